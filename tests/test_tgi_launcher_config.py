"""TGI's launcher reads config.json through its own RawConfig (launcher/src/main.rs): top-level keys
only, MoE counts under its own key names, and no config at all when quant_method is not one of its
Quantization values. Its defaults follow that view, release by release."""

from __future__ import annotations

from test_tgi_engine import H100, LLAMA8B, run

from servefit.engines.tgi import defaults as d
from servefit.engines.tgi.era import era
from servefit.engines.tgi.launcher_config import read
from servefit.models.spec import ModelSpec

GEMMA3_27B = ModelSpec(
    name="google/gemma-3-27b-it", architecture="Gemma3ForConditionalGeneration", model_type="gemma3",
    num_hidden_layers=62, hidden_size=5376, num_attention_heads=32, num_key_value_heads=16, head_dim=128,
    intermediate_size=21504, vocab_size=262208, max_position_embeddings=131072, params=27_432_406_640,
    multimodal=True, torch_dtype="bfloat16")
GEMMA3_4B = ModelSpec(**{**GEMMA3_27B.__dict__, "name": "google/gemma-3-4b-it", "num_hidden_layers": 34,
                         "hidden_size": 2560, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                         "intermediate_size": 10240, "params": 4_300_079_472})
QWEN3_MOE = ModelSpec(
    name="Qwen/Qwen3-30B-A3B", architecture="Qwen3MoeForCausalLM", model_type="qwen3_moe", num_hidden_layers=48,
    hidden_size=2048, num_attention_heads=32, num_key_value_heads=4, head_dim=128, intermediate_size=6144,
    moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8, vocab_size=151936,
    max_position_embeddings=40960, params=30_532_122_624, torch_dtype="bfloat16")
MIXTRAL = ModelSpec(
    name="mistralai/Mixtral-8x7B-v0.1", architecture="MixtralForCausalLM", model_type="mixtral", num_hidden_layers=32,
    hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128, intermediate_size=14336,
    moe_intermediate_size=14336, num_experts=8, num_experts_per_tok=2, vocab_size=32000,
    max_position_embeddings=32768, params=46_702_792_704, torch_dtype="bfloat16")


def test_nested_vlm_config_head_size_by_release():
    # Config::from reads head_dim (or hidden_size / num_attention_heads) at the top level, where a
    # Gemma 3 VLM file has neither: before 3.2.1 resolve_attention falls back to flashdecoding
    # (block 256, prefix caching off); 3.2.1 reads text_config.head_dim, which the 27B's file
    # states (128, not Gemma3TextConfig's default 256) and the 4B's omits; 3.3.0 takes 256 for gemma3
    want = [("3.2.0", GEMMA3_27B, None), ("3.2.1", GEMMA3_27B, 128), ("3.2.1", GEMMA3_4B, None),
            ("3.3.0", GEMMA3_4B, 256), ("3.3.7", GEMMA3_27B, 128)]
    for version, model, head in want:
        lc = read(model, era(version))
        assert lc is not None and lc.head_dim == head, (version, model.name)
    card = {"gpu": H100}
    _, p = run("text-generation-launcher --model-id g", version="3.2.0", model=GEMMA3_27B, **card)
    assert (p.detail.attention, p.detail.block_size) == ("flashdecoding", 256)
    _, p = run("text-generation-launcher --model-id g", version="3.2.1", model=GEMMA3_27B, **card)
    assert (p.detail.attention, p.detail.block_size) == ("flashinfer", 1)
    _, p = run("text-generation-launcher --model-id g", version="3.2.1", model=GEMMA3_4B, **card)
    assert p.detail.attention == "flashdecoding"
    _, p = run("text-generation-launcher --model-id g", version="3.3.0", model=GEMMA3_4B, **card)
    assert p.detail.attention == "flashinfer"
    # a flat text config is read as before
    assert read(LLAMA8B, era("3.0.1")).head_dim == 128
    _, p = run("text-generation-launcher --model-id m", version="3.0.1", gpu=H100)
    assert p.detail.attention == "flashinfer"


