"""Docker Compose files: each service whose entrypoint + command (or image) runs an engine.

Interpolation (`$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `$$` for a literal `$`)
reads the `.env` file beside the compose file; the shell environment of whoever runs compose is
unknown, so a variable `.env` does not define is reported as unresolved rather than taken as
empty. `command`/`entrypoint` are read in both forms (a string is split like shlex, a list item
is one word); `sh -c` strings are then run through the shell splitter with the container's
`environment` (list or map) and `env_file` values. YAML anchors and `<<` merges are applied.
Hardware: `deploy.resources.reservations.devices` (count / device_ids), `gpus:`, and
`NVIDIA_VISIBLE_DEVICES`; shared memory from `shm_size`, `ipc: host` or a /dev/shm mount.

Files layered on a base, as `docker compose -f compose.yaml -f compose.gpu.yaml` merges them
(compose_layers.py): a base file takes its standard override (compose.override.yaml,
docker-compose.override.yml) as docker compose does by default; an overlay beside a base
(docker-compose.gpu.yml, compose.prod.yaml) is read on top of that base for the services it
names. Later layers replace `image`, `command`, `entrypoint` and the GPU request, and merge
`environment` / `env_file` by variable, `ports` and `volumes` by adding.
"""

from __future__ import annotations

import os

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from servefit.core import GpuHint, LaunchSite, Span, Together, Token
from servefit.sources import image_release
from servefit.sources.base import FileCtx, _repo_of, _within, give_names
from servefit.sources.compose_build import built, dockerfile_of, tagged_dockerfile
from servefit.sources.compose_layers import LayeredY, alternative, extended, layers
from servefit.sources.container import container
from servefit.sources.detect import markers, models_on_request
from servefit.sources.docker_scripts import mounts_as_copies, run_copied
from servefit.sources.envfile import load_env_file
from servefit.sources.hints import SHM_MIN, count_visible_devices, size_bytes, to_int
from servefit.sources.image_env import llama_arg_server
from servefit.sources.launch import Facts
from servefit.sources.ports import Exposure, published
from servefit.sources.problems import missing_config_file, unknown_image
from servefit.sources.shell import Vars, Word, expand_word, split_words
from servefit.sources.yamlpos import Y


def _words(y: Y, node: Node | None, interp: Vars) -> list[Word] | None:
    if isinstance(node, SequenceNode):
        out = [expand_word(y.scalar_src(i), interp, compose=True) for i in node.value if isinstance(i, ScalarNode)]
        return out or None
    if isinstance(node, ScalarNode) and node.tag != "tag:yaml.org,2002:null" and str(node.value).strip():
        return split_words(y.scalar_src(node), interp, compose=True)
    return None


def _cleared(node: Node | None) -> bool:
    """An entrypoint written empty (`[]`, `""`): the compose spec ignores the image's then; `null`
    or no key keeps it."""
    if isinstance(node, SequenceNode):
        return not node.value
    return isinstance(node, ScalarNode) and node.tag != "tag:yaml.org,2002:null" and not str(node.value).strip()


def _env_files(y: Y, node: Node | None, fc: FileCtx, env: Vars) -> None:
    entries = y.seq(node) if isinstance(node, SequenceNode) else ([node] if node is not None else [])
    for e in entries:
        t = y.tok(e) if isinstance(e, ScalarNode) else y.tok(y.get(e, "path"))
        if t is None:
            continue
        path = os.path.join(os.path.dirname(fc.path), t.text)
        inside = _within(path, _repo_of(os.path.dirname(fc.path) or "."))  # never a file outside the repository
        vals = load_env_file(path) if inside and os.path.isfile(path) else None
        if vals is None:
            fc.findings.append(missing_config_file(f"env_file {t.text} is not in the repository; the variables "
                                                "it sets are unknown", span=t.span))
            continue
        for k, v in vals.items():
            env.set(k, v)


def _environment(y: Y, node: Node | None, interp: Vars, env: Vars, runtime: list[str] | None = None) -> None:
    """`environment` as a list or a map; a name without a value that `.env` does not define is
    passed through from the shell that runs compose (`runtime`: set, value unknown)."""
    runtime = runtime if runtime is not None else []
    if isinstance(node, SequenceNode):
        for item in node.value:
            if not isinstance(item, ScalarNode):
                continue
            w = expand_word(y.scalar_src(item), interp, compose=True)
            name, eq, _ = w.text.partition("=")
            if eq:
                val = w.after(len(name) + 1)
                env.set(name, val.token(), val.unresolved)
            elif interp.get(name) is not None:
                env.set(name, interp.get(name))  # type: ignore[arg-type]
            else:
                runtime.append(name)
    elif isinstance(node, MappingNode):
        for k, _, v in y.items(node):
            if isinstance(v, ScalarNode) and v.tag != "tag:yaml.org,2002:null":
                w = expand_word(y.scalar_src(v), interp, compose=True)
                env.set(k, w.token(), w.unresolved)
            elif interp.get(k) is not None:
                env.set(k, interp.get(k))  # type: ignore[arg-type]
            else:
                runtime.append(k)


