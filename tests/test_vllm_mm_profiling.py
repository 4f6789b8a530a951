"""vLLM options that reshape the multimodal profiling run (engines/vllm/mm_profiling.py): --skip-mm-profiling
and --mm-encoder-tp-mode data, release by release."""

from __future__ import annotations

from servefit.engines.vllm import encoder, mm_profiling, vision_tower
from servefit.models import resolve_model
from servefit.models.vision import count_vision_params
from servefit.pipeline import Target, evaluate, site_from_argv


def _plan(version: str, *flags: str, model: str = "Qwen/Qwen2.5-VL-7B-Instruct"):
    site = site_from_argv(["vllm", "serve", model, "--max-model-len", "8192", *flags], {})
    return evaluate(site, Target(gpu="H100", engine_version=version)).plan


def test_skip_mm_profiling_leaves_the_language_model_forward_alone():
    # v1/worker/gpu_model_runner.py::profile_run (0.10.1.1 on): no encoder dummy batch, no cached outputs,
    # the same activation as with every modality off; 0.10.0 has no such switch
    off = _plan("0.11.0", "--limit-mm-per-prompt", '{"image": 0, "video": 0}').memory.activation_peak
    assert _plan("0.11.0", "--skip-mm-profiling").memory.activation_peak == off == 6_072_827_904
    assert _plan("0.11.0").memory.activation_peak == 6_498_549_760
    assert _plan("0.10.0", "--skip-mm-profiling").memory.activation_peak == 6_498_549_760
    assert not mm_profiling.skipped({"skip_mm_profiling": True}, (0, 11, 0), v1=False)  # V0 profiles as before


