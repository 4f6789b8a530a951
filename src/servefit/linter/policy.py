"""What the user asked of the findings: the configuration's select / ignore / per-file ignores
and severity overrides, suppressions written in the files, and the baseline."""

from __future__ import annotations

from servefit import suppressions
from servefit.config import Config
from servefit.core import Finding
from servefit.linter.run import LintResult


def apply(result: LintResult, cfg: Config, baseline: str | None = None) -> list[Finding]:
    sups = list(result.suppressions)
    for rep in result.sites:
        notes = rep.site.workload.annotations
        if notes:
            files = frozenset(f.span.file for f in rep.findings if f.span is not None)
            sups.extend(suppressions.from_annotations(rep.site.file, rep.site.name, notes,
                                                      rep.site.workload.annotation_line or rep.site.line, files))
    kept = []
    for f in result.findings:
        file = f.span.file if f.span is not None else None
        own = result.config_for(file, cfg)  # each file follows its nearest configuration
        f.severity = own.severity_of(f.code, f.severity)  # type: ignore[assignment]
        if own.enabled(f.code, file):
            kept.append(f)
    kept, meta = suppressions.apply(kept, sups, cfg.require_reason)
    kept += [m for m in meta if result.config_for(m.span.file if m.span is not None else None, cfg)
             .enabled(m.code, m.span.file if m.span is not None else None)]
    if baseline:
        from servefit import baseline as baseline_mod

        kept = baseline_mod.filter_new(kept, baseline_mod.read(baseline), cfg.relative)
    return sorted(kept, key=_order)


def _order(f: Finding) -> tuple:
    s = f.span
    return (s.file, s.line, s.col, f.code) if s is not None else ("", 0, 0, f.code)
