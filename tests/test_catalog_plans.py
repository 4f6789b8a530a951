"""Every catalog entry plans under vLLM without error, and the plan's weights are the
checkpoint's: 2 bytes per parameter in bf16/fp16, or the quantized size of its scheme."""

from __future__ import annotations

from typing import Any

import pytest

from servefit import data
from servefit.core import MemoryPlan, UsageError
from servefit.engines.options import FlagHistory
from servefit.engines.vllm import encoder, vision_tower
from servefit.memory.params import param_groups
from servefit.memory.weights import scheme_for, weight_bytes
from servefit.models import catalog, catalog_entries
from servefit.models.arch_gemma4 import vllm_unloaded_params
from servefit.models.spec import ModelSpec
from servefit.pipeline import Target, evaluate, site_from_argv

RAW: list[dict[str, Any]] = catalog_entries.entries()
ARCHS: dict[str, Any] = data.load("engines/vllm_architectures.yaml")["architectures"]
H200 = 141 * 10**9  # bytes of weights one H200 may hold, with room for the rest


def tensor_parallel(m: ModelSpec) -> int:
    """The smallest power-of-two TP degree (at most 8) whose shard of the weights fits an H200."""
    size = 2 * m.params
    tp = 1
    while tp < 8 and size / tp > 0.8 * H200:
        tp *= 2
    return tp


def release_for(m: ModelSpec) -> str:
    """0.11.0, or the first release read that has the architecture where 0.11.0 lacks it (VLLM024
    refuses the plan otherwise; data/engines/vllm_architectures.yaml)."""
    entry = ARCHS.get(m.architecture)
    if entry is None or FlagHistory(tuple((a, b) for a, b in entry["in"])).present("0.11.0"):
        return "0.11.0"
    return str(entry["in"][-1][0])


# V0 profiles Llama-3.2-Vision's tower on one dummy image per max_num_seqs sequence (engines/vllm/encoder.py
# _mllama_v0): at the default 256 the 90B's tower alone takes 55 GiB a rank at TP 2, more than the room its
# weights leave on an H200, so it is planned at the 16 sequences vLLM's own examples give it
SEQS = {"mllama": 16}


def plan_for(name: str, tp: int, max_len: int = 4096, version: str = "0.11.0", seqs: int | None = None) -> MemoryPlan:
    argv = ["vllm", "serve", name, "--max-model-len", str(max_len), "--tensor-parallel-size", str(tp)]
    argv += ["--max-num-seqs", str(seqs)] if seqs else []
    return evaluate(site_from_argv(argv), Target(gpu="H200", gpus=tp, engine_version=version)).plan


