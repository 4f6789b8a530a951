"""vLLM on unified memory (DGX Spark's GB10) and the release a build behaves as, each from the wheels'
code: vllm/utils/mem_utils.py::MemorySnapshot.measure (MemAvailable as free from 0.12),
engine/arg_utils.py::get_batch_defaults (NVML's memory query, the 160 GiB tier from 0.28, is_gb10 in
0.33), v1/worker/gpu_worker.py (0.20's CUDA-graph profiling default, found in a 0.19.2rc1.dev134 log)."""

from __future__ import annotations

import json

import pytest

from servefit.cli import main
from servefit.engines.vllm import ENGINE
from servefit.engines.vllm.defaults import batch_defaults, nvml_reports_memory
from servefit.engines.vllm.era import era, main_build, vtuple
from servefit.hardware import local
from servefit.hardware.catalog import lookup
from servefit.hardware.spec import GpuSpec
from servefit.pipeline import site_from_argv
from tests.test_local_gpu import nvml  # noqa: F401  (the fixture)
from tests.test_vllm_engine import LLAMA8B

GiB, MiB = 2**30, 2**20
GB10 = lookup("GB10")
B200 = lookup("B200")
# a discrete card of the GB10's size, to show what the NVML failure changes
BIG = GpuSpec(key="x", name="NVIDIA RTX PRO 7000", vendor="nvidia", memory_bytes=GB10.memory_bytes,
              compute_capability=120, fp8=True)


def plan(argv: str, gpu: GpuSpec, version: str | None, env: dict[str, str] | None = None):
    cfg = ENGINE.parse(site_from_argv(argv.split(), env), version)
    return cfg, ENGINE.plan(cfg, LLAMA8B, gpu, 1)


@pytest.mark.parametrize("version,planned", [
    ("0.19.2rc1.dev134+gfe9c3d6c5", (0, 20, 0)),  # 0.19.1 was the last 0.19 release
    ("0.26.1rc1.dev608+g99a10304d", (0, 27, 0)),  # 0.26.0 the last 0.26
    ("0.10.1.dev101+gbda9d0535", None),  # on the way to 0.10.1, which was released
    ("0.6.4.post2.dev", None),  # 0.6.4 was released
    ("0.19.1rc1.dev5", None),  # a candidate of the released 0.19.1
    ("0.33.1rc1.dev3", None),  # past the newest release read: nothing to lead to
    ("0.19.1", None), ("0.20.0", None),
])
def test_main_builds_behave_as_the_release_they_led_to(version, planned):
    assert main_build(version) == planned
    assert vtuple(version) == (planned or vtuple(version.split("rc")[0].split(".dev")[0].split(".post")[0]))


