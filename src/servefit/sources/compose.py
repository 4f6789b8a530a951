"""Docker Compose files: each service whose entrypoint + command (or image) runs an engine.

Interpolation (`$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `$$` for a literal `$`)
reads the `.env` file beside the compose file; the shell environment of whoever runs compose is
unknown, so a variable `.env` does not define is reported as unresolved rather than taken as
empty. `command`/`entrypoint` are read in both forms (a string is split like shlex, a list item
is one word); `sh -c` strings are then run through the shell splitter with the container's
`environment` (list or map) and `env_file` values. YAML anchors and `<<` merges are applied.
Hardware: `deploy.resources.reservations.devices` (count / device_ids), `gpus:`, and
`NVIDIA_VISIBLE_DEVICES`; shared memory from `shm_size`, `ipc: host` or a /dev/shm mount.
"""

from __future__ import annotations

import os

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from servefit.core import GpuHint, Token
from servefit.sources.base import FileCtx, _repo_of, _within
from servefit.sources.detect import models_on_request
from servefit.sources.envfile import load_env_file
from servefit.sources.hints import SHM_MIN, count_visible_devices, size_bytes, to_int
from servefit.sources.launch import container
from servefit.sources.ports import Exposure, published
from servefit.sources.problems import missing_config_file
from servefit.sources.shell import Vars, Word, expand_word, split_words
from servefit.sources.yamlpos import Y


def _words(y: Y, node: Node | None, interp: Vars) -> list[Word] | None:
    if isinstance(node, SequenceNode):
        out = [expand_word(y.scalar_src(i), interp, compose=True) for i in node.value if isinstance(i, ScalarNode)]
        return out or None
    if isinstance(node, ScalarNode) and node.tag != "tag:yaml.org,2002:null" and str(node.value).strip():
        return split_words(y.scalar_src(node), interp, compose=True)
    return None


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


def _gpus(y: Y, svc: Node, env: Vars) -> GpuHint | None:
    for d in y.seq(y.get(svc, "deploy", "resources", "reservations", "devices")):
        caps = [y.str(c) for c in y.seq(y.get(d, "capabilities"))]
        driver = y.str(y.get(d, "driver"))
        if "gpu" not in caps and driver not in ("nvidia", "amd", "cdi"):
            continue
        cnt = y.tok(y.get(d, "count"))
        ids = y.seq(y.get(d, "device_ids"))
        if ids:
            return GpuHint(None, len(ids), "compose device_ids", y.span(y.get(d, "device_ids")))  # type: ignore[arg-type]
        if cnt is not None and cnt.text != "all":
            return GpuHint(None, to_int(cnt.text), "compose deploy.resources.reservations.devices count", cnt.span)
        return GpuHint(None, None, "compose devices count: all", cnt.span if cnt else None)
    g = y.get(svc, "gpus")
    if isinstance(g, ScalarNode):
        return GpuHint(None, None, "compose gpus: all", y.span(g))
    for d in y.seq(g):
        cnt = y.tok(y.get(d, "count"))
        if cnt is not None and cnt.text != "all":
            return GpuHint(None, to_int(cnt.text), "compose gpus count", cnt.span)
    vis = env.get("NVIDIA_VISIBLE_DEVICES")
    if vis is not None and count_visible_devices(vis.text):
        return GpuHint(None, count_visible_devices(vis.text), "NVIDIA_VISIBLE_DEVICES", vis.span)
    return None


def _shm(y: Y, svc: Node) -> bool:
    if y.str(y.get(svc, "ipc")) == "host":
        return True
    size = y.str(y.get(svc, "shm_size"))
    if size:
        b = size_bytes(size)
        return b is not None and b >= SHM_MIN
    for v in y.seq(y.get(svc, "volumes")):
        text = y.str(v) or y.str(y.get(v, "target")) or ""
        if text.rstrip("/").endswith("/dev/shm"):
            return True
    return False


def scan(y: Y, root: Node, fc: FileCtx) -> None:
    interp = Vars()
    dotenv = os.path.join(os.path.dirname(fc.path), ".env")
    if os.path.isfile(dotenv):
        for k, v in (load_env_file(dotenv) or {}).items():
            interp.set(k, v)
    for sname, _, svc in y.items(y.get(root, "services")):
        if not isinstance(svc, MappingNode):
            continue
        image_node = y.get(svc, "image")
        image: Token | None = None
        if isinstance(image_node, ScalarNode):
            image = expand_word(y.scalar_src(image_node), interp, compose=True).token()
        env = Vars()
        _env_files(y, y.get(svc, "env_file"), fc, env)
        runtime: list[str] = []
        _environment(y, y.get(svc, "environment"), interp, env, runtime)
        env.exported = set(env.values)
        entry = _words(y, y.get(svc, "entrypoint"), interp)
        cmd = _words(y, y.get(svc, "command"), interp)
        ctx = fc.ctx()
        launches = container(image, entry, cmd, ctx, env)
        if not launches:
            continue
        shm = _shm(y, svc)
        for launch in launches:
            launch.shm = shm
        ports = [y.str(p) or y.str(y.get(p, "target")) for p in y.seq(y.get(svc, "ports"))]
        extra: dict[str, object] = {"service": sname, "ports": [p for p in ports if p], "exposure": _exposure(y, svc),
                                    "runtime_env": runtime}
        pmap = _path_map(y, svc)
        if pmap:
            extra["path_map"] = pmap
        build = y.str(y.get(svc, "build")) or y.str(y.get(svc, "build", "context"))
        if build and any(models_on_request(la.engine) for la in launches):  # the build context holds its Modelfile
            extra["modelfile_refs"] = [build]
        fc.add(launches, f"compose/{sname}", _gpus(y, svc, env), extra, ctx.ollama_models)


def _exposure(y: Y, svc: Node) -> list[Exposure]:
    """Ports published beyond the host's loopback, and host networking."""
    out: list[Exposure] = []
    mode = y.tok(y.get(svc, "network_mode"))
    if mode is not None and mode.text == "host":
        out.append(Exposure("compose network_mode: host (the container shares the host's interfaces)", mode.span))
    for p in y.seq(y.get(svc, "ports")):
        t = y.tok(p)
        if t is not None:
            e = published("compose ports", t.text, t.span)
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


def _path_map(y: Y, svc: Node) -> dict[str, str]:
    """Bind mounts, container dir -> host dir (relative to the compose file)."""
    out = {}
    for v in y.seq(y.get(svc, "volumes")):
        text = y.str(v)
        if text:
            parts = text.split(":")
            if len(parts) >= 2 and parts[0][:1] in (".", "/", "~"):
                out[parts[1]] = parts[0]
        elif y.str(y.get(v, "type")) == "bind":
            src, dst = y.str(y.get(v, "source")), y.str(y.get(v, "target"))
            if src and dst:
                out[dst] = src
    return out
