"""Shell scripts: every command that starts an engine, directly or through `exec`, `nohup ... &`,
`env`, `VAR=1` prefixes, `docker run ... IMAGE args`, or `bash -c "..."`.

Variables assigned earlier in the script (`X=1`, `export X=1`, `${X:=d}`) expand later
commands; only exported ones (and `VAR=1 cmd` prefixes) reach the engine's environment.
`ollama pull/run MODEL` lines are kept as the models an Ollama server in the same script loads.
A Slurm batch script's `#SBATCH` GPU request is the hardware of the servers it starts (sources/slurm.py).
A systemd unit the script writes from a heredoc (`cat > x.service <<EOF`) is read as that unit, and a drop-in
(`tee /etc/systemd/system/ollama.service.d/env.conf <<EOF`) as that drop-in; a
script it writes from one (`cat > run.sh <<EOF`) or runs from one (`bash <<EOF`) as that script, and a Kubernetes
manifest it writes or applies from one (`cat <<EOF > vllm.yaml`, `kubectl apply -f - <<EOF`) as that manifest.
"""

from __future__ import annotations

import os
import re

from servefit.core import GpuHint
from servefit.sources.base import FileCtx
from servefit.sources.launch import Ctx, Facts, Launch, from_commands
from servefit.sources.shell import Vars, split_commands
from servefit.sources.slurm import gpu_request
from servefit.sources.text import Src


def scan(fc: FileCtx) -> None:
    env = Vars()
    cmds = split_commands(fc.src, env)
    ctx = fc.ctx(exported_only=True)
    launches = from_commands(cmds, ctx, env)
    calls: dict[int, str] = {}
    own_gpu: dict[int, GpuHint | None] = {}  # a batch script's own #SBATCH request (`sbatch job.sbatch MODEL`)
    if ".sh" in fc.text or "sbatch" in fc.text:  # `bash service.sh $MODEL $TP`: the script it runs, with them
        from servefit.sources.script_calls import called_scripts

        for launch, path, own in called_scripts(fc, cmds, env):
            calls[id(launch)] = os.path.basename(path)
            launches.append(launch)
            own_gpu[id(launch)] = own
    if ".service" in fc.text and "<<" in fc.text:
        heredoc_units(fc, env)
    if "<<" in fc.text:
        launches += heredoc_scripts(fc, env)
        heredoc_manifests(fc, env)
    mine = gpu_request(fc.text, fc.li.span) if "#SBATCH" in fc.text else None
    for launch in launches:
        slurm = mine or own_gpu.get(id(launch))
        gpu = slurm
        if slurm is not None and launch.gpu is not None and launch.gpu.count is not None:
            # CUDA_VISIBLE_DEVICES set in the script narrows the allocation
            gpu = GpuHint(slurm.name, launch.gpu.count, f"{slurm.source}; count from {launch.gpu.source}",
                          slurm.span)
        # a batch script's task variables (SLURM_NODEID, SLURM_PROCID) are Slurm's (sources/slurm.py)
        facts = Facts(runtime="slurm") if slurm is not None or "#SBATCH" in fc.text else None
        # a called script's server is the caller's (not a "script:" one: the called script read alone gives way)
        name = f"script:{launch.line}" if id(launch) not in calls else f"run/{calls[id(launch)]}@{launch.line}"
        fc.add([launch], name, gpu, facts, ctx.ollama_models)
    if ".service.d/" in fc.text and "echo" in fc.text:
        echoed_drop_ins(fc)
    if "install.sh" in fc.text:
        installed_ollama(fc, ctx)


# `echo 'Environment="OLLAMA_HOST=0.0.0.0"' | sudo tee -a /etc/systemd/system/ollama.service.d/override.conf`:
# a drop-in the script writes a line at a time
_ECHO_DROP_IN = re.compile(r"^[ \t]*echo[ \t]+(?:'([^'\n]*)'|\"([^\"\\\n]*)\")[ \t]*\|[ \t]*(?:sudo[ \t]+)?tee\b"
                           r"(?:[ \t]+-a)?[ \t]+\S*?([\w.-]+\.service)\.d/[\w.-]+\.conf\b", re.M)


