"""Which CUDA graphs a vLLM command captures: the CUDAGraphMode each release resolves from the
compilation level / optimization level, an explicit cudagraph_mode and the model (graphs.py prices them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.engines.vllm.forward import pooling_runner

if TYPE_CHECKING:
    from servefit.engines.vllm.era import Era
    from servefit.engines.vllm.plan import Resolved
    from servefit.models.spec import ModelSpec

# CUDAGraphMode (config/compilation.py): what capture_model captures for each mode. PIECEWISE: every
# capture size as piecewise graphs; FULL: every size as one full graph of a mixed batch;
# FULL_DECODE_ONLY: full graphs of uniform decode batches only; FULL_AND_PIECEWISE: both of the last
# (CUDAGraphMode.mixed_mode / decode_mode / separate_routine; v1/worker/gpu_model_runner.py::capture_model).
GRAPH_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
# CompilationLevel (<= 0.11) / CompilationMode (0.12 on) by name; 3 (PIECEWISE / VLLM_COMPILE) is the
# only one that splits the model into pieces and so the only one with piecewise graphs.
_COMPILE_MODES = {"NO_COMPILATION": 0, "NONE": 0, "DYNAMO_AS_IS": 1, "STOCK_TORCH_COMPILE": 1,
                  "DYNAMO_ONCE": 2, "DYNAMO_TRACE_ONCE": 2, "PIECEWISE": 3, "VLLM_COMPILE": 3}
# config/vllm.py::OPTIMIZATION_LEVEL_00 .. _03 (0.12 on): the cudagraph_mode each -O level defaults to
_OPT_LEVEL_MODE = {0: "NONE", 1: "PIECEWISE", 2: "FULL_AND_PIECEWISE", 3: "FULL_AND_PIECEWISE"}


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def _compile_mode(value: object) -> int | None:
    if value is None:
        return None
    n = _int(value)
    return n if n is not None else _COMPILE_MODES.get(str(value).upper())


def cudagraph_mode(model: ModelSpec, r: Resolved, e: Era, settings: dict) -> str:
    """The CUDAGraphMode vLLM captures with, per release. V0 (worker/model_runner.py::capture_model)
    captures full decode graphs unless --enforce-eager, whatever the compilation level. V1:
    - up to 0.10.0 (v1/worker/gpu_model_runner.py::__init__ use_cuda_graph): graphs only at compilation
      level 3 with use_cudagraph on; piecewise, or one full graph per size with full_cuda_graph.
    - 0.10.1 - 0.11 (config/__init__.py::VllmConfig.__post_init__): an explicit cudagraph_mode wins
      (full_cuda_graph is FULL); else PIECEWISE (0.10.x) / FULL_AND_PIECEWISE (0.11) at level 3, NONE
      at any other level (-O<n> is the level there); pooling models PIECEWISE from 0.11.
    - 0.12 on (config/vllm.py::VllmConfig.__post_init__): -O<n> is the optimization level, whose
      defaults give the mode (_OPT_LEVEL_MODE) unless set; a compilation mode other than VLLM_COMPILE
      drops every mode to NONE in 0.12, from 0.13 only the modes with piecewise graphs; pooling models
      (and decode context parallel in 0.12) turn a mode with full graphs into PIECEWISE."""
    s = settings
    if not e.v1:
        return "NONE" if s.get("enforce_eager") else "FULL_DECODE_ONLY"
    if r.enforce_eager:
        return "NONE"
    raw = s.get("compilation_config")
    cc = raw if isinstance(raw, dict) else ({"level": raw} if raw is not None else {})
    explicit = str(cc["cudagraph_mode"]).upper() if cc.get("cudagraph_mode") is not None else None
    explicit = explicit if explicit in GRAPH_MODES else None
    level = _compile_mode(cc.get("mode", cc.get("level")))
    opt = _int(s.get("optimization_level")) if s.get("optimization_level") is not None else None
    if r.version < (0, 12, 0):
        level = level if level is not None else (opt if opt is not None else 3)
        if r.version < (0, 10, 1):
            if level != 3 or cc.get("use_cudagraph") is False:
                return "NONE"
            return "FULL" if cc.get("full_cuda_graph") else "PIECEWISE"
        mode = explicit or ("FULL" if cc.get("full_cuda_graph") else None)
        if mode is None:
            if level != 3:
                return "NONE"
            mode = "FULL_AND_PIECEWISE" if r.version >= (0, 11, 0) else "PIECEWISE"
        if mode in ("PIECEWISE", "FULL_AND_PIECEWISE") and level != 3:
            return "NONE"  # vLLM asserts level 3 for piecewise graphs: it does not start otherwise
        pooling = r.version >= (0, 11, 0) and pooling_runner(model, s, e.v1)
        return "PIECEWISE" if pooling and explicit is None and mode != "NONE" else mode
    opt = opt if opt is not None else 2
    level = level if level is not None else (3 if opt > 0 else 0)
    mode = explicit or _OPT_LEVEL_MODE.get(opt, "FULL_AND_PIECEWISE")
    if level != 3 and mode != "NONE" and (r.version < (0, 13, 0) or "PIECEWISE" in mode):
        return "NONE"
    full = mode in ("FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
    dcp = r.version < (0, 13, 0) and int(s.get("decode_context_parallel_size") or 1) > 1
    if full and (pooling_runner(model, s, e.v1) or dcp):
        return "PIECEWISE"
    return mode
