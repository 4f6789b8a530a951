"""Checkpoints that keep some linear layers in 16 bits: the skip lists of each quantization
format, matched the way vLLM matches them, and the bytes they add (hand-computed)."""

from __future__ import annotations

import json

from servefit.cli import main
from servefit.engines.vllm.non_torch import non_torch_bytes, nvls_bytes
from servefit.hardware import resolve_gpu
from servefit.memory.params import param_groups
from servefit.memory.unquantized import kept_fractions, skip_list
from servefit.memory.weights import kept_params, scheme_for, weight_bytes
from servefit.models import resolve_model
from servefit.models.catalog import lookup
from servefit.models.config_json import from_config
from servefit.models.spec import ModelSpec

H, INTER, LAYERS, VOCAB = 16384, 53248, 126, 128256
ATTN = H * H * 2 + 2 * H * 8 * 128  # q + o + k + v of Llama-3.1-405B: 570,425,344
MLP = 3 * H * INTER  # 2,617,245,696


def test_meta_405b_fp8_keeps_attention_and_the_outer_layers_in_bf16():
    m = lookup("meta-llama/Meta-Llama-3.1-405B-Instruct-FP8")
    assert m is not None and m.quantization and m.quantization["quant_method"] == "fbgemm_fp8"
    g = param_groups(m)
    kept = kept_params(m, g, scheme_for(m.quantization))
    assert kept is not None and len(kept) == LAYERS
    assert kept[0] == kept[125] == ATTN + MLP and all(k == ATTN for k in kept[1:125])
    # bf16: embeddings, lm_head, norms, every attention projection, the MLPs of layers 0 and 125;
    # fp8 (1 byte): the other 124 MLPs
    dense = 2 * VOCAB * H + (2 * LAYERS + 1) * H
    expected = dense * 2 + (LAYERS * ATTN + 2 * MLP) * 2 + 124 * MLP * 1
    assert expected == 487_168_311_296
    assert weight_bytes(m, 2, scheme_for(m.quantization)) == expected


def test_estimate_shards_the_kept_layers_over_tp8(capsys):
    rc = main(["estimate", "--gpu", "H100", "--engine-version", "0.5.3", "--format", "json", "--",
               "vllm", "serve", "meta-llama/Meta-Llama-3.1-405B-Instruct-FP8", "-tp", "8"])
    out = json.loads(capsys.readouterr().out)
    assert rc in (0, 1)
    weights = out["memory"]["weights"]
    # one eighth of the checkpoint, plus the norms and the rotary cache (131072 x 128 bf16),
    # which every rank holds whole
    norms = (2 * LAYERS + 1) * H * 2
    assert weights == (487_168_311_296 - norms) // 8 + norms + 131072 * 128 * 2
    assert any("stay bfloat16" in a for a in out["assumptions"])


def test_other_organizations_fp8_is_their_own_checkpoint_but_a_local_copy_is_meta():
    other = lookup("RedHatAI/Meta-Llama-3.1-405B-Instruct-FP8")
    assert other is not None and other.quantization == {"quant_method": "fp8"}
    local = lookup("/models/Meta-Llama-3.1-405B-Instruct-FP8")
    assert local is not None and local.quantization and local.quantization["quant_method"] == "fbgemm_fp8"


def _spec(quant: dict) -> ModelSpec:
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 4, "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000,
           "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "quantization_config": quant}
    return from_config(cfg, "t/tiny")


