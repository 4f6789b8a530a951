"""The linter: sources -> engines -> rules over paths (`lint_paths`)."""

from servefit.linter.run import LintOptions, LintResult, SiteReport, lint_paths, lint_site

__all__ = ["LintOptions", "LintResult", "SiteReport", "lint_paths", "lint_site"]
