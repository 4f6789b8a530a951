"""Servers that run without a CUDA or ROCm GPU: an engine's CPU build (llama.cpp's `server` image,
vLLM's CPU images, TGI's `-intel-cpu` tags), a build for other accelerators (TPU, Gaudi, Neuron),
or a device setting (`--device cpu`). servefit plans GPU memory, so such a server is listed and
said not planned (SF120), the same reason in every command. Where the file gives it GPUs anyway
(a GPU request, llama.cpp's -ngl), they sit unused: that is a warning. The builds and values are
each engine's recognition data (`off_gpu`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from servefit.core import EngineConfig, LaunchSite, Span
from servefit.sources.hints import to_int


@dataclass(frozen=True)
class OffGpu:
    """Where the server runs instead, what says so (an image or a setting), and where that is written."""

    runs_on: str
    what: str  # "the image ghcr.io/ggml-org/llama.cpp:server is llama.cpp's CPU build", "--device cpu"
    span: Span | None
    instead: str = ""  # the GPU build to use
    ignores: str = ""  # a GPU setting the build ignores (n_gpu_layers)
    fails: bool = False  # the engine sees no GPU and has no CPU fallback


def off_gpu(site: LaunchSite, cfg: EngineConfig) -> OffGpu | None:
    """How this server runs off the GPU, or None when it runs on one (as far as the file says)."""
    from servefit.sources.detect import split_image, trait

    entries = trait(cfg.engine, "off_gpu") or ()
    repo, tag = split_image(site.image) if site.image else ("", None)
    for e in entries:
        if not _in_force(e, cfg.version):
            continue
        if "setting" in e:
            value = str(cfg.settings.get(e["setting"]) or "").strip().lower()
            hit = next((where for v, where in e["values"].items()
                        if value == v or (e.get("prefix") and value.startswith(v))), None)
            if e["setting"] in cfg.explicit and hit is not None:
                name = e["setting"]
                said = f"{name}={value}" if name.isupper() else f"{_flag(name)} {value}"  # a variable, a flag
                return OffGpu(hit, said, cfg.spans.get(name))
            continue
        if not repo or not re.search(e["image"], repo.lower()):
            continue
        if "tag" in e and not re.search(e["tag"], (tag or "").lower()):
            continue
        return OffGpu(e["runs_on"], f"the image {site.image} is {e['what']}", site.image_span,
                      e.get("instead", ""), e.get("ignores", ""))
    if site.workload.profile_off_gpu is not None:
        return OffGpu(*site.workload.profile_off_gpu)
    return _hidden(site, cfg.engine) or _not_requested(site, cfg.engine)


def message(off: OffGpu, cfg: EngineConfig, site: LaunchSite, title: str) -> tuple[str, bool]:
    """The finding's text, and whether it is a warning: the engine fails without a GPU, or the file
    gives the server GPUs or sets a GPU setting the build ignores."""
    if off.fails:
        fix = f" (for a GPU add {off.instead})" if off.instead else ""
        return f"{off.what}: {title} sees no GPU (it needs one unless it is a CPU build), so its memory is not checked{fix}", True
    hint, gpus = site.gpu, ""
    if hint is not None and (hint.count or hint.name):
        n = hint.count
        gpus = (f"{n} GPU{'s' if n != 1 else ''}" if n else "GPUs") + f" ({hint.source.removeprefix('count from ')})"
    parts = [f"{off.what}: the server runs on {off.runs_on}, and servefit plans GPU memory, so its "
             "memory is not checked"]
    unused = []
    if off.ignores and off.ignores in cfg.explicit and to_int(str(cfg.settings.get(off.ignores))):
        unused.append(f"{_flag(off.ignores)} {cfg.settings[off.ignores]} is ignored")
    if gpus:
        unused.append(f"the file gives it {gpus}, which it does not use")
    if unused:
        parts.append(" and ".join(unused) + (f": for a GPU use {off.instead}" if off.instead else ""))
    return "; ".join(parts), bool(unused)


def _hidden(site: LaunchSite, engine: str) -> OffGpu | None:
    """CUDA_VISIBLE_DEVICES written to hide every GPU on purpose (empty, a negative index): CUDA
    then shows the process no GPU. llama.cpp and Ollama run on the CPU; vLLM, SGLang and TGI need a GPU
    unless they are a CPU build. (`all` and other entries CUDA does not read
    are SF118's, sources/hints.py::no_gpu_visible.)"""
    from servefit.sources.detect import trait

    tok = site.env.get("CUDA_VISIBLE_DEVICES")
    if tok is None or "$" in tok.text:
        return None
    first = tok.text.strip().strip("\"'").split(",")[0].strip()
    if first and not first.startswith("-"):
        return None
    shown = tok.text.strip() or '""'
    cpu = bool(trait(engine, "runs_on_cpu"))
    return OffGpu("the CPU" if cpu else "", f"CUDA_VISIBLE_DEVICES={shown} hides every GPU", tok.span, fails=not cpu)


def _not_requested(site: LaunchSite, engine: str) -> OffGpu | None:
    """A Kubernetes container that asks for no GPU (Workload.no_gpu_request), or a CI job on a runner without one: the NVIDIA and AMD device
    plugins give a container only the GPUs its `nvidia.com/gpu` / `amd.com/gpu` resource counts, so the
    engine sees none. llama.cpp and Ollama run on the CPU; vLLM, SGLang and TGI need a GPU unless they
    are a CPU build. Whatever --gpu names is not what this pod gets."""
    from servefit.sources.detect import trait

    if not site.workload.no_gpu_request or (site.gpu is not None and (site.gpu.count is not None or site.gpu.name)):
        return None
    cpu = bool(trait(engine, "runs_on_cpu"))
    if site.workload.runner:  # a GitHub Actions job on a standard hosted runner (sources/workflow.py)
        return OffGpu("the CPU" if cpu else "", f"the job runs on GitHub's hosted runner {site.workload.runner}, which "
                      "has no GPU", None, "a GPU runner: `runs-on:` the label of a self-hosted or GPU larger runner",
                      fails=not cpu)
    what = ("the container asks Kubernetes for no GPU (no nvidia.com/gpu or amd.com/gpu in its resources, no GPU "
            "node selector or runtimeClassName)")
    return OffGpu("the CPU" if cpu else "", what, None, "a `nvidia.com/gpu` limit in the container's resources",
                  fails=not cpu)


def _in_force(entry: dict, version: str | None) -> bool:
    """Whether the entry's releases (`since` inclusive, `before` exclusive) include the one planned."""
    from servefit.engines.options import _vkey

    if not version:
        return "since" not in entry  # the newest release is planned
    v = _vkey(version)
    return (not entry.get("since") or v >= _vkey(str(entry["since"]))) and \
        (not entry.get("before") or v < _vkey(str(entry["before"])))


def _flag(setting: str) -> str:
    return "--" + setting.replace("_", "-")