def test_skip_list_forms():
    assert skip_list({"quant_method": "fp8", "ignored_layers": ["lm_head"], "ignore": ["re:.*gate$"]}) == \
        ["lm_head", "re:.*gate$"]
    assert skip_list(None) == [] and skip_list({"quant_method": "awq", "modules_to_not_convert": None}) == []
    # q (64x64) + k, v (64x32 each) + o (64x64) = 12,288; gated MLP 3 x 64 x 128 = 24,576
    cases = [
        ({"quant_method": "fbgemm_fp8", "modules_to_not_convert": ["model.layers.1.self_attn.q_proj",
                                                                   "model.layers.1.self_attn.o_proj"]},
         [(0, 0, 0), (8192 / 12288, 0, 0), (0, 0, 0), (0, 0, 0)]),
        ({"quant_method": "modelopt", "exclude_modules": ["lm_head", "model.layers.*.self_attn*"]},
         [(1, 0, 0)] * 4),
        ({"quant_method": "compressed-tensors", "ignore": ["lm_head", "re:model.layers.[03].mlp.down_proj"]},
         [(0, 1 / 3, 0), (0, 0, 0), (0, 0, 0), (0, 1 / 3, 0)]),
        ({"quant_method": "awq", "modules_to_not_convert": ["layers.2."]},  # AWQ: substring, as vLLM
         [(0, 0, 0), (0, 0, 0), (1, 1, 0), (0, 0, 0)]),
        ({"quant_method": "fp8", "ignored_layers": ["language_model.model.layers.3.mlp"]},
         [(0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 1, 0)]),
        ({"quant_method": "fp8", "ignored_layers": ["lm_head", "re:[unclosed"]}, None),
    ]
    for quant, expected in cases:
        m = _spec(quant)
        assert kept_fractions(m, m.quantization, [False] * 4) == expected, quant


def test_a_local_config_json_with_full_module_paths(tmp_path):
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 128, "vocab_size": 1000,
           "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
           "quantization_config": {"quant_method": "fbgemm_fp8", "modules_to_not_convert": [
               f"model.layers.{i}.self_attn.{p}_proj" for i in range(2) for p in "qkvo"]}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = resolve_model(str(tmp_path))
    g = param_groups(m)
    attn, mlp = 4 * 64 * 64, 3 * 64 * 128
    assert kept_params(m, g, scheme_for(m.quantization)) == [attn, attn]
    dense = 2 * 1000 * 64 + 5 * 64
    assert weight_bytes(m, 2, scheme_for(m.quantization), g) == dense * 2 + 2 * attn * 2 + 2 * mlp


def test_nvls_buffers_count_on_nvswitch_boards_by_nccl_era():
    h100, a100 = resolve_gpu("H100"), resolve_gpu("A100-80GB")
    mib = 2**20
    # NCCL 2.20 (vLLM 0.5.3): pynccl + torch's communicator, 288 MiB per local rank each
    assert nvls_bytes(8, h100, (0, 5, 3)) == 2 * 288 * 8 * mib
    assert nvls_bytes(4, h100, (0, 8, 5)) == 2 * 144 * 4 * mib
    assert nvls_bytes(8, h100, (0, 11, 0)) == 1 * 32 * 8 * mib
    assert nvls_bytes(2, h100, (0, 5, 3)) == nvls_bytes(8, a100, (0, 5, 3)) == 0
    # NCCL_NVLS_ENABLE=0 (ncclNvlsInit returns before enabling NVLS): the same plan less those buffers
    on, off = non_torch_bytes(8, 8, h100, (0, 5, 3)), non_torch_bytes(8, 8, h100, (0, 5, 3), env={"NCCL_NVLS_ENABLE": "0"})
    assert on - off == 2 * 288 * 8 * mib
    assert non_torch_bytes(8, 8, h100, (0, 5, 3), env={"NCCL_NVLS_ENABLE": "2"}) == on
    from servefit.engines.vllm.non_torch import notes

    said = [n for n in notes(h100, (0, 5, 3), False, 8) if n.startswith("NCCL's NVLS buffers counted (4.50 GiB")]
    assert len(said) == 1 and "NCCL_NVLS_ENABLE=0" in said[0]
    assert not any("NVLS" in n for n in notes(h100, (0, 5, 3), False, 8, {"NCCL_NVLS_ENABLE": "0"}))
    assert not any("NVLS" in n for n in notes(a100, (0, 5, 3), False, 8))
    # without NVLS: the table, interpolated, flat past 8 GPUs
    v26 = (0, 26, 0)  # before 0.27's total_consumed accounting (tests/test_vllm_profile.py covers that)
    assert non_torch_bytes(8, 8, a100, v26) == non_torch_bytes(16, 8, a100, v26) == int(2.10 * 2**30)
    # TP3 (no card: the H100 figures) halfway between the TP2 and TP4 shares, both logged on 132 x 2048 threads
    h100_alone = 132 * 2048 * 516
    share2, share4 = int(0.55 * 2**30) - h100_alone, int(1.79 * 2**30) - h100_alone
    assert non_torch_bytes(3, 1, None, v26) == h100_alone + share2 + (share4 - share2) // 2


