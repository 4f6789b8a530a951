"""Ollama's memory estimate release by release (ollama/ollama at each tag): GGML.GraphSize
(llm/ggml.go, fs/ggml/ggml.go), llm/memory.go::EstimateGPULayers, kvcache/causal.go::Causal.Init and
the flash-attention default (GGML.FlashAttention + llm/server.go NewLlamaServer)."""

from __future__ import annotations

from servefit.core import LaunchSite, ModelInputs, Token
from servefit.engines.llamacpp import model as M
from servefit.engines.ollama import ENGINE
from servefit.engines.ollama import classic as CL
from servefit.engines.ollama import graphsize as G
from servefit.engines.ollama import versions as V
from servefit.engines.ollama.layout import cache_cells
from servefit.engines.ollama.plan import _fa, _kv_type
from servefit.hardware.spec import GpuSpec
from servefit.models.catalog import lookup

MIB, GIB = 2**20, 2**30


def lm(ref: str, quant: str) -> M.LModel:
    spec = lookup(ref)
    assert spec is not None
    return M.load({"model": None, "gguf_quant": quant}, spec, [])


LLAMA = lm("meta-llama/Llama-3.1-8B-Instruct", "Q4_K_M")
GPTOSS = lm("openai/gpt-oss-20b", "MXFP4_MOE")
GEMMA3 = lm("google/gemma-3-27b-it", "Q4_K_M")
RTX = GpuSpec(key="rtx-4090", name="NVIDIA GeForce RTX 4090", vendor="nvidia", memory_bytes=24111 * MIB,
              compute_capability=89)


def test_llama_full_graph_gains_the_vocab_term_in_0_3_10():
    # v0.3.9 GraphSize: full = 4 x batch x (1 + 4e + ctx(1 + heads)); v0.3.10: max(that, 4 x batch x (e + vocab))
    assert G.graph_size(LLAMA, "llama", 2048, 512, 1, "f16", (0, 3, 9))[2] == 4 * 512 * (1 + 4 * 4096 + 2048 * 33)
    assert G.graph_size(LLAMA, "llama", 2048, 512, 1, "f16", (0, 3, 10))[2] == 4 * 512 * (4096 + 128256)


def test_kv_cache_type_counts_from_0_5_0():
    assert sum(G.graph_size(LLAMA, "llama", 8192, 512, 1, "q8_0", (0, 4, 7))[0]) == GIB  # f16 whatever was asked
    assert sum(G.graph_size(LLAMA, "llama", 8192, 512, 1, "q8_0", (0, 5, 0))[0]) == GIB // 2
    assert sum(G.graph_size(LLAMA, "llama", 8192, 512, 1, "q4_0", (0, 5, 0))[0]) == GIB // 4


def test_gemma3_sliding_layers_from_0_6_3():
    full = sum(G.graph_size(GEMMA3, "gemma3", 8192, 512, 1, "f16", (0, 6, 0))[0])
    swa = sum(G.graph_size(GEMMA3, "gemma3", 8192, 512, 1, "f16", (0, 6, 3))[0])
    per_cell = 2 * 128 * 16 * 2  # (key_length + value_length) x head_count_kv x f16
    # 62 layers; every 6th (10 of them) global at 8192 cells, 52 sliding at 1 x 1024 + 512
    assert full == 62 * 8192 * per_cell and swa == (10 * 8192 + 52 * 1536) * per_cell


