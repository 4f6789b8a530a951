"""What one SGLang step holds outside the static pool: the larger of a chunked-prefill forward and the
decode sampler's logits. SGLang's own reserve (server_args.py, 1.5 MiB per chunked-prefill token plus
graph terms) only chooses the default mem_fraction_static; it is no measure of what a forward takes, and
compared with an explicit fraction it warned on SGLang's own default runs that start and serve (seven
of twelve calibration logs).

- The forward of `tokens` tokens (chunked_prefill_size; without chunking a whole prefill batch) holds the
  hidden states and the MLP's intermediates: srt/models/llama.py LlamaMLP keeps gate_up_proj's output
  (2 x intermediate / TP) and SiluAndMul's (intermediate / TP); an MoE layer
  (srt/layers/moe/fused_moe_triton/fused_moe.py fused_experts_impl) keeps intermediate caches of
  top_k x (2 + 1) x moe_intermediate / TP per token, and a shared expert its own MLP.
- The decode sampler holds fp32 logits and their probabilities for the batch the CUDA graphs cover
  (srt/layers/logits_processor.py, srt/layers/sampler.py): 2 x batch x vocab x 4 bytes."""

from __future__ import annotations

from servefit.models.spec import ModelSpec


def activation_bytes(model: ModelSpec, tp: int, tokens: int, batch: int, dtype_bytes: float) -> int:
    h = model.hidden_size
    if model.is_moe:
        inter = (model.moe_intermediate_size or model.intermediate_size) // tp
        mlp = model.num_experts_per_tok * 3 * inter + model.num_shared_experts * 3 * inter
    else:
        mlp = 3 * (model.intermediate_size // tp)
    forward = tokens * (4 * h + mlp) * dtype_bytes
    sampler = 2 * batch * model.vocab_size * 4
    return int(max(forward, sampler))
