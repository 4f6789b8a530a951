"""With no version given servefit says loudly which release it models, and a flag the newest
release no longer has dates the config to the last release line that had it."""

from __future__ import annotations

from servefit.engines.vllm import CURRENT
from servefit.pipeline import Target, evaluate, site_from_argv


def cfg_of(cmd: str, version: str | None = None):
    site = site_from_argv(cmd.split(), {})
    site.engine = "vllm"
    return evaluate(site, Target(gpu="RTX 3090", engine_version=version)).config


def test_no_version_warns_first():
    cfg = cfg_of("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192")
    assert cfg.version == CURRENT
    assert cfg.assumptions[0].startswith(f"WARNING: vLLM {CURRENT} assumed (no version given")


def test_a_removed_flag_dates_the_config():
    cfg = cfg_of("vllm serve meta-llama/Llama-3.1-8B-Instruct --swap-space 4")
    assert cfg.version == "0.18.0"  # --swap-space: until 0.18.99 in data/engines/vllm.yaml
    assert cfg.assumptions[0].startswith("WARNING: vLLM 0.18.0 assumed (no version given; --swap-space")
    assert not [f for f in cfg.findings if "swap" in f.message and f.code == "VLLM001"]


def test_a_given_version_is_not_second_guessed():
    cfg = cfg_of("vllm serve meta-llama/Llama-3.1-8B-Instruct --swap-space 4", version="0.11.0")
    assert cfg.version == "0.11.0"
    assert not any(a.startswith("WARNING") for a in cfg.assumptions)
