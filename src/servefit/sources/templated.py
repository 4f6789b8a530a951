"""Files servefit cannot read as they are written, said rather than skipped: YAML and scripts written as
templates (Helm's `{{ }}`, Jinja's `{% %}`), and scripts that build the command they run at run time
(`eval "$cmd"`)."""

from __future__ import annotations

import re
from typing import Any

from servefit.sources.problems import not_read, not_rendered


def templated_yaml(fc: Any) -> None:
    """A YAML file with template syntax (a chart's template): not YAML until rendered, said, not skipped."""
    from servefit.sources.yamlpos import TEMPLATE

    m = TEMPLATE.search(fc.text)
    i = m.start() if m is not None else 0
    if m is not None and m.group().startswith("%{"):  # Terraform's templatefile() renders it
        fc.findings.append(not_rendered(
            "template syntax (%{ }): this file is a Terraform template, not YAML until templatefile() renders it, "
            "so it was not read; lint the file Terraform writes from it", span=fc.li.span(i, i + 2)))
        return
    fc.findings.append(not_rendered("template syntax ({{ }}): this file is not YAML until rendered, so it was not read; "
                 "servefit reads the chart's values file, or lint `helm template` output",
        span=fc.li.span(i, i + 2)))


_JINJA = re.compile(r"\{%-?\s*(?:extends|block|if|for|set|macro|include)\b")
# a Go template a program takes as an argument (`docker ps --format '{{.Names}}'`, `kubectl -o go-template=`),
# or an Ollama Modelfile's TEMPLATE written from a heredoc: text the program fills, not a template of the script
_GO_TEMPLATE_ARG = re.compile(r"(?:--format|--template|go-template|\s-f)[= ]\s*['\"]?[^'\"\n]*$|^\s*TEMPLATE\s",
                              re.IGNORECASE)
# `eval "$cmd"` / `eval "${docker_cmd}"`: a command line held in a variable, built as the script runs
_RUNTIME_EVAL = re.compile(r"(?m)(?:^|[;&|(`]|\$\()\s*(eval\s+[\"']?\$\{?\w+\}?[\"']?)")


def _go_template_arg(text: str, at: int) -> bool:
    line = text[text.rfind("\n", 0, at) + 1:at]
    return _GO_TEMPLATE_ARG.search(line) is not None


def _evals_no_server(text: str, e: re.Match[str]) -> bool:
    """`c=$(printf "curl -LO '...ollama-linux.tar.zst'")` then `eval "$c"`: every value the file gives the
    variable starts a program that names no server (a download, a listing), so the eval starts none."""
    from servefit.sources import detect

    var = re.sub(r"\W", "", e.group(1).split(None, 1)[-1])
    values = re.findall(rf"(?m)^\s*(?:export\s+|local\s+)?{re.escape(var)}=(.*)$", text)
    firsts = [re.sub(r"""^[\s"'(]*(?:\$\(\s*(?:printf|echo)\s+)?["']*""", "", v).split(None, 1)[:1] for v in values]
    return bool(firsts) and all(f and detect.program(f[0]) in detect.NOT_LAUNCH for f in firsts)


def template_script(fc: Any, kind: str) -> None:
    """A script, Dockerfile or unit written as a template (Jinja `{% if %}`, Go `{{ .Values }}`) that mentions an
    engine and gave no server: its commands are not shell until rendered, so that is said, not skipped."""
    from servefit.sources.yamlpos import TEMPLATE

    m = _JINJA.search(fc.text) or next((t for t in TEMPLATE.finditer(fc.text) if not _go_template_arg(fc.text, t.start())),
                                       None)
    if m is None:
        if kind == "script" and (e := _RUNTIME_EVAL.search(fc.text)) is not None and not _evals_no_server(fc.text, e):
            fc.findings.append(not_read(
                f"`{e.group(1)}` runs a command line the script builds when it runs: servefit does not run it, "
                "so the server it starts was not read; write the command out, or lint it with "
                "`servefit lint -- COMMAND`", span=fc.li.span(e.start(1), e.end(1))))
        return
    what = {"dockerfile": "Dockerfile", "systemd": "unit", "make": "Makefile", "supervisor": "program file"}.get(
        kind, "script")
    marks = "{% %}" if m.group().startswith("{%") else "{{ }}"
    fc.findings.append(not_rendered(f"template syntax ({marks}): this {what} is a template, so the servers it starts "
                                    f"were not read; lint the {what} it renders into",
                                    span=fc.li.span(m.start(), m.start() + 2)))
