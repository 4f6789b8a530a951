"""The compute buffer llama.cpp reserves per device.

llama.cpp has no formula: src/llama-context.cpp::llama_context::sched_reserve builds the worst-case
graphs (n_tokens = min(n_ctx, n_ubatch), a full KV: n_kv = cells per stream) and ggml-alloc measures
the peak of live tensors per backend. The peak is one of three phases of that graph, each an f32
working set (sizes from the graph built in src/llama-graph.cpp):
- attention, flash attention off: the KQ scores n_kv x n_tokens x n_head (softmax in place), the
  f32 KQ mask n_kv x pad(n_tokens), and the residual stream (~4 x n_embd x n_tokens);
- attention, flash attention on: the mask (f32 input + f16 copy) and the residual stream;
- FFN: up, gate and their GLU product, n_ff x n_tokens each (MoE: the selected experts' activation and down
  output), the residual stream, and the masks every attention layer reads (ffn_working_set, graph_inputs);
- output: logits n_vocab x n_outputs + the final norm n_embd x n_tokens. Before b9460 the reserve
  produced logits for all n_ubatch tokens; since, llama-server reserves n_parallel outputs
  (server-context.cpp::server_n_outputs_max).
The max of the phases matches the logs within a few MiB for dense models (e.g. Llama-3-8B at
n_ctx 8192, ub 512: 560.00 MiB with FA off = KQ 512 + mask 16 + residual 32; 258.50 MiB with FA on
= logits 250.5 + 8). Models with sliding-window layers (two masks, llama_kv_cache_iswa) log the
logits + final norm alone, whatever the context: gpt-oss-20b 398.38 MiB at 65536 and at 2 x 24576
(b7772), Gemma-4 E2B 1031 MiB (b8700) -- an observation from those calibration logs, not read off
ggml-alloc. Hybrid models (recurrent layers beside full-attention ones) log no masks under the logits
either: Qwen3.5-9B at n_ctx 131072, ub 2048 (b8193) logs 1972.00 MiB = logits 248320 x 2048 x 4
(1940.00) + final norm 4096 x 2048 x 4 (32.00), the 1536 MiB of FA masks not added; Qwen3.6-27B and
35B-A3B at 262144 / ub 512 (b8836) log 824.02 / 804.02 MiB, the attention phase (masks 768 + residual
40 / 16, -1.9% / -2.5%). In their graphs (src/models/qwen35.cpp, qwen35moe.cpp: llm_build_delta_net_base,
build_inp_mem_hybrid) the first full-attention layer, where llama-graph.cpp::build_attn_mha casts the
mask to f16, comes after three gated-delta-net layers, and the last layer's rows are taken after the
final norm; ggml-alloc's placement that follows is not simulated here -- an observation from those
logs. Every GPU that holds layers reserves roughly the full amount.
The host side (CUDA_Host compute buffer) holds the graph inputs: embeddings + the f32 mask.
"""

from __future__ import annotations

from dataclasses import dataclass

from servefit.engines.llamacpp import versions as V
from servefit.engines.llamacpp.kv import CtxParams, KvLayout, pad
from servefit.engines.llamacpp.model import LModel

KQ_MASK_PAD = 64  # GGML_KQ_MASK_PAD (src/llama-graph.cpp)


@dataclass
class Compute:
    """The compute buffer llama.cpp reserves on each GPU holding layers and on the host, and the graph phase
    that sets its peak."""

    device: int  # bytes on each GPU holding layers
    host: int  # CUDA_Host / CPU compute buffer
    phase: str  # attention | ffn | output
    n_outputs: int


def n_outputs(cp: CtxParams, b: int, draft: int = 0, embedding: bool = False) -> int:
    t = min(cp.n_ctx, cp.n_ubatch)
    if b < V.OUTPUTS_MAX or embedding:
        return t
    return min(cp.n_batch, cp.n_seq * (1 + draft), t)


def _hybrid(lm: LModel) -> bool:
    """Recurrent layers beside attention layers (Qwen3.5/3.6, Qwen3-Next, Jamba, Granite-4.0-H...)."""
    return any(lm.recurrent) and any(lm.has_kv(il) for il in range(lm.n_layer))


