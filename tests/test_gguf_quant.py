"""The llama-quantize per-tensor type model reproduces the model buffers llama.cpp logs."""

from __future__ import annotations

import pytest

from servefit.models.gguf_quant import synth_tensors
from servefit.models.spec import ModelSpec

MIB = 2**20


def llama31_8b() -> ModelSpec:
    return ModelSpec(name="llama-3.1-8b", architecture="LlamaForCausalLM", model_type="llama", num_hidden_layers=32,
                     hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                     intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072)


def qwen25_7b() -> ModelSpec:
    return ModelSpec(name="qwen2.5-7b", architecture="Qwen2ForCausalLM", model_type="qwen2", num_hidden_layers=28,
                     hidden_size=3584, num_attention_heads=28, num_key_value_heads=4, head_dim=128,
                     intermediate_size=18944, vocab_size=152064, max_position_embeddings=32768)


def qwen3_8b() -> ModelSpec:
    return ModelSpec(name="qwen3-8b", architecture="Qwen3ForCausalLM", model_type="qwen3", num_hidden_layers=36,
                     hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                     intermediate_size=12288, vocab_size=151936, max_position_embeddings=40960)


def split(spec: ModelSpec, ft: str) -> tuple[float, float]:
    ts = synth_tensors(spec, ft)
    emb = sum(t.nbytes for t in ts if t.name == "token_embd.weight")
    return round((sum(t.nbytes for t in ts) - emb) / MIB, 2), round(emb / MIB, 2)


@pytest.mark.parametrize("spec,ft,gpu,cpu", [
    # load_tensors: CUDA0 model buffer size / CPU_Mapped model buffer size, from public logs
    (llama31_8b, "Q4_K_M", 4403.49, 281.81),
    (llama31_8b, "Q8_0", 7605.33, 532.31),
    (qwen25_7b, "Q4_K_M", 4168.09, 292.36),
    (qwen3_8b, "Q4_K_M", 4455.34, 333.84),
])
def test_model_buffers_match_logs(spec, ft, gpu, cpu):
    assert split(spec(), ft) == (gpu, cpu)


def test_q4_k_m_type_choices():
    ts = {t.name: t.type for t in synth_tensors(llama31_8b(), "Q4_K_M")}
    assert ts["output.weight"] == "Q6_K" and ts["token_embd.weight"] == "Q4_K"
    assert ts["blk.0.attn_v.weight"] == "Q6_K" and ts["blk.4.attn_v.weight"] == "Q4_K"  # use_more_bits
    assert ts["blk.0.attn_norm.weight"] == "F32"
    assert sum(1 for v in ts.values() if v == "Q6_K") == 33  # as the log's "type q6_K: 33 tensors"


def test_tied_embedding_takes_the_output_type():
    spec = llama31_8b()
    spec.tie_word_embeddings = True
    ts = {t.name: t.type for t in synth_tensors(spec, "Q4_K_M")}
    assert "output.weight" not in ts and ts["token_embd.weight"] == "Q6_K"


def test_iq_mixes_and_bpw_order():
    bpw = {}
    for ft in ("IQ2_XXS", "Q2_K", "Q3_K_M", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "F16"):
        ts = synth_tensors(llama31_8b(), ft)
        bpw[ft] = 8 * sum(t.nbytes for t in ts) / sum(t.n_elements for t in ts)
    assert list(bpw.values()) == sorted(bpw.values())
    assert 4.8 < bpw["Q4_K_M"] < 4.95 and abs(bpw["F16"] - 16) < 0.01


def test_moe_and_mla_layouts():
    moe = ModelSpec(name="moe", architecture="X", model_type="mixtral", num_hidden_layers=4, hidden_size=256,
                    num_attention_heads=8, num_key_value_heads=2, head_dim=32, intermediate_size=512,
                    vocab_size=1000, max_position_embeddings=4096, num_experts=8, num_experts_per_tok=2)
    ts = {t.name: t for t in synth_tensors(moe, "Q4_K_M")}
    assert ts["blk.0.ffn_gate_inp.weight"].type == "F32" and ts["blk.0.attn_v.weight"].type == "Q8_0"
    assert ts["blk.0.ffn_down_exps.weight"].shape == (512, 256, 8)
    mla = ModelSpec(name="mla", architecture="X", model_type="deepseek_v3", num_hidden_layers=2, hidden_size=256,
                    num_attention_heads=4, num_key_value_heads=4, head_dim=64, intermediate_size=512, vocab_size=1000,
                    max_position_embeddings=4096, kv_lora_rank=64, qk_rope_head_dim=32, qk_nope_head_dim=64,
                    v_head_dim=64, q_lora_rank=96)
    names = {t.name for t in synth_tensors(mla, "Q8_0")}
    assert {"blk.0.attn_kv_a_mqa.weight", "blk.0.attn_kv_b.weight", "blk.0.attn_q_b.weight"} <= names


def test_unknown_ftype():
    with pytest.raises(KeyError):
        synth_tensors(llama31_8b(), "Q7_K")


