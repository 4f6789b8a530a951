"""`docker run [OPTIONS] IMAGE [COMMAND...]` in a script: the container's server with its options
(`-e` / `--env-file`, `--gpus`, `--shm-size` / `--ipc=host`, `-p`, `-v`, `--entrypoint`)."""

from __future__ import annotations

from servefit.core import GpuHint, Span, Token
from servefit.sources.container import container
from servefit.sources.hints import SHM_MIN, docker_gpus, size_bytes
from servefit.sources.launch import Ctx, Launch
from servefit.sources.ports import Exposure, published
from servefit.sources.shell import Vars, Word

DOCKER_VALUE_LONG = {
    "--env", "--env-file", "--volume", "--publish", "--name", "--gpus", "--shm-size", "--ipc",
    "--network", "--net", "--workdir", "--entrypoint", "--user", "--runtime", "--mount", "--device",
    "--cpus", "--memory", "--restart", "--label", "--hostname", "--ulimit", "--cap-add", "--cap-drop",
    "--security-opt", "--log-driver", "--log-opt", "--platform", "--pull", "--add-host", "--dns",
    "--tmpfs", "--group-add", "--pid", "--uts", "--cpuset-cpus", "--memory-swap", "--health-cmd",
    "--health-interval", "--health-retries", "--health-timeout", "--label-file", "--volumes-from",
    "--stop-signal", "--stop-timeout", "--cgroupns", "--cidfile", "--device-cgroup-rule", "--expose",
    "--link", "--mac-address", "--ip", "--ip6", "--memory-reservation", "--oom-score-adj",
    "--storage-opt", "--sysctl", "--userns", "--cpu-shares", "--annotation", "--attach",
    "--device-read-bps", "--gpus-all", "--pids-limit", "--network-alias", "--isolation", "--hooks-dir",
}
DOCKER_VALUE_SHORT = set("evpwuhlmc")


def _env_files(files: list[Word], ctx: Ctx, env: Vars) -> None:
    """`--env-file FILE`: its variables, under the `-e` ones (docker reads the files first, a later
    file over an earlier one, then -e). The file is looked for beside the script, then at the
    repository's root; one that is not there is said, as compose's env_file is."""
    import os

    from servefit.sources.base import _repo_of, _within
    from servefit.sources.envfile import load_env_file
    from servefit.sources.problems import missing_config_file

    here = os.path.dirname(ctx.file) or "."
    root = _repo_of(here)
    read: dict[str, Token] = {}
    for w in files:
        cands = [os.path.normpath(os.path.join(d, w.text)) for d in (here, root)] if not w.unresolved else []
        path = next((c for c in cands if _within(c, root) and os.path.isfile(c)), None)
        vals = load_env_file(path) if path is not None else None
        if vals is None:
            ctx.findings.append(missing_config_file(f"--env-file {w.text} is not in the repository; the variables "
                                                    "it sets are unknown", span=w.token().span))
            continue
        read.update(vals)
    for k, v in read.items():
        if k not in env.values:
            env.set(k, v)


def _built_here(image: Word, entry: Word | None, rest: list[Word], ctx: Ctx, env: Vars) -> list[Launch] | None:
    """The image a script beside this one builds (`docker build -t NAME .`): docker runs that local
    image, so the container runs that Dockerfile's last stage, as a compose service with `image: NAME`
    does (compose_build.built); None when nothing here builds it. An image named like an engine's
    (`ollama`) whose Dockerfile starts no server servefit reads is said not read (SF116), not taken for
    the engine's own image with its defaults (JaeikBae/ollama-on-docker: `CMD ["bash", "serve.sh"]`)."""
    import os

    from servefit.sources import detect
    from servefit.sources.compose_build import built, tagged_dockerfile
    from servefit.sources.problems import unread_server

    df = None if image.unresolved else tagged_dockerfile(image.text, ctx.file)
    if df is None:
        return None
    launches = built(df[0], df[1], [entry] if entry is not None else None, rest or None, entry is not None, env, ctx)
    span = (rest[0] if rest else image).token().span
    for launch in launches:  # the server is this `docker run`: its line, as for an engine's image
        launch.line = span.line if span is not None else launch.line
    if not launches and detect.engine_of_image(image.text) is not None:
        ctx.findings.append(unread_server(
            f"`{image.text}` is built here (docker build -t) from {os.path.relpath(df[0], os.path.dirname(ctx.file) or '.')}, "
            "not pulled as the engine's image, and its command starts no server servefit reads: this server was not "
            "checked", span=image.token().span))
    return launches