def test_nested_vlm_config_gives_no_positions_and_no_vram_cap():
    # no top-level max_position_embeddings / num_attention_heads: the prefill default is neither
    # capped by the positions nor by vram_maximum (model_vram needs the heads)
    lc = read(GEMMA3_27B, era("3.3.7"))
    assert lc.max_position_embeddings is None and lc.num_heads is None
    assert d._model_vram(lc) is None and d._token_vram(lc) is None
    small = ModelSpec(**{**GEMMA3_27B.__dict__, "max_position_embeddings": 2048})
    _, p = run("text-generation-launcher --model-id g", version="3.3.7", model=small, gpu=H100)
    assert p.detail.max_batch_prefill_tokens == 8000  # `default_optimal` for gemma3, uncapped
    flat = ModelSpec(**{**small.__dict__, "model_type": "qwen2_5_vl"})
    _, p = run("text-generation-launcher --model-id g", version="3.3.7", model=flat, gpu=H100)
    assert p.detail.max_batch_prefill_tokens == 2048  # a flat file's positions cap it
    # 2.x length defaults: no top-level positions is the 4096 max_default
    old = ModelSpec(**{**small.__dict__, "model_type": "llava_next"})
    _, p = run("text-generation-launcher --model-id g", version="2.2.0", model=old, gpu=H100)
    assert (p.detail.max_input_tokens, p.detail.max_total_tokens, p.detail.max_batch_prefill_tokens) == \
        (4095, 4096, 4145)


def test_moe_counts_under_the_launchers_key_names():
    # RawConfig: intermediate_size as the file has it, num_experts from `num_local_experts` only
    # (Mixtral), num_experts_per_tok, n_shared_experts
    q = read(QWEN3_MOE, era("3.3.7"))
    assert (q.intermediate_size, q.num_experts, q.num_experts_per_token, q.num_shared_experts) == (6144, 1, 8, 0)
    m = read(MIXTRAL, era("3.3.7"))
    assert (m.intermediate_size, m.num_experts, m.num_experts_per_token) == (14336, 8, 2)
    # Config::flop for the Qwen3 MoE: attention 2*32*128*2048*3 + 2*4*128*2048*2, mlp 2*3*2048*(6144*8)
    flop = (2 * 32 * 128 * 2048 * 3 + 2 * 4 * 128 * 2048 * 2 + 2 * 3 * 2048 * 6144 * 8) * 48
    assert d._flop(q) == flop
    # Config::model_vram / token_vram with one "expert" (no num_local_experts in a Qwen MoE file)
    layer = 3 * 6144 * 1 * 2048 + (32 + 2 * 4) * 128 + 32 * 128 * 2048
    assert d._model_vram(q) == (layer * 48 + 2 * 2048 * 151936) * 2
    assert d._token_vram(q) == 4 * 2 * 128 * 2 * 48 + (6144 + 3072) * 1 * 2 * 3
    assert d._token_vram(m) == 8 * 2 * 128 * 2 * 32 + (14336 + 7168) * 8 * 2 * 3
    # on an H100 the compute-optimal prefill is 900e12 / flop, then capped by vram_maximum
    _, p = run("text-generation-launcher --model-id q", version="3.3.7", model=QWEN3_MOE, gpu=H100)
    avail = int(H100.smi_memory_bytes * 0.95)
    vmax = (avail - d._model_vram(q)) // d._token_vram(q)
    assert p.detail.max_batch_prefill_tokens == min(int(900e12 / flop), 40960, vmax)


def test_unknown_quant_method_leaves_the_launcher_without_config():
    # quantization_config.quant_method must deserialize into enum Quantization (kebab-case): a
    # fbgemm_fp8 file fails get_config(...).ok(), so no compute-optimal prefill (4096), no
    # positions cap, and resolve_attention skips its head-size check; "fp8" parses
    fbgemm = ModelSpec(**{**LLAMA8B.__dict__, "quantization": {"quant_method": "fbgemm_fp8"}})
    fp8 = ModelSpec(**{**LLAMA8B.__dict__, "quantization": {"quant_method": "fp8"}})
    assert read(fbgemm, era("3.3.7")) is None and read(fp8, era("3.3.7")) is not None
    assert read(fbgemm, era("2.2.0")) is not None  # before 2.3 the launcher never read quantization_config
    ct = ModelSpec(**{**LLAMA8B.__dict__, "quantization": {"quant_method": "compressed-tensors"}})
    assert read(ct, era("2.4.0")) is None and read(ct, era("2.4.1")) is not None
    _, p = run("text-generation-launcher --model-id m", version="3.3.7", model=fbgemm, gpu=H100)
    assert p.detail.max_batch_prefill_tokens == 4096
    _, p = run("text-generation-launcher --model-id m", version="3.3.7", model=fp8, gpu=H100)
    assert p.detail.max_batch_prefill_tokens == int(900e12 / 15_032_385_536)  # compute_optimal, quantized: no cap
    odd = ModelSpec(**{**fbgemm.__dict__, "head_dim": 96, "hidden_size": 3072})
    _, p = run("text-generation-launcher --model-id m", version="3.3.7", model=odd, gpu=H100)
    assert p.detail.attention == "flashinfer"  # the head-size fallback needs the config
