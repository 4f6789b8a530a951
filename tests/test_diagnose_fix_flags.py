"""Every fix diagnose gives for vLLM is one the release in the log accepts: each flag it names is in that
release's own parser (data/engines/vllm_history.yaml, the option table lint uses), and a per-step token cap
keeps to lint's VLLM011 (>= max-num-seqs) and VLLM012 (below max-model-len only with chunked prefill)."""

from __future__ import annotations

import re

import pytest

from servefit.diagnose.fixes import Fixing
from servefit.diagnose.model import Diagnosis
from servefit.engines.options import load_table
from servefit.engines.vllm import diagnose as vd
from servefit.engines.vllm.era import era

FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-O)(?=[\s=,:)']|$)")
CAP = re.compile(r"--max-num-batched-tokens (?:from [\d,]+ to )?(\d[\d,]*)")
SETTINGS = ({}, {"max_model_len": 32768, "enable_chunked_prefill": False},
            {"max_model_len": 4096, "max_num_seqs": 1536, "max_num_batched_tokens": 2048})


def _fixes(root: str, version: str | None, stage: str = "", signature: str = "torch.oom",
           settings: dict | None = None) -> list[str]:
    d = Diagnosis(root_cause=root, stage=stage, engine="vllm", signature=signature)
    d.figures = {"engine_version": version} if version else {}
    d.settings_in_log = dict(settings or {})
    return vd.fixes(Fixing(d, "vllm")) or []


@pytest.mark.parametrize("version", [*load_table("vllm").releases, None])
def test_every_flag_a_fix_names_is_in_that_release(version: str | None) -> None:
    table, v0 = load_table("vllm"), not era(version).v1
    for root in vd.FIXES:
        for stage in ("", "compile", "decode"):
            for sig in ("torch.oom", "vllm.no_kv_memory"):
                for settings in SETTINGS:
                    for line in _fixes(root, version, stage, sig, settings):
                        missing = [f for f in FLAG.findall(line) if not table.in_release(f, version)]
                        assert not missing, (version, root, stage, line)
                        m = CAP.search(line)
                        if m is None:
                            continue
                        cap = int(m.group(1).replace(",", ""))
                        assert cap >= settings.get("max_num_seqs", 0), (version, line)  # VLLM011
                        chunked = settings.get("enable_chunked_prefill") or not v0
                        if cap < settings.get("max_model_len", 0) and not chunked:  # VLLM012
                            assert "--enable-chunked-prefill" in line, (version, line)


def test_graph_capture_fix_names_the_flag_of_the_release() -> None:
    assert _fixes("cuda_graph_capture", "0.4.0")[1] == "Capture smaller graphs: --max-context-len-to-capture 2048"
    assert _fixes("cuda_graph_capture", "0.6.3")[1] == "Capture smaller graphs: --max-seq-len-to-capture 2048"
    # V1 0.8 has neither --cuda-graph-sizes (0.9) nor --max-cudagraph-capture-size (0.11.2)
    assert _fixes("cuda_graph_capture", "0.8.5")[1] == (
        "Capture smaller graphs: --compilation-config '{\"cudagraph_capture_sizes\": [1, 2, 4, 8, 16, 32, 64, 128]}' "
        "(capture fewer, smaller graphs)")
    assert _fixes("cuda_graph_capture", "0.10.1")[1].startswith("Capture smaller graphs: --cuda-graph-sizes 128")


def test_v0_batch_fix_caps_tokens_only_with_chunked_prefill() -> None:
    long = {"max_model_len": 32768, "max_num_seqs": 512}
    assert _fixes("batch_misconfiguration", "0.6.3", settings=long) == [
        "Lower --max-num-seqs from 512 to 256",
        "Or cap the tokens processed per step: --enable-chunked-prefill --max-num-batched-tokens 8192 (the V0 engine "
        "(vLLM 0.6.3) accepts a value below --max-model-len only with chunked prefill)",
        "Cap concurrency in front of the server (gateway / load-balancer limit)"]
    # chunked prefill already on (V0 turns it on by itself above 32K), or V1: the plain cap
    on = _fixes("batch_misconfiguration", "0.6.3", settings={**long, "enable_chunked_prefill": True})
    assert on[1] == "Lower --max-num-batched-tokens (e.g. 8192) to cap the tokens processed per step"
    assert _fixes("batch_misconfiguration", "0.11.0", settings=long)[1] == on[1]
    # 0.3.3 has no chunked prefill at all: only a shorter context bounds a step
    assert _fixes("batch_misconfiguration", "0.3.3", settings=long)[1] == (
        "Or lower --max-model-len (now 32768): vLLM 0.3.3 has no chunked prefill, and each step may hold a whole "
        "max-model-len prompt")


def test_profiling_fix_keeps_the_cap_at_or_above_max_num_seqs() -> None:
    s = {"max_num_batched_tokens": 2048, "max_num_seqs": 1536, "max_model_len": 4096}
    assert _fixes("profiling_peak", "0.11.0", settings=s)[0].startswith(
        "Lower --max-num-batched-tokens from 2,048 to 1,536: the engine (vLLM 0.11.0)")
    assert _fixes("profiling_peak", "0.3.3", settings={"max_model_len": 32768})[1] == (
        "vLLM 0.3.3 has no chunked prefill (it arrives in 0.4.0): only a shorter --max-model-len bounds the profiled "
        "batch")


def _other(engine: str, root: str, version: str | None = None, stage: str = "", signature: str | None = None,
           settings: dict | None = None, site_version: str | None = None) -> list[str]:
    from importlib import import_module

    d = Diagnosis(root_cause=root, stage=stage, engine=engine, signature=signature)
    d.figures = {"engine_version": version} if version else {}
    d.settings_in_log = dict(settings or {})
    return import_module(f"servefit.engines.{engine}.diagnose").fixes(Fixing(d, engine, site_version=site_version))


@pytest.mark.parametrize("engine", ["sglang", "tgi", "llamacpp", "ollama"])
def test_other_engines_name_only_flags_their_release_has(engine: str) -> None:
    from importlib import import_module

    table = load_table(engine)
    roots = import_module(f"servefit.engines.{engine}.diagnose").FIXES
    for version in table.releases:
        for root in roots:
            for stage in ("", "compute", "prefill", "decode", "graphs"):
                for line in _other(engine, root, version, stage, f"{engine}.prefill"):
                    missing = [f for f in FLAG.findall(line) if not table.in_release(f, version)]
                    assert not missing, (engine, version, root, stage, line)


def test_renamed_flags_follow_the_release_the_log_or_config_names() -> None:
    warm = ("profiling_peak", "", "tgi.prefill")
    assert "And lower --max-input-length with it" in _other("tgi", warm[0], "1.0.0", warm[1], warm[2])[1]
    assert "And lower --max-input-tokens with it" in _other("tgi", warm[0], "3.3.7", warm[1], warm[2])[1]
    # no release anywhere: the newest spelling and the older one
    assert "--max-input-tokens (--max-input-length before 2.0.0) with it" in _other("tgi", *warm)[1]
    # TGI 1.x prints its Args with max_input_length (the log's settings alias it to max_input_tokens): that is the
    # release's spelling; 2.x prints both, max_input_length as None
    from servefit.diagnose import diagnose_lines

    err = "RuntimeError: Not enough memory to handle 4096 prefill tokens. You need to decrease `--max-batch-prefill-tokens`"
    v1 = "INFO text_generation_launcher: Args { model_id: \"x\", max_input_length: 1024, max_batch_prefill_tokens: 4096 }"
    v2 = ("INFO text_generation_launcher: Args { model_id: \"x\", max_input_tokens: Some(1024), max_input_length: None, "
          "max_batch_prefill_tokens: 4096 }")
    assert "And lower --max-input-length to at most 2048 with it" in diagnose_lines([v1, err]).fix[1]
    assert "And lower --max-input-tokens to at most 2048 with it" in diagnose_lines([v2, err]).fix[1]
    # a field printed without a value still names the release's spelling
    assert "And lower --max-input-tokens to at most 2048 with it" in diagnose_lines([v2.replace("Some(1024)", "None"), err]).fix[1]
    # the config's release (an image tag) when the log names none
    assert "And lower --max-input-length with it" in _other("tgi", *warm, site_version="1.4.5")[1]
    assert _other("tgi", "batch_misconfiguration", "1.0.0", "decode")[0].startswith(
        "Lower --max-concurrent-requests: a decode step")  # --max-batch-size arrives in 1.4.1
    assert not any("--kv-cache-dtype" in line for line in _other("tgi", "kv_cache_overflow", "2.3.1"))
    graphs = ("cuda_graph_capture", "", "sglang.graph_capture")
    assert _other("sglang", graphs[0], "0.4.0", *graphs[1:])[0] == "Lower --cuda-graph-max-bs (e.g. 16): fewer, " \
        "smaller decode graphs"
    assert _other("sglang", graphs[0], "0.5.23", *graphs[1:])[0].startswith("Lower --cuda-graph-max-bs-decode (e.g.")
    assert _other("sglang", graphs[0], "0.3.0", *graphs[1:])[0].startswith("Lower --mem-fraction-static")


def test_vllm_takes_the_configs_release_when_the_log_names_none() -> None:
    d = Diagnosis(root_cause="cuda_graph_capture", engine="vllm", signature="torch.oom")
    assert vd.fixes(Fixing(d, "vllm", site_version="0.4.0"))[1] == (
        "Capture smaller graphs: --max-context-len-to-capture 2048")


def test_flash_attention_is_written_as_the_build_takes_it() -> None:
    from servefit.diagnose import diagnose_lines
    from servefit.engines.option_data import flag_arity

    # a bare switch in the early builds, on|off|auto later (llamacpp_history.yaml `arity`)
    assert [flag_arity("llamacpp", "--flash-attn", b) for b in ("b3889", "b6301", "b7347", None)] == ["0", "0", "1", "1"]
    lines = ["llama_init_from_model: flash_attn    = 0",
             "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 14136.04 MiB on device 0: cudaMalloc failed: out of "
             "memory", "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 14822711296",
             "graph_reserve: failed to allocate compute buffers"]
    old = diagnose_lines(["build: 4600 (6f3c6a8d) with cc (GCC) 13.2.0 for x86_64-linux-gnu", *lines])
    assert old.figures["engine_version"] == "4600" and old.stage == "compute"
    assert old.fix[0].startswith("Turn on flash attention (-fa): ")
    assert "--cache-type-v q8_0 with -fa (half" in "\n".join(old.fix)
    new = diagnose_lines(["build: 8000 (0123abcd) with cc (GCC) 13.2.0 for x86_64-linux-gnu", *lines])
    assert new.fix[0].startswith("Turn on flash attention (-fa on): ")
    assert diagnose_lines(lines).fix[0].startswith("Turn on flash attention (-fa on): ")  # no build: the newest