def test_a_main_build_before_020_subtracts_the_graph_estimate_as_020_does():
    dev, rel = "0.19.2rc1.dev134+gfe9c3d6c5", "0.19.1"
    assert era(dev).cudagraph_subtracted and not era(rel).cudagraph_subtracted
    argv = "vllm serve m --max-model-len 8192 --gpu-memory-utilization 0.5"
    _, p = plan(argv, GB10, dev)
    m = p.memory
    assert m.cuda_graphs > 0
    assert p.detail.available_kv_cache_bytes == m.budget - m.weights - m.activation_peak - m.non_torch - m.cuda_graphs
    assert m.budget == -(-GB10.memory_bytes * 5 // 10)  # 0.20's ceil
    assert p.assumptions[0] == ("vLLM 0.19.2rc1.dev134+gfe9c3d6c5 is a build of the main branch after the last 0.19 "
                                "release (0.19.2 was never released): planned as 0.20.0, the release it led to")
    _, q = plan(argv, GB10, rel)
    n = q.memory
    assert q.detail.available_kv_cache_bytes == n.budget - n.weights - n.activation_peak - n.non_torch
    assert not any("main branch" in a for a in q.assumptions)


@pytest.mark.parametrize("version", ["0.11.0", "0.19.1", "0.25.1", "0.32.0", "0.33.0"])
def test_gb10_is_on_the_small_batch_tier_in_every_release(version):
    """Up to 0.32 NVML's memory query raises on GB10 and get_batch_defaults falls back to 0 bytes; 0.33
    reads CUDA's total and keeps cc 12.1 small. A discrete card of the same size gets 8192 / 1024."""
    assert not nvml_reports_memory(GB10) and nvml_reports_memory(BIG) and nvml_reports_memory(lookup("H100"))
    _, p = plan("vllm serve m --max-model-len 8192", GB10, version)
    assert (p.detail.max_num_batched_tokens, p.detail.max_num_seqs) == (2048, 256)
    _, q = plan("vllm serve m --max-model-len 8192", BIG, version)
    assert (q.detail.max_num_batched_tokens, q.detail.max_num_seqs) == (8192, 1024)


@pytest.mark.parametrize("version,defaults", [("0.27.1", (8192, 1024)), ("0.28.0", (16384, 1024)),
                                              ("0.33.0", (16384, 1024))])
def test_the_160_gib_tier_arrives_in_028(version, defaults):
    assert batch_defaults(era(version), B200.name, B200.memory_bytes) == defaults
    _, p = plan("vllm serve m --max-model-len 8192", B200, version)
    assert (p.detail.max_num_batched_tokens, p.detail.max_num_seqs) == defaults


def test_unified_memory_start_check_and_what_it_assumes():
    """vLLM refuses to start when free < ceil(total x util) on unified memory too; free there is MemAvailable
    (0.12+), which servefit cannot know: the plan says how much the rest may hold."""
    cfg, p = plan("vllm serve m --max-model-len 8192 --gpu-memory-utilization 0.999", GB10, "0.25.1")
    assert p.outcome == "rejected_config" and "VLLM020" in [f.code for f in p.findings]
    assert p.messages[0] == ("Free memory on device (121.39/121.69 GiB) on startup is less than desired GPU memory "
                             "utilization (0.999, 121.57 GiB)")
    v1 = {"VLLM_USE_V2_MODEL_RUNNER": "0"}  # 0.25.1 runs Llama with Model Runner V2, which budgets no graphs
    _, p = plan("vllm serve m --max-model-len 8192 --gpu-memory-utilization 0.95", GB10, "0.25.1", v1)
    assert p.outcome == "started"
    [avail, graphs, took] = [a for a in p.assumptions if a.startswith("unified memory")]
    assert avail == ("unified memory: vLLM reads the memory the OS reports available (MemAvailable): it refuses to "
                     "start unless 115.61 GiB of the 121.69 GiB are available, so the OS, other programs and vLLM's "
                     "own processes may hold at most 6.08 GiB at start; host memory those take while vLLM loads and "
                     "profiles is charged to the KV cache too, and is not predicted")
    assert graphs.startswith("unified memory: the CUDA-graph estimate vLLM subtracts is read from CUDA's free memory")
    # the capture log's figure is MemFree's drop in every release (capture_model's torch.cuda.mem_get_info)
    assert took == ("unified memory: the capture log's 'took X GiB' is the drop in CUDA's free memory (the kernel's "
                    "MemFree), not the graphs' size: page cache the kernel reclaims for them hides them (near the "
                    "utilization ceiling the log can read about 0), host memory and files written meanwhile add in; "
                    "the plan gives what the graphs hold")
    # Model Runner V2 before 0.29 subtracts no graph estimate (graphs.graph_estimate): no note on it
    _, v2 = plan("vllm serve m --max-model-len 8192 --gpu-memory-utilization 0.95", GB10, "0.25.1")
    assert [a for a in v2.assumptions if a.startswith("unified memory")] == [avail, took]
    _, old = plan("vllm serve m --max-model-len 8192 --gpu-memory-utilization 0.9", GB10, "0.11.0")
    [note, old_took] = [a for a in old.assumptions if a.startswith("unified memory")]  # no graph estimate before 0.20
    assert old_took == took
    assert note.startswith("unified memory: vLLM 0.11.0 reads free memory from CUDA, which on this device counts the "
                           "page cache as used: it refuses to start unless 109.52 GiB of the 121.69 GiB are free")
    _, first = plan("vllm serve m --max-model-len 8192", GB10, "0.11.1")  # the first release that reads MemAvailable
    assert [a[:77] for a in first.assumptions if a.startswith("unified memory")] == [
        "unified memory: vLLM reads the memory the OS reports available (MemAvailable)", took[:77]]
    _, eager = plan("vllm serve m --max-model-len 8192 --enforce-eager", GB10, "0.25.1")
    assert len([a for a in eager.assumptions if a.startswith("unified memory")]) == 1  # no graphs, no capture log
    _, h100 = plan("vllm serve m --max-model-len 8192", lookup("H100"), "0.25.1")
    assert not [a for a in h100.assumptions if a.startswith("unified memory")]


SPARK = {"name": "NVIDIA GB10", "uuid": "GPU-2dee", "total": 0, "free": 0, "cc": [12, 1], "no_memory": True}


def test_gpu_local_on_a_gb10_reads_the_os_memory_as_vllm_does(nvml, capsys, tmp_path, monkeypatch):  # noqa: F811
    """NVML answers "Not Supported" for a GB10's memory: MemTotal is CUDA's total and MemAvailable what vLLM
    (0.12+) takes as free; 10 GiB not available (and the CUDA context) leave 111.39 GiB: 0.9's 109.52 GiB
    start, 0.95's 115.61 GiB do not."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       127601664 kB\nMemFree:        90000000 kB\n"
                       "MemAvailable:   117115904 kB\nCached:          20000000 kB\n", encoding="ascii")
    monkeypatch.setattr(local, "MEMINFO", str(meminfo))
    nvml(devices=[SPARK])
    rc = main(["estimate", "--gpu", "local", "--format", "json", "--", "vllm", "serve",
               "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192", "--gpu-memory-utilization", "0.9"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["gpu"]["memory_bytes"] == 127601664 * 1024 == GB10.memory_bytes
    assert out["gpu"]["source"] == ("--gpu local: NVML device 0 (GPU-2dee), the system's memory (NVML reports none for "
                                    "this unified-memory GPU): 121.69 GiB total, 10.00 GiB not available "
                                    "(MemTotal - MemAvailable)")
    spec, _ = local.target()
    assert spec.unified_memory and spec.in_use_bytes == 10 * GiB
    script = tmp_path / "serve.sh"
    script.write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 "
                      "--gpu-memory-utilization 0.95\n", encoding="utf-8")
    assert main(["lint", str(script), "--gpu", "local", "--format", "json"]) == 1
    [err] = [f for f in json.loads(capsys.readouterr().out) if f["code"] == "VLLM020"]
    assert err["message"].startswith("Free memory on device (111.39/121.69 GiB) on startup is less than desired")
    meminfo.write_text("MemTotal:       127601664 kB\n", encoding="ascii")
    local.devices.cache_clear()
    rc = main(["estimate", "--gpu", "local", "--", "vllm", "serve", "m"])
    assert rc == 2 and capsys.readouterr().err == (
        f"servefit: error: --gpu local: NVML reports no memory for this GPU and {meminfo} gives no MemTotal / "
        "MemAvailable; pass --gpu NAME instead\n")


def test_up_to_011_the_checkpoint_in_the_page_cache_counts_against_the_kv_cache():
    """0.11.0 reads CUDA's free memory (MemFree on GB10): the files read while loading stay in the page
    cache and count as non-torch growth; from 0.11.1 MemAvailable leaves them out (mem_utils.py::
    MemorySnapshot.measure, shared_sysmem_device_mem_sms). --load-format dummy reads no file."""
    argv = "vllm serve m --max-model-len 8192 --gpu-memory-utilization 0.9"
    _, old = plan(argv, GB10, "0.11.0")
    _, new = plan(argv, GB10, "0.11.1")
    _, v12 = plan(argv, GB10, "0.12.0")
    assert v12.memory.non_torch == new.memory.non_torch
    _, dummy = plan(argv + " --load-format dummy", GB10, "0.11.0")
    _, h100 = plan(argv, lookup("H100"), "0.11.0")
    assert old.memory.non_torch == dummy.memory.non_torch + old.memory.weights == h100.memory.non_torch + old.memory.weights
    assert new.memory.non_torch == dummy.memory.non_torch
    m = old.memory
    assert old.detail.available_kv_cache_bytes == m.budget - m.weights - m.activation_peak - m.non_torch
    [note, _took] = [a for a in old.assumptions if a.startswith("unified memory")]  # and the capture log's reading
    assert note.endswith("planned with an empty page cache at start (as after `sync; echo 3 > /proc/sys/vm/drop_caches`"
                         "), so the checkpoint files read while loading count against the KV cache as non-torch "
                         "memory, taken as the weights' size")


def test_the_page_cache_is_not_an_out_of_memory():
    """A 33B-class model in bf16 (62 GiB) loads on a GB10; on 0.11 its files in the page cache leave no KV
    budget, and vLLM says so: the cache is reclaimable, so it is not an out-of-memory at load."""
    from servefit.models.spec import ModelSpec

    m = ModelSpec(name="x/y-33b", architecture="LlamaForCausalLM", model_type="llama", num_hidden_layers=56,
                  hidden_size=7168, num_attention_heads=56, num_key_value_heads=8, head_dim=128,
                  intermediate_size=20480, vocab_size=128256, max_position_embeddings=32768)
    cfg = ENGINE.parse(site_from_argv("vllm serve x/y-33b --max-model-len 8192".split()), "0.11.0")
    p = ENGINE.plan(cfg, m, GB10, 1)
    assert 60 * GiB < p.memory.weights < 65 * GiB
    assert p.outcome == "no_kv_memory" and p.detail.available_kv_cache_bytes < 0
    cfg = ENGINE.parse(site_from_argv("vllm serve x/y-33b --max-model-len 8192".split()), "0.12.0")
    assert ENGINE.plan(cfg, m, GB10, 1).outcome == "started"


@pytest.mark.parametrize("name", ["ASUS Ascent GX10", "Dell Pro Max GB10", "Lenovo ThinkStation PGX", "MSI EdgeXpert",
                                  "HP ZGX Nano", "Gigabyte AI TOP ATOM", "Acer Veriton GN100"])
def test_oem_gb10_systems_are_the_gb10_by_a_stated_assumption(name):
    from servefit.hardware.catalog import catalog_assumption

    gpu = lookup(name)
    assert gpu is not None and gpu.key == "dgx-spark" and gpu.memory_bytes == 124611 * MiB
    assert catalog_assumption(gpu, name) == ("a GB10 system other than the DGX Spark taken to report the DGX Spark's "
                                             "121.69 GiB (the same 128 GB; its own total was not seen in a log)")
    assert catalog_assumption(gpu, "DGX Spark") is None


def test_the_graph_estimate_variable_exists_from_018():
    # envs.py: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is absent in 0.17.0, default "0" in 0.18.0, "1" from
    # 0.20.0; setting it on 0.17 changes nothing, setting it on 0.18 turns the subtraction on, 0 turns it off
    on, off = {"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "1"}, {"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0"}
    assert [era(v).cudagraph_subtracted for v in ("0.17.0", "0.18.0", "0.19.1", "0.20.0")] == [False, False, False, True]
    assert [era(v, on).cudagraph_subtracted for v in ("0.17.1", "0.18.0", "0.19.1")] == [False, True, True]
    assert not era("0.24.0", off).cudagraph_subtracted
