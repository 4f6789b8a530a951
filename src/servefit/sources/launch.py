"""From words to servers: strip what wraps an engine command (`exec`, `nohup`, `env`,
`VAR=1` prefixes, `sudo`, `uv run`, `srun`...), unwrap `sh -c` strings, read `docker run`
options (image, `-e`, `--gpus`, `--ipc=host`, `--shm-size`, `--entrypoint`), and combine a
container's entrypoint and command the way the runtime does (k8s `command`/`args`, compose
`entrypoint`/`command`, Dockerfile ENTRYPOINT/CMD) with the image's own entrypoint when only
arguments are given.

The image entrypoint, when servefit fills it in, appears in argv as tokens with `span=None`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, TypedDict

from servefit.core import Finding, GpuHint, Span, Token
from servefit.rules.catalog import finding
from servefit.rules.registry import rule
from servefit.sources import detect
from servefit.sources.hints import count_visible_devices
from servefit.sources.ollama_client import EXEC_VALUE, container_exec, ollama_client
from servefit.sources.ports import Exposure
from servefit.sources.shell import Command, Vars, Word, split_commands
from servefit.sources.text import LineIndex

# words before the command itself: `if [ -f X ]; then` tests X (`[` is not a launch), never runs it
SKIP_WORDS = {"exec", "nohup", "time", "then", "do", "else", "{", "!", "setsid", "stdbuf", "if", "elif", "while",
              "until"}
# `for NAME in WORDS` / `select NAME in WORDS`: the words are data (`for d in /opt/llama-server`), not a command
LIST_WORDS = {"for", "select"}
# a program, never a model: one in a bin folder (`/usr/bin/supervisord`), a script, or a process manager
PROGRAM_PATH = re.compile(r"^(?:/(?:usr/(?:local/)?)?s?bin/\S+|\S+\.(?:sh|bash|py)|(?:\S*/)?(?:supervisord|tini|dumb-init))$")
DOCKER = {"docker", "podman", "nerdctl"}
# a cluster node's launcher given as an engine image's command (`ray start --head`, ray-project's images with
# vLLM installed): a command, never the engine's arguments (vLLM would take `--head` for `--headless`)
NODE_STARTERS = {"ray"}
COMPOSE = {"docker-compose", "podman-compose"}


@dataclass
class Ctx:
    """What a wrapper knows around the words it hands over."""

    file: str
    li: LineIndex
    findings: list[Finding]
    exported_only: bool = False  # scripts: only exported variables reach the engine
    depth: int = 0
    ollama_models: list[Token] = field(default_factory=list)
    modelfile_refs: list[str] = field(default_factory=list)  # `ollama create NAME -f PATH`
    created: list[str] = field(default_factory=list)  # the NAME of each `ollama create NAME -f PATH`
    pulled_vars: list[tuple[str, Span | None]] = field(default_factory=list)  # `ollama pull $MODEL`: unknown here


# the runtimes (Facts.runtime) of a script's command that runs an image, a local build of it among them
RUNS_IMAGES = ("docker run", "Cloud Run")


class Facts(TypedDict, total=False):
    """What a wrapper knows about a server beside its words; to_site lifts each into the
    LaunchSite (Workload, image span, model inputs). The wrapper's own facts override those of a
    launch inside it (a `docker run` in a compose command)."""

    k8s_kind: str | None
    chart: str
    service: str | None
    container: str
    runtime: str
    runtime_env: list[str]
    env_opaque: bool
    ports: list[Any]
    exposure: list[Exposure]
    config_only: bool
    compose_files: list[str]
    compose_extends: list[tuple[str, str]]
    path_map: dict[str, str]
    model_file_refs: list[str]
    image_span: Span | None
    shm_limit: str | None
    notes: list[str]  # assumptions the reading made, said with the plan
    engine_version: str  # the release a build installs (`pip install vllm==X`) or builds from source, over its image's tag
    version_source: str  # where that release is written
    packages: list[str]  # pip requirements the build installs (`RUN pip install ...`), as written
    list_separator: str  # Workload.list_separator
    env_list_end: Span | None  # Workload.env_list_end
    no_gpu_request: bool  # Workload.no_gpu_request
    args_at_run: bool  # Workload.args_at_run
    runner: str  # Workload.runner
    profile_off_gpu: tuple[str, str, Span | None]  # Workload.profile_off_gpu
    refused: str  # Workload.refused


@dataclass
class Launch:
    """An engine command found in a file, before it becomes a LaunchSite: the engine, its argv and environment
    with spans, the image, and what the wrapper knows about the server."""

    engine: str
    argv: list[Token]
    env: dict[str, Token]
    line: int
    image: str | None = None
    unresolved: list[tuple[str, Span | None]] = field(default_factory=list)
    gpu: GpuHint | None = None
    shm: bool | None = None
    facts: Facts = field(default_factory=lambda: Facts())
    # per environment variable, the unset variables its value is written with (Vars.taint)
    env_taint: dict[str, list[tuple[str, Span | None]]] = field(default_factory=dict)


def _env_of(env: Vars, exported_only: bool) -> dict[str, Token]:
    if not exported_only:
        return dict(env.values)
    return {k: v for k, v in env.values.items() if k in env.exported}


def _shell_payload(words: list[Word], i: int) -> Word | None:
    """For `sh [-opts] -c PAYLOAD`, the payload word."""
    j = i + 1
    while j < len(words):
        t = words[j].text
        if t.startswith("-") and not t.startswith("--") and "c" in t[1:]:
            return words[j + 1] if j + 1 < len(words) else None
        if t.startswith("-") or t.startswith("+"):
            j += 1
            continue
        return None
    return None


def _exec_in_container(words: list[Word], ctx: Ctx, env: Vars) -> list[Launch]:
    """`docker exec -d NAME bash -c 'python3 -m sglang.launch_server ...'`: a server started inside a
    container that is already running (its image is not known here); the command after the name."""
    texts = [w.text for w in words]
    k = 0
    while k < len(texts) and texts[k].startswith("-"):
        k += 2 if texts[k] in EXEC_VALUE else 1
    return from_words(words[k + 1:], ctx, env) if k + 1 < len(words) else []


def _wrapped_shell(words: list[Word], start: int) -> int | None:
    """`srun --nodes=1 bash -c "vllm serve ..."`, `apptainer exec --nv IMG bash -c '...'`: a launcher's
    command that is itself an `sh -c` string; the position of that shell, or None."""
    for k in range(start + 1, len(words)):
        if detect.program(words[k].text) in detect.SHELLS and _shell_payload(words, k) is not None:
            return k
    return None


@rule("SF103", "SF121")
def from_commands(cmds: list[Command], ctx: Ctx, env: Vars) -> list[Launch]:
    from servefit.budget import SERVERS_PER_FILE

    out: list[Launch] = []
    stops = _stops_on_exit(cmds)
    served = False  # the command before this one started a server and ended at a line break
    for cmd in cmds:
        if len(out) > SERVERS_PER_FILE:  # the file reader reports the bound; the rest is not looked at
            break
        if served and cmd.words and _option_word(cmd.words[0].text):
            ctx.findings.append(finding(
                "SF121", f"`{' '.join(cmd.texts)}` is a command of its own: the line before it does not end "
                "in `\\`, so bash starts the server without these options and then fails on "
                f"`{cmd.words[0].text}: command not found`", span=cmd.words[0].token().span))
        found = from_words(cmd.words, ctx, cmd.env if cmd.env is not None else env)
        served = bool(found) and cmd.sep == "\n" and cmd.broken is None  # SF103 says that one
        if found and cmd.sep == "&" and stops:
            continue  # started for the script's own use (`ollama pull` in a model Job) and stopped when it exits
        for launch in found:
            launch.unresolved.extend(cmd.unresolved)
            if cmd.broken is not None:
                ctx.findings.append(finding(
                    "SF103", "this comment ends the backslash continuation: bash runs the command "
                    "without the lines that follow, and those lines fail as a separate command",
                    span=cmd.broken))
        out.extend(found)
    return out


def _option_word(text: str) -> bool:
    """`--host`, `-fa`: a word only an option can be (ShellCheck's SC2215, a flag used as a command name)."""
    return re.match(r"--?[A-Za-z]", text) is not None


def _stops_on_exit(cmds: list[Command]) -> bool:
    """`trap 'kill $pid' EXIT`: the script kills what it started in the background when it ends, and does not
    `wait` for it (a script that waits serves until the server stops: a Slurm job's restart loop)."""
    return any(c.words and c.words[0].text == "trap" and len(c.words) > 2 and "kill" in c.words[1].text
               and any(w.text in ("EXIT", "0") for w in c.words[2:]) for c in cmds) \
        and not any(c.words and c.words[0].text == "wait" for c in cmds)


def from_words(words: list[Word], ctx: Ctx, env: Vars) -> list[Launch]:
    """The servers one simple command starts (an `sh -c` can hold several)."""
    if ctx.depth > 4 or not words:
        return []
    texts = [w.text for w in words]
    prefix: dict[str, Word] = {}
    i = 0
    n = len(words)
    while i < n:
        t = texts[i]
        a = words[i].assignment()
        if a is not None:
            prefix[a[0]] = a[1]
            i += 1
        elif t in SKIP_WORDS:
            i += 1
        elif t in ("env", "sudo"):
            i += 1
            while i < n and texts[i].startswith("-"):
                i += 2 if texts[i] in ("-u", "-g", "--unset", "-C") else 1
        else:
            break
    if i >= n or texts[i] in LIST_WORDS:
        return []
    ollama_client(words[i:], ctx)
    head = detect.program(texts[i])
    if head in detect.NOT_LAUNCH and not (head in detect.RUNNERS and texts[i + 1:i + 2] == ["run"]):
        return []
    sub_env = env
    if prefix:
        sub_env = env.copy()
        for var, w in prefix.items():
            sub_env.set(var, w.token(), w.unresolved)
            sub_env.exported.add(var)
    if head in DOCKER or head in COMPOSE:
        j = i + 1
        if j < n and texts[j] in ("container", "compose") and head in DOCKER:
            j += 1
        if j < n and texts[j] == "run" and head in DOCKER and texts[j - 1] != "compose":
            from servefit.sources.docker_run import docker_run

            return docker_run(words[j + 1:], ctx, sub_env)
        if j < n and texts[j] == "exec":
            container_exec(words[j + 1:], ctx)
            if head in DOCKER and texts[j - 1] != "compose":
                return _exec_in_container(words[j + 1:], ctx, sub_env)
        return []
    if head == "tmux":  # a server started in a tmux session: its shell-command, or keys typed with Enter
        from servefit.sources.tmux import tmux

        return tmux(words[i + 1:], ctx, sub_env)
    if head in ("apptainer", "singularity"):
        from servefit.sources.apptainer import apptainer

        return apptainer(words[i + 1:], ctx, sub_env)
    if head == "gcloud":  # `gcloud [beta] run deploy SERVICE --image ...`: a Cloud Run service
        k = i + 1 + (texts[i + 1:i + 2] in (["beta"], ["alpha"]))
        if texts[k:k + 2] == ["run", "deploy"]:
            from servefit.sources.cloud_run import gcloud_run_deploy

            return gcloud_run_deploy(words[k + 2:], ctx, sub_env)
        return []
    if texts[i] == "eval" and i + 1 < n:  # `eval $CMD`: the words joined and read again as shell
        from servefit.sources.shell_run import eval_launches

        return eval_launches(words[i + 1:], ctx, sub_env)
    start = i
    if head in detect.SHELLS:
        payload = _shell_payload(words, i)
        if payload is None:
            # `bash start-ollama.sh`: a script the engines' data names as the server's launcher
            script = next((k for k in range(i + 1, n) if not texts[k].startswith("-")), n)
            if script == n or detect.recognise(texts[script:]) is None:
                return []
            start = script
    if start == i and head in detect.SHELLS:
        assert payload is not None
        from servefit.sources.shell_run import split_command

        split_command(words, payload, ctx)
        inner = Ctx(ctx.file, ctx.li, ctx.findings, ctx.exported_only, ctx.depth + 1, ctx.ollama_models,
                    ctx.modelfile_refs, created=ctx.created, pulled_vars=ctx.pulled_vars)
        k = next(j for j, w in enumerate(words) if w is payload)
        positional = words[k + 2:]  # `sh -c 'exec vllm serve "$@"' -- ARGS...`: $0 is the word after, "$@" the rest
        if positional and any(v in payload.text for v in ('"$@"', "$@", "$*")):
            from servefit.sources.k8s_scripts import script_launches

            found = script_launches(payload.to_src(), positional, inner, sub_env)
        else:
            found = from_commands(split_commands(payload.to_src(), sub_env.copy()), inner, sub_env)
        for launch in found:  # the outer shell expanded the payload: its unset variables are the server's
            launch.unresolved.extend(payload.unresolved + payload.substituted_refs())
        return found
    hit = detect.find_engine(texts[start:])
    if hit is None:
        inner_shell = _wrapped_shell(words, start)
        if inner_shell:
            return from_words(words[inner_shell:], ctx, sub_env)
        from servefit.sources.shell_run import server_in_argument

        server_in_argument(words[start:], ctx)
        return []
    k = start + hit[0]
    argv_words = words[k:]
    unres: list[tuple[str, Span | None]] = []
    for w in argv_words:
        unres.extend(w.unresolved)
    for var, w in prefix.items():  # `LD_LIBRARY_PATH=/x:$LD_LIBRARY_PATH`: the inherited value extended, no setting
        unres.extend(u for u in w.unresolved if u[0] != var)
    proc_env = _env_of(sub_env, ctx.exported_only)
    launch = Launch(hit[1], [w.token() for w in argv_words], proc_env, argv_words[0].line,
                    unresolved=unres, env_taint=dict(sub_env.taint))
    cvd = proc_env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        cnt = count_visible_devices(cvd.text)
        if cnt:
            launch.gpu = GpuHint(None, cnt, "CUDA_VISIBLE_DEVICES", cvd.span)
    return [launch]