def expected_weight_bytes(m: ModelSpec, tp: int) -> int:
    scheme = scheme_for(m.quantization)
    if scheme is None:
        return 2 * m.params
    b = weight_bytes(m, 2, scheme)
    if scheme.name == "mxfp4" and m.is_moe:  # Marlin (a pip install of 0.11) pads intermediate to 128, hidden to 256
        inter, h = (m.moe_intermediate_size or m.intermediate_size) // tp, m.hidden_size
        pad = (-(-inter // 128) * 128 * -(-h // 256) * 256) / (inter * h)
        b += int(sum(param_groups(m).experts) * scheme.bytes_per_param * (pad - 1))
    return b


def allowance(m: ModelSpec, tp: int) -> float:
    """What vLLM adds beyond the checkpoint on every GPU: the rotary cos/sin cache (max positions
    x rotary dim x 2 B), K/V projections replicated when there are fewer KV heads than ranks,
    the vocabulary padded to 64 rows, and a vision tower vLLM replicates on every rank (all but
    the Qwen-VL towers)."""
    rotary = m.max_position_embeddings * (m.qk_rope_head_dim or m.head_dim) * 2
    rs = m.rope_scaling or {}
    if rs.get("rope_type", rs.get("type")) == "yarn" and m.original_max_position_embeddings:
        rotary = int(m.original_max_position_embeddings * float(rs.get("factor", 1))) * m.head_dim * 2
    kv = 2 * m.hidden_size * m.head_dim * 2 * m.num_hidden_layers if m.num_key_value_heads < tp else 0
    pad = 2 * 64 * m.hidden_size * 2
    vision = 0 if vision_tower.sharded(m) else 2 * m.vision_params * (tp - 1)
    if m.model_type in ("gemma4", "gemma4_text"):  # the full layers' RoPE cache and K/V slots (tests/test_gemma4.py)
        rotary += m.max_position_embeddings * int(m.layout.get("global_head_dim") or 0) * 2
        kv += vllm_unloaded_params(m) * 2 // tp
    return tp * (rotary + kv + pad) + vision


@pytest.mark.parametrize("entry", RAW, ids=[e["name"] for e in RAW])
def test_every_entry_plans_with_its_weights(entry):
    m = catalog.spec_from_entry(entry)
    tp = tensor_parallel(m)
    if m.model_type in ("zaya", "inkling_mm_model"):  # vLLM's plan not modelled: one line, exit 2
        with pytest.raises(UsageError, match=f"^servefit does not model how vLLM serves {m.name} .*SGLang is modelled"):
            plan_for(m.name, tp, min(4096, m.max_position_embeddings), release_for(m))
        return
    plan = plan_for(m.name, tp, min(4096, m.max_position_embeddings), release_for(m), SEQS.get(m.model_type))
    assert plan.memory.weights > 0
    want = expected_weight_bytes(m, tp)
    if want / tp <= 0.8 * H200:
        assert plan.outcome == "started", (plan.outcome, plan.messages)
    else:  # over 8 x H200's room (GLM-5 in bf16, Kimi K2 in FP8): it need not start, weights still exact
        assert want / 8 > 0.8 * H200 and tp == 8
    total = plan.memory.weights * tp  # the GPU that runs out first holds an even share under TP
    # Qwen3-VL's deepstack buffers are built with the model on every rank (encoder.py deepstack_buffer_bytes)
    total -= tp * encoder.deepstack_buffer_bytes(m, {}, plan.detail.as_dict()["max_num_batched_tokens"], 2)
    assert abs(total - want) <= 0.01 * want + allowance(m, tp), (total, want, tp)


def test_allowance_is_small_next_to_the_weights():
    """The tolerance above stays a few percent of the weights (the planted-bug guard: a plan that
    counted weights twice or dropped the vision tower would not pass). Models under 1B with a 256K
    context are the exception: their rotary cache alone is several percent of the weights."""
    models = [m for m in map(catalog.spec_from_entry, RAW) if m.params >= 10**9]
    worst = max(allowance(m, tensor_parallel(m)) / (2 * m.params) for m in models)
    assert worst < 0.05


@pytest.mark.parametrize("name,tp,gib", [
    ("Qwen/Qwen2.5-Coder-7B-Instruct", 1, 14.19),  # 7615616512 x 2 B
    ("mistralai/Mistral-Small-24B-Instruct-2501", 1, 43.91),  # 23572403200 x 2 B
    ("codellama/CodeLlama-34b-Instruct-hf", 1, 62.86),  # 33743970304 x 2 B
])
def test_weights_of_catalogued_checkpoints(name, tp, gib):
    assert plan_for(name, tp).memory.weights / 2**30 == pytest.approx(gib, abs=0.02)


def test_the_engine_support_table_validates_against_its_schema():
    import json
    from pathlib import Path

    jsonschema = pytest.importorskip("jsonschema")
    root = Path(data.__file__).resolve().parent.parent
    schema = json.loads((root / "schemas" / "engine_support.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    table = data.load("engine_support.yaml")
    jsonschema.validate(table, schema)
    assert {row["model_type"] for row in table} == {"deepseek_v4", "zaya", "inkling_mm_model"}
