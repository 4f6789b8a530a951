"""Ollama: server environment, tags, the three memory eras, and Modelfile linking."""

from __future__ import annotations

import pytest

from servefit.core import InlineFile, LaunchSite, ModelInputs, Span, Token, Workload
from servefit.engines.ollama import ENGINE
from servefit.engines.ollama.config import resolve_tag
from servefit.engines.ollama_link import link_modelfiles
from servefit.engines.ollama_modelfile import modelfile_of, parse_modelfile
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec

MIB, GIB = 2**20, 2**30


def gpu(mib: int = 24111) -> GpuSpec:
    return GpuSpec(key="rtx-4090", name="NVIDIA GeForce RTX 4090", vendor="nvidia", memory_bytes=mib * MIB,
                   compute_capability=89)


def llama8b() -> ModelSpec:
    return ModelSpec(name="meta-llama/Llama-3.1-8B-Instruct", architecture="LlamaForCausalLM", model_type="llama",
                     num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                     head_dim=128, intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072)


def site(cmd="ollama run llama3.1:8b", env=None, params=None, modelfile=None) -> LaunchSite:
    return LaunchSite(file="compose.yaml", line=1, argv=[Token(w) for w in cmd.split()],
                      env={k: (v if isinstance(v, Token) else Token(v)) for k, v in (env or {}).items()},
                      name="ollama", inputs=ModelInputs(request_options=dict(params or {}), definition=modelfile))


def plan(s: LaunchSite, version=None, g=None, n=1):
    cfg = ENGINE.parse(s, version)
    return cfg, ENGINE.plan(cfg, llama8b(), g or gpu(), n)


def codes(cfg, p=None):
    return {f.code for f in cfg.findings + (p.findings if p else [])}


def test_command_and_tags():
    assert ENGINE.command_length(["ollama", "serve"]) == 2 and ENGINE.command_length(["/bin/ollama", "run", "x"]) == 2
    assert ENGINE.command_length(["ollama", "list"]) == 0
    assert resolve_tag("llama3.1:8b-instruct-q4_K_M")[:2] == ("meta-llama/Llama-3.1-8B-Instruct", "Q4_K_M")
    assert resolve_tag("gpt-oss:20b")[:2] == ("openai/gpt-oss-20b", "OLLAMA_MXFP4")  # Ollama's own conversion
    assert resolve_tag("llama3.1:70b-instruct-q8_0")[:2] == ("meta-llama/Llama-3.1-70B-Instruct", "Q8_0")
    assert resolve_tag("qwen2.5")[0] == "Qwen/Qwen2.5-7B-Instruct"
    assert resolve_tag("registry.ollama.ai/library/gemma3:27b-it-fp16")[:2] == ("google/gemma-3-27b-it", "F16")
    assert resolve_tag("hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q8_0")[1] == "Q8_0"


def test_env_parsing_and_invalid_values():
    cfg = ENGINE.parse(site(env={"OLLAMA_NUM_PARALLEL": "four", "OLLAMA_FLASH_ATTENTION": "yes please",
                                 "OLLAMA_CONTEXT_LENGTH": " '8192' "}), None)
    s = cfg.settings
    assert "OLLAMA_NUM_PARALLEL" not in s and s["flash_attention"] is True and s["OLLAMA_CONTEXT_LENGTH"] == 8192
    assert [f.code for f in cfg.findings].count("OLLM013") == 2


def test_classic_estimator_matches_log():  # ollama/ollama#11292: llama3.1:8b, 8192 tokens, 0.9.x
    cfg, p = plan(site(params={"num_ctx": "8192"}, env={"OLLAMA_NUM_PARALLEL": "1"}), "0.9.5")
    x = p.detail
    assert x.era == "classic" and p.outcome == "started"
    assert round(x.memory_required_gib, 1) == 6.5 and round(x.memory_required_kv_gib, 1) == 1.0
    assert 'memory.graph.full="560.0 MiB" memory.graph.partial="677.5 MiB"' in p.messages[0]
    assert 'memory.weights.nonrepeating="411.0 MiB"' in p.messages[0]
    assert x.runner is not None and x.runner.kv_buffer_mib == 1024.0 and x.runner.compute_buffer_mib == 560.0  # the runner's own lines


