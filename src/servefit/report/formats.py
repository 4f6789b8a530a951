"""Findings as JSON, SARIF 2.1.0 and GitHub Actions annotations (only output formats live here)."""

from __future__ import annotations

import json
from typing import Any

from servefit import __version__
from servefit.core import Finding
from servefit.redact import redact_text
from servefit.rules.docs import url

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


def to_sarif(findings: list[Finding]) -> str:
    from servefit.rules.catalog import rules

    cat = rules()
    used = sorted({f.code for f in findings})
    index = {code: i for i, code in enumerate(used)}
    driver_rules = []
    for code in used:
        r = cat.get(code, {"name": code, "severity": "warning"})
        driver_rules.append({
            "id": code, "name": r["name"],
            "shortDescription": {"text": r.get("summary", r["name"])},
            "fullDescription": {"text": str(r.get("what") or r.get("summary") or r["name"])},
            "help": {"text": " ".join(str(r.get(k, "")) for k in ("why", "fix")).strip() or r["name"]},
            "defaultConfiguration": {"level": SARIF_LEVEL[r["severity"]]},
        })
    results = []
    for f in findings:
        res: dict[str, Any] = {"ruleId": f.code, "ruleIndex": index[f.code], "level": SARIF_LEVEL[f.severity],
                               "message": {"text": redact_text(f.message)}}
        if f.span is not None:
            region: dict[str, Any] = {"startLine": max(f.span.line, 1), "startColumn": max(f.span.col, 1)}
            if f.span.end_line >= f.span.line:
                region["endLine"] = max(f.span.end_line, 1)
                region["endColumn"] = max(f.span.end_col, 1)
            res["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": f.span.file.replace("\\", "/")},
                                                      "region": region}}]
        if f.site:
            res["partialFingerprints"] = {"servefit/v1": f"{f.code}:{f.site}:{f.setting or ''}"}
        results.append(res)
    doc = {"$schema": SARIF_SCHEMA, "version": "2.1.0",
           "runs": [{"tool": {"driver": {"name": "servefit", "version": __version__,
                                         "informationUri": "https://pypi.org/project/servefit/", "rules": driver_rules}},
                     "results": results}]}
    return json.dumps(doc, indent=2) + "\n"


def _gh_escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
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