def echoed_drop_ins(fc: FileCtx) -> None:
    """Drop-ins the script writes with `echo LINE | tee [-a] UNIT.service.d/NAME.conf`, read as the drop-in
    those lines make (each character where the script writes it)."""
    from servefit.sources.systemd import entries, scan_unit

    lines: dict[str, list[tuple[str, int]]] = {}
    for m in _ECHO_DROP_IN.finditer(fc.text):
        g = 1 if m.group(1) is not None else 2
        lines.setdefault(m.group(3), []).append((m.group(g), m.start(g)))
    for unit, parts in lines.items():
        text, offs = "", []
        for line, at in parts:
            text += line + "\n"
            offs += list(range(at, at + len(line))) + [at + len(line)]
        body = Src(text, fc.li, offs=offs + [offs[-1] if offs else 0])
        scan_unit(fc, entries(body), unit, None, body)


# `curl -fsSL https://ollama.com/install.sh | sh`: Ollama's Linux installer (scripts/install.sh, configure_systemd)
# writes ollama.service (`ExecStart=/usr/local/bin/ollama serve`) and, where systemd runs, enables and starts it
_INSTALLER = re.compile(r"^[ \t]*(?:sudo[ \t]+)?(?:curl|wget)\b[^\n]*\bollama\.(?:com|ai)/install\.sh\b[^\n]*\|[ \t]*"
                        r"(?:sudo[ \t]+(?:-E[ \t]+)?)?(?:ba)?sh\b", re.M)


def installed_ollama(fc: FileCtx, ctx: Ctx) -> None:
    """The server Ollama's installer starts, where the script writes no drop-in and starts no `ollama serve` itself:
    the installed unit's `ollama serve` with its defaults, serving the models the script pulls."""
    from servefit.sources.launch import from_words
    from servefit.sources.shell import split_words
    from servefit.sources.systemd import _packaged_exec

    m = _INSTALLER.search(fc.text)
    if m is None:
        return
    at = m.start() + len(m.group(0)) - len(m.group(0).lstrip())
    for exec_start in _packaged_exec("ollama.service", Src(fc.text[at:], fc.li, offs=list(range(at, len(fc.text) + 1)))):
        launches = from_words(split_words(exec_start, Vars()), ctx, Vars())
        if any(site.engine == launch.engine for site in fc.sites for launch in launches):
            return  # the script starts or configures that server itself
        for launch in launches:
            launch.line = fc.li.pos(at)[0]
            launch.facts["notes"] = ["Ollama's Linux installer (ollama.com/install.sh) writes ollama.service and "
                                     f"starts it: the server is its ExecStart={exec_start.text}, with the defaults"]
        fc.add(launches, "systemd/ollama.service", None, None, ctx.ollama_models)


# `cat > /etc/systemd/system/x.service <<EOF`, `sudo tee x.service > /dev/null << 'EOF'`: a unit the
# script writes from a heredoc
_UNIT_HEREDOC = re.compile(r"^[^\n]*?(?:cat|tee)\b[^\n]*?([\w./${}-]+\.service)\b[^\n]*?<<(-?)[ \t]*(['\"]?)(\w+)\3[^\n]*\n",
                           re.M)


# `cat > run.sh <<'EOF'`, `tee /opt/serve.sh <<EOF`: a script the script writes; `bash <<EOF`,
# `sh -s <<EOF`: one it runs
_SCRIPT_HEREDOC = re.compile(r"^[^\n]*?(?:(?:cat|tee)\b[^\n]*?[\w./${}-]+\.sh\b|(?<![\w.-])(?:ba|da|z)?sh(?:[ \t]+-s)?)"
                             r"[^\n]*?<<(-?)[ \t]*(['\"]?)(\w+)\2[^\n]*\n", re.M)


# `cat <<EOF >> vllm.yaml`, `cat > deploy.yaml <<'EOF'`, `kubectl apply -f - <<EOF`: a Kubernetes manifest the
# script writes or applies
_MANIFEST_HEREDOC = re.compile(r"^(?:(?=[^\n]*\b(?:cat|tee)\b)(?=[^\n]*\.ya?ml\b)|(?=[^\n]*\bkubectl\b[^\n]*"
                               r"\b(?:apply|create)\b[^\n]*-f[ \t]*-(?:\s|$)))[^\n]*?<<(-?)[ \t]*(['\"]?)(\w+)\2[^\n]*\n",
                               re.M)


