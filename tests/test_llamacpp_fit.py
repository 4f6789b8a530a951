"""llama.cpp --fit as the engine runs it (src/llama.cpp::llama_params_fit_impl, common/fit.cpp::
common_params_fit_impl): the context is the straight line between two dry runs, the layers come after,
and the figures here are worked by hand from that code and the dry runs' own buffers."""

from __future__ import annotations

import math

from test_llamacpp_engine import codes, gemma3_12b, gpu, run

MIB = 2**20
FREE_12000 = 12000 - 512  # device_free: the card less the CUDA context
TARGET = FREE_12000 - 1024  # --fit-target 1024 MiB by default


def dry_run(cmd: str, **kw) -> float:
    """A device's model + KV + compute at a fixed context with fit off, in MiB (what fit's dry run measures)."""
    _, p = run(cmd + " -fit off -ngl 99", **kw)
    d = p.detail
    return d.model_buffer_mib + d.kv_buffer_mib + d.compute_buffer_mib


def line(ctx_min: int, ctx_max: int, used_min: float, used_max: float, target: float, align: int = 256) -> int:
    """common_params_fit_impl step 2: interpolate, round down to `align`, never below ctx_min."""
    ctx = ctx_min + int((ctx_max - ctx_min) * (target - used_min) // (used_max - used_min))
    return max(ctx - ctx % align, ctx_min)


def test_unset_context_is_the_line_between_the_training_length_and_fit_ctx():
    kw = dict(g=gpu(12000), version="b7772")
    hi = dry_run("llama-server -m x-Q4_K_M.gguf -c 131072", **kw)
    lo = dry_run("llama-server -m x-Q4_K_M.gguf -c 4096", **kw)
    assert (hi, lo) == (4403.49 + 16384 + 416.0, 4403.49 + 512 + 258.5)  # KV: 32 layers x 2 x 1024 x f16
    assert line(4096, 131072, lo, hi, TARGET) == 45824
    cfg, p = run("llama-server -m x-Q4_K_M.gguf", **kw)
    assert p.outcome == "started" and p.detail.n_ctx == 45824
    assert p.detail.kv_buffer_mib == 45824 * 128 / 1024  # 128 KiB per cell
    assert p.detail.n_gpu_layers_offloaded == 33  # one device: the context is final, layers stay
    assert p.messages[:4] == [
        "llama_params_fit_impl: projected to use 21203 MiB of device memory vs. 11488 MiB of free device memory",
        "llama_params_fit_impl: cannot meet free memory target of 1024 MiB, need to reduce device memory by 10739 MiB",
        "llama_params_fit_impl: context size reduced from 131072 to 45824 -> need 10761 MiB less memory in total",
        "llama_params_fit_impl: entire model can be fit by reducing context"]
    assert {"LCPP008", "LCPP010"} <= codes(cfg, p)


def test_the_line_is_not_a_search_where_memory_is_not_linear_in_context():
    """Gemma 3: the sliding-window cache stops growing at its window, so a search for the largest context
    that fits (24576) is not what llama.cpp picks: the line lands above the target, and one GPU keeps it."""
    kw = dict(spec=gemma3_12b, g=gpu(12000), version="b7772")
    hi = dry_run("llama-server -m gemma-3-12b-it-Q4_K_M.gguf -c 131072", **kw)
    lo = dry_run("llama-server -m gemma-3-12b-it-Q4_K_M.gguf -c 4096", **kw)
    assert line(4096, 131072, lo, hi, TARGET) == 26624
    _, p = run("llama-server -m gemma-3-12b-it-Q4_K_M.gguf", **kw)
    assert p.detail.n_ctx == 26624
    assert dry_run("llama-server -m gemma-3-12b-it-Q4_K_M.gguf -c 26624", **kw) > TARGET
    _, at = run("llama-server -m gemma-3-12b-it-Q4_K_M.gguf -c 26624 -fit off", **kw)
    assert p.detail.kv_buffer_mib == at.detail.kv_buffer_mib == 3104.0


def test_when_even_fit_ctx_is_too_much_the_context_stays_there_and_layers_move():
    _, p = run("llama-server -m x-Q4_K_M.gguf", g=gpu(3000), version="b7772")
    assert p.detail.n_ctx == 4096 and p.detail.kv_buffer_mib == 512.0
    assert p.detail.n_gpu_layers_offloaded == 6
    # the whole difference between the two dry runs: 21203.49 - 5173.99 MiB
    assert "llama_params_fit_impl: context size reduced from 131072 to 4096 -> need 16029 MiB less memory " \
           "in total" in p.messages


def test_user_layers_do_not_stop_the_context_but_stop_the_layers():
    _, p = run("llama-server -m x-Q4_K_M.gguf -ngl 99", g=gpu(12000), version="b7772")
    assert p.detail.n_ctx == 45824 and p.outcome == "started"
    assert not any("failed to fit" in m for m in p.messages)  # one device: the line is final
    cfg, p = run("llama-server -m x-Q4_K_M.gguf -c 131072 -ngl 99", g=gpu(12000), version="b7772")
    assert p.outcome == "oom_at_load" and {"LCPP006", "LCPP012"} <= codes(cfg, p)
    assert "llama_params_fit_impl: context size set by user to 131072 -> no change" in p.messages
    assert "llama_params_fit: failed to fit params to free device memory: n_gpu_layers already set by user " \
           "to 99, abort" in p.messages


def test_common_fit_cpp_names_from_b8865():
    _, p = run("llama-server -m x-Q4_K_M.gguf", g=gpu(12000), version="b9000")
    assert p.detail.n_ctx == 45824
    assert p.messages[2].startswith("common_params_fit_impl: context size reduced from 131072 to 45824")
    _, p = run("llama-server -m x-Q4_K_M.gguf", g=gpu(80000), version="b8854")
    assert p.messages[1] == "llama_params_fit_impl: will leave 58284 >= 1024 MiB of free device memory, " \
                            "no changes needed"


def test_streams_count_since_pr_27496():
    """-np 2 without a unified cache and no -c: from PR #27496 fit asks for the training length per slot
    (n_ctx_max = 131072 x 2) and rounds to 256 x 2; before, the slots shared 131072."""
    cmd = "llama-server -m x-Q4_K_M.gguf -np 2 -no-kvu"
    _, new = run(cmd, g=gpu(80000), version="b10600")
    _, old = run(cmd, g=gpu(80000), version="b10309")
    _, off = run(cmd + " -fit off", g=gpu(80000), version="b10600")
    assert (new.detail.n_ctx, new.detail.n_ctx_per_seq, new.detail.kv_buffer_mib) == (262144, 131072, 32768.0)
    assert (old.detail.n_ctx, old.detail.n_ctx_per_seq, old.detail.kv_buffer_mib) == (131072, 65536, 16384.0)
    assert (off.detail.n_ctx, off.detail.n_ctx_per_seq) == (131072, 65536)
    kw = dict(g=gpu(16000), version="b10600")
    hi = dry_run(cmd + " -c 262144", **kw)
    lo = dry_run(cmd + " -c 8192", **kw)  # --fit-ctx 4096 per stream
    assert line(8192, 262144, lo, hi, 16000 - 512 - 1024, align=512) == 78848
    _, p = run(cmd, **kw)
    assert (p.detail.n_ctx, p.detail.n_ctx_per_seq, p.detail.kv_buffer_mib) == (78848, 39424, 9856.0)


def test_two_gpus_keep_a_layer_and_a_half_spare_and_fill_the_last_gpu_first():
    """Several devices: the line aims (nd + 1) x model-per-layer / 2 lower, then the layers are filled from
    the last GPU backwards."""
    kw = dict(g=gpu(12000), n=2, version="b7772")
    _, hi = run("llama-server -m x-Q4_K_M.gguf -c 131072 -fit off -ngl 99", **kw)
    _, lo = run("llama-server -m x-Q4_K_M.gguf -c 4096 -fit off -ngl 99", **kw)

    def used(p):
        return sum(sum(d.values()) for d in p.detail.devices_mib.values())

    model = sum(d["model"] for d in hi.detail.devices_mib.values())
    target = 2 * TARGET - 3 * (model / 32) / 2
    assert line(4096, 131072, used(lo), used(hi), target) == 113152
    _, p = run("llama-server -m x-Q4_K_M.gguf", **kw)
    assert p.detail.n_ctx == 113152 and p.detail.n_gpu_layers_offloaded == 33
    assert p.detail.fit["changed_layers"]
    dev = p.detail.devices_mib
    assert sum(dev["CUDA0"].values()) <= TARGET
    # the last GPU took the most layers that kept its target: 18 (17 blocks + output), not 19 ...
    for n, fits in ((18, True), (19, False)):
        _, alone = run(f"llama-server -m x-Q4_K_M.gguf -c 113152 -fit off -ngl {n} -ts 0,1", **kw)
        assert (sum(alone.detail.devices_mib["CUDA1"].values()) <= TARGET) is fits
    assert dev["CUDA1"]["kv"] == 7514.0  # 17 blocks x 113152 cells x 4 KiB
    # ... measured before CUDA0 had layers: with every layer offloaded the pipeline copies come on top,
    # and llama.cpp does not measure that GPU again
    assert sum(dev["CUDA1"].values()) > TARGET


def _projector(path) -> str:
    """A GGUF header of one 512 MiB f16 tensor (the weights a projector file declares)."""
    import struct

    kvs = {"general.architecture": (8, struct.pack("<Q", 4) + b"clip")}
    out = b"GGUF" + struct.pack("<IQQ", 3, 1, len(kvs))
    for k, (t, payload) in kvs.items():
        out += struct.pack("<Q", len(k)) + k.encode() + struct.pack("<I", t) + payload
    name = b"v.blk.0.attn_q.weight"
    out += struct.pack("<Q", len(name)) + name + struct.pack("<I", 2) + struct.pack("<2Q", 1024, 262144)
    out += struct.pack("<IQ", 1, 0)
    path.write_bytes(out)
    return str(path)


def test_the_projector_is_loaded_outside_the_fit(tmp_path):
    """fit's dry runs load the text model only: the context is the one without a projector, which then
    takes its 512 MiB of the margin (LCPP013 says to raise --fit-target)."""
    mm = _projector(tmp_path / "mmproj-f16.gguf")
    cfg, p = run(f"llama-server -m x-Q4_K_M.gguf --mmproj {mm}", g=gpu(12000), version="b7772")
    assert p.detail.n_ctx == 45824 and "LCPP013" in codes(cfg, p)
    assert round(p.memory.weights / MIB, 2) == 4915.49  # 4403.49 + 512
    assert p.memory.free_headroom < 1024 * MIB  # the projector came out of the margin


def test_llama_server_adds_the_projector_to_the_target_from_pr_21489(tmp_path):
    """From ~b8690 load_model adds the projector's memory to --fit-target: the line aims 512 MiB lower."""
    mm = _projector(tmp_path / "mmproj-f16.gguf")
    lo = 4403.49 + 512 + 258.5
    hi = 4403.49 + 16384 + 416.0
    assert line(4096, 131072, lo, hi, TARGET - 512) == 41728
    cfg, p = run(f"llama-server -m x-Q4_K_M.gguf --mmproj {mm}", g=gpu(12000), version="b9000")
    assert p.detail.n_ctx == 41728 and p.detail.kv_buffer_mib == 41728 * 128 / 1024
    assert "LCPP013" not in codes(cfg, p)
    assert p.messages[:3] == [
        "srv    load_model: [mtmd] estimated memory usage of mmproj is 512.00 MiB",
        "common_params_fit_impl: projected to use 21203 MiB of device memory vs. 11488 MiB of free device memory",
        "common_params_fit_impl: cannot meet free memory target of 1536 MiB, need to reduce device memory by "
        "11251 MiB"]
    # the line is straight but the compute is not: at 41728 cells the logits (250.5 MiB) outgrow the freed 122 MiB
    # mask hole and stack on it (compute.py), so the start lands 32 MiB short of the 1024 MiB kept free
    assert p.memory.free_headroom // MIB == 991


def test_a_draft_model_is_reserved_from_b9305():
    cmd = "llama-server -m x-Q4_K_M.gguf -md Llama-3.2-1B-Instruct-Q4_K_M.gguf"
    cfg, before = run(cmd, g=gpu(12000), version="b9297")
    assert before.detail.n_ctx == 45824 and {"LCPP013", "LCPP006"} <= codes(cfg, before)
    cfg, after = run(cmd, g=gpu(12000), version="b9305")
    # the draft is measured at its training length (131072) before the fit: the target rises by GiBs
    assert after.detail.n_ctx == 4096 and after.outcome == "started"
    assert "LCPP013" not in codes(cfg, after)


def test_the_compute_buffer_fit_measures_has_no_masks_under_the_logits_with_sliding_windows():
    """What fit's dry run counts as compute: gpt-oss-20b logs 398.38 MiB = logits 4 x 201088 x 512 +
    final norm 4 x 2880 x 512 at any context (b7772 calibration logs); a dense model's logits still sit
    on its masks (Llama-3-8B at 8192: logits 250.5 + norm 8 + 24 MiB of masks - 16)."""
    from test_llamacpp_engine import gpt_oss_20b

    for ctx in (4096, 65536):
        _, p = run(f"llama-server -m gpt-oss-20b-F16.gguf -c {ctx} -np 1 -fa on", spec=gpt_oss_20b,
                   g=gpu(80000), version="b7772")
        assert p.detail.compute_buffer_mib == round((4 * 201088 * 512 + 4 * 2880 * 512) / MIB, 2) == 398.38
    _, p = run("llama-server -m x-Q4_K_M.gguf -c 8192 -np 1 -fa on", g=gpu(80000), version="b7772")
    assert p.detail.compute_buffer_mib == 250.5 + 8 + (24 - 16)


def test_moe_on_one_gpu_keeps_the_first_blocks_whole_and_tries_the_next_ones_up_experts():
    """gpt-oss-20b, -c 32768, 9000 MiB card (target 7464 MiB): the dense weights fit, so blocks turn
    whole front to back while they fit: 12 (the experts of blocks 12-23 on the CPU: 7272.66 MiB; of
    13-23: 7676.08 MiB, over). Block 12 then keeps its up experts (LAYER_FRACTION_UP, under the target)
    but not its gate experts too."""
    from test_llamacpp_engine import gpt_oss_20b

    kw = dict(spec=gpt_oss_20b, g=gpu(9000), version="b7772")
    exps = r"\.ffn_(up|down|gate_up|gate)_(ch|)exps=CPU"
    whole = {}
    for first in (12, 13):
        ot = r"blk\.(" + "|".join(str(il) for il in range(first, 24)) + ")" + exps
        whole[first] = dry_run(f"llama-server -m gpt-oss-20b-mxfp4.gguf -c 32768 -ot {ot}", **kw)
        _, q = run(f"llama-server -m gpt-oss-20b-mxfp4.gguf -c 32768 -ot {ot} -fit off -ngl 99", **kw)
        whole[first, "model"] = q.detail.model_buffer_mib
    target = 9000 - 512 - 1024
    assert whole[12] <= target < whole[13]
    cfg, p = run("llama-server -m gpt-oss-20b-mxfp4.gguf -c 32768", **kw)
    assert p.detail.fit["n_cpu_moe"] == 12 and p.detail.n_gpu_layers_offloaded == 25
    assert "the experts of 12 layers run on the CPU" in " ".join(f.message for f in p.findings)
    up = p.detail.model_buffer_mib - whole[12, "model"]  # block 12's up experts: 32 x 2880 x 2880 MXFP4
    assert 134 < up < 135 and whole[12] + up < target
    assert p.detail.kv_buffer_mib == 792.0  # every layer's KV stays on the GPU


def test_moe_whose_dense_weights_do_not_fit_gets_the_most_dense_only_layers():
    """gpt-oss-20b on a 3000 MiB card (target 1464 MiB): even with every expert on the CPU the dense
    weights, KV and compute are over, so step 3 stands: the most layers offloaded from the back with the
    first of them whole -- the output layer alone fits, the output + block 23 whole does not."""
    from test_llamacpp_engine import gpt_oss_20b

    kw = dict(spec=gpt_oss_20b, g=gpu(3000), version="b7772")
    target = 3000 - 512 - 1024
    assert dry_run("llama-server -m gpt-oss-20b-mxfp4.gguf -c 32768 -cmoe", **kw) > target
    _, one = run("llama-server -m gpt-oss-20b-mxfp4.gguf -c 32768 -fit off -ngl 1", **kw)
    _, two = run("llama-server -m gpt-oss-20b-mxfp4.gguf -c 32768 -fit off -ngl 2", **kw)

    def used(p):
        return p.detail.model_buffer_mib + p.detail.kv_buffer_gpu_mib + p.detail.compute_buffer_mib

    assert used(one) <= target < used(two)
    _, p = run("llama-server -m gpt-oss-20b-mxfp4.gguf -c 32768", **kw)
    assert p.detail.n_gpu_layers_offloaded == 1 and p.detail.model_buffer_mib == one.detail.model_buffer_mib


def test_before_pr_18372_the_context_is_cut_in_proportion_to_the_kv():
    """src/llama.cpp llama_params_fit_impl before PR #18372: no dry run at --fit-ctx; bytes per cell = the KV
    buffers / n_ctx_train (128 KiB here), the cut = ceil(deficit / that), the result padded up to 256 by
    llama_context; a cut that covers the deficit ends fit with "across devices" even on one GPU."""
    kw = dict(g=gpu(12000), version="b7500")
    hi = dry_run("llama-server -m x-Q4_K_M.gguf -c 131072", **kw)
    cut = math.ceil((hi - FREE_12000 + 1024) * 1024 / 128)
    assert cut == 85916
    _, p = run("llama-server -m x-Q4_K_M.gguf", **kw)
    assert p.messages[1:4] == [
        "llama_params_fit_impl: cannot fulfill margin of 1024 MiB, need to reduce device memory by 10739 MiB",
        f"llama_params_fit_impl: context size reduced from 131072 to {131072 - cut} -> need 10739 MiB less "
        "memory in total",
        "llama_params_fit_impl: entire model can be fit across devices by reducing context"]
    assert (p.detail.n_ctx, p.detail.kv_buffer_mib) == (45312, 45312 * 128 / 1024)  # 45156 padded to 256
    # b7600: the line already, the one margin still (per-device targets and their wording: PR #18679)
    _, p = run("llama-server -m x-Q4_K_M.gguf", g=gpu(12000), version="b7600")
    assert p.messages[1].startswith("llama_params_fit_impl: cannot fulfill margin of 1024 MiB")
    assert "context size reduced from 131072 to 45824" in p.messages[2]


def test_the_proportional_cut_left_gemma3_short_of_the_target():
    """Issue #18270, the reason for PR #18372: Gemma 3's window caches do not shrink with the context, so the
    proportional cut (40661, padded 40704) leaves 28 MiB of the 1024 MiB --fit-target free."""
    _, old = run("llama-server -m gemma-3-12b-it-Q4_K_M.gguf", spec=gemma3_12b, g=gpu(12000), version="b7500")
    _, new = run("llama-server -m gemma-3-12b-it-Q4_K_M.gguf", spec=gemma3_12b, g=gpu(12000), version="b7772")
    assert "context size reduced from 131072 to 40661" in old.messages[2]
    assert (old.detail.n_ctx, new.detail.n_ctx) == (40704, 26624)
    # the line misses the target by 116 MiB (test above); the proportional cut by almost all of it
    assert (old.memory.free_headroom // MIB, new.memory.free_headroom // MIB) == (28, 908)


def test_an_explicit_c_0_keeps_the_training_context_from_pr_19070():
    """common/arg.cpp: -c 0 sets fit_params_min_ctx = UINT32_MAX, so fit keeps 131072 and moves layers instead;
    before PR #19070 -c 0 was the same as no -c."""
    _, new = run("llama-server -m x-Q4_K_M.gguf -c 0", g=gpu(12000), version="b7900")
    _, old = run("llama-server -m x-Q4_K_M.gguf -c 0", g=gpu(12000), version="b7800")
    assert "llama_params_fit_impl: user has requested full context size of 131072 -> no change" in new.messages
    assert (new.detail.n_ctx, new.detail.n_gpu_layers_offloaded) == (131072, 16)
    assert (old.detail.n_ctx, old.detail.n_gpu_layers_offloaded) == (45824, 33)


def test_before_b7553_an_unset_or_999_ngl_is_fits_to_change():
    """Before -ngl auto, common left llama_model_default_params' 999 when -ngl was unset and fit compared with
    that default: unset and -ngl 999 let fit move layers, -ngl 99 stops it."""
    kw = dict(g=gpu(3000), version="b7500")
    layers = {cmd: run("llama-server -m x-Q4_K_M.gguf" + cmd, **kw)[1] for cmd in ("", " -ngl 999", " -ngl 99")}
    assert [p.detail.n_gpu_layers_offloaded for p in layers.values()] == [6, 6, 33]
    assert "llama_params_fit: failed to fit params to free device memory: n_gpu_layers already set by user " \
           "to 99, abort" in layers[" -ngl 99"].messages


def test_the_abort_quotes_the_ngl_as_given():
    """common/arg.cpp stores -ngl 999 as 999 and `all` as -2; fit's abort quotes that number (a public b7772
    log: "n_gpu_layers already set by user to 999, abort", ghghang2/v1.5 llama_server.log)."""
    said = {}
    for ngl in ("999", "all"):
        _, p = run(f"llama-server -m x-Q4_K_M.gguf -c 65536 -ngl {ngl}", g=gpu(12000), version="b7772")
        said[ngl] = [m.split("to ")[-1] for m in p.messages if "already set by user" in m]
    assert said == {"999": ["999, abort"], "all": ["-2, abort"]}
