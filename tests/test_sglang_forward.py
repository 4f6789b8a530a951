"""A step's activations outside SGLang's static pool, priced from the model (engines/sglang/forward.py),
not from SGLang's default-fraction reserve, which flagged SGLang's own default runs."""

from servefit.engines.sglang.forward import activation_bytes
from servefit.models import catalog


def test_dense_prefill_step_holds_hidden_states_and_the_gated_mlp():
    m = catalog.lookup("meta-llama/Llama-3.1-8B-Instruct")
    assert m is not None
    # 8192 tokens x (4 x 4096 + 3 x 14336) x 2 bytes; the sampler's 2 x 160 x 128256 x 4 is smaller
    assert activation_bytes(m, 1, 8192, 160, 2) == 8192 * (4 * 4096 + 3 * 14336) * 2
    assert activation_bytes(m, 2, 8192, 160, 2) == 8192 * (4 * 4096 + 3 * 7168) * 2  # the MLP is split by TP


def test_moe_step_holds_top_k_expert_intermediates_and_the_sampler_can_dominate():
    m = catalog.lookup("Qwen/Qwen3-30B-A3B")
    assert m is not None and m.is_moe
    per_token = 4 * m.hidden_size + m.num_experts_per_tok * 3 * m.moe_intermediate_size
    assert activation_bytes(m, 1, 2048, 8, 2) == 2048 * per_token * 2
    assert activation_bytes(m, 1, 16, 512, 2) == 2 * 512 * m.vocab_size * 4  # a short step: the logits
