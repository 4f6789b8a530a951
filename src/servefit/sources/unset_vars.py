"""SF001: a value written as a variable the repository does not set, said once per variable per
server with where it would get a value (a pod's valueFrom, compose's shell, Slurm), never guessed."""

from __future__ import annotations

import re

from servefit.core import Finding, LaunchSite, Span
from servefit.rules.catalog import finding
from servefit.rules.registry import rule

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def shown_var(var: str) -> str:
    """A variable as the user wrote it: `${PORT}`, `$1` (a script argument), a command substitution
    cut to its first line (`$(awk -v a=... 'BEGIN {…)`)."""
    if var.startswith(("$(", "`")):
        first = var.splitlines()[0] if var else var
        return first if first == var and len(var) <= 60 else first[:57].rstrip() + "…)"
    if var.startswith(("for ", "read ")):  # a `for` loop's variable, or one `while read` sets (sources/shell.py)
        return f"${{{var.split(' ', 1)[1]}}}"
    return var if var.startswith(("$", "%", "set /a")) else f"${{{var}}}"


# what Windows sets in every session (a batch script's `%USERPROFILE%`, PowerShell's `$env:LOCALAPPDATA`)
WINDOWS_VARS = {"USERPROFILE", "LOCALAPPDATA", "APPDATA", "PROGRAMFILES", "PROGRAMFILES(X86)", "PROGRAMDATA",
                "HOMEDRIVE", "HOMEPATH", "TEMP", "TMP", "CD", "COMPUTERNAME", "USERNAME", "SYSTEMROOT", "WINDIR",
                "SYSTEMDRIVE", "PUBLIC"}


def where_set(site: LaunchSite, var: str) -> str | None:
    """Where a variable the file names but gives no value gets one: a k8s container's env entry
    filled from a fieldRef, Secret or ConfigMap when the pod starts, a compose service's
    environment entry passed through from the shell, Slurm's own SLURM_* in a batch script, the pod's
    HOSTNAME; None
    where the file does not name it."""
    name = var.strip("${}")
    win = var[5:] if var.lower().startswith("$env:") else var.strip("%") if var.startswith("%") else ""
    if win.upper() in WINDOWS_VARS:
        return "is set by Windows for the user who runs the script"
    if var.startswith("set /a"):
        return "is arithmetic the script computes"
    if site.workload.runtime == "slurm":
        from servefit.sources.slurm import TASK_VARIABLES

        if name in TASK_VARIABLES:
            return "is set by Slurm for each task"
    if site.workload.runtime == "github-actions" and name.startswith("GH_"):
        return "is a ${{ }} expression GitHub Actions fills in when the job runs"
    if site.name.startswith("dockerfile") and _build_arg(site.file, name):
        return f"is a build argument with no default (`docker build --build-arg {name}=...` sets it)"
    if name == "HOSTNAME" and site.workload.kind:
        return "is the pod's name, set by Kubernetes (a StatefulSet's pods end in their ordinal)"
    if name not in site.workload.runtime_env:
        return None
    if site.workload.kind:
        return "is filled in when the pod starts (its env entry takes it from valueFrom)"
    return "is passed through from the shell that runs compose" if site.workload.service else None


def _build_arg(dockerfile: str, name: str) -> bool:
    """Whether the Dockerfile declares `ARG NAME` with no default."""
    import re

    from servefit.sources.base import read_text

    text = read_text(dockerfile) or ""
    return re.search(rf"(?im)^[ \t]*ARG[ \t]+{re.escape(name)}[ \t]*$", text) is not None


def var_of(site: LaunchSite, span: Span | None, message: str = "", text: str | None = None) -> str | None:
    """The unset variable a finding (at `span`, saying `message`) or a value (`text`) is about:
    written at that place, or carried inside a value whose place is a whole string (`CMD="... $N"`
    run as `$CMD`: every word of it points at the string) and named in the message or the value."""
    if span is not None and span.end > span.start:  # an empty span is a place not traced (a kustomize build's top)
        hit = next((v for v, sp in site.unresolved_spans if sp is not None and (sp.file, sp.start) == (span.file, span.start)),
                   None)
        if hit is not None:
            return hit
    where = {(t.span.file, t.span.start) for t in (*site.argv, *site.env.values()) if t.span is not None}
    if text is None and (span is None or (span.file, span.start) not in where):
        return None
    said = text if text is not None else message
    # a variable's name as the words show it: a command substitution as written (`$(nproc)`), a name as
    # `${EXTRA}` or `$EXTRA` (`OPTS="... ${EXTRA}"` inside `CMD="llama-server ${OPTS}"` run as `${CMD}`)
    return next((v for v, _ in site.unresolved_spans if (v.startswith("$") and len(v) > 2 and v in said)
                 or (NAME_RE.fullmatch(v) and re.search(rf"\$(?:\{{{v}\}}|{v}\b)", said))), None)