def test_encoder_data_parallel_per_release_and_family():
    q25, q2 = resolve_model("Qwen/Qwen2.5-VL-7B-Instruct"), resolve_model("Qwen/Qwen2-VL-7B-Instruct")
    data = {"mm_encoder_tp_mode": "data"}
    dp = mm_profiling.encoder_data_parallel
    # supports_encoder_tp_data: Qwen2.5-VL from 0.10.2, Qwen2-VL from 0.11; one rank or "weights": sharded
    assert (dp(q25, data, (0, 10, 1), 2), dp(q25, data, (0, 10, 2), 2), dp(q2, data, (0, 10, 2), 2),
            dp(q2, data, (0, 11, 0), 2)) == (False, True, False, True)
    assert not dp(q25, data, (0, 11, 0), 1) and not dp(q25, {"mm_encoder_tp_mode": "weights"}, (0, 11, 0), 2)
    assert dp(q25, {"enable_multimodal_encoder_data_parallel": True}, (0, 11, 0), 2)
    assert not dp(resolve_model("google/gemma-3-27b-it"), data, (0, 11, 0), 2)  # falls back to weights
    # the replicated tower: each rank loads all of it, half more than when it is split over two ranks
    tower = count_vision_params(q25.vision, q25.hidden_size, q25.model_type) * 2
    for version, more in (("0.10.2", tower // 2), ("0.11.0", tower // 2), ("0.10.1", 0)):
        grow = _plan(version, "-tp", "2", "--mm-encoder-tp-mode", "data").memory.weights - \
            _plan(version, "-tp", "2").memory.weights
        assert grow == more == (676_550_144 if more else 0), version


def test_encoder_data_parallel_peak_runs_the_rank_share_on_the_whole_tower():
    m = resolve_model("Qwen/Qwen2.5-VL-7B-Instruct")
    args = dict(v1=True, max_model_len=32768, max_num_seqs=256, max_num_batched_tokens=8192, chunked_prefill=True,
                db=2, tp=2, version=(0, 11, 0))
    kw = {"mm_processor_kwargs": '{"max_pixels": 200704}', "limit_mm_per_prompt": '{"video": 0}'}
    split = encoder.profile(m, kw, **args)
    whole = encoder.profile(m, kw, **args, encoder_dp=True)
    assert split is not None and whole is not None and (whole.items, whole.tokens_per_item) == (32, 256)
    patches = 32 * 256 * 4
    # 16 of the 32 images on the busiest rank, through an unsharded MLP, plus the whole batch's float32 pixels
    assert whole.peak == vision_tower.vit_peak_bytes(m, patches // 2, 2, 1, version=(0, 11, 0)) + 4 * 1176 * patches
    assert split.peak == vision_tower.vit_peak_bytes(m, patches, 2, 2, version=(0, 11, 0)) and whole.peak < split.peak
    assert (whole.outputs, whole.inputs) == (split.outputs, split.inputs)


def test_dummy_image_size_override_from_012():
    # --limit-mm-per-prompt '{"image": {"count": 1, "width": 512, "height": 512}}' (ImageDummyOptions, 0.12 on):
    # the encoder runs a 504 x 504 image (smart_resize to 28s: 18 x 18 merged tokens = 324, 1296 patches) while
    # the budget still counts the largest image's 16384 tokens; 0.12 pads the cached output to those 16384
    # rows (gpu_model_runner.py::profile_run), 0.13 keeps the 324; 0.11 has no such option
    m = resolve_model("Qwen/Qwen2.5-VL-7B-Instruct")
    kw = {"limit_mm_per_prompt": '{"image": {"count": 1, "width": 512, "height": 512}, "video": 0}'}
    assert mm_profiling.dummy_image_size(kw, (0, 12, 0)) == (512, 512)
    assert mm_profiling.dummy_image_size(kw, (0, 11, 0)) is None
    assert mm_profiling.dummy_image_size({"limit_mm_per_prompt": '{"image": 2}'}, (0, 12, 0)) is None
    assert mm_profiling.qwen_image_tokens(512, 512, 28, 12845056) == 18 * 18

    def prof(version):
        p = encoder.profile(m, kw, v1=True, max_model_len=32768, max_num_seqs=256, max_num_batched_tokens=8192,
                            chunked_prefill=True, db=2, version=version)
        assert p is not None and (p.items, p.tokens_per_item, p.modality) == (1, 16384, "image")
        return p

    full, small, later = prof((0, 11, 0)), prof((0, 12, 0)), prof((0, 13, 0))
    assert full.peak == vision_tower.vit_peak_bytes(m, 65536, 2, version=(0, 11, 0)) and full.inputs == 4 * 1176 * 65536
    assert small.peak == vision_tower.vit_peak_bytes(m, 1296, 2, version=(0, 12, 0)) and \
        later.peak == vision_tower.vit_peak_bytes(m, 1296, 2, version=(0, 13, 0)) and small.inputs == 4 * 1176 * 1296
    assert (small.outputs, later.outputs) == (16384 * 3584 * 2, 324 * 3584 * 2)


def test_qwen2_vl_attention_half_with_rotary_copies_0092_to_010():
    # qwen2_vl.py::Qwen2VisionAttention.forward, 0.9.2 - 0.10.2: block input + norm1 output (2 x 1280), qkv (3 x 1280),
    # contiguous q, k, v (3 x 1280), and while q (then k) is rotated a float32 copy (2 x 1280 in bf16 units), the
    # float32 output of flash-attn's apply_rotary_emb (2 x 1280) and the bf16 cast (1280): 13 x 1280 x 2 bytes; the
    # rotary table rot_pos_emb (head_dim 80 / 2 float32) with its cos and sin: 3 x 40 x 4; the float32 pixels
    # 3 x 2 x 14 x 14 x 4. The MLP half is (3 x 1280 + 2 x 4 x 1280) x 2 = 28160 bytes, below the 33280.
    m = resolve_model("Qwen/Qwen2-VL-2B-Instruct")
    patches = 65536
    assert vision_tower.vit_peak_bytes(m, patches, 2, version=(0, 10, 2)) == patches * (4704 + 33280 + 480) \
        == 2_520_776_704
    # 0.12 rotates views in bf16 (no copies): the MLP half; 0.9.1 casts in the model and keeps the bf16 pixels
    assert vision_tower.vit_peak_bytes(m, patches, 2, version=(0, 12, 0)) == patches * (4704 + 28160)
    assert vision_tower.vit_peak_bytes(m, patches, 2, version=(0, 9, 1)) == patches * (4704 + 2352 + 28160)
    # TP 2 (Qwen2.5-VL 7B, 0.10.2): split_qkv all-gathers the qkv (3 x 1280) and keeps it while the per-rank
    # contiguous q, k, v (3 x 640) are made: (2 x 1280 + 3 x 640 + 3 x 1280 + 3 x 640) x 2 + the rotary table 160
    # = 20640, above the rotation's (2 x 1280 + 11 x 640) x 2 + 480 = 19680 and the MLP half
    # (3 x 1280 + 3 x 3420 // 2) x 2 + 160 = 18100
    q25 = resolve_model("Qwen/Qwen2.5-VL-7B-Instruct")
    assert vision_tower.vit_peak_bytes(q25, 1000, 2, 2, version=(0, 10, 2)) == 1000 * (4704 + 20640)
    assert vision_tower.vit_peak_bytes(q25, 1000, 2, 2, version=(0, 11, 0)) == 1000 * (4704 + (3840 + 5130) * 2)


def test_qwen2_vl_eager_profile_on_a_wsl_rtx4080_0102():
    # the imageworks calibration log (0.10.2, eager, 16384-token dummy video = 65536 patches): "Actual usage is 4.15 GiB
    # for weight, 2.36 GiB for peak activation" on a 15.99 GiB card; the encoder's peak is the activation
    site = site_from_argv(["vllm", "serve", "Qwen/Qwen2-VL-2B-Instruct", "--max-model-len", "4096", "--enforce-eager",
                           "--gpu-memory-utilization", "0.8"], {})
    plan = evaluate(site, Target(gpu="RTX 4080", engine_version="0.10.2", gpu_memory=int(15.99 * 2**30))).plan
    assert plan.memory.activation_peak == 2_520_776_704  # 2.348 GiB