def _bodies(fc: FileCtx, pattern: re.Pattern[str], env: Vars) -> list[tuple[re.Match[str], Src, bool]]:
    """The heredocs after the lines pattern matches (its last three groups: `-`, the quote, the
    delimiter), as the command reads them: an unquoted delimiter lets the shell expand `$VAR` and
    undo `\\\\` / `\\$` first (bash: Here Documents)."""
    out = []
    for m in pattern.finditer(fc.text):
        dash, quote, delim = m.group(m.re.groups - 2), m.group(m.re.groups - 1), m.group(m.re.groups)
        start = m.end()
        end = start
        while end < len(fc.text):
            nl = fc.text.find("\n", end)
            line_end = len(fc.text) if nl < 0 else nl
            line = fc.text[end:line_end]
            if (line.lstrip("\t") if dash == "-" else line) == delim:
                break
            end = line_end + 1
        out.append((m, _heredoc_text(fc, start, min(end, len(fc.text)), bool(quote)), bool(quote)))
    return out


def heredoc_units(fc: FileCtx, env: Vars) -> None:
    """systemd units the script writes from heredocs, read as the units they become."""
    from servefit.sources.systemd import entries, scan_unit

    for m, body, quoted in _bodies(fc, _UNIT_HEREDOC, env):
        drop_in = body if fc.text.startswith(".d/", m.end(1)) else None  # `tee .../ollama.service.d/env.conf <<EOF`
        scan_unit(fc, entries(body), os.path.basename(m.group(1)), None if quoted else env, drop_in)


def heredoc_scripts(fc: FileCtx, env: Vars) -> list[Launch]:
    """The servers of scripts the script writes or runs from heredocs. An unquoted body is expanded
    with the script's variables as it is written; a quoted one runs with its own."""
    out: list[Launch] = []
    for _, body, quoted in _bodies(fc, _SCRIPT_HEREDOC, env):
        inner = Vars() if quoted else env
        out += from_commands(split_commands(body, inner), fc.ctx(exported_only=True), inner)
    return out


def heredoc_manifests(fc: FileCtx, env: Vars) -> None:
    """Kubernetes manifests the script writes or applies from heredocs, read as the manifests they become. In an
    unquoted body the shell has expanded `${VAR}` before kubectl reads it, so it is not the text Kubernetes passes
    on literally (SF107)."""
    from servefit.sources import k8s
    from servefit.sources.yamlpos import Y, YamlProblem, compose_all

    for _, body, quoted in _bodies(fc, _MANIFEST_HEREDOC, env):
        try:
            docs = compose_all(body)
        except YamlProblem:
            continue
        y = Y(body)
        kdocs = [d for d in docs if y.get(d, "apiVersion") is not None and y.get(d, "kind") is not None]
        if not kdocs:
            continue
        before = len(fc.findings)
        k8s.scan(y, kdocs, fc)
        if not quoted:
            fc.findings[before:] = [f for f in fc.findings[before:] if f.code != "SF107"]


def _heredoc_text(fc: FileCtx, start: int, end: int, quoted: bool) -> Src:
    """The heredoc's text as the command reads it, each character mapped to where it is written."""
    if quoted:
        return Src(fc.text[start:end], fc.li, base=start)
    out: list[str] = []
    offs: list[int] = []
    i = start
    t = fc.text
    while i < end:
        if t[i] == "\\" and i + 1 < end and t[i + 1] in "\\$`":
            out.append(t[i + 1])
            offs.append(i + 1)
            i += 2
        elif t[i] == "\\" and i + 1 < end and t[i + 1] == "\n":
            i += 2  # a line continuation inside the heredoc: the lines are joined
        else:
            out.append(t[i])
            offs.append(i)
            i += 1
    offs.append(end)
    return Src("".join(out), fc.li, offs=offs)
