"""SEC001 hardcoded-secret: a credential written literally in a file servefit reads.

Two ways in, one finding per place: (1) the servers of the file, whose environment variables and
flags with secret names (redact.is_secret_name / SECRET_FLAGS) hold a literal value written in
this file; (2) tokens of well-known providers (redact.LITERAL: hf_..., sk-..., ghp_..., AKIA...)
anywhere in the file's text. A value that reached the server through a reference is not a
finding: the text at its span is then `${HF_TOKEN}`, `$(HF_TOKEN)` or lives in another file, and
`valueFrom: secretKeyRef` is never read. Placeholders (`<your-token>`, `changeme`, `EMPTY`,
`xxxx`), values that are plainly made up for docs and tests (`EXAMPLE`, `fake`, a run of the
alphabet) and paths to key files are not credentials. Messages show at most a provider's prefix.
"""

from __future__ import annotations

import re

from servefit.core import Finding, LaunchSite, Span, Token
from servefit.redact import LITERAL, is_secret_flag, is_secret_name, masked
from servefit.rules.catalog import finding
from servefit.rules.registry import rule

PLACEHOLDER = re.compile(
    r"^(?:x+|X+|\*+|\.+|-+|_+|0+|changeme|change[-_]?me|change[-_]?this|placeholder|replace[-_]?me|your[-_ ].*|"
    r".*[-_]here|<.*>|\[.*\]|\{.*\}|dummy|empty|none|null|nil|undefined|secret|password|passwd|token|"
    r"api[-_]?key|example.*|sample.*|test|testing|todo|fixme|redacted|masked|true|false|yes|no|on|off|"
    r"not[-_]?needed|not[-_]?used|unused|n/?a|\d{1,4})$", re.I)
PROVIDERS = (("hf_", "Hugging Face token"), ("sk-", "API key"), ("ghp_", "GitHub token"),
             ("github_pat_", "GitHub token"), ("xox", "Slack token"), ("AKIA", "AWS access key"),
             ("glpat-", "GitLab token"), ("nvapi-", "NVIDIA API key"))


FAKE = re.compile(r"example|fake|dummy|placeholder|redacted|sample|abcdefgh|12345678|(.)\1{7}", re.I)


def is_literal(value: str) -> bool:
    """A value that is a credential as written: not a reference, a path or a placeholder."""
    v = value.strip().strip("\"'")
    if len(v) < 4 or "$" in v or "{{" in v or "%(" in v or PLACEHOLDER.match(v):
        return False
    return not v.startswith(("/", "./", "../", "~", "file:", "@", "secret://", "vault:", "arn:"))


def looks_fake(value: str) -> bool:
    """Documentation and test values (`AKIAIOSFODNN7EXAMPLE`, `hf_abcdefgh...`, `sk-xxxxxxxx...`):
    a real token is random, so it never holds a run of the alphabet or of one character."""
    return FAKE.search(value) is not None


def _tail(tok: Token, k: int) -> Span | None:
    s = tok.span
    if s is None or s.start < 0 or s.line != s.end_line:
        return None
    return Span(s.file, s.line, s.col + k, s.end_line, s.end_col, s.start + k, s.end)


def _values(site: LaunchSite) -> list[tuple[str, str, Span | None]]:
    """(name, value, span of the value) for the site's secret env vars and secret flags."""
    out = [(name, tok.text, tok.span) for name, tok in site.env.items() if is_secret_name(name)]
    argv = site.argv
    for i, tok in enumerate(argv):
        flag, eq, val = tok.text.partition("=")
        if not is_secret_flag(flag):
            continue
        if eq:
            out.append((flag, val, _tail(tok, len(flag) + 1)))
        elif i + 1 < len(argv):
            out.append((flag, argv[i + 1].text, argv[i + 1].span))
    return out


@rule("SEC001")
def check_file(path: str, text: str | None, sites: list[LaunchSite]) -> list[Finding]:
    if not text:
        return []
    out: list[Finding] = []
    taken: list[tuple[int, int]] = []
    for site in sites:
        for name, value, span in _values(site):
            if span is None or span.file != path or span.start < 0 or not is_literal(value) or looks_fake(value):
                continue
            if text[span.start:span.end] != value or any(a <= span.start < b for a, b in taken):
                continue  # came through a variable, or already reported
            taken.append((span.start, max(span.end, span.start + 1)))
            out.append(finding("SEC001", f"`{name}` holds a literal credential ({masked(value)}) committed in "
                                         "this file: anyone who can read the repository can use it; rotate it and load "
                                         "it from a Secret or the environment", span=span, site=site.name))
    if any(p in text for p, _ in PROVIDERS):
        from servefit.sources.text import LineIndex

        li: LineIndex | None = None
        for m in LITERAL.finditer(text):
            if any(a <= m.start() < b for a, b in taken) or looks_fake(m.group(0)):
                continue
            li = li or LineIndex(text, path)
            kind = next((k for p, k in PROVIDERS if m.group(0).startswith(p)), "token")
            taken.append((m.start(), m.end()))
            out.append(finding("SEC001", f"a {kind} ({masked(m.group(0))}) is committed in this file: anyone who can "
                                         "read the repository can use it; rotate it and load it from a Secret or "
                                         "the environment", span=li.span(m.start(), m.end())))
    return out