def compute_buffer(lm: LModel, cp: CtxParams, kv: KvLayout, fa: bool, b: int, draft: int = 0) -> Compute:
    t = min(cp.n_ctx, cp.n_ubatch)
    n_kv = kv.cells_base if any(lm.has_kv(il) for il in range(lm.n_layer)) else 0
    e, h, vocab = lm.n_embd, lm.n_head_max, lm.n_vocab
    t_pad = pad(t, KQ_MASK_PAD)
    resid = 4 * t * 4 * e
    masks = 6 * n_kv * t_pad  # f32 KQ mask + its f16 copy
    if fa:
        attn = masks + resid
    else:
        attn = 4 * n_kv * t * h + 4 * n_kv * t_pad + resid
    ffn = ffn_working_set(lm, t) + graph_inputs(lm, kv, t, fa)
    n_out = n_outputs(cp, b, draft, lm.embedding)
    out = 4 * vocab * n_out + 4 * e * t
    hole = masks if fa else 4 * n_kv * t_pad
    if n_out >= t and not any(lm.swa) and not _hybrid(lm) and 4 * vocab * n_out > hole:
        # ggml/src/ggml-alloc.c::ggml_dyn_tallocr_alloc: a tensor takes the best-fitting freed block that holds it and
        # grows the buffer's last block only when none does. The masks are freed after the last attention layer: logits
        # larger than that hole stack on it (Qwen2.5-7B at 32768 / ub 512: 382.01 MiB logged, 386 planned); logits it
        # holds reuse it and the attention phase stays the peak (Llama-3.1-8B at 131072 / ub 512 in Ollama 0.21's
        # llama runner: 416.01 MiB logged = masks 384 + residual 32, not logits 250.5 + masks)
        out += max(0, hole - 8 * e * t)
    phases = {"attention": attn, "ffn": ffn, "output": out}
    phase = max(phases, key=lambda k: phases[k])
    host = 4 * t * e + 4 * n_kv * t_pad
    return Compute(device=phases[phase], host=host, phase=phase, n_outputs=n_out)


def ffn_working_set(lm: LModel, t: int) -> int:
    """The FFN phase of one layer. Dense (src/llama-graph.cpp build_ffn, LLM_FFN_PAR with SiLU / GELU): up and gate
    (n_ff x n_tokens each) and their ggml_swiglu_split / ggml_geglu_split product, a new tensor (ggml-alloc.c
    ggml_op_can_inplace has no GLU op), live together, beside three n_embd-wide residual-stream tensors. MoE
    (build_moe_ffn): the selected experts' activation (n_expert_used x n_ff_exp per token) is the input of the down
    projection's mul_mat_id, whose output is n_embd x n_expert_used per token, before the weighted sum; gate and up
    with their product (3 x n_expert_used x n_ff_exp) where that is larger."""
    e = lm.n_embd
    if lm.n_expert and lm.n_expert_used:
        k, ff = lm.n_expert_used, lm.n_ff_exp or lm.n_ff
        return 4 * t * (max(3 * k * ff, k * ff + k * e) + 3 * e + 2 * lm.n_expert)
    return 4 * t * (3 * lm.n_ff + 3 * e)


def graph_inputs(lm: LModel, kv: KvLayout, t: int, fa: bool) -> int:
    """Graph inputs every attention layer reads, live through each layer's FFN: the KQ mask (n_kv x n_tokens; two
    with a sliding-window cache, build_attn_inp_kv_iswa), as the f16 cast flash attention reads (f32 without it).
    With the FFN above this matches the logs: Qwen2.5-7B at ub 512 and 16384 cells (CUDA b9500) 148.09 MiB = 3 x 37 +
    3 x 7 + 16; Qwen3.5-9B at ub 2048 (Vulkan b9849) 416.44 / 416.16 = 3 x 96 + 3 x 32 + 32; Qwen3.8-27B 568.18
    (planned 560.00, -1.4%). Gemma 4 (src/models/gemma4.cpp) holds more: the masks' f32 copies as well, and the
    per-layer input embeddings that project_per_layer_inputs makes for every layer at once (n_embd_per_layer x
    n_layer x n_tokens f32; E2B / E4B): Vulkan b9849 at ub 2048 logs E2B 560.07 MiB (planned 538.00: FFN 324 + masks
    144 + per-layer inputs 70) and 26B-A4B 428.07 (planned 420.00: 288 + 132) -- the Gemma 4 terms are an
    observation from those logs, not a simulation of ggml-alloc's placement."""
    if not any(lm.has_kv(il) for il in range(lm.n_layer)):
        return 0
    cells = kv.cells_base + kv.cells_swa
    if lm.arch != "gemma4":
        return (2 if fa else 4) * t * cells
    return (6 if fa else 4) * t * cells + 4 * t * lm.n_embd_per_layer * lm.n_layer


def mtp_draft(lm: LModel, cp: CtxParams, fa: bool, n_out: int) -> int:
    """The compute buffer of the MTP draft context (mtp.py): one decoder layer over the batch, whose FFN phase holds
    the FFN's three n_ff-wide tensors, two residual-stream tensors and the attention mask (graph_inputs), or the
    logits of its n_outputs rows. Qwen3.8-27B at ub 2048 and 8192 cells (Vulkan b9849): 520.06 MiB logged =
    3 x 136 + 2 x 40 + 32 -- an observation from that log."""
    t = min(cp.n_ctx, cp.n_ubatch)
    e = lm.n_embd
    ffn = 4 * t * (3 * lm.n_ff + 2 * e) + (2 if fa else 4) * cp.n_ctx * t
    return max(ffn, 4 * lm.n_vocab * n_out + 4 * e * t)
