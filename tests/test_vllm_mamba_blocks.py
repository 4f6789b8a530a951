"""VLLM025: from 0.20 vLLM stops before capturing full CUDA graphs when a hybrid (Mamba / Gated DeltaNet)
model's KV cache has fewer blocks than --max-num-seqs (config/compilation.py::CompilationConfig
.resolve_cudagraph_mode_and_sizes: "max_num_seqs (N) exceeds available Mamba cache blocks (M)").
The OTel README (farbodtavakkoli/OTel inference/vllm/llm/README.md) quotes it for Qwen3.8-27B-FP8 on one
H100 under vLLM 0.27.1 with the default max_num_seqs 1024 ("... (694)"), and the run that started with
--max-num-seqs 256 (a calibration case)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import H100, run  # noqa: E402

from servefit.models.catalog import lookup  # noqa: E402

QWEN38 = "Qwen/Qwen3.8-27B-FP8"
CMD = "vllm serve Qwen/Qwen3.8-27B-FP8 --max-model-len 8192 --gpu-memory-utilization 0.90"


def _codes(cfg, plan) -> list[str]:
    return [f.code for f in cfg.findings + plan.findings]


def test_default_max_num_seqs_outnumbers_the_blocks_at_0271():
    cfg, plan = run(CMD, model=lookup(QWEN38), gpu=H100, version="0.27.1")
    blocks = plan.detail.num_gpu_blocks
    assert plan.detail.max_num_seqs == 1024 and 0 < blocks < 1024
    assert plan.outcome == "rejected_config"
    assert "VLLM025" in _codes(cfg, plan)
    # vLLM logs the pool, then raises with its own words
    assert plan.messages[-3].startswith("GPU KV cache size: ")
    assert plan.messages[-1] == (f"max_num_seqs (1024) exceeds available Mamba cache blocks ({blocks}). Each decode "
                                 "sequence requires one Mamba cache block, so CUDA graph capture cannot proceed. "
                                 f"Please lower max_num_seqs to at most {blocks} or increase gpu_memory_utilization.")
    finding = next(f for f in plan.findings if f.code == "VLLM025")
    assert f"at most {blocks:,}" in finding.message and finding.setting == "max_num_seqs"


def test_starts_with_256_sequences_eagerly_or_before_020():
    model = lookup(QWEN38)
    cfg, plan = run(CMD + " --max-num-seqs 256", model=model, gpu=H100, version="0.27.1")
    assert plan.outcome == "started" and "VLLM025" not in _codes(cfg, plan)
    # no graphs, no check
    cfg, plan = run(CMD + " --enforce-eager", model=model, gpu=H100, version="0.27.1")
    assert plan.outcome == "started" and plan.detail.num_gpu_blocks < 1024
    # piecewise graphs only: no full decode graph
    cfg, plan = run(CMD + " -cc.cudagraph_mode=PIECEWISE", model=model, gpu=H100, version="0.27.1")
    assert plan.outcome == "started" and plan.detail.num_gpu_blocks < 1024
    # 0.19 caps the capture sizes to the blocks instead of raising
    cfg, plan = run(CMD + " --max-num-seqs 1024", model=model, gpu=H100, version="0.19.0")
    assert plan.outcome == "started" and plan.detail.num_gpu_blocks < 1024


def test_attention_only_models_are_not_checked():
    """The check needs a MambaSpec group (KVCacheConfig.has_mamba_layers): a Llama pool of 100 blocks
    (--num-gpu-blocks-override) under 1024 sequences starts."""
    cfg, plan = run("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 1024 --num-gpu-blocks-override 100 "
                    "--max-num-seqs 1024", model=lookup("meta-llama/Llama-3.1-8B-Instruct"), gpu=H100, version="0.27.1")
    assert plan.detail.num_gpu_blocks == 100 and plan.outcome == "started"
    cfg, plan = run(CMD + " --num-gpu-blocks-override 100 --max-num-seqs 101", model=lookup(QWEN38), gpu=H100,
                    version="0.27.1")
    assert plan.outcome == "rejected_config" and "(100)" in plan.messages[-1]
    cfg, plan = run(CMD + " --num-gpu-blocks-override 100 --max-num-seqs 100", model=lookup(QWEN38), gpu=H100,
                    version="0.27.1")
    assert plan.outcome == "started"