# The text model's GGUF holds what the checkpoint holds without the vision tower; these differ for a
# recorded reason: OPT-350m's 512-wide embeddings with project_in / project_out, an embedding model
# whose catalogued count leaves out the LM head that the layout adds, Gemma 4 E2B / E4B's audio tower,
# and Zamba2: models/gguf_quant.py has no Zamba2 layout (its shared attention blocks and per-layer LoRA
# adapters); a llama.cpp converter for it (MODEL_ARCH.ZAMBA2) was seen only in forks, not confirmed upstream.
# sapientinc/HRM-Text-1B: num_hidden_layers counts its 128 KV-holding layer runs, not its 32 layers of
# weights (models/arch_hrm.py); the GGUF layout (models/gguf_layout.py) has no stacks of shared layers.
# DeepSeek-V4: llama.cpp's LLM_ARCH_DEEPSEEK4 tensors (compressors, indexer, hyper-connections) are not
# modelled; servefit refuses to plan V4 under llama.cpp / Ollama (data/engine_support.yaml).
LAYOUT_EXCEPTIONS = {"facebook/opt-350m", "Alibaba-NLP/gte-Qwen2-7B-instruct", "google/gemma-4-E2B-it",
                     "google/gemma-4-E4B-it", "Zyphra/Zamba2-2.7B", "Zyphra/Zamba2-1.2B-instruct",
                     "sapientinc/HRM-Text-1B", "deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4-Flash-Base",
                     "deepseek-ai/DeepSeek-V4-Pro", "deepseek-ai/DeepSeek-V4-Pro-Base"}


def test_every_catalog_layout_holds_the_checkpoints_text_parameters():
    """A GGUF sized from the catalog (no file to read) is only right when convert_hf_to_gguf.py's
    tensors are the architecture's: the gate-less MLPs (GPT-2, OPT, BLOOM, StarCoder, BERT), the
    encoders' attention and positions, mixer-only blocks (Nemotron-H, Mamba), MoE every n-th layer
    (Llama 4, Jamba), Gated DeltaNet and Falcon-H1's parallel mixers. Within 2% of the count."""
    from servefit.models import catalog_entries

    off = {}
    for m in catalog_entries.all_models():
        if not m.params or m.name in LAYOUT_EXCEPTIONS:
            continue
        n = sum(t.n_elements for t in synth_tensors(m, "BF16"))
        r = n / (m.params - (m.vision_params or 0)) - 1
        if abs(r) > 0.02:
            off[m.name] = round(100 * r, 1)
    assert off == {}


def test_nemotron_h_blocks_hold_one_mixer_each():
    """llama.cpp nemotron-h.cpp: a Mamba2 block has no FFN, an attention block none, and the FFN
    blocks of Nemotron 3 hold ungated experts with a shared expert; MoE sits only in those."""
    from servefit.models import catalog

    m = catalog.lookup("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    ts = {t.name: t for t in synth_tensors(m, "Q4_K_M")}
    kinds = m.kinds()
    il_m, il_a, il_f = kinds.index("mamba"), kinds.index("full"), kinds.index("none")
    assert not any(k.startswith((f"blk.{il_m}.ffn", f"blk.{il_a}.ffn", f"blk.{il_f}.attn_q", f"blk.{il_f}.ssm"))
                   for k in ts)
    assert ts[f"blk.{il_f}.ffn_up_exps.weight"].shape == (2688, 1856, 128)
    assert f"blk.{il_f}.ffn_gate_exps.weight" not in ts and ts[f"blk.{il_f}.ffn_up_shexp.weight"].shape == (2688, 3712)
    assert ts[f"blk.{il_m}.ssm_in.weight"].shape == (2688, 2 * 4096 + 2 * 8 * 128 + 64)


@pytest.mark.parametrize("ft", ["BF16", "F16", "Q8_0", "Q5_K_M", "Q4_K_M"])
def test_gpt_oss_experts_stay_mxfp4_in_every_file_type(ft):
    """convert_hf_to_gguf.py writes gpt-oss's MXFP4 expert blocks as they are ("--outtype bf16 ...
    gpt-oss-20b.gguf: n_tensors = 459, total_size = 13.8G", a public conversion log), and the quantized
    files keep them (the calibration logs' F16 and Q5_K_M model buffers)."""
    from servefit.models import catalog

    ts = synth_tensors(catalog.lookup("openai/gpt-oss-20b"), ft)
    assert {t.type for t in ts if t.name.endswith("_exps.weight")} == {"MXFP4"}
    if ft == "BF16":
        assert 13.7e9 <= sum(t.nbytes for t in ts) <= 13.9e9


def test_gpt_oss_blocks_carry_their_biases_and_sinks():
    """The public gpt-oss-20b F16 file loads "459 tensors" typed "f32: 289, f16: 98, mxfp4: 72" (the calibration
    log lcpp-nbchat15-...-free14992-b7772): 19 tensors a block, the q/k/v/o, router and expert biases and the
    sinks in F32; its CUDA0 model buffer is 12036.68 MiB (every tensor but token_embd)."""
    from collections import Counter

    from servefit.models import catalog

    ts = synth_tensors(catalog.lookup("openai/gpt-oss-20b"), "F16")
    assert Counter(t.type for t in ts) == {"F32": 289, "F16": 98, "MXFP4": 72}
    assert {t.type for t in ts if t.name.endswith("_exps.bias") or t.name.endswith("attn_sinks.weight")} == {"F32"}
    assert round(sum(t.nbytes for t in ts if t.name != "token_embd.weight") / 2**20, 2) == 12036.67
    by = {t.name: t.shape for t in ts}  # one sink per attention head (64), expert biases experts x width
    assert (by["blk.0.attn_sinks.weight"], by["blk.0.ffn_down_exps.bias"]) == ((64,), (2880, 32))