def test_gpt_oss_graph_by_release():
    kv0 = 8192 * 128 * 8 * 2 * 24  # the KV total before GraphSize's gpt-oss override
    def gs(v, fa=False):
        return G.graph_size(GPTOSS, "gptoss", 8192, 512, 1, "f16", v, fa)
    assert gs((0, 11, 0))[1:] == (2 * (32 * kv0 // 6), 32 * kv0 // 6)  # partial = 2 x full
    assert gs((0, 11, 3))[1:] == (32 * kv0 // 6, 32 * kv0 // 6)
    assert gs((0, 11, 5))[1:] == (16 * kv0 // 6, 0)  # only partial; EstimateGPULayers copies it to full
    assert gs((0, 11, 8), fa=True)[1] == (4 + 8 + 110) * MIB and gs((0, 11, 8))[1] == 16 * kv0 // 6
    assert gs((0, 11, 7), fa=True)[1] == 16 * kv0 // 6  # no flash-attention estimate before v0.11.8
    # even layers: 1 x 4096 + batch cells, odd layers the context
    assert sum(gs((0, 11, 5))[0]) == 12 * (4096 + 512) * 2048 + 12 * 8192 * 2048


def test_batch_is_the_unmultiplied_context_from_0_11_5():
    free = [24 * GIB]
    old = CL.estimate(LLAMA, "llama", free, 256, 512, 4, "f16", -1, 0, 457 * MIB, v=(0, 11, 4))
    new = CL.estimate(LLAMA, "llama", free, 256, 512, 4, "f16", -1, 0, 457 * MIB, v=(0, 11, 5))
    assert old.kv == 2048 * 131072 and new.kv == 1024 * 131072  # 4 x 256 cells; at least 2048 before v0.11.5
    assert old.graph_full == 4 * 512 * (4096 + 128256) and new.graph_full == 4 * 256 * (4096 + 128256)


def test_layer_order_and_buffer_before_and_in_0_7_0():
    def est(v):
        return CL.estimate(LLAMA, "llama", [5 * GIB], 8192, 512, 1, "f16", -1, 0, 457 * MIB, v=v)
    old, v070, v071 = est((0, 6, 8)), est((0, 7, 0)), est((0, 7, 1))
    assert (old.layers, v070.layers, v071.layers) == (24, 22, 24)  # v0.7.0's buffer is the largest group
    # before v0.7.0 the 8 layers left over count at the last layer's size (weights + 32 MiB of KV), the
    # output layer beside them
    assert old.total - old.vram == 8 * (CL.groups(LLAMA)["blk.31"] + 32 * MIB) + old.weights_output


def test_metal_uses_the_full_graph_for_partial():
    e = CL.estimate(LLAMA, "llama", [3 * GIB], 8192, 512, 1, "f16", -1, 0, 512 * MIB, v=(0, 9, 0), metal=True)
    assert e.graph_partial == e.graph_full == 4 * 512 * (1 + 4 * 4096 + 8192 * 33)


def test_ollama_engine_cache_cells_by_release():
    assert cache_cells((0, 12, 0), "gptoss", 8192, 2, 512, False, 128) == (16384, 8704)  # 2 x 4096 + 512
    assert cache_cells((0, 12, 0), "gemma3", 1024, 1, 512, False, 1024) == (1024, 1536)  # window > ctx: no
    assert cache_cells((0, 12, 4), "gemma3", 1024, 1, 512, False, 1024) == (1024, 1024)  # window >= ctx: full
    assert cache_cells((0, 12, 4), "gemma3", 8192, 2, 512, True, 1024) == (16384, 2816)  # 2 x 1025 + 512 -> 256
    assert cache_cells((0, 12, 0), "gemma3", 8192, 2, 512, True, 1024) == (16384, 2560)  # 2 x 1024 + 512
    assert cache_cells((0, 11, 10), "llama", 300, 2, 512, False, 0) == (608, 608)  # CachePadding 32 without FA
    assert cache_cells((0, 13, 2), "llama", 300, 2, 512, False, 0) == (768, 768)
    assert cache_cells((0, 11, 10), "gemma3", 2048, 1, 4096, True, 1024)[1] == 5120  # batch unclamped
    assert cache_cells((0, 12, 0), "gemma3", 2048, 1, 4096, True, 1024)[1] == 3072


def test_flash_attention_default_follows_the_tag():
    s: dict = {"flash_attention": None, "kv_cache_type": "f16"}
    assert not V.fa_wanted((0, 11, 7), "gptoss") and V.fa_wanted((0, 11, 8), "gptoss")
    assert not V.fa_wanted((0, 12, 3), "qwen3") and V.fa_wanted((0, 12, 4), "qwen3")
    assert not V.fa_wanted((0, 12, 5), "gemma3") and V.fa_wanted((0, 12, 6), "gemma3")
    assert not V.fa_wanted((0, 15, 2), "llama")
    assert _fa(s, LLAMA, RTX, (0, 12, 4), "qwen3") and not _fa(s, LLAMA, RTX, (0, 12, 4), "llama")
    off = {"flash_attention": False, "kv_cache_type": "f16"}
    assert _fa(off, LLAMA, RTX, (0, 12, 0), "gptoss")  # v0.11.8 - v0.12.3: the model's wish wins
    assert not _fa(off, LLAMA, RTX, (0, 12, 4), "gptoss")  # from v0.12.4 the variable decides
    assert not _fa(s, GPTOSS, RTX, (0, 11, 4), "gptoss") and _fa(s, GPTOSS, RTX, (0, 11, 8), "gptoss")
    assert _fa({"flash_attention": True, "kv_cache_type": "f16"}, GPTOSS, RTX, (0, 11, 1), "gptoss")
    # v0.13.4: a llama-runner model left to llama.cpp's "auto" runs FA but keeps an f16 cache
    q8 = {"flash_attention": None, "kv_cache_type": "q8_0"}
    assert _fa(q8, LLAMA, RTX, (0, 13, 4), "llama", auto=True) and _kv_type(q8, LLAMA, RTX, True, auto=True) == "f16"
    assert _kv_type(q8, LLAMA, RTX, True) == "q8_0"


def test_plan_logs_the_release_graph():  # llama3.1:8b, num_ctx 2048, one slot: the graph line by release
    def site() -> LaunchSite:
        return LaunchSite(file="c.yaml", line=1, argv=[Token(w) for w in "ollama run llama3.1:8b".split()],
                          env={"OLLAMA_NUM_PARALLEL": Token("1")}, name="ollama",
                          inputs=ModelInputs(request_options={"num_ctx": "2048"}))
    old = ENGINE.plan(ENGINE.parse(site(), "0.3.9"), lookup("meta-llama/Llama-3.1-8B-Instruct"), RTX, 1)
    new = ENGINE.plan(ENGINE.parse(site(), "0.3.10"), lookup("meta-llama/Llama-3.1-8B-Instruct"), RTX, 1)
    assert 'memory.graph.full="164.0 MiB"' in old.messages[0] and 'memory.graph.full="258.5 MiB"' in new.messages[0]


def test_per_layer_kv_heads_and_recurrent_layers_from_0_11_11():
    jamba = lm("ai21labs/Jamba-v0.1", "Q4_K_M")  # attention (8 KV heads) in 4 of 32 layers, Mamba in the rest
    cell = (128 + 128) * 8 * 2  # one f16 cell of an attention layer
    old = sum(G.graph_size(jamba, "jamba", 4096, 512, 1, "f16", (0, 11, 10))[0])
    new = sum(G.graph_size(jamba, "jamba", 4096, 512, 1, "f16", (0, 11, 11))[0])
    assert old == 32 * 4096 * cell  # every layer at the largest head_count_kv
    # Mamba layers: ((d_conv - 1) x d_inner + d_state x d_inner) f32 values
    assert new == 4 * 4096 * cell + 28 * (3 * 8192 + 16 * 8192) * 4


def test_llama_runner_flash_attention_is_auto_from_0_13_4():
    def site(env: dict[str, str]) -> LaunchSite:
        return LaunchSite(file="c.yaml", line=1, argv=[Token(w) for w in "ollama run llama3.1:8b".split()],
                          env={k: Token(v) for k, v in env.items()}, name="ollama", inputs=ModelInputs())
    spec = lookup("meta-llama/Llama-3.1-8B-Instruct")
    env = {"OLLAMA_KV_CACHE_TYPE": "q8_0", "OLLAMA_NEW_ENGINE": "0"}
    def run(v: str, extra: dict[str, str]):
        d = ENGINE.plan(ENGINE.parse(site({**env, **extra}), v), spec, RTX, 1).detail
        return d.era, d.flash_attention, d.kv_cache_type
    assert run("0.13.3", {}) == ("layout", False, "f16")  # llama is not on GGML.FlashAttention's list
    assert run("0.13.4", {}) == ("layout", True, "f16")  # auto: FA on, but a quantized cache needs it set
    assert run("0.13.4", {"OLLAMA_FLASH_ATTENTION": "1"}) == ("layout", True, "q8_0")


def test_llama_runner_layout_uses_graphsize_figures_from_0_12_11():
    # v0.12.11+ llm/server.go llamaServer.Load synthesises weights / kv / graph from GraphSize
    def run(mib: int, n: int, env: dict[str, str]):
        s = LaunchSite(file="c.yaml", line=1, argv=[Token(w) for w in "ollama run llama3.1:8b".split()],
                       env={k: Token(v) for k, v in env.items()}, name="ollama",
                       inputs=ModelInputs(request_options={"num_ctx": "8000" if env else "8192"}))
        g = GpuSpec(key="x", name="NVIDIA X", vendor="nvidia", memory_bytes=mib * MIB, compute_capability=89)
        return ENGINE.plan(ENGINE.parse(s, "0.13.5"), lookup("meta-llama/Llama-3.1-8B-Instruct"), g, n)
    q8 = run(24111, 1, {"OLLAMA_FLASH_ATTENTION": "1", "OLLAMA_KV_CACHE_TYPE": "q8_0"})
    # q8_0 at kvCacheBytesPerElement's 1 byte, 8000 cells unpadded: 8000 x 32 layers x 2048 = 500 MiB
    assert 'msg="kv cache" device=CUDA0 size="500.0 MiB"' in q8.messages
    part = run(6144, 1, {})  # 27 of 33 layers: the partial graph, and CPU lines for the rest
    assert part.messages[:6] == ['msg="model weights" device=CUDA0 size="3.6 GiB"',
                                 'msg="model weights" device=CPU size="764.1 MiB"',
                                 'msg="kv cache" device=CUDA0 size="832.0 MiB"',
                                 'msg="kv cache" device=CPU size="192.0 MiB"',
                                 'msg="compute graph" device=CUDA0 size="677.5 MiB"',
                                 'msg="total memory" size="6.0 GiB"']
    two = run(6144, 2, {})  # every layer on the two GPUs: each logs the full graph, the total counts both
    assert two.messages.count('msg="compute graph" device=CUDA1 size="560.0 MiB"') == 1
    assert two.detail.layers_offloaded == 33 and 'msg="total memory" size="6.4 GiB"' in two.messages


def test_offload_line_fields_by_release():
    def line(v: str) -> str:
        s = LaunchSite(file="c.yaml", line=1, argv=[Token(w) for w in "ollama run llama3.1:8b".split()],
                       env={"OLLAMA_NUM_PARALLEL": Token("1")}, name="ollama",
                       inputs=ModelInputs(request_options={"num_ctx": "2048"}))
        return ENGINE.plan(ENGINE.parse(s, v), lookup("meta-llama/Llama-3.1-8B-Instruct"), RTX, 1).messages[0]
    blk = sum(b for k, b in CL.groups(LLAMA).items() if k.startswith("blk."))
    out = CL.groups(LLAMA)["output_norm"] + CL.groups(LLAMA)["output"]
    from servefit.engines.ollama.report import human_bytes as hb
    kv = 2048 * 32 * 2048 * 2  # 256 MiB
    # before v0.6.1 memoryWeights added each layer's KV; total = it, repeating = it - output
    assert f'memory.weights.total="{hb(blk + kv)}" memory.weights.repeating="{hb(blk + kv - out)}"' in line("0.5.11")
    assert f'memory.weights.total="{hb(blk)}" memory.weights.repeating="{hb(blk)}"' in line("0.6.1")
    assert f'memory.weights.total="{hb(blk + out)}" memory.weights.repeating="{hb(blk)}"' in line("0.6.3")
    assert line("0.5.11").startswith('msg="offload to cuda" layers.requested=-1')
    assert line("0.5.12").startswith("msg=offload library=cuda layers.requested=-1")
    assert "memory.gpu_overhead" not in line("0.3.9") and 'memory.gpu_overhead="0 B"' in line("0.3.10")


def test_estimate_sizes_at_least_2048_cells_from_0_7_1_to_0_11_4():
    def kv(v):
        return CL.estimate(LLAMA, "llama", [24 * GIB], 512, 512, 2, "f16", -1, 0, 457 * MIB, v=v).kv
    assert kv((0, 7, 0)) == 1024 * 131072  # 2 slots x 512
    assert kv((0, 7, 1)) == kv((0, 11, 4)) == 2048 * 131072  # EstimateGPULayers: opts.NumCtx = max(NumCtx, 2048)
    assert kv((0, 11, 5)) == 1024 * 131072


def test_runner_gets_flash_attention_as_ollama_passes_it():
    from servefit.engines.ollama.runner import runner_buffers
    spec = lookup("meta-llama/Llama-3.1-8B-Instruct")
    def compute(v, fa, auto=False):
        r = runner_buffers({"quant": "Q4_K_M"}, spec, RTX, 1, v, 8192, 1, 512, 33, fa, "f16", fa_auto=auto)[0]
        assert r is not None
        return r.compute_buffer_mib
    # v0.13.0 runs llama.cpp b6800 (auto by default), but NewContextParams passes DISABLED when FA is off
    assert compute((0, 13, 0), False) == 560.0 and compute((0, 13, 0), True) == 266.5
    assert compute((0, 13, 4), True, auto=True) == 266.5  # auto resolves on for a CUDA device


def test_gpt_oss_keeps_an_f16_cache_from_0_11_5_to_0_12_3():
    q8 = {"flash_attention": True, "kv_cache_type": "q8_0"}
    assert _kv_type(q8, GPTOSS, RTX, True, arch="gptoss", v=(0, 11, 4)) == "q8_0"
    assert _kv_type(q8, GPTOSS, RTX, True, arch="gptoss", v=(0, 11, 5)) == "f16"  # SupportsKVCacheType: sinks
    assert _kv_type(q8, GPTOSS, RTX, True, arch="gptoss", v=(0, 12, 4)) == "q8_0"


def test_graph_branches_join_by_release():
    gemma = lm("google/gemma-7b-it", "Q4_0")
    gemma2 = lm("google/gemma-2-9b-it", "Q4_0")
    glm = lm("THUDM/glm-4-9b-chat", "Q4_0")
    e, vocab = 3072, 256000
    # gemma before v0.1.48: partial 4 x batch x (2e + vocab + 1) + e x vocab x 105 / 128, full 4 x batch x (e + vocab)
    assert G.graph_size(gemma, "gemma", 2048, 512, 1, "f16", (0, 1, 47))[1:] == (
        4 * 512 * (2 * e + vocab + 1) + e * vocab * 105 // 128, 4 * 512 * (e + vocab))
    assert G.graph_size(gemma, "gemma", 2048, 512, 1, "f16", (0, 1, 48))[1:] == (1175699456, 530579456)
    assert G.graph_size(gemma2, "gemma2", 2048, 512, 1, "f16", (0, 1, 47))[1:] == (0, 0)  # no branch yet
    assert G.graph_size(glm, "chatglm", 2048, 512, 1, "f16", (0, 2, 1))[1:] == (0, 0)
    assert G.graph_size(glm, "chatglm", 2048, 512, 1, "f16", (0, 2, 2))[1:] == (
        4 * 512 * (4096 + 151552) + 4096 * 151552 * 105 // 128, 4 * 512 * (4096 + 151552))
    # without a branch EstimateGPULayers falls back to gqa x kv / 6 for both graphs
    est = CL.estimate(gemma2, "gemma2", [24 * GIB], 2048, 512, 1, "f16", -1, 0, 457 * MIB, v=(0, 1, 47))
    assert est.graph_partial == est.graph_full == 2 * est.kv // 6


def test_flash_attention_gpu_support_by_release():
    on = {"flash_attention": True, "kv_cache_type": "f16"}
    def card(vendor: str, cc: int) -> GpuSpec:
        return GpuSpec(key="g", name="G", vendor=vendor, memory_bytes=16 * GIB, compute_capability=cc)
    # FlashAttentionSupported tests CUDA's DriverMajor >= 7 (the driver version), not the compute capability
    assert _fa(on, LLAMA, card("nvidia", 61), (0, 9, 0), "llama")
    assert _fa(on, LLAMA, card("nvidia", 72), (0, 12, 3), "llama")
    assert not _fa(on, LLAMA, card("nvidia", 72), (0, 12, 4), "llama")  # Jetson Xavier excluded from v0.12.4
    assert not _fa(on, LLAMA, card("amd", 0), (0, 4, 7), "llama") and _fa(on, LLAMA, card("amd", 0), (0, 5, 0), "llama")


def test_ollama_engine_models_by_release():
    from servefit.engines.ollama.plan import ollama_engine
    assert not ollama_engine("gemma3", (0, 5, 13), False) and ollama_engine("gemma3", (0, 6, 0), False)
    # KV.OllamaEngineRequired listed qwen3 from v0.12.0, not in v0.12.5, again from v0.12.6
    assert [ollama_engine("qwen3", (0, 12, p), False) for p in (0, 4, 5, 6)] == [True, True, False, True]
    assert not ollama_engine("deepseek2", (0, 12, 11), False) and ollama_engine("deepseek2", (0, 13, 0), False)
    s = LaunchSite(file="c.yaml", line=1, argv=[Token(w) for w in "ollama run gemma3:27b".split()],
                   env={"OLLAMA_NUM_PARALLEL": Token("1")}, name="ollama", inputs=ModelInputs())
    p = ENGINE.plan(ENGINE.parse(s, "0.9.0"), lookup("google/gemma-3-27b-it"), RTX, 1)
    # sized by EstimateGPULayers, run by the Ollama engine: no llama.cpp runner lines
    assert p.detail.era == "classic" and p.detail.runner is None and len(p.messages) == 1


def test_total_memory_adds_each_gpus_graph_on_the_ollama_engine():
    s = LaunchSite(file="c.yaml", line=1, argv=[Token(w) for w in "ollama run gemma3:27b".split()], env={},
                   name="ollama", inputs=ModelInputs())
    g = GpuSpec(key="x", name="NVIDIA X", vendor="nvidia", memory_bytes=12 * GIB, compute_capability=89)
    p = ENGINE.plan(ENGINE.parse(s, "0.13.5"), lookup("google/gemma-3-27b-it"), g, 2)
    from servefit.engines.ollama.report import human_bytes as hb
    assert len(p.devices) == 2 and all(d.activation_peak > 0 for d in p.devices)
    total = sum(d.weights + d.kv_cache + d.activation_peak for d in p.devices)
    assert f'msg="total memory" size="{hb(total)}"' in p.messages and hb(total) == "17.3 GiB"
