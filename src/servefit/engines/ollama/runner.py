"""The llama.cpp runner Ollama starts before 0.30 (`ollama runner --model BLOB --ctx-size num_ctx*np
--batch-size num_batch --n-gpu-layers N --parallel np [--flash-attn] [--kv-cache-type T]`,
llm/server.go::NewLlamaServer): its own buffers (model, KV, compute) are llama.cpp's, at the
llama.cpp build Ollama vendored, so the llamacpp planner predicts the lines the runner logs."""

from __future__ import annotations

from typing import Any

from servefit.core import LaunchSite, Token
from servefit.engines.ollama.detail import RunnerBuffers
from servefit.engines.ollama.versions import RUNNER_UBATCH
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec

# Ollama release -> llama.cpp build its llama runner vendored: llama/build-info.cpp LLAMA_COMMIT in the commit
# that updated llama/llama.cpp and the first release tag holding it (ollama/ollama history). Exact where the
# commit names its build (v0.12.4 b6646, v0.12.11 b6840, v0.13.2 b7108); the others are placed by their date
# (+-50): 40c6d79f v0.5.2, 46e3556e v0.5.8, d7cfe1ff v0.5.13, 71e90e88 v0.6.6, e1e8e099 v0.6.8, de4c07f9 v0.7.0
# (kept until v0.11.5: before the separate SWA cache of #13194 and the KV streams of #14363), e54d41be v0.11.5,
# df1b612 v0.12.6, 17f7f4b v0.13.3, ec98e2002 v0.13.5 (a5bb8ba4 came in and was reverted before v0.15.5)
VENDORED = [((0, 0, 0), "b3800"), ((0, 5, 2), "b4300"), ((0, 5, 8), "b4600"), ((0, 5, 13), "b4780"),
            ((0, 6, 6), "b5140"), ((0, 6, 8), "b5240"), ((0, 7, 0), "b5340"), ((0, 11, 5), "b6150"),
            ((0, 12, 4), "b6646"), ((0, 12, 6), "b6730"), ((0, 12, 11), "b6840"), ((0, 13, 2), "b7108"),
            ((0, 13, 3), "b7320"), ((0, 13, 5), "b7440")]


def vendored_build(v: tuple[int, ...]) -> str:
    out = VENDORED[0][1]
    for ov, b in VENDORED:
        if v >= ov:
            out = b
    return out


def runner_buffers(s: dict[str, Any], spec: ModelSpec, gpu: GpuSpec, n_dev: int, v: tuple[int, ...], num_ctx: int,
                   num_parallel: int, num_batch: int, layers: int, fa: bool, kvt: str,
                   fa_auto: bool = False) -> tuple[RunnerBuffers | None, list[str]]:
    """The runner's buffers and the lines it logs for them (None, [] for a model the planner cannot size).
    Flash attention reaches llama.cpp through llama/llama.go NewContextParams: enabled or disabled
    (flash_attn / flash_attn_type) until v0.13.3, and from v0.13.4 also "auto" for a setting left unset."""
    from servefit.engines.llamacpp import ENGINE as LCPP
    from servefit.engines.llamacpp.detail import of as llama_detail

    build = vendored_build(v)
    # llama/llama.go NewContextParams starts from llama_context_default_params() (n_ubatch 512): before v0.13.3 it
    # sets only n_batch = num_batch, so llama.cpp's n_ubatch = min(n_batch, 512); from v0.13.3 n_batch = num_batch x
    # np and n_ubatch = num_batch
    if v >= RUNNER_UBATCH:
        n_batch, n_ubatch = num_batch * num_parallel, num_batch
    else:
        n_batch, n_ubatch = num_batch, min(num_batch, 512)
    words = ["llama-server", "-m", str(s.get("model_path") or "model.gguf"), "-c", str(num_ctx * num_parallel),
             "-np", str(num_parallel), "-b", str(n_batch), "-ub", str(n_ubatch), "-ngl", str(layers)]
    if kvt != "f16":
        words += ["-ctk", kvt, "-ctv", kvt]
    site = LaunchSite(file="<ollama runner>", line=0, argv=[Token(w) for w in words], engine="llamacpp",
                      name="ollama runner")
    cfg = LCPP.parse(site, build)
    cfg.settings["flash_attn"] = "auto" if fa_auto else "on" if fa else "off"
    cfg.settings["gguf_quant"] = s.get("quant")
    # llama/llama.go NewContextParams starts from llama_context_default_params() and leaves swa_full at that
    # default, true (src/llama-context.cpp; llama-server's common_params default is false): the runner's
    # sliding-window layers hold the whole context (no effect before the separate SWA caches of #13194)
    cfg.settings["swa_full"] = True
    if not s.get("model_path"):
        cfg.settings["model"] = None
    try:
        p = LCPP.plan(cfg, spec, gpu, n_dev)
    except Exception:  # a model llama.cpp's planner cannot size: leave the runner lines out
        return None, []
    x = llama_detail(p)
    out = RunnerBuffers(model_buffer_mib=x.model_buffer_mib, model_buffer_host_mib=x.model_buffer_host_mib,
                        kv_buffer_mib=x.kv_buffer_mib, compute_buffer_mib=x.compute_buffer_mib,
                        n_ctx_per_seq=x.n_ctx_per_seq, n_gpu_layers_offloaded=x.n_gpu_layers_offloaded,
                        kv_cache_cells=x.kv_cache_cells, n_ubatch=x.n_ubatch,
                        runner_llama_cpp_build=build)
    return out, [m for m in p.messages if "buffer size" in m or "offloaded" in m]