def test_the_july_2024_405b_fp8_checkpoint_has_16_kv_heads():
    # benchmarks/accuracy/configs: the checkpoint as vLLM issue #6746's run loaded it (16 KV heads, k_proj /
    # v_proj 2048 rows, bf16 like every attention projection): 126 x 2 x 8 more heads x 128 x 16384 bf16
    from pathlib import Path

    path = Path(__file__).parents[1] / "benchmarks/accuracy/configs/meta-llama-3.1-405b-instruct-fp8-2024-07.json"
    m = from_config(json.loads(path.read_text()), "local/405b-fp8-2024-07")
    now = lookup("meta-llama/Meta-Llama-3.1-405B-Instruct-FP8")
    assert m.num_key_value_heads == 16 and now is not None and now.num_key_value_heads == 8
    s = scheme_for(m.quantization)
    extra = LAYERS * 2 * 8 * 128 * H * 2
    assert weight_bytes(m, 2, s) - weight_bytes(now, 2, scheme_for(now.quantization)) == extra == 8_455_716_864


def test_compressed_tensors_ignores_experts_by_expert_0_projections():
    # vLLM 0.25.1 compressed_tensors_moe.py::get_moe_method asks for "{prefix}.0.gate_proj" etc.: a regex
    # naming layers 40-47's experts one by one leaves those layers' FusedMoE unquantized
    m = lookup("poolside/Laguna-S-2.1-INT4")
    assert m is not None
    moe = [i >= 1 for i in range(48)]
    fr = kept_fractions(m, m.quantization, moe)
    assert fr is not None
    assert [f[2] for f in fr] == [0.0] * 40 + [1.0] * 8
    assert all(f[0] == 1.0 and f[1] == 1.0 for f in fr)  # attention, shared experts and routers stay bf16
    # two of the three projections ignored is not an ignored layer (vLLM raises on mixed schemes)
    q = {"quant_method": "compressed-tensors", "bits": 4, "group_size": 32,
         "ignore": ["re:.*experts\\.[0-9]+\\.(?:gate_proj|up_proj)$"]}
    assert kept_fractions(m, q, moe) is None


def test_symmetric_compressed_tensors_int4_has_no_zero_points():
    # compressed_tensors_moe_wna16_marlin.py registers weight_zero_point only when not symmetric
    sym = scheme_for({"quant_method": "compressed-tensors", "config_groups": {"g": {
        "targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "group_size": 32, "symmetric": True}}}})
    asym = scheme_for({"quant_method": "compressed-tensors", "config_groups": {"g": {
        "targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "group_size": 32, "symmetric": False}}}})
    assert sym is not None and asym is not None
    assert sym.bytes_per_param == 0.5 + 2 / 32 and asym.bytes_per_param == 0.5 + 2 / 32 + 0.5 / 32


def test_laguna_s21_int4_main_by_hand():
    # main from 3 Aug 2026: routed experts of layers 1-39 INT4 (group 32, bf16 scales), everything else bf16;
    # the repository's checkpoint is 92.84 GiB
    m = lookup("poolside/Laguna-S-2.1-INT4")
    assert m is not None
    g = param_groups(m)
    experts = 256 * 3 * 3072 * 1024
    assert g.experts[1] == experts and g.experts[0] == 0
    total = weight_bytes(m, 2, scheme_for(m.quantization))
    assert total == (m.params - 39 * experts) * 2 + 39 * experts * (0.5 + 2 / 32)
    assert abs(total / 2**30 - 92.84) < 0.1