def test_auto_parallel_before_0_10_and_kv_type_warning():
    cfg, p = plan(site(params={"num_ctx": "2048"}, env={"OLLAMA_KV_CACHE_TYPE": "q8_0"}), "0.9.0")
    # v0.9.0 server/sched.go defaultParallel = 2 (4 in v0.2.0 - v0.6.6)
    assert p.detail.num_parallel == 2 and p.detail.kv_cache_type == "f16"
    assert plan(site(params={"num_ctx": "2048"}), "0.6.6")[1].detail.num_parallel == 4
    assert plan(site(params={"num_ctx": "2048"}), "0.1.48")[1].detail.num_parallel == 1  # no automatic slots yet
    # the two automatic slots fit (0.9 picks 2 only when they do): concurrency, not a cost (OLLM007)
    assert "OLLM005" in codes(cfg, p) and "OLLM007" not in codes(cfg, p)
    assert p.detail.layers_offloaded == p.detail.layers_model
    cfg, p = plan(site(params={"num_ctx": "2048"}, env={"OLLAMA_KV_CACHE_TYPE": "q8_0",
                                                        "OLLAMA_FLASH_ATTENTION": "1"}), "0.9.0")
    assert p.detail.kv_cache_type == "q8_0" and "OLLM005" not in codes(cfg, p)


@pytest.mark.parametrize(("num_ctx", "parallel", "spills", "warned"), [
    ("131072", "4", True, True),  # 4 x 131072 tokens of KV: layers go to the CPU because of the slots
    ("16384", "4", False, False),  # 4 slots that fit: the concurrency asked for
    ("131072", "1", True, False),  # one slot that spills: OLLM006 says so, the slots are not the cause
])
def test_parallel_slots_are_reported_only_when_they_push_the_model_off_the_gpu(num_ctx, parallel, spills, warned):
    """Ollama gives each slot the full num_ctx (sched.go: NumCtx x numParallel). OLLM007 used to
    fire on any num_parallel > 1, so a config tune wrote (131072 x 4 with headroom) was flagged."""
    cfg, p = plan(site(params={"num_ctx": num_ctx}, env={"OLLAMA_NUM_PARALLEL": parallel}), "0.12.3")
    assert (p.detail.layers_offloaded < p.detail.layers_model) is spills
    assert ("OLLM007" in codes(cfg, p)) is warned
    if warned:
        f = next(f for f in p.findings if f.code == "OLLM007")
        assert f.message.startswith(f"KV cache for {num_ctx} x 4 = {int(num_ctx) * 4} tokens (")
        assert "the model no longer fits on NVIDIA GeForce RTX 4090" in f.message


def test_no_layer_on_the_gpu_runs_on_the_cpu_runner():
    """llm/server.go NewLlamaServer: when no layer fits (not on Metal) Ollama starts the CPU runner, so
    the GPU holds nothing: not the graph the estimate sized for a partial offload, not a CUDA buffer."""
    cfg, p = plan(site(params={"num_ctx": "131072"}, env={"OLLAMA_NUM_PARALLEL": "4"}), "0.12.3", g=gpu(12000))
    assert p.detail.layers_offloaded == 0 and p.detail.memory_graph_partial_gib > 10
    m = p.memory
    assert (m.weights, m.kv_cache, m.activation_peak, m.non_torch) == (0, 0, 0, 0)
    assert m.free_headroom == m.budget
    assert p.detail.runner is None and not any("CUDA" in line for line in p.messages)
    warn = [f for f in p.findings if f.code == "OLLM006"]
    assert warn[0].message == ("no layer fits on NVIDIA GeForce RTX 4090: Ollama runs the whole model on the CPU "
                               "(num_ctx 131072 x 4 slots)")
    cfg, p = plan(site(params={"num_ctx": "131072"}, env={"OLLAMA_NUM_PARALLEL": "1"}), "0.12.3", g=gpu(12000))
    assert 0 < p.detail.layers_offloaded < 33  # some layers fit: the partial graph is on the GPU
    assert abs(p.memory.activation_peak - p.detail.memory_graph_partial_gib * GIB) < MIB