def _gpus(y: Y, svcs: list[Node], env: Vars, interp: Vars) -> GpuHint | None:
    """The GPU request of the last layer that makes one, else NVIDIA_VISIBLE_DEVICES."""
    for svc in reversed(svcs):
        hint = _gpu_request(y, svc, interp)
        if hint is not None:
            return hint
    vis = env.get("NVIDIA_VISIBLE_DEVICES")
    if vis is not None and count_visible_devices(vis.text):
        return GpuHint(None, count_visible_devices(vis.text), "NVIDIA_VISIBLE_DEVICES", vis.span)
    return None


def _gpu_request(y: Y, svc: Node, interp: Vars) -> GpuHint | None:
    def value(node: Node | None) -> Token | None:  # `count: ${GPU_COUNT-1}` is interpolated like the rest
        return expand_word(y.scalar_src(node), interp, compose=True).token() if isinstance(node, ScalarNode) else None

    for d in y.seq(y.get(svc, "deploy", "resources", "reservations", "devices")):
        caps = [y.str(c) for c in y.seq(y.get(d, "capabilities"))]
        drv = value(y.get(d, "driver"))
        if "gpu" not in caps and (drv.text if drv else None) not in ("nvidia", "amd", "cdi"):
            continue
        cnt = value(y.get(d, "count"))
        ids = y.seq(y.get(d, "device_ids"))
        if ids:
            # `device_ids: ['0,1,2,3']`: Docker joins the ids with commas into NVIDIA_VISIBLE_DEVICES, so one
            # entry holding several is several GPUs
            texts = [(tok.text if (tok := value(i)) is not None else "") for i in ids]
            n = sum(max(1, len([p for p in t.split(",") if p.strip()])) for t in texts)
            return GpuHint(None, n, "compose device_ids", y.span(y.get(d, "device_ids")))  # type: ignore[arg-type]
        if cnt is not None and cnt.text != "all":
            return GpuHint(None, to_int(cnt.text), "compose deploy.resources.reservations.devices count", cnt.span)
        return GpuHint(None, None, "compose devices count: all", cnt.span if cnt else None)
    g = y.get(svc, "gpus")
    if isinstance(g, ScalarNode):
        return GpuHint(None, None, "compose gpus: all", y.span(g))
    for d in y.seq(g):
        cnt = value(y.get(d, "count"))
        if cnt is not None and cnt.text != "all":
            return GpuHint(None, to_int(cnt.text), "compose gpus count", cnt.span)
    return None


def _shm(y: Y, svcs: list[Node]) -> bool:
    ipc, size = _last(y, svcs, "ipc"), _last(y, svcs, "shm_size")
    if y.str(ipc) == "host":
        return True
    if y.str(size):
        b = size_bytes(y.str(size) or "")
        return b is not None and b >= SHM_MIN
    for svc in svcs:
        for v in y.seq(y.get(svc, "volumes")):
            text = y.str(v) or y.str(y.get(v, "target")) or ""
            if text.rstrip("/").endswith("/dev/shm"):
                return True
    return False


def _last(y: Y, svcs: list[Node], key: str) -> Node | None:
    """A key's value in the last layer that sets it (compose replaces scalars and commands)."""
    for svc in reversed(svcs):
        v = y.get(svc, key)
        if v is not None:
            return v
    return None


def scan(y: Y, root: Node, fc: FileCtx) -> None:
    interp = Vars()
    dotenv = os.path.join(os.path.dirname(fc.path), ".env")
    if os.path.isfile(dotenv):
        for k, v in (load_env_file(dotenv) or {}).items():
            interp.set(k, v)
    stack = layers(fc.path, y, root)
    ly = LayeredY(y, stack)
    files = [p for p, _, _ in stack]
    overlay = files[0] != fc.path  # this file is read on top of its base: only the services it names
    pinned: dict[str, list[tuple[str, list[LaunchSite], Span | None]]] = {}
    names = [k for k, _, _ in y.items(y.get(root, "services"))] if overlay else \
        list(dict.fromkeys(k for _, yy, rr in stack for k, _, _ in yy.items(yy.get(rr, "services"))))
    for sname in names:
        alone = overlay and alternative(stack, sname)  # a compose file for another engine, run on its own
        svcs: list[Node] = [n for _, yy, rr in (stack[1:] if alone else stack)
                            if isinstance(n := yy.get(rr, "services", sname), MappingNode)]
        own = set(map(id, svcs))
        svcs = [b for svc in svcs for b in [*extended(ly, svc), svc]]  # `extends:` bases merge under the service
        bases = [(f, name) for b in svcs if id(b) not in own and (f := ly.file_of(b))
                 and (name := _name_in(ly, f, b))]
        if svcs:
            first = len(fc.sites)
            _service(ly, sname, svcs, fc, interp, [fc.path] if alone else files, bases)
            for dev, at in _device_ids(ly, svcs, interp) if len(fc.sites) > first else ():
                pinned.setdefault(dev, []).append((sname, fc.sites[first:], at))
    _shared_gpus(pinned)


