"""llama.cpp b9849 (HilbertraumAI's Vulkan logs, issue 16): the FFN phase of the compute buffer at a 2048-token
ubatch (engines/llamacpp/compute.py ffn_working_set / graph_inputs), Gemma 4's graph inputs, and MTP speculative
decoding (engines/llamacpp/mtp.py): the recurrent state's rollback rows, the MTP block and its draft context."""

from __future__ import annotations

import shlex

from servefit.engines.llamacpp import mtp as MT
from servefit.engines.llamacpp.model import LModel
from servefit.pipeline import Target, evaluate, site_from_argv

MIB = 2**20
VK = "--ctx-size 8192 --threads 10 --batch-size 2048 --ubatch-size 2048 --jinja"


def _plan(cmd: str, gpu: str = "RTX 3090", version: str = "b9849", memory: int | None = None):
    return evaluate(site_from_argv(shlex.split(cmd)), Target(gpu=gpu, engine_version=version,
                                                             gpu_memory=memory)).plan


def test_dense_ffn_phase_is_up_gate_and_their_product_with_the_mask():
    # Qwen3.5-9B at ub 2048, 8192 cells, -np 1: 3 x 12288 x 2048 f32 (288) + 3 x 4096 x 2048 f32 (96) + the f16
    # mask 8192 x 2048 (32) = 416.00 (logged 416.16)
    d = _plan(f"llama-server --model Qwen3.5-9B-UD-Q4_K_XL.gguf {VK} -np 1", "RTX 3080 Ti").detail
    assert d.compute_buffer_mib == (4 * 2048 * (3 * 12288 + 3 * 4096) + 2 * 8192 * 2048) / MIB == 416.0


def test_gemma4_e2b_holds_both_masks_and_the_per_layer_inputs():
    # FFN: the double-wide 12288 of the KV-shared layers (288) + 3 x 1536 (36); masks f32 + f16 over 8192 + 4096
    # cells (144); per-layer inputs 256 x 35 x 2048 f32 (70): 538.00 (logged 560.07)
    p = _plan(f"llama-server --model gemma4-e2b-it-qat-q4.gguf {VK}", "RTX 3060 Laptop", memory=5994 * MIB)
    want = 4 * 2048 * (3 * 12288 + 3 * 1536) + 6 * 2048 * (8192 + 4096) + 4 * 2048 * 256 * 35
    assert p.detail.compute_buffer_mib == want / MIB == 538.0
    assert p.detail.model_buffer_mib == 1341.79  # Q4_0 (a -qat-q4 file), logged 1341.76


def test_gemma4_26b_moe_phase_is_the_experts_down_projection():
    # 8 experts x 704 activation + their 8 x 2816 down output + 3 x 2816 + 2 x 128 router rows (288), masks f32 + f16
    # over 8192 + 3072 cells (132): 420.00 (logged 428.07)
    d = _plan(f"llama-server --model gemma4-26b-a4b-it-qat-q4.gguf {VK} -np 1").detail
    want = 4 * 2048 * (8 * 704 + 8 * 2816 + 3 * 2816 + 2 * 128) + 6 * 2048 * (8192 + 3072)
    assert d.compute_buffer_mib == want / MIB == 420.0


def _lm(arch: str) -> LModel:
    return LModel(arch=arch, name="x", n_layer=4, n_embd=64, n_vocab=100, n_ctx_train=4096, n_head=[4] * 4,
                  n_head_kv=[0, 0, 0, 2], head_k=16, head_v=16, head_k_swa=16, head_v_swa=16, swa=[False] * 4,
                  n_swa=0, recurrent=[True, True, True, False])


def test_rollback_rows_follow_need_n_rs_seq():
    q = _lm("qwen35")
    assert MT.n_rs_seq({"spec_type": "draft-mtp", "draft_max": 2}, q) == 2
    assert MT.n_rs_seq({"spec_type": "draft-mtp"}, q) == 3  # common_params_speculative_draft::n_max
    assert MT.n_rs_seq({"spec_type": "ngram-mod", "draft_max": 2}, q) == 0  # n-gram drafts keep no snapshots
    assert MT.n_rs_seq({"spec_type": "draft-eagle3,ngram-mod", "draft_max": 5}, q) == 5
    assert MT.n_rs_seq({"spec_type": "draft-mtp", "draft_max": 2}, _lm("lfm2")) == 0  # no rs rollback there


def test_mtp_plan_matches_the_b9849_log():
    p = _plan("llama-server --model qwen3.8-27b-ud-q5km.gguf --ctx-size 8192 --threads 10 --batch-size 2048 "
              "--ubatch-size 2048 --jinja --spec-type draft-mtp --spec-draft-n-max 2 -np 1")
    d = p.detail
    # 48 gated-delta-net layers x (3 x 10240 conv rows + 48 x 128 x 128 state) f32 x (1 + 2 rs_seq): 448.88 MiB
    assert d.rs_buffer_mib == 448.88
    assert d.n_gpu_layers_offloaded == 66 and d.n_layers_total == 66  # 64 + the MTP block + output
    assert d.kv_buffer_mib == 512.0  # the target's 16 attention layers: the MTP block's KV is the draft's
    assert d.compute_buffer_mib == 560.0  # logged 568.18
    # the draft context: one layer of 4 KV heads x 256 at f16 for 8192 cells (32.00) and its compute buffer
    # 3 x 17408 x 2048 + 2 x 5120 x 2048 f32 + the f16 mask (520.00; logged 520.06), reserved in --fit-target:
    # 1024 + 552 MiB
    assert any(m.endswith(">= 1576 MiB of free device memory, no changes needed") for m in p.messages)
    assert round((p.memory.kv_cache - 512 * MIB) / MIB, 2) == round(448.88 + 32.0, 2)


def test_no_mtp_block_without_draft_mtp():
    d = _plan("llama-server --model qwen3.8-27b-ud-q5km.gguf --ctx-size 8192 --batch-size 2048 --ubatch-size 2048 "
              "-np 1").detail
    assert d.n_gpu_layers_offloaded == 65 and d.rs_buffer_mib == 149.62
