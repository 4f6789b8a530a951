"""Terraform (HCL) is not read: its containers are built from variables, `concat()` and
conditionals that only `terraform plan` evaluates. A .tf file that starts an engine (an engine
image, a launch command, `python -m` an engine's server module, a helm_release of the engine's
own chart) is said to be unchecked, once, at the first such string (quoted, or a line of a heredoc
such as a kubectl_manifest's `yaml_body`), so a repository whose servers live in Terraform is not
reported clean.
"""

from __future__ import annotations

import re

from servefit.sources.base import FileCtx
from servefit.sources.problems import not_read

STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
INTERP = re.compile(r"\$\{[^}]*\}")
# a heredoc (`yaml_body = <<-YAML ... YAML`, `<<EOF`): a manifest's `image:` and command lines are unquoted there
HEREDOC = re.compile(r"<<-?([A-Za-z_][A-Za-z0-9_]*)[ \t]*\n(.*?)^[ \t]*\1[ \t]*$", re.S | re.M)
YAML_VALUE = re.compile(r"^[ \t]*(?:-[ \t]+)?(?:[A-Za-z_][\w.-]*:[ \t]*)?(?:[|>][-+]?[ \t]*)?['\"]?([^'\"\n#]+?)['\"]?[ \t]*$",
                        re.M)


def _literals(text: str) -> list[tuple[int, int, str]]:
    """Each quoted string, and each line's value in a heredoc, as (start, end, text), in file order."""
    found = [(m.start(1), m.end(1), m.group(1)) for m in STRING.finditer(text)]
    for h in HEREDOC.finditer(text):
        found += [(h.start(2) + v.start(1), h.start(2) + v.end(1), v.group(1))
                  for v in YAML_VALUE.finditer(h.group(2)) if v.group(1).strip()]
    return sorted(set(found))


def _engine_of(literal: str) -> str | None:
    from servefit.sources import detect

    text = INTERP.sub("x", literal).strip()
    if not text or len(text) > 2000:
        return None
    if " " not in text and ("/" in text or ":" in text):
        eng = detect.engine_of_image(text)
        if eng is not None:
            return eng
    hit = detect.recognise(text.split()) or detect.recognise(["python3", "-m", text])
    return hit[0] if hit else None


def engine_title(engine: str) -> str:
    from servefit.engines import get

    try:
        return get(engine).title or engine
    except KeyError:
        return engine


def scan(fc: FileCtx) -> None:
    from servefit.sources import detect

    for start, end, literal in _literals(fc.text):
        chart = detect.engine_of_chart_repo(literal) if "://" in literal else None
        if chart is not None:  # a helm_release of the engine's own chart
            fc.findings.append(not_read(
                f"servefit does not read Terraform, and this file installs the {engine_title(chart)} Helm chart of "
                f"{literal} here: its values were not checked. Lint the values file it passes "
                "(`servefit lint values.yaml`) or the manifests it applies", span=fc.li.span(start, end)))
            return
        eng = _engine_of(literal)
        if eng is None:
            continue
        title = engine_title(eng)
        fc.findings.append(not_read(
            f"servefit does not read Terraform, and this file starts {title} here: its settings were not "
            "checked. Lint the manifests it applies (`kubectl get deploy NAME -o yaml > deploy.yaml`) or the launch "
            f"command (`servefit estimate -- {' '.join(launch_words(eng))} ...`)",
            span=fc.li.span(start, end)))
        return


def launch_words(engine: str) -> list[str]:
    from servefit.sources import detect

    return detect.server_command(engine) or [engine]