def _device_ids(y: Y, svcs: list[Node], interp: Vars) -> list[tuple[str, Span | None]]:
    """The GPUs a service reserves by id (`device_ids: ['0']`, the last layer that reserves any), each with where
    the list is written."""
    for svc in reversed(svcs):
        for d in y.seq(y.get(svc, "deploy", "resources", "reservations", "devices")):
            ids = y.get(d, "device_ids")
            if ids is not None and y.seq(ids):
                return [(part.strip(), y.span(ids)) for i in y.seq(ids) if isinstance(i, ScalarNode)
                        for part in expand_word(y.scalar_src(i), interp, compose=True).text.split(",") if part.strip()]
    return []


def _shared_gpus(pinned: dict[str, list[tuple[str, list[LaunchSite], Span | None]]]) -> None:
    """Services that reserve the same GPU by id run on it at the same time: their memory adds up (SF117)."""
    for dev, users in pinned.items():
        if len({name for name, _, _ in users}) < 2:
            continue
        names = " and ".join(repr(name) for name, _, _ in users)
        together = Together(f"compose services {names}", tuple(site.name for _, sites, _ in users for site in sites),
                            users[0][2], f"reserve the same GPU (device_ids '{dev}'), so they run at the same time")
        for _, sites, _ in users:
            for site in sites:
                if site.workload.together is None:
                    site.workload.together = together


def _name_in(y: LayeredY, path: str, node: Node) -> str | None:
    """The service name `node` has in the file `path`."""
    root = y.roots.get(path)
    return next((k for k, _, v in y.items(y.get(root, "services")) if v is node), None) if root is not None else None


def _service(y: LayeredY, sname: str, svcs: list[Node], fc: FileCtx, interp: Vars, files: list[str],
             bases: list[tuple[str, str]] | None = None) -> None:
    image_node = _last(y, svcs, "image")
    image: Token | None = None
    unset: list[str] = []
    if isinstance(image_node, ScalarNode):
        word = expand_word(y.scalar_src(image_node), interp, compose=True)
        image, unset = word.token(), [v for v, _ in word.unresolved]
    env = Vars()
    for svc in svcs:  # env_file first, then environment, each layer over the one before
        _env_files(y, y.get(svc, "env_file"), fc, env)
    runtime: list[str] = []
    for svc in svcs:
        _environment(y, y.get(svc, "environment"), interp, env, runtime)
    env.exported = set(env.values)
    entry_node, cmd_node = _last(y, svcs, "entrypoint"), _last(y, svcs, "command")
    entry = _words(y, entry_node, interp)
    cmd = _words(y, cmd_node, interp)
    if _cleared(entry_node):  # `entrypoint: []` or `""` drops the image's: the command is the whole of it
        entry, cmd = cmd, None
    # the server's file is the one its command (else its image) is written in: its line is there
    home = y.file_of(entry_node if entry else cmd_node if cmd else image_node) or fc.path
    ctx = fc.ctx() if home == fc.path else fc.ctx_for(home, y.index_of(home))
    pmap = {k: v for svc in svcs for k, v in _path_map(y, svc, interp).items()}
    # a script of the repository bind-mounted into the container and run there (`entrypoint:
    # [/bin/sh, /entrypoint.sh]`, `./scripts/entrypoint.sh:/entrypoint.sh:ro`): read in this service
    # (a relative `./scripts/serve.sh` runs from the service's `working_dir`)
    wd_node = _last(y, svcs, "working_dir")
    workdir = expand_word(y.scalar_src(wd_node), interp, compose=True).text if isinstance(wd_node, ScalarNode) else "/"
    mounted = run_copied(image, entry, cmd, ctx, env, mounts_as_copies(pmap), workdir,
                         os.path.dirname(home) or ".", f"service {sname!r} of {{image}}") if pmap else None
    build_node = _last(y, svcs, "build")
    # a service that builds its image runs that build: `image:` beside `build:` is the tag compose gives
    # it (local/vllm-openai:lexi), not an image pulled, so its name and tag say nothing of the release
    df = dockerfile_of(y, build_node, y.file_of(build_node) or fc.path) if build_node is not None else None
    launches = mounted if mounted is not None else [] if df is not None else container(image, entry, cmd, ctx, env)
    if not launches and df is None and build_node is None and image is not None and not unset:
        df = tagged_dockerfile(image.text, home)  # `image: NAME` that a Makefile beside it builds
    if df is not None and not mounted:  # a script mounted into the built image is what its command runs
        launches = built(df[0], df[1], entry, cmd, entry_node is not None, env, ctx)  # the repo's own image
        key = next((k for svc in reversed(svcs) if (k := y.key_node(svc, "build" if build_node is not None else "image"))
                    is not None), None)
        for launch in launches:  # the server is the service: its line is that of its `build:`
            launch.line = y.span(key).line if key is not None else launch.line
    if not launches and df is None and image is not None and not entry and (not cmd or cmd[0].text.startswith("-")) \
            and image_release.client_image(image.text) is None:  # llama.cpp's light image: said (SF116), no server
        launches = llama_arg_server(image, cmd or [], env, ctx)  # an image built elsewhere, set by LLAMA_ARG_*
    if not launches:
        if image is not None and unset and not entry and markers().search(sname):  # the image decides
            fc.findings.append(unknown_image(image, sname, unset[0]))
        return
    shm = _shm(y, svcs)
    for launch in launches:
        launch.shm = shm
    ports = [y.str(p) or y.str(y.get(p, "target")) for svc in svcs for p in y.seq(y.get(svc, "ports"))]
    facts: Facts = {"service": sname, "ports": [p for p in ports if p], "exposure": _exposure(y, svcs, interp),
                    "runtime_env": runtime}
    if len(files) > 1:
        facts["compose_files"] = files
    if bases:
        facts["compose_extends"] = bases
    if pmap:
        facts["path_map"] = pmap
    build = y.str(build_node) or y.str(y.get(build_node, "context"))
    if build and any(models_on_request(la.engine) for la in launches):  # the build context holds its Modelfile
        facts["model_file_refs"] = [build]
    first = len(fc.sites)
    label = f"compose/{sname}" + "".join(f"+{os.path.basename(f)}" for f in files[1:] if not _standard(f))
    fc.add(launches, label, _gpus(y, svcs, env, interp), facts, ctx.ollama_models)
    cname = _last(y, svcs, "container_name")
    give_names(fc.sites[first:], [(y.str(cname) if isinstance(cname, ScalarNode) else None, "its compose container_name"),
                                  (sname, "its compose service name")])
    for site in fc.sites[first:]:
        site.file = home