def test_kv_type_with_fa_off_fails_in_llama_server_era():
    cfg, p = plan(site(env={"OLLAMA_KV_CACHE_TYPE": "q8_0", "OLLAMA_FLASH_ATTENTION": "false"}), "0.32.0")
    errs = [f for f in cfg.findings if f.code == "OLLM005"]
    assert errs and errs[0].severity == "error"
    assert p.outcome == "rejected_config"


def test_default_num_ctx_by_era_and_vram():
    assert plan(site(), "0.6.0")[1].detail.num_ctx == 2048
    assert plan(site(), "0.9.0")[1].detail.num_ctx == 4096
    assert plan(site(), "0.32.0", g=gpu(24111))[1].detail.num_ctx == 32768
    assert plan(site(), "0.32.0", g=gpu(16000))[1].detail.num_ctx == 4096
    cfg, p = plan(site(), "0.32.0", g=gpu(81000))
    assert p.detail.num_ctx == 131072  # the 256k tier, capped at the model's context
    assert "OLLM008" in codes(cfg, p)


def test_llama_server_era_partial_offload_is_a_warning():
    cfg, p = plan(site(params={"num_ctx": "131072"}, env={"OLLAMA_NUM_PARALLEL": "4"}), "0.32.0")
    assert p.outcome == "started" and p.detail.era == "llama-server"
    assert "-c 524288 -np 4" in p.detail.llama_server_argv
    assert p.detail.runner is not None and p.detail.runner.n_ctx_per_seq == 131072
    assert 0 < p.detail.layers_offloaded < 33
    warn = [f for f in p.findings if f.code == "OLLM006"]
    assert warn and warn[0].severity == "warning" and f"{p.detail.layers_offloaded}/33" in warn[0].message


def test_forced_num_gpu_can_oom():
    cfg, p = plan(site(params={"num_ctx": "131072", "num_gpu": "99"}, env={"OLLAMA_NUM_PARALLEL": "4"}), "0.9.0")
    assert p.outcome == "oom_at_load" and "OLLM012" in codes(cfg, p)


def test_layout_era_reports_per_device_lines():
    cfg, p = plan(site("ollama run gemma3:4b", params={"num_ctx": "8192"}), "0.12.3")
    assert p.detail.era in ("layout", "classic")
    cfg, p = plan(site(params={"num_ctx": "8192"}), "0.15.0")
    assert p.detail.era == "layout" and any('msg="total memory"' in m for m in p.messages)


def test_modelfile_parameters_through_the_site():
    text = "FROM llama3.1:8b\nPARAMETER num_ctx 131072\nPARAMETER bogus 1\n"
    doc = parse_modelfile(text, "Modelfile")
    cfg = ENGINE.parse(site("ollama serve", modelfile=doc), None)
    assert cfg.settings["num_ctx"] == 131072 and cfg.model_ref == "meta-llama/Llama-3.1-8B-Instruct"
    assert cfg.spans["num_ctx"].line == 2 and "OLLM002" in codes(cfg)


def test_compose_with_modelfile_is_one_server(tmp_path):
    """Done-when: the Modelfile's num_ctx 131072 and the compose file's OLLAMA_NUM_PARALLEL=4
    are estimated as one server."""
    mf_path = tmp_path / "Modelfile"
    mf_path.write_text("FROM llama3.1:8b\nPARAMETER num_ctx 131072\n")
    compose = str(tmp_path / "compose.yaml")
    env_span = Span(compose, 7, 30, 7, 31, 120, 121)
    server = LaunchSite(file=compose, line=5, argv=[Token("ollama"), Token("serve")], engine="ollama",
                        env={"OLLAMA_NUM_PARALLEL": Token("4", env_span)}, name="services/ollama",
                        inputs=ModelInputs(file_refs=["./Modelfile"]))
    from servefit.sources.modelfile import scan

    mf_sites, _ = scan(str(mf_path), mf_path.read_text())
    merged = link_modelfiles([server] + mf_sites)
    assert len(merged) == 1
    cfg = ENGINE.parse(merged[0], "0.32.0")
    assert cfg.settings["num_ctx"] == 131072 and cfg.settings["OLLAMA_NUM_PARALLEL"] == 4
    assert cfg.spans["OLLAMA_NUM_PARALLEL"] == env_span and cfg.spans["num_ctx"].file == str(mf_path)
    p = ENGINE.plan(cfg, llama8b(), gpu(), 1)
    assert p.detail.as_dict()["n_ctx"] == 4 * 131072 and any(f.code == "OLLM006" for f in p.findings)