def docker_run(words: list[Word], ctx: Ctx, env: Vars) -> list[Launch]:
    """`docker run [OPTIONS] IMAGE [COMMAND...]`."""
    denv = Vars()
    entry: Word | None = None
    gpu: GpuHint | None = None
    shm: bool | None = None
    unres: list[tuple[str, Span | None]] = []
    exposure: list[Exposure] = []
    mounts: dict[str, str] = {}  # container dir -> host dir (`-v HOST:CONTAINER[:ro]`)
    env_files: list[Word] = []
    j = 0
    n = len(words)
    while j < n:
        t = words[j].text
        if t == "--":
            j += 1
            break
        if not t.startswith("-") or t == "-":
            break
        flag, eq, _ = t.partition("=")
        if t in ("-P", "--publish-all") or (not t.startswith("--") and "P" in t[1:] and "p" not in t[1:]):
            exposure.append(Exposure(f"docker run {t} (every exposed port, on all interfaces)", words[j].token().span))
        val: Word | None = None
        pos: int
        if flag.startswith("--"):
            if eq:
                val = words[j].after(len(flag) + 1)
                j += 1
            elif flag in DOCKER_VALUE_LONG and j + 1 < n:
                val = words[j + 1]
                j += 2
            else:
                j += 1
        else:
            j += 1
            for pos, ch in enumerate(flag[1:]):
                if ch in DOCKER_VALUE_SHORT:
                    flag = "-" + ch
                    if len(t) > pos + 2:
                        val = words[j - 1].after(pos + 2)
                    elif j < n:
                        val = words[j]
                        j += 1
                    break
        if val is None:
            continue
        v = val.text
        if flag in ("-e", "--env"):
            name, has_eq, _ = v.partition("=")
            if has_eq:
                vw = val.after(len(name) + 1)
                denv.set(name, vw.token(), vw.unresolved)
            elif env.get(name) is not None:
                tok = env.get(name)
                assert tok is not None
                denv.set(name, tok)
            else:
                unres.append((name, val.token().span))
        elif flag == "--env-file":
            env_files.append(val)
        elif flag == "--gpus":
            cnt, src = docker_gpus(v)
            gpu = GpuHint(None, cnt, f"docker run {src}", val.token().span)
        elif flag == "--ipc":
            shm = True if v == "host" else shm
        elif flag == "--shm-size":
            size = size_bytes(v)
            shm = size is not None and size >= SHM_MIN
        elif flag == "--entrypoint":
            entry = val
        elif flag in ("-v", "--volume"):
            parts = v.split(":")
            if len(parts) >= 2 and parts[0] and parts[1].startswith("/"):
                mounts[parts[1].rstrip("/") or "/"] = parts[0]
        elif flag in ("-p", "--publish"):
            e = published(f"docker run {flag}", v, val.token().span)
            if e is not None:
                exposure.append(e)
        elif flag in ("--network", "--net") and v == "host":
            exposure.append(Exposure(f"docker run {flag} host (the container shares the host's interfaces)",
                                     val.token().span, host_network=True))
    if j >= n:
        return []
    _env_files(env_files, ctx, denv)
    image_word = words[j]
    rest = words[j + 1:]
    denv.exported = set(denv.values)
    here = _built_here(image_word, entry, rest, ctx, denv)  # a local build of that name is what docker runs
    launches = here if here is not None else \
        container(image_word.token(), [entry] if entry is not None else None, rest, ctx, denv)
    for launch in launches:
        launch.unresolved.extend(unres)
        if gpu is not None and (launch.gpu is None or launch.gpu.count is None):
            launch.gpu = gpu
        launch.shm = shm if shm is not None else False
        launch.facts["runtime"] = "docker run"
        launch.facts["exposure"] = list(exposure)
        if mounts:
            launch.facts.setdefault("path_map", dict(mounts))
    return launches
