"""Findings as JSON, SARIF 2.1.0 and GitHub Actions annotations (only output formats live here)."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from servefit import __version__
from servefit.core import Finding
from servefit.redact import redact_text
from servefit.rules.docs import url
from servefit.termsafe import one_line

SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def finding_json(f: Finding) -> dict[str, Any]:
    out: dict[str, Any] = {"code": f.code, "name": f.name, "severity": f.severity, "message": redact_text(f.message),
                           "url": url(f.code)}
    if f.span is not None:
        out["location"] = {"file": f.span.file, "line": f.span.line, "column": f.span.col}
        out["end_location"] = {"file": f.span.file, "line": f.span.end_line, "column": f.span.end_col}
    else:
        out["location"] = out["end_location"] = None
    if f.setting:
        out["setting"] = f.setting
    if f.site:
        out["server"] = f.site
    out["fix"] = None
    if f.fix is not None:
        out["fix"] = {"message": redact_text(f.fix.message), "applicability": f.fix.applicability,
                      "edits": [{"location": {"line": e.span.line, "column": e.span.col},
                                 "end_location": {"line": e.span.end_line, "column": e.span.end_col},
                                 "content": redact_text(e.text)} for e in f.fix.edits]}
    return out


def to_json(findings: list[Finding]) -> str:
    return json.dumps([finding_json(f) for f in findings], indent=2) + "\n"


def _rule_tags(code: str, r: dict[str, Any]) -> list[str]:
    """The rule's group (the data/rules file it lives in: an engine, `security`, `sources`,
    `common`) and, for security rules, what kind of weakness."""
    group = str(r.get("group") or "servefit")
    tags = [group]
    if group == "security":
        tags.append("external/cwe/cwe-798" if code == "SEC001" else "exposure")
    return tags


def _sarif_rule(code: str, r: dict[str, Any]) -> dict[str, Any]:
    from servefit.rules.docs import render

    props: dict[str, Any] = {"tags": _rule_tags(code, r), "precision": "high",
                             "problem.severity": {"info": "recommendation"}.get(r["severity"], r["severity"])}
    if r.get("security_severity"):
        props["security-severity"] = str(r["security_severity"])
    return {
        "id": code, "name": r["name"],
        "shortDescription": {"text": r.get("summary", r["name"])},
        "fullDescription": {"text": str(r.get("what") or r.get("summary") or r["name"])},
        "help": {"text": render(r), "markdown": _help_markdown(r)},
        "helpUri": url(code),
        "defaultConfiguration": {"level": SARIF_LEVEL[r["severity"]]},
        "properties": props,
    }


def _help_markdown(r: dict[str, Any]) -> str:
    out = [f"**{r['name']}** ({r['code']})", "", str(r.get("summary", ""))]
    from servefit.rules.docs import snippet

    for title, key in (("What it does", "what"), ("Why is this bad?", "why"), ("Example", "example"),
                       ("Use instead", "passing"), ("Fix", "fix")):
        if r.get(key):
            if key in ("example", "passing"):
                body = "\n".join(snippet(r[key]))
                out += ["", f"### {title}", "", f"```\n{body}\n```"]
            else:
                out += ["", f"### {title}", "", str(r[key]).rstrip()]
    out += ["", f"[Rule documentation]({url(r['code'])})"]
    return "\n".join(out)


def _artifact(path: str, root: str) -> dict[str, Any]:
    """A file as SARIF wants it: relative to %SRCROOT% (the directory servefit ran in) when it
    lies below it, an absolute file:// URI otherwise."""
    from pathlib import Path
    from urllib.parse import quote

    full = os.path.abspath(path)
    rel = os.path.relpath(full, root)
    if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
        return {"uri": Path(full).as_uri()}
    return {"uri": quote(rel.replace(os.sep, "/")), "uriBaseId": "%SRCROOT%"}


