"""llama.cpp build numbers and the builds where memory behaviour changed (docs A7; builds are
`git rev-list --count` on master, approximate to +-10)."""

from __future__ import annotations

import re

CURRENT = "b10309"  # newest modelled (ggml-org/llama.cpp 82bb48500, 2026-08)

# common/common.h common_params::n_ctx: 0 (the training context) until PR #10136 ("llama : adjust default context
# size", 2024-11-02; b4079 is dated 2024-11-14: approximate, +-30 builds), 4096 from then, 0 again from --fit (FIT: the
# vendored common.h of llama.cpp 17f7f4b still reads 4096, ec98e2002 reads 0)
CTX_4096 = 4000
ISWA = 5435  # SWA layers get their own, window-sized cache (#13194, merged 2025-05-20; b5439 has it)
# the SWA cache holds n_swa + n_ubatch cells, n_batch before (#13833, opened 2025-05-27 on top of #13845; the merge
# build was not read: approximate, +-40 builds)
SWA_UBATCH = 5540
KV_UNIFIED_OPTION = 5913  # -kvu, multi-stream KV (#14363)
KV_CACHE_RENAMED = 6233  # llama_kv_cache_unified -> llama_kv_cache in logs
FA_AUTO = 6325  # -fa on|off|auto, default auto; all GPU layers by default (#15434)
NO_PAD = 6868  # KV padding (256 with FA, 32 without) removed (#16812)
NP_AUTO = 6925  # server -np auto = 4 with unified KV (#16736)
PAD_256 = 6975  # n_ctx and SWA cache padded to 256 (#17046)
ROUTER = 7389  # no -m: router mode, --models-dir / --models-max (#17470, Dec 2025; b7389 has it, issue #18035)
FIT = 7407  # --fit, default on (#16653); common_params::n_ctx back to 0
# PR #19067 ("kv-cache : support V-less cache", 2026-01-24, the day of #19070): MLA models (hparams.is_mla(): DeepSeek
# V2/V3, Kimi K2, GLM-4.7-Flash) cache K only; before, V held kv_lora_rank per cell. Approximate (+-40 builds).
MLA_V_LESS = 7830
# PR #19559 ("memory : fix kv cache size for hybrid models", 2026-02-12; b8006 is dated that day): llama_model::
# create_memory passed cparams.n_ctx (all streams) as the hybrid attention cache's per-stream size, so without
# --kv-unified the attention layers of Qwen3-Next / Granite 4 / Nemotron-H / Jamba held -np times the cells.
HYBRID_KV_SEQ = 8010
# PR #25871 (2026-07-18; b9986 is dated 2026-07-14): MLA / DeepSeek V4 models refuse -ctk != -ctv. Approximate (+-40).
MLA_SAME_TYPES = 10030
# src/llama.cpp llama_params_fit_impl step 2 before PR #18372 ("llama-fit-params: fix Gemma 3 calculation", opened
# 2025-12-25; b7539 is that day's build, issue #18376): the context cut in proportion to the KV; from it the line
# between two dry runs. Approximate (+-15 builds).
FIT_LINE = 7550
# PR #18679 (2026-01-07, "free memory target per device"): -fitt takes one value per device and fit logs
# "cannot meet free memory target" (before: one margin_s, "cannot fulfill margin"). Approximate.
FIT_TARGETS = 7660
# PR #19070 (2026-01-24, "keep explicit --ctx-size 0"): common/arg.cpp -c 0 sets fit_params_min_ctx = UINT32_MAX,
# so fit keeps the full training context. b7771 is dated 2026-01-18 (ik_llama.cpp #1162): approximate.
FIT_FULL_CTX = 7830
OUTPUT_FIRST = 7467  # -ngl offloads the output layer first (#18148)
NGL_AUTO = 7553  # -ngl default auto, `all` keyword (#18266)
# compute-buffer log prefix sched_reserve: logs of b7772 print it (calibration cases nbchat13 / nbchat14), logs
# of b7500 still llama_context:; the build in between that renamed it was not read, so the first one seen
SCHED_RESERVE_LOG = 7772
FIT_IN_COMMON = 8865  # --fit moved from src/llama.cpp llama_params_fit_impl to common/fit.cpp common_params_fit_impl
TRACE_LOGS = 9151  # library INFO logs need -lv 4 (#23021)
OUTPUTS_MAX = 9460  # n_outputs_max: server reserves logits for n_parallel outputs only (#23861)


def build(version: str | None) -> int:
    """`b6800`, `6800`, `server-b6800`, `full-cuda-b4719` -> 6800; unknown -> the newest."""
    if not version:
        return build(CURRENT)
    m = re.search(r"b?(\d{3,6})(?!.*\d)", version)
    if m:
        return int(m.group(1))
    return build(CURRENT)


# The function that logs the KV / compute buffers, read off src/ at the tags b4234 b4435 b4600 b4753
# b4980 b5415 b5590 b6301 (a change between two tags read is placed at the later one):
# KV: llama_kv_cache_init() up to b4753, llama_kv_cache_unified::init ("init:") at b4980,
# the llama_kv_cache_unified constructor from b5415, llama_kv_cache from KV_CACHE_RENAMED;
# compute: llama_new_context_with_model() up to b4435, llama_init_from_model() b4600 - b4753, the
# llama_context constructor from b4980, sched_reserve from SCHED_RESERVE_LOG.
KV_INIT_METHOD = 4980
KV_UNIFIED_CTOR = 5415
CONTEXT_CTOR = 4980


def kv_log_prefix(b: int) -> str:
    if b < KV_INIT_METHOD:
        return "llama_kv_cache_init"
    if b < KV_UNIFIED_CTOR:
        return "init"
    return "llama_kv_cache_unified" if b < KV_CACHE_RENAMED else "llama_kv_cache"


def compute_log_prefix(b: int) -> str:
    if b < 4500:
        return "llama_new_context_with_model"
    if b < CONTEXT_CTOR:
        return "llama_init_from_model"
    return "llama_context" if b < SCHED_RESERVE_LOG else "sched_reserve"
