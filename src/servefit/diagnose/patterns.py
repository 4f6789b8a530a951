"""The shape of a log line diagnose recognises, the lines every log may carry (PyTorch, the
kernel's OOM killer, Kubernetes, HTTP requests) and the helpers that turn matches into figures.
Each engine's own lines are data (data/engines/<name>.yaml, key `logs`), gathered by catalog.py.

Each pattern has one or more literal needles (a line is only searched when it contains one,
which keeps multi-GB logs fast) and a regex whose named groups become figures. A group
name ends in its unit: `__sz` a size as written ("71.45 GiB", "0 bytes"), `__gib` / `__mib`
/ `__kib` a bare number in that unit, `__b` bytes, `__n` an integer (commas allowed),
`__f` a float, `__s` text.

torch's wording is c10/cuda/CUDACachingAllocator's (old "(GPU 0; X total capacity; ...)" and new
"GPU 0 has a total capacity of ..." forms, 2.1's "capacty" typo included), plus the runtime and driver API
checks' "CUDA error: out of memory" / "CUDA driver error: out of memory" (c10/cuda/CUDAException.h); the Linux OOM killer's
is mm/oom_kill.c's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

SIZE = r"\d+(?:\.\d+)?\s?(?:[KMGT]i?B|[kKMG]B|bytes|B)\b"
_SIZE_PARTS = re.compile(r"(\d+(?:\.\d+)?)\s?([KMGTkmgt]?)(i?)(?:B|bytes)")
_UNIT = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def size(text: str) -> int | None:
    """Bytes for a size as engines print it. GB/MB/kB are read as binary units: vLLM,
    SGLang and the kernel print binary quantities with decimal labels."""
    m = _SIZE_PARTS.search(text)
    if not m:
        return None
    return int(round(float(m.group(1)) * _UNIT[m.group(2).lower()]))


def convert(name: str, raw: str) -> tuple[str, Any]:
    """(figure name, value) for a named group."""
    key, _, unit = name.partition("__")
    raw = raw.strip()
    if unit == "sz":
        return key, size(raw)
    if unit in ("gib", "gb"):
        return key, int(round(float(raw) * 2**30))
    if unit == "mib":
        return key, int(round(float(raw) * 2**20))
    if unit == "kib":
        return key, int(raw) * 1024
    if unit in ("b", "n"):
        return key, int(raw.replace(",", ""))
    if unit == "f":
        return key, float(raw)
    if unit == "k8s":  # Kubernetes quantities: 32Gi, 512Mi, 64G
        m = re.fullmatch(r"([\d.]+)([KMGT]?)(i?)", raw)
        if not m:
            raise ValueError(raw)
        exp = " KMGT".index(m.group(2) or " ")
        return key, int(float(m.group(1)) * (1024 if m.group(3) else 1000) ** exp)
    return key, raw


def figures_of(m: re.Match[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, raw in m.groupdict().items():
        if raw is None:
            continue
        try:
            key, val = convert(name, raw)
        except ValueError:
            continue
        if val is not None:
            out.setdefault(key, val)
    return out


@dataclass(frozen=True)
class Pattern:
    """One log line diagnose recognises. The generic ones are below; each engine's come from its
    `logs` table (diagnose/catalog.py), where the fields after `rank` are documented
    (schemas/engine_logs.schema.json)."""

    name: str  # "<family>.<what>"
    engine: str | None  # the engine a match proves (None: any)
    kind: str  # fatal | error | support | recovered | start | loading | weights | kv | serving | request | metric | info
    # | config | phase
    needles: tuple[str, ...]
    regex: re.Pattern[str]
    rank: int = 0  # fatal only: how specifically it explains the failure
    stage: str = ""  # the start-up or serving stage the line itself names
    cause: tuple[str, str, str] | None = None  # (root cause, timing, confidence) the message states outright
    targets: tuple[str, ...] = ()  # the settings a fix changes first
    parse: str = ""  # how the line adds to the run state (catalog.PARSE_MODES)
    phase: str = ""  # the start-up phase reached once this line is printed
    keys: tuple[str, ...] = ()  # parse=logfmt: the keys kept
    names: tuple[tuple[str, str], ...] = ()  # parse=layout: what the line calls a buffer -> figure
    skip: str = ""  # parse=layout: lines containing this are left out (host buffers)
    clears: tuple[str, ...] = ()  # kind=recovered: the figures the retry no longer has
    recovers: tuple[str, ...] = ()  # kind=recovered: the failures (pattern names) it undoes; empty: any of its family
    host: bool = False  # fatal: the line is about host memory (RAM), not the GPU's
    means: str = ""  # error: what the failure is and what fixes it; recovered: what the engine did instead

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]


def _p(name: str, engine: str | None, kind: str, needles: str | tuple[str, ...], regex: str, rank: int = 0,
       flags: int = 0, means: str = "") -> Pattern:
    return Pattern(name, engine, kind, (needles,) if isinstance(needles, str) else needles,
                   re.compile(regex, flags), rank, means=means)


# Lines that any engine's log may carry: PyTorch's OOM, the kernel's OOM killer, Kubernetes, the
# Hugging Face loader, HTTP requests. The engines' own
# lines are in their data files (data/engines/<name>.yaml, key `logs`).
GENERIC: tuple[Pattern, ...] = (
    # also the CUDA libraries' own words for a failed allocation: cuBLAS creating its handle and workspace
    # (CUBLAS_STATUS_ALLOC_FAILED, torch's CUDABlas / CublasHandlePool) and NCCL's buffers ("Cuda failure 'out of
    # memory'", NCCL's CUDACHECK) - both allocate on the GPU after the engine has taken its share
    _p("torch.oom", None, "fatal", ("out of memory", "OutOfMemoryError", "CUBLAS_STATUS_ALLOC_FAILED"),
       r"OutOfMemoryError:|(?:CUDA|HIP|XPU) out of memory(?:\.|$| occurred)|(?:CUDA|HIP)(?: driver)? error: out of memory"
       r"|CUBLAS_STATUS_ALLOC_FAILED|Cuda failure '?out of memory",
       2),
    _p("kernel.oom_kill", None, "fatal", ("Killed process", "Kill process"),
       r"[Oo]ut of memory: Kill(?:ed)? process (?P<killed_pid__n>\d+) \((?P<process__s>[^)]+)\)"
       r"(?:.*?anon-rss:(?P<anon_rss__kib>\d+)kB)?", 1),
    _p("kernel.invoked", None, "fatal", "invoked oom-killer", r"(?P<process__s>\S+) invoked oom-killer", 1),
    # as Kubernetes and Docker report it (describe's `Reason: OOMKilled`, the pod's YAML/JSON, `get pods`'
    # STATUS column, docker inspect's `"OOMKilled": true`), not a document's prose about it
    _p("k8s.oomkilled", None, "fatal", "OOMKilled",
       r'[Rr]eason\W{0,4}\s*OOMKilled\b|^\S+\s+\d+/\d+\s+OOMKilled\b|"OOMKilled"\s*:\s*true|Terminated\W+OOMKilled\b', 0),
    _p("kernel.killed", None, "support", "Killed process",
       r"Killed process (?P<killed_pid__n>\d+) \((?P<process__s>[^)]+)\).*?anon-rss:(?P<anon_rss__kib>\d+)kB"),
    _p("kernel.oom_detail", None, "support", "oom-kill:", r"oom-kill:.*?task=(?P<process__s>[^,]+),pid=(?P<killed_pid__n>\d+)"),
    _p("k8s.exit137", None, "support", ("137",), r"(?:Exit Code:\s+137|exit(?:ed with)? code:? 137)\b", 0, re.I),
    _p("k8s.started", None, "support", "Started:", r"^\s*Started:\s+(?P<started__s>.+?)\s*$"),
    _p("k8s.finished", None, "support", "Finished:", r"^\s*Finished:\s+(?P<finished__s>.+?)\s*$"),
    _p("k8s.memory_limit", None, "support", "memory:",
       r"^\s+memory:\s+(?P<memory_limit__k8s>\d+(?:\.\d+)?(?:[KMGT]i?|[kMGT])?)\s*$"),
    _p("hf.shards", None, "loading", "checkpoint shards:",
       r"Loading (?:safetensors )?checkpoint shards:\s+(?P<pct__n>\d+)%"),
    _p("cuda.device", None, "info", "Device 0:", r"Device 0: (?P<gpu_name__s>[^,]+), compute capability"),
    _p("http.request", None, "request", ("POST /v1/", "POST /generate", "/api/chat", "/api/generate"),
       r"POST /v1/|POST /generate|POST\s+\"?/api/(?:chat|generate)"),
    # start-up failures that are not OOMs, in the words of the CUDA runtime (cudaErrorCompatNotSupportedOnDevice,
    # cudaErrorInsufficientDriver, cudaErrorNoKernelImageForDevice), torch (c10/cuda) and the dynamic loader
    _p("cuda.driver", None, "error",
       ("forward compatibility was attempted", "driver version is insufficient", "driver on your system is too old"),
       r"forward compatibility was attempted on non supported HW|CUDA driver version is insufficient for CUDA "
       r"runtime version|NVIDIA driver on your system is too old", means=(
           "the CUDA build of this engine (its image or wheel) needs a newer NVIDIA driver than the host has: update "
           "the driver, or use an image / wheel built for the CUDA version the driver supports (nvidia-smi shows it)")),
    _p("cuda.no_kernel", None, "error", "no kernel image is available",
       r"no kernel image is available for execution on the device", means=(
           "this build has no GPU kernels for this card's architecture (compute capability): use a build or image "
           "compiled for it")),
    _p("triton.resources", None, "error", "OutOfResources",
       r"OutOfResources: out of resource: (?P<message__s>shared memory.*)", means=(
           "a Triton kernel's tile needs more shared memory (per SM) than this GPU has - a kernel choice for this GPU, "
           "not GPU memory: another attention backend, or a release whose kernels fit this GPU")),
    _p("python.undefined_symbol", None, "error", "undefined symbol",
       r"ImportError: .*?\.so: undefined symbol", means=(
           "a compiled extension was built against a different torch than the one installed (an ABI mismatch): "
           "reinstall it for this torch, or run the engine's own container image")),
    # docker compose's line when a service's container stops (`vllm-1 exited with code 137`): a failure, its code says
    # how (137 = 128 + SIGKILL, outcomes.py)
    _p("container.exit", None, "error", "exited with code", r"exited with code (?P<exit_code__n>[1-9]\d*)\b"),
    _p("json.request", None, "request", ('"prompt_tokens"', "prompt_tokens=", "input_length=", "input length"),
       r"(?:\"prompt_tokens\"\s*:\s*|prompt_tokens=|input_length=|input length[:=]?\s*)(?P<prompt_tokens__n>\d+)"),
)

# Figures in a torch OOM message; the message may be wrapped over the following lines.
TORCH_FIGURES: tuple[re.Pattern[str], ...] = tuple(re.compile(r) for r in (
    r"Tried to allocate (?P<tried_to_allocate__sz>" + SIZE + ")",
    r"\(GPU (?P<gpu__n>\d+);",
    r"GPU (?P<gpu__n>\d+) has a total capac",
    r"(?P<total__sz>" + SIZE + r") total capacity",
    r"total capac(?:i)?ty of (?P<total__sz>" + SIZE + ")",
    r"(?P<allocated__sz>" + SIZE + r") already allocated",
    r"(?P<free__sz>" + SIZE + r") free[;)]",
    r"of which (?P<free__sz>" + SIZE + r") is free",
    r"(?P<reserved__sz>" + SIZE + r") reserved(?: in total by PyTorch)?[;)]",
    r"(?P<limit__sz>" + SIZE + r") allowed",
    r"this process has (?P<process_in_use__sz>" + SIZE + r") memory in use",
    r"Of the allocated memory (?P<allocated__sz>" + SIZE + r") is allocated by PyTorch",
    r"(?P<private_pools__sz>" + SIZE + r") allocated in private pools",
    r"(?P<reserved_unallocated__sz>" + SIZE + r") is reserved by PyTorch but unallocated",
))
# the exception a traceback ends with (parse.py looks for it only while a traceback is open)
EXCEPTION = re.compile(r"\b(?P<exception__s>(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): (?P<message__s>.+)$")
TORCH_PROCESS = re.compile(r"Process (\d+) has (" + SIZE + r") memory in use")

# Traceback frames that name a stage in any engine's code (torch's CUDA graph capture, the
# Hugging Face loader, a model's forward); each engine adds its own (`logs.frames`).
GENERIC_FRAMES: dict[str, str] = {
    "capture_graph": "graphs", "cuda_graph": "graphs", "capture_begin": "graphs", "capture_end": "graphs",
    "init_kv_cache": "kv_alloc",
    "load_model": "load", "load_weights": "load", "from_pretrained": "load", "model_loader": "load",
    "create_weights": "load", "weight_loader": "load",
    "generate": "serving", "forward": "serving",
}
# When several frames name a stage, the most specific wins (a graph capture runs forward passes).
STAGE_ORDER = ("sampler", "graphs", "compile", "kv_alloc", "compute", "profile", "load", "prefill", "decode", "serving")

# Settings printed in start-up lines: `{'k': v}` / `k=v, ...` / Rust `Args { k: Some(v), ... }` /
# `ServerArgs(k=v, ...)`, Go `map[K:V ...]`, a command line's flags.
KV_PAIRS = re.compile(r"""['"]?([A-Za-z_][\w.]*)['"]?(?::\s*|=)(Some\(([^)]*)\)|'[^']*'|"[^"]*"|\[[^\]]*\]|[^,\s}()]+)""")
ENV_MAP = re.compile(r"\b([A-Z][A-Z0-9_]+):(\S*)")
CMD_FLAG = re.compile(r"(?:^|\s)(--?[\w-]+)(?:=|\s+)([^\s-][^\s]*)")


def value(text: str) -> Any:
    """A setting's value as printed (Some(16000), '...', None, True, 0.9)."""
    t = text.strip().rstrip(",").strip()
    if t.startswith("Some(") and t.endswith(")"):
        t = t[5:-1].strip().rstrip(",").strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    if t in ("None", "null", "none"):
        return None
    if t in ("True", "true"):
        return True
    if t in ("False", "false"):
        return False
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t


_SIZE_UNITS = ("__sz", "__gib", "__gb", "__mib", "__kib", "__b")
_SIZE_BASE = frozenset({"fragmentation_gap", "reserved", "process_in_use", "weights", "kv_cache", "compute_graph",
                        "memory_limit"})


def size_keys(regexes: list[re.Pattern[str]]) -> frozenset[str]:
    """The figures that are byte counts: every group whose unit is a size."""
    keys = set(_SIZE_BASE)
    for rx in regexes + list(TORCH_FIGURES):
        for name in rx.groupindex:
            if name.endswith(_SIZE_UNITS):
                keys.add(name.split("__", 1)[0])
    return frozenset(keys)


def is_size(key: str) -> bool:
    from servefit.diagnose.catalog import catalog

    return key in catalog().size_figures or key.startswith("memory.")
