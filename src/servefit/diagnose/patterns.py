"""The log lines diagnose recognises, engine by engine, as compiled regexes.

Each entry has one or more literal needles (a line is only searched when it contains one,
which keeps multi-GB logs fast) and a regex whose named groups become figures. A group
name ends in its unit: `__sz` a size as written ("71.45 GiB", "0 bytes"), `__gib` / `__mib`
/ `__kib` a bare number in that unit, `__b` bytes, `__n` an integer (commas allowed),
`__f` a float, `__s` text.

Sources of the exact wording (see /work/shared/research): torch's c10/cuda/CUDACachingAllocator
(old "(GPU 0; X total capacity; ...)" and new "GPU 0 has a total capacity of ..." forms, 2.1's
"capacty" typo included); vLLM kv_cache_planning.py / gpu_worker.py / utils.py messages (§1, §3
of vllm.md); llama.cpp llama-kv-cache.cpp, llama-context.cpp, ggml-cuda.cu, ggml-alloc.c (A5);
Ollama llm/memory.go, llm/server.go, sched.go (Part B); TGI flash_causal_lm.py::warmup and
backends/v3 (A1.2, A2); SGLang model_runner / memory_pool (A3.3, A3.5); the Linux OOM killer.
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
    name: str  # "<family>.<what>"
    engine: str | None  # the engine a match proves (None: any)
    kind: str  # fatal | support | start | weights | kv | serving | request | metric | info | config | phase:<p>
    needles: tuple[str, ...]
    regex: re.Pattern[str]
    rank: int = 0  # fatal only: how specifically it explains the failure

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]


def _p(name: str, engine: str | None, kind: str, needles: str | tuple[str, ...], regex: str, rank: int = 0,
       flags: int = 0) -> Pattern:
    return Pattern(name, engine, kind, (needles,) if isinstance(needles, str) else needles,
                   re.compile(regex, flags), rank)


PATTERNS: tuple[Pattern, ...] = (
    # ---- failures ---------------------------------------------------------------------------
    _p("torch.oom", None, "fatal", ("out of memory", "OutOfMemoryError"),
       r"OutOfMemoryError:|(?:CUDA|HIP|XPU) out of memory(?:\.|$| occurred)|(?:CUDA|HIP) error: out of memory", 2),
    _p("vllm.kv_refusal", "vllm", "fatal", "To serve at least one request",
       r"max seq len \((?P<max_model_len__n>\d+)\), \((?P<kv_cache_needed__gib>[\d.]+) GiB KV cache is needed, "
       r"which is larger than the available KV cache memory \((?P<kv_cache_available__gib>[\d.]+) GiB\)"
       r"(?:\. Based on the available memory, the estimated maximum model length is "
       r"(?P<estimated_max_model_len__n>\d+))?", 3),
    _p("vllm.kv_refusal_v0", "vllm", "fatal", "maximum number of tokens that can be stored in KV cache",
       r"max seq len \((?P<max_model_len__n>\d+)\) is larger than the maximum number of tokens that can be "
       r"stored in KV cache \((?P<kv_cache_tokens__n>\d+)\)", 3),
    _p("vllm.no_kv_memory", "vllm", "fatal", "No available memory for the cache blocks",
       r"No available memory for the cache blocks", 3),
    _p("vllm.autofit_fail", "vllm", "fatal", "Cannot auto-fit max_model_len", r"Cannot auto-fit max_model_len", 3),
    _p("vllm.free_memory", "vllm", "fatal", "less than desired GPU memory utilization",
       r"Free memory on device(?: \S+)? \((?P<device_free__gib>[\d.]+)/(?P<total__gib>[\d.]+) GiB\) on startup "
       r"is less than desired GPU memory utilization \((?P<gpu_memory_utilization__f>[\d.]+), "
       r"(?P<requested__gib>[\d.]+) GiB\)", 3),
    _p("vllm.sampler_oom", "vllm", "fatal", "warming up sampler",
       r"out of memory occurred when warming up sampler with (?P<dummy_requests__n>\d+) dummy requests", 3),
    _p("tgi.prefill", "tgi", "fatal", "prefill tokens",
       r"Not enough memory to handle (?P<prefill_tokens__n>\d+) prefill tokens", 3),
    _p("tgi.max_total", "tgi", "fatal", "Not enough memory to handle",
       r"Not enough memory to handle `?max_total_tokens=(?P<max_total_tokens__n>\d+)", 3),
    _p("sglang.mem_fraction", "sglang", "fatal", "increase --mem-fraction-static",
       r"Not enough memory\. Please try to increase --mem-fraction-static\."
       r"(?:.*?mem_fraction_static=(?P<mem_fraction_static__f>[\d.]+))?", 3),
    _p("ollama.sysmem", "ollama", "fatal", "model requires more system memory",
       r"model requires more system memory \((?P<required__sz>" + SIZE + r")\) than is available "
       r"\((?P<available__sz>" + SIZE + r")\)", 3),
    _p("ollama.runner_oom", "ollama", "fatal", "llama runner process has terminated",
       r"llama runner process has terminated: (?P<runner_error__s>[^\"]*?(?:out of memory|cudaMalloc failed|"
       r"unable to allocate|failed to allocate)[^\"]*)", 2),
    _p("llamacpp.cuda_alloc", "llamacpp", "fatal", "cudaMalloc failed",
       r"allocating (?P<alloc_size__mib>[\d.]+) MiB on device (?P<device__n>\d+): cudaMalloc failed", 2),
    _p("llamacpp.alloc_buffer", "llamacpp", "fatal", "failed to allocate",
       r"failed to allocate (?P<alloc_device__s>\S+) buffer of size (?P<alloc_size__b>\d+)", 2),
    _p("llamacpp.kv_alloc", "llamacpp", "fatal", "failed to allocate buffer for kv cache",
       r"failed to allocate buffer for kv cache", 2, re.I),
    _p("llamacpp.compute_alloc", "llamacpp", "fatal", "failed to allocate compute",
       r"failed to allocate compute (?:buffers|pp buffers)", 2),
    _p("llamacpp.load_alloc", "llamacpp", "fatal", "unable to allocate",
       r"unable to allocate (?P<alloc_device__s>\S+) buffer", 2),
    _p("kernel.oom_kill", None, "fatal", ("Killed process", "Kill process"),
       r"[Oo]ut of memory: Kill(?:ed)? process (?P<killed_pid__n>\d+) \((?P<process__s>[^)]+)\)"
       r"(?:.*?anon-rss:(?P<anon_rss__kib>\d+)kB)?", 1),
    _p("kernel.invoked", None, "fatal", "invoked oom-killer", r"(?P<process__s>\S+) invoked oom-killer", 1),
    _p("k8s.oomkilled", None, "fatal", "OOMKilled", r"\bOOMKilled\b", 0),
    # ---- lines that only add to a failure just before them -------------------------------
    _p("llamacpp.context_fail", "llamacpp", "support", ("failed to create context", "failed to initialize the context",
                                                        "failed to load model", "error loading model"),
       r"failed to (?:create|initialize the) context|failed to load model|error loading model"),
    _p("kernel.killed", None, "support", "Killed process",
       r"Killed process (?P<killed_pid__n>\d+) \((?P<process__s>[^)]+)\).*?anon-rss:(?P<anon_rss__kib>\d+)kB"),
    _p("kernel.oom_detail", None, "support", "oom-kill:", r"oom-kill:.*?task=(?P<process__s>[^,]+),pid=(?P<killed_pid__n>\d+)"),
    _p("k8s.exit137", None, "support", ("137",), r"(?:Exit Code:\s+137|exit(?:ed with)? code:? 137)\b", 0, re.I),
    _p("k8s.started", None, "support", "Started:", r"^\s*Started:\s+(?P<started__s>.+?)\s*$"),
    _p("k8s.finished", None, "support", "Finished:", r"^\s*Finished:\s+(?P<finished__s>.+?)\s*$"),
    _p("k8s.memory_limit", None, "support", "memory:",
       r"^\s+memory:\s+(?P<memory_limit__k8s>\d+(?:\.\d+)?(?:[KMGT]i?|[kMGT])?)\s*$"),
    # ---- start of an engine run ---------------------------------------------------------------
    _p("vllm.start", "vllm", "start", ("vLLM API server version", "Initializing a V1 LLM engine",
                                       "Initializing an LLM engine"),
       r"vLLM API server version (?P<engine_version__s>\S+)|Initializing an? (?:V1 )?LLM engine(?: \(v?"
       r"(?P<engine_version2__s>[^)]+)\))?"),
    _p("tgi.start", "tgi", "start", "Args {", r"text_generation_launcher.*Args \{"),
    _p("sglang.start", "sglang", "start", "server_args=ServerArgs(", r"server_args=ServerArgs\("),
    _p("ollama.start", "ollama", "start", "starting llama server", r"starting llama server"),
    _p("llamacpp.start", "llamacpp", "start", ("build: ", "llama_model_loader: loaded meta data"),
       r"^(?:\S+ [IWE] )?(?:main: )?build: \d+|llama_model_loader: loaded meta data"),
    # ---- start-up progress and engine figures -------------------------------------------------
    _p("hf.shards", None, "loading", "checkpoint shards:",
       r"Loading (?:safetensors )?checkpoint shards:\s+(?P<pct__n>\d+)%"),
    _p("vllm.weights", "vllm", "weights", ("Model loading took", "Loading model weights took"),
       r"(?:Model loading|Loading model weights) took (?P<weights__sz>" + SIZE + r")"),
    _p("vllm.profile", "vllm", "info", "activation peak memory takes",
       r"model weights take (?P<weights__sz>" + SIZE + r"); non_torch_memory takes (?P<non_torch__sz>" + SIZE
       + r"); PyTorch activation peak memory takes (?P<activation_peak__sz>" + SIZE + r")"),
    _p("vllm.kv_available", "vllm", "info", "Available KV cache memory",
       r"Available KV cache memory: (?P<kv_cache_available__sz>" + SIZE + r")"),
    _p("vllm.kv_tokens", "vllm", "kv", "KV cache size:",
       r"GPU KV cache size: (?P<kv_cache_tokens__n>[\d,]+) tokens"),
    _p("vllm.concurrency", "vllm", "info", "Maximum concurrency for",
       r"Maximum concurrency for (?P<max_model_len__n>[\d,]+) tokens per request: (?P<max_concurrency__f>[\d.]+)x"),
    _p("vllm.blocks", "vllm", "kv", ("# GPU blocks:", "# cuda blocks:"),
       r"# (?:GPU|cuda) blocks: (?P<gpu_blocks__n>\d+)"),
    _p("vllm.graphs", "vllm", "info", ("Graph capturing finished", "CUDA graph pool memory"),
       r"(?:Graph capturing finished in \d+ secs?, took|CUDA graph pool memory:) (?P<cuda_graphs__sz>" + SIZE + r")"),
    _p("vllm.serving", "vllm", "serving", ("Application startup complete", "Uvicorn running on"),
       r"Application startup complete|Uvicorn running on"),
    _p("cuda.device", None, "info", "Device 0:", r"Device 0: (?P<gpu_name__s>[^,]+), compute capability"),
    _p("llamacpp.device", "llamacpp", "info", "using device",
       r"using device \w+ \((?P<gpu_name__s>[^)]+)\).*?- (?P<device_free__mib>\d+) MiB free"),
    _p("llamacpp.model_buf", "llamacpp", "weights", "model buffer size",
       r"(?P<buf__s>\w+) model buffer size\s*=\s*(?P<model_buffer__mib>[\d.]+) MiB"),
    _p("llamacpp.offloaded", "llamacpp", "info", "layers to GPU",
       r"offloaded (?P<layers_offloaded__n>\d+)/(?P<layers__n>\d+) layers to GPU"),
    _p("llamacpp.kv_buf", "llamacpp", "kv", ("KV buffer size", "KV self size"),
       r"(?P<buf__s>\w+) KV (?:buffer|self) size\s*=\s*(?P<kv_buffer__mib>[\d.]+) MiB"),
    _p("llamacpp.compute_buf", "llamacpp", "info", "compute buffer size",
       r"(?P<buf__s>\w+) compute buffer size\s*=\s*(?P<compute_buffer__mib>[\d.]+) MiB"),
    _p("llamacpp.context", "llamacpp", "phase:context", ("llama_context:", "llama_new_context_with_model:",
                                                         "llama_init_from_model:"),
       r"(?:llama_context|llama_new_context_with_model|llama_init_from_model): +(?P<key__s>n_ctx(?:_per_seq|_seq)?|"
       r"n_seq_max|n_batch|n_ubatch|flash_attn|type_k|kv_unified) += (?P<value__s>\S+)"),
    _p("llamacpp.load", "llamacpp", "phase:load", ("load_tensors:", "llm_load_tensors:"), r"load_tensors:"),
    _p("llamacpp.serving", "llamacpp", "serving", ("server is listening on", "llama runner started"),
       r"server is listening on|llama runner started"),
    _p("llamacpp.file_size", "llamacpp", "info", "file size",
       r"print_info: file size\s*=\s*(?P<model_file__sz>" + SIZE + r")"),
    _p("ollama.offload", "ollama", "info", ("msg=offload", 'msg="offload'), r"msg=\"?offload"),
    _p("ollama.layout", "ollama", "info", ('msg="model weights"', 'msg="kv cache"', 'msg="compute graph"'),
       r"msg=\"(?P<what__s>model weights|kv cache|compute graph)\".*?size=\"(?P<size__sz>" + SIZE + r")\""),
    _p("ollama.config", "ollama", "config", "server config", r"server config\"? env=\"?map\["),
    _p("tgi.kv_blocks", "tgi", "kv", "KV-cache blocks:",
       r"KV-cache blocks: (?P<kv_blocks__n>\d+), size: (?P<block_size__n>\d+)"),
    _p("tgi.max_batch_total", "tgi", "info", "max batch total tokens",
       r"(?:Setting|Inferred) max batch total tokens(?: to|:) (?P<max_batch_total_tokens__n>\d+)"),
    _p("tgi.serving", "tgi", "serving", "Connected", r"text_generation_router.*\bConnected\b"),
    _p("sglang.weights", "sglang", "weights", "Load weight end",
       r"Load weight end\..*?avail mem=(?P<avail_after_load__gb>[\d.]+) GB, mem usage=(?P<weights__gb>[\d.]+) GB"),
    _p("sglang.kv", "sglang", "kv", "KV Cache is allocated",
       r"KV Cache is allocated\. #tokens: (?P<kv_cache_tokens__n>\d+), (?:K size: (?P<k_size__gb>[\d.]+) GB, "
       r"V size: (?P<v_size__gb>[\d.]+) GB|KV size: (?P<kv_size__gb>[\d.]+) GB)"),
    _p("sglang.pool_full", "sglang", "info", "KV cache pool is full",
       r"KV cache pool is full\. Retract requests\. #retracted_reqs: (?P<retracted_reqs__n>\d+)"),
    _p("sglang.serving", "sglang", "serving", ("The server is fired up", "ready to roll"),
       r"The server is fired up and ready to roll"),
    # ---- engine settings the log prints at start ----------------------------------------------
    _p("vllm.args", "vllm", "config", ("non-default args:", "with config:", "args: Namespace("),
       r"non-default args: \{|with config: |args: Namespace\("),
    _p("tgi.args", "tgi", "config", "Args {", r"Args \{"),
    _p("sglang.args", "sglang", "config", "server_args=ServerArgs(", r"server_args=ServerArgs\("),
    _p("sglang.scheduler", "sglang", "config", "max_total_num_tokens=", r"max_total_num_tokens="),
    # ---- serving: requests and metrics ----------------------------------------------------------
    _p("http.request", None, "request", ("POST /v1/", "POST /generate", "/api/chat", "/api/generate"),
       r"POST /v1/|POST /generate|POST\s+\"?/api/(?:chat|generate)"),
    _p("vllm.request", "vllm", "request", "Received request ", r"Received request (?P<request_id__s>\S+?):"),
    _p("llamacpp.request", "llamacpp", "request", "n_prompt_tokens",
       r"n_prompt_tokens = (?P<prompt_tokens__n>\d+)"),
    _p("json.request", None, "request", ('"prompt_tokens"', "prompt_tokens=", "input_length=", "input length"),
       r"(?:\"prompt_tokens\"\s*:\s*|prompt_tokens=|input_length=|input length[:=]?\s*)(?P<prompt_tokens__n>\d+)"),
    _p("sglang.prefill", "sglang", "request", "Prefill batch",
       r"Prefill batch\. #new-seq: (?P<new_seqs__n>\d+), #new-token: (?P<prompt_tokens__n>\d+)"),
    _p("vllm.metrics", "vllm", "metric", "Avg prompt throughput",
       r"Running: (?P<running__n>\d+) reqs.*?GPU KV cache usage: (?P<kv_usage__f>[\d.]+)%"),
    _p("sglang.decode", "sglang", "metric", "Decode batch",
       r"#running-req: (?P<running__n>\d+), #token: \d+, token usage: (?P<kv_usage_frac__f>[\d.]+)"),
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
TORCH_PROCESS = re.compile(r"Process (\d+) has (" + SIZE + r") memory in use")

# Frames of a traceback that tell which start-up stage ran out of memory (vLLM, TGI, HF).
STAGES: tuple[tuple[str, str], ...] = (
    ("_dummy_sampler_run", "sampler"),
    ("capture_model", "graphs"), ("capture_graph", "graphs"), ("cuda_graph", "graphs"),
    ("initialize_kv_cache", "kv_alloc"), ("_allocate_kv_cache", "kv_alloc"), ("init_kv_cache", "kv_alloc"),
    ("profile_run", "profile"), ("_dummy_run", "profile"), ("determine_available_memory", "profile"),
    ("determine_num_available_blocks", "profile"), ("warmup", "profile"),
    ("load_model", "load"), ("load_weights", "load"), ("from_pretrained", "load"), ("model_loader", "load"),
    ("execute_model", "serving"), ("generate", "serving"), ("forward", "serving"),
)

# Settings printed in start-up lines: vLLM `non-default args: {...}` / `with config: k=v, ...`,
# TGI `Args { k: Some(v), ... }`, SGLang `ServerArgs(k=v, ...)`, Ollama `map[K:V ...]`.
KV_PAIRS = re.compile(r"""['"]?([A-Za-z_][\w.]*)['"]?(?::\s*|=)(Some\(([^)]*)\)|'[^']*'|"[^"]*"|\[[^\]]*\]|[^,\s})]+)""")
OLLAMA_ENV = re.compile(r"\b(OLLAMA_\w+):(\S*)")
CMD_FLAG = re.compile(r"(?:^|\s)(--?[\w-]+)(?:=|\s+)([^\s-][^\s]*)")
SETTING_ALIASES = {
    "max_seq_len": "max_model_len", "model_id": "model", "model_path": "model", "model_tag": "model",
    "tp_size": "tensor_parallel_size", "num_shard": "num_shard", "max_input_length": "max_input_tokens",
    "--ctx-size": "num_ctx", "-c": "num_ctx", "--parallel": "num_parallel", "-np": "num_parallel",
    "--n-gpu-layers": "num_gpu", "-ngl": "num_gpu", "--batch-size": "num_batch", "-b": "num_batch",
    "--model": "model", "chunked_prefill_enabled": "enable_chunked_prefill",
}
KNOWN_SETTINGS = frozenset({
    "model", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization",
    "tensor_parallel_size", "pipeline_parallel_size", "kv_cache_dtype", "quantization", "enforce_eager",
    "cpu_offload_gb", "swap_space", "block_size", "enable_chunked_prefill", "dtype",
    "max_batch_prefill_tokens", "max_total_tokens", "max_input_tokens", "max_batch_total_tokens",
    "max_concurrent_requests", "max_batch_size", "num_shard", "quantize", "cuda_memory_fraction",
    "mem_fraction_static", "max_running_requests", "chunked_prefill_size", "max_prefill_tokens",
    "context_length", "context_len", "max_total_num_tokens", "num_ctx", "num_parallel", "num_gpu", "num_batch",
    "n_ctx", "n_ctx_per_seq", "n_ctx_seq", "n_seq_max", "n_batch", "n_ubatch", "flash_attn", "type_k",
    "kv_unified", "OLLAMA_CONTEXT_LENGTH", "OLLAMA_NUM_PARALLEL", "OLLAMA_KV_CACHE_TYPE", "OLLAMA_FLASH_ATTENTION",
    "OLLAMA_GPU_OVERHEAD", "OLLAMA_MAX_LOADED_MODELS", "OLLAMA_SCHED_SPREAD",
})


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


def _size_keys() -> frozenset[str]:
    keys = {"fragmentation_gap", "reserved", "process_in_use", "weights", "kv_cache", "compute_graph", "memory_limit"}
    for rx in [p.regex for p in PATTERNS] + list(TORCH_FIGURES):
        for name in rx.groupindex:
            if name.endswith(_SIZE_UNITS):
                keys.add(name.split("__", 1)[0])
    return frozenset(keys)


SIZE_FIGURES = _size_keys()  # figures that are byte counts (memory.* from Ollama too)


def is_size(key: str) -> bool:
    return key in SIZE_FIGURES or key.startswith("memory.")