# files beside a compose file that hold example values: docker compose reads none of them, only `.env`
# (docs.docker.com/compose/how-tos/environment-variables/variable-interpolation: the .env file in the
# project directory, or --env-file)
SAMPLE_ENV = (".env.example", ".env.sample", ".env.template", ".env.dist", "example.env")


def sample_sets(site: LaunchSite, var: str) -> str:
    """For a compose service: a sample env file beside the compose file that sets the variable (said,
    never taken as its value: compose does not read it). One that leaves it empty (`MODEL_DIR_PATH=`) is a
    blank for the reader to fill in: copying it would give the engine nothing."""
    import os

    from servefit.sources.envfile import load_env_file

    name = var.strip("${}")
    if not site.workload.service or not site.file or name in site.workload.runtime_env:
        return ""
    here = os.path.dirname(site.file)
    for sample in SAMPLE_ENV:
        path = os.path.join(here, sample)
        value = (load_env_file(path) or {}).get(name) if os.path.isfile(path) else None
        if value is not None and not value.text.strip():
            return f" ({sample} leaves it empty, to be filled in: set it in .env, the file docker compose reads)"
        if value is not None:
            return f" ({sample} sets it, but docker compose reads only .env: copy it to .env to use its values)"
    return ""


def _written(site: LaunchSite, var: str, span: Span | None) -> str:
    """The variable as the file writes it: a GitHub Actions `${{ matrix.quant }}` stands in the shell text
    as a placeholder of its length (sources/workflow.py), so the file's own characters are shown."""
    if site.workload.runtime == "github-actions" and var.strip("${}").startswith("GH_") and span is not None \
            and span.start >= 0:
        try:
            with open(span.file, encoding="utf-8", newline="") as fh:
                text = fh.read()[span.start:span.end]
        except OSError:
            text = ""
        if text.startswith("${{"):
            return text
    return shown_var(var)


@rule("SF001")
def unresolved(message: str, span: Span | None, site: str = "") -> Finding:
    """SF001: a value written as a variable the repository does not set; it is said, not guessed."""
    return finding("SF001", message, span=span, site=site)


def unresolved_findings(sites: list[LaunchSite]) -> list[Finding]:
    """SF001 once per variable per server, at the first place the variable is used."""
    from servefit.engines import title

    out = []
    for site in sites:
        seen: set[str] = set()
        for var, span in site.unresolved_spans:
            if var in seen:
                continue
            seen.add(var)
            eng = title(site.engine) or site.engine or "the engine"
            if var.startswith(("$(", "`")):
                msg = f"{shown_var(var)} is computed when the server starts: the value it gives {eng} is not known here"
            elif var.startswith("${") and "[" in var:  # sources/shell_expand.py: an element by a computed key
                msg = (f"{shown_var(var)} is the element of {var[2:var.index('[')]} that the script picks when it "
                       f"runs: the value it gives {eng} is not known here")
            elif var.startswith("for "):
                msg = (f"{shown_var(var)} takes each value of its `for` loop in turn: the value it gives {eng} is not "
                       "known here")
            elif var.startswith("read "):
                msg = (f"{shown_var(var)} takes each line its `while read` loop reads in turn: the value it gives {eng} "
                       "is not known here")
            elif var.startswith("<"):  # sources/shell.py PLACEHOLDER
                msg = f"{var} is a placeholder to fill in: the value it gives {eng} is not known, so it is not checked"
            elif var == "...":  # sources/shell.py ELIDED
                msg = f"`...` leaves out {eng}'s arguments here: they are not known, so they are not checked"
            elif var in ("$@", "$*", "%*"):
                msg = f"{var}: the arguments the script is called with are not known; they are not checked"
            elif var[:1] in "$%" and var[1:].isdigit():  # `model_name=$1`: one argument, named as such
                msg = (f"{var}: argument {var[1:]} the script is called with is not known: the value it gives {eng} "
                       "is not checked")
            else:
                msg = (f"{_written(site, var, span)} {where_set(site, var) or 'is not set in this repository'}"
                       f"{sample_sets(site, var)}: the value it gives {eng} is not known, so it is not checked")
            out.append(unresolved(msg, span or None, site.name))
    return out


def model_among_unknown_args(site: LaunchSite | None) -> str | None:
    """Where a command names no model but leaves arguments unknown (`serve ...` in notes, a script's
    "$@"): the model may be among them, so that is what is said, not that none is given."""
    elided = next((v for v, _ in site.unresolved_spans if v in ("...", "$@", "$*", "%*")), None) if site else None
    if elided is None:
        return None
    return f"the model is not in the command: it may be among the arguments `{elided}` stands for (pass --model REF)"