def _standard(path: str) -> bool:
    from servefit.sources.compose_layers import OVERRIDES

    return os.path.basename(path) in OVERRIDES


def _exposure(y: Y, svcs: list[Node], interp: Vars) -> list[Exposure]:
    """Ports published beyond the host's loopback (every layer's), and host networking; a port
    spec is read after compose's interpolation (`${OLLAMA_PORT:-11434}:11434`)."""
    out: list[Exposure] = []
    mode = y.tok(_last(y, svcs, "network_mode"))
    if mode is not None and mode.text == "host":
        out.append(Exposure("compose network_mode: host (the container shares the host's interfaces)", mode.span,
                            host_network=True))
    for p in [p for svc in svcs for p in y.seq(y.get(svc, "ports"))]:
        t = y.tok(p)
        if t is not None:
            value = expand_word(y.scalar_src(p), interp, compose=True).text if "$" in t.text else None
            e = published("compose ports", t.text, t.span, value)
        else:  # long syntax: target, published, host_ip
            target = y.str(y.get(p, "target")) or ""
            ip = y.str(y.get(p, "host_ip")) or ""
            pub = y.str(y.get(p, "published")) or ""
            if ip:
                spec = f"{f'[{ip}]' if ':' in ip else ip}:{pub}:{target}"
            else:
                spec = f"{pub}:{target}" if pub else target
            e = published("compose ports", spec, y.span(p)) if target else None
        if e is not None:
            out.append(e)
    return out


def _path_map(y: Y, svc: Node, interp: Vars | None = None) -> dict[str, str]:
    """Bind mounts, container dir -> host dir (relative to the compose file), interpolated as compose
    does first (`${CONFIG_DIR:-../configs}/vllm:/workspace/configs`)."""
    out = {}
    for v in y.seq(y.get(svc, "volumes")):
        text = y.str(v)
        if text and interp is not None and "$" in text and isinstance(v, ScalarNode):
            text = expand_word(y.scalar_src(v), interp, compose=True).text
        if text:
            parts = text.split(":")
            if len(parts) >= 2 and parts[0][:1] in (".", "/", "~"):
                out[parts[1]] = parts[0]
        elif y.str(y.get(v, "type")) == "bind":
            src, dst = y.str(y.get(v, "source")), y.str(y.get(v, "target"))
            if src and dst:
                out[dst] = src
    return out
