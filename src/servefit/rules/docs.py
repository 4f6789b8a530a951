"""A rule's documentation as text, in ruff's shape (What it does / Why is this bad / Example / Fix)."""

from __future__ import annotations

from typing import Any

DOCS_URL = "https://servefit.dev/rules/#{code}"  # the docs site built from docs/ (mkdocs.yml)


def url(code: str) -> str:
    return DOCS_URL.format(code=code.lower())


def render(r: dict[str, Any]) -> str:
    out = [f"{r['name']} ({r['code']})", "", f"Default severity: {r['severity']}", ""]
    if r.get("summary"):
        out += [r["summary"], ""]
    for title, key in (("What it does", "what"), ("Why is this bad?", "why"), ("Example", "example"),
                       ("Use instead", "passing"), ("Fix", "fix")):
        if r.get(key):
            if key in ("example", "passing"):
                body = "\n".join("    " + ln for ln in snippet(r[key]))
            else:
                body = str(r[key]).rstrip()
            out += [f"## {title}", body, ""]
    if r.get("options"):
        out += ["## Options", *option_lines(r), ""]
    return "\n".join(out)


def snippet(ex: Any) -> list[str]:
    """An example as lines: a header naming the file and target, then the file's text; then each
    file beside it under its own header."""
    if not isinstance(ex, dict):
        return str(ex).rstrip().splitlines()
    target = " ".join(x for x in (f"{ex['gpus']} ×" if ex.get("gpus") else "", ex.get("gpu", ""),
                                   f"engine {ex['version']}" if ex.get("version") else "") if x)
    where = f", reported at {ex['line']}:{ex['column']}" if ex.get("line") else ""
    setting = [f"saved as {ex['encoding']}"] if ex.get("encoding") else []
    setting += [f"the {name} plugin {'not installed' if state == 'not-installed' else 'raising an error'}"
                for name, state in (ex.get("plugins") or {}).items()]
    if ex.get("linted"):
        setting.append(f"servefit lint {' '.join(ex['linted'])}")
    note = "; ".join(setting + ([ex["note"]] if ex.get("note") else []))
    head = f"# {ex['file']}" + (f" (--gpu {target})" if target else "") + where + (f": {note}" if note else "")
    out = [head, *str(ex["text"]).rstrip().splitlines()]
    for name, text in (ex.get("also") or {}).items():
        out += ["", f"# {name}", *str(text).rstrip().splitlines()]
    return out


def option_lines(r: dict[str, Any]) -> list[str]:
    """`- max (number, default 0.95): ...` and the configuration that sets it."""
    out = []
    for name, o in r.get("options", {}).items():
        bounds = "".join(f", {k} {o[k]}" for k in ("minimum", "maximum") if k in o)
        out.append(f"- `{name}` ({o['type']}, default {o['default']}{bounds}): {o['description']}")
    first = next(iter(r.get("options", {})), None)
    if first is not None:
        default = r["options"][first]["default"]
        out += ["", f"    [tool.servefit.rules.{r['code']}]", f"    {first} = {default}"]
    return out


def markdown(rules: dict[str, dict[str, Any]]) -> str:
    """docs/rules.md: every rule, generated from the catalogue."""
    out = ["# servefit rules", "", "Generated from `src/servefit/data/rules/*.yaml` (`servefit rule CODE` prints one).", "",
           "| code | name | severity | summary |", "|---|---|---|---|"]
    for code, r in sorted(rules.items()):
        out.append(f"| [{code}](#{code.lower()}) | {r['name']} | {r['severity']} | {r.get('summary', '')} |")
    out.append("")
    for code, r in sorted(rules.items()):
        out += [f"## {code}", "", f"**{r['name']}** — default severity *{r['severity']}*", ""]
        for title, key in (("What it does", "what"), ("Why is this bad?", "why"), ("Fix", "fix")):
            if r.get(key):
                out += [f"**{title}** {r[key]}", ""]
        if r.get("example"):
            out += [*(["Example:", ""] if r.get("passing") else []), "```", *snippet(r["example"]), "```", ""]
        if r.get("passing"):
            out += ["Use instead:", "", "```", *snippet(r["passing"]), "```", ""]
        if r.get("options"):
            out += ["**Options**", "", *option_lines(r), ""]
    return "\n".join(out)