def test_link_by_create_command_inline_and_same_directory(tmp_path):
    (tmp_path / "models").mkdir()
    mf = tmp_path / "models" / "Modelfile"
    mf.write_text("FROM qwen2.5:7b\nPARAMETER num_ctx 8192\n")
    compose = str(tmp_path / "compose.yaml")
    cmd = LaunchSite(file=compose, line=3, argv=[Token(w) for w in
                                                 "ollama create mine -f /models/Modelfile".split()],
                     engine="ollama", name="s", workload=Workload(path_map={"/models": "./models"}))
    out = link_modelfiles([cmd])
    assert modelfile_of(out[0]).from_ref.text == "qwen2.5:7b"
    inline = LaunchSite(file=compose, line=3, argv=[Token("ollama"), Token("serve")], engine="ollama", name="s",
                        inputs=ModelInputs(inline=[InlineFile("FROM gemma3:4b\nPARAMETER num_ctx 4096\n", line=12,
                                                                      indent=8)]))
    doc = modelfile_of(link_modelfiles([inline])[0])
    assert doc.from_ref.span.line == 12 and doc.from_ref.span.col == 14
    lone = LaunchSite(file=str(tmp_path / "models" / "compose.yaml"), line=1, argv=[Token("ollama"), Token("serve")],
                      engine="ollama", name="s")
    from servefit.sources.modelfile import scan

    out = link_modelfiles([lone] + scan(str(mf), mf.read_text())[0])
    assert len(out) == 1 and modelfile_of(out[0]) is not None


def test_unified_memory_and_max_loaded_models():
    mac = GpuSpec(key="m2", name="Apple M2 Max", vendor="apple", memory_bytes=32 * GIB, unified_memory=True)
    cfg, p = plan(site(params={"num_ctx": "131072"}, env={"OLLAMA_MAX_LOADED_MODELS": "3"}), "0.32.0", g=mac)
    assert "OLLM011" in codes(cfg, p)
    assert "OLLM010" in codes(cfg, p)


def test_a_second_model_fits_beside_as_the_scheduler_decides():
    """server/sched.go::load: before 0.30 a second model must load fully in what this one leaves;
    from 0.30 its prediction may take at most 80% of it. OLLAMA_MAX_LOADED_MODELS unset or 1: one model."""
    from servefit.engines.ollama.report import room_for_another, several_models

    assert room_for_another(10 * GIB, 20 * GIB, "layout") and not room_for_another(10 * GIB + 1, 20 * GIB, "layout")
    assert room_for_another(8 * GIB, 18 * GIB, "llamaserver")
    assert not room_for_another(9 * GIB, 20 * GIB, "llamaserver") and room_for_another(9 * GIB, 20 * GIB, "classic")
    assert [several_models(s) for s in ({}, {"OLLAMA_MAX_LOADED_MODELS": 1}, {"OLLAMA_MAX_LOADED_MODELS": 2},
                                        {"OLLAMA_MAX_LOADED_MODELS": 0})] == [False, False, True, True]
    cfg, p = plan(site(params={"num_ctx": "65536"}, env={"OLLAMA_MAX_LOADED_MODELS": "2",
                                                          "OLLAMA_NUM_PARALLEL": "2"}), "0.12.3")
    f = next(f for f in p.findings if f.code == "OLLM010")
    assert f.message.startswith("OLLAMA_MAX_LOADED_MODELS=2: a second model of this size does not fit beside this "
                                "one (") and "num_ctx 65536 x 2 slots" in f.message