def _region(span: Any) -> dict[str, Any]:
    region: dict[str, Any] = {"startLine": max(span.line, 1), "startColumn": max(span.col, 1)}
    if span.end_line >= span.line:
        region["endLine"] = max(span.end_line, 1)
        region["endColumn"] = max(span.end_col, 1)
    return region


def fingerprint(f: Finding, rel_file: str, occurrence: int) -> str:
    """Stable across edits elsewhere in the file and across moved lines: the file, the rule, the
    server (a script server's line number dropped), the setting, and which of several identical
    keys this is. Never the line."""
    import hashlib

    server = re.sub(r":\d+$", "", f.site or "")
    key = "\0".join((rel_file, f.code, server, f.setting or "", str(occurrence)))
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def to_sarif(findings: list[Finding], root: str | None = None) -> str:
    """SARIF 2.1.0 for code scanning: rules with help and URIs, security-severity on security
    rules, relative URIs under %SRCROOT%, stable partialFingerprints and fixes."""
    from pathlib import Path

    from servefit.rules.catalog import rules

    root = os.path.abspath(root or os.getcwd())
    cat = rules()
    used = sorted({f.code for f in findings})
    index = {code: i for i, code in enumerate(used)}
    driver_rules = [_sarif_rule(code, cat.get(code, {"code": code, "name": code.lower(), "severity": "warning"}))
                    for code in used]
    results = []
    seen: dict[tuple[str, ...], int] = {}
    for f in findings:
        res: dict[str, Any] = {"ruleId": f.code, "ruleIndex": index[f.code], "level": SARIF_LEVEL[f.severity],
                               "message": {"text": redact_text(f.message)}}
        rel = ""
        if f.span is not None:
            art = _artifact(f.span.file, root)
            rel = art["uri"]
            res["locations"] = [{"physicalLocation": {"artifactLocation": art, "region": _region(f.span)}}]
        key = (rel, f.code, re.sub(r":\d+$", "", f.site or ""), f.setting or "")
        seen[key] = seen.get(key, -1) + 1
        res["partialFingerprints"] = {"servefit/v2": fingerprint(f, rel, seen[key])}
        if f.fix is not None and f.fix.edits and f.fix.applicability != "display-only":
            changes: dict[str, list[dict[str, Any]]] = {}
            for e in f.fix.edits:
                changes.setdefault(e.span.file, []).append(
                    {"deletedRegion": _region(e.span), "insertedContent": {"text": redact_text(e.text)}})
            res["fixes"] = [{"description": {"text": redact_text(f.fix.message)},
                             "artifactChanges": [{"artifactLocation": _artifact(file, root), "replacements": reps}
                                                 for file, reps in changes.items()]}]
        results.append(res)
    doc = {"$schema": SARIF_SCHEMA, "version": "2.1.0",
           "runs": [{"tool": {"driver": {"name": "servefit", "version": __version__,
                                         "informationUri": "https://servefit.dev/",
                                         "rules": driver_rules}},
                     "originalUriBaseIds": {"%SRCROOT%": {"uri": Path(root).as_uri() + "/"}},
                     "columnKind": "unicodeCodePoints",
                     "results": results}]}
    return json.dumps(doc, indent=2) + "\n"


def _gh_escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    text = one_line(text)  # ESC and every other control character: escaped, never raw in a CI log
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def to_github(findings: list[Finding]) -> str:
    """Workflow commands: ::error file=F,line=L,col=C,endLine=..,title=CODE::message"""
    kind = {"error": "error", "warning": "warning", "info": "notice"}
    lines = []
    for f in findings:
        props = []
        if f.span is not None:
            props += [f"file={_gh_escape(f.span.file, True)}", f"line={f.span.line}", f"col={f.span.col}"]
            if f.span.end_line >= f.span.line:
                props += [f"endLine={f.span.end_line}", f"endColumn={f.span.end_col}"]
        props.append(f"title={_gh_escape(f'{f.code} {f.name}', True)}")
        lines.append(f"::{kind[f.severity]} {','.join(props)}::{_gh_escape(redact_text(f.message))}")
    return "\n".join(lines) + ("\n" if lines else "")