def test_automatic_slots_try_one_gpu_before_all():
    """server/sched.go::pickBestFullFitByLibrary: each slot count on one GPU first, then on all GPUs."""
    cfg, p = plan(site(params={"num_ctx": "49152"}), "0.9.0", n=2)  # 2 slots need both GPUs, 1 fits on one
    assert p.detail.num_parallel == 1 and 'memory.available="[23.3 GiB]"' in p.messages[0]
    cfg, p = plan(site(params={"num_ctx": "49152"}, env={"OLLAMA_SCHED_SPREAD": "1"}), "0.9.0", n=2)
    assert p.detail.num_parallel == 2 and 'memory.available="[23.3 GiB 23.3 GiB]"' in p.messages[0]
    # llm/memory.go::PredictServerFit with num_gpu set: it fits once that many layers are placed
    cfg, p = plan(site(params={"num_ctx": "8192", "num_gpu": "20"}, env={"OLLAMA_NUM_PARALLEL": "1"}), "0.9.0", n=2)
    assert p.detail.layers_offloaded == 20 and 'memory.available="[23.3 GiB]"' in p.messages[0]


def test_as_few_gpus_as_possible_from_0_11_5():
    """v0.11.5 llm/memory.go::pickBestFullFitByLibrary tries 1, 2, ... GPUs; before, one GPU or all."""
    env = {"OLLAMA_NUM_PARALLEL": "1"}
    old = plan(site(params={"num_ctx": "98304"}, env=env), "0.11.4", n=4)[1]
    new = plan(site(params={"num_ctx": "98304"}, env=env), "0.11.5", n=4)[1]
    assert 'memory.available="[23.3 GiB 23.3 GiB 23.3 GiB 23.3 GiB]"' in old.messages[0]
    assert 'memory.available="[23.3 GiB 23.3 GiB]"' in new.messages[0]


def test_num_ctx_past_the_model_is_capped_from_0_9_3():
    env = {"OLLAMA_NUM_PARALLEL": "1"}
    cfg, p = plan(site(params={"num_ctx": "200000"}, env=env), "0.9.2")
    assert p.detail.num_ctx == 200000 and p.detail.runner.kv_buffer_mib == 25000.0  # 200000 x 128 KiB
    f = next(f for f in p.findings if f.code == "OLLM009")
    assert f.message.endswith("> 131072; Ollama before 0.9.3 does not cap it: the model runs past the length it was "
                              "trained for")
    cfg, p = plan(site(params={"num_ctx": "200000"}, env=env), "0.9.3")
    assert p.detail.num_ctx == 131072
    assert next(f for f in p.findings if f.code == "OLLM009").message.endswith("> 131072; Ollama uses 131072")


def test_new_memory_estimates_are_opt_in_until_0_11_11():
    """PR #11090 made the layout path opt-in for Ollama-engine models (envconfig.NewMemoryEstimates,
    OLLAMA_NEW_ESTIMATES, default off); PR #12252 turned it on by default (v0.11.11 release notes)."""
    from servefit.models import resolve_model

    spec = resolve_model("google/gemma-3-4b-it")

    def detail(version, env=None):
        cfg = ENGINE.parse(site("ollama run gemma3:4b", env=env, params={"num_ctx": "4096"}), version)
        return ENGINE.plan(cfg, spec, gpu(), 1).detail

    old, opted, new = detail("0.11.10"), detail("0.11.10", {"OLLAMA_NEW_ESTIMATES": "1"}), detail("0.11.11")
    assert (old.era, opted.era, new.era) == ("classic", "layout", "layout")
    assert old.memory_required_kv_gib is not None and old.kv_cache_gib is None  # the offload line's figures
    assert new.memory_required_kv_gib is None and new.kv_cache_gib is not None  # the per-device lines'
    assert detail("0.11.4", {"OLLAMA_NEW_ESTIMATES": "1"}).era == "classic"  # before the layout path existed
