"""Qwen2.5-VL: vision-tower parameter counts and the encoder's share of vLLM's profiling run,
against values computed by hand."""

from __future__ import annotations

import json

from servefit.cli import main
from servefit.engines.vllm import encoder, vision_tower
from servefit.models import count_params, resolve_model
from servefit.models.architecture import count_text_params
from servefit.models.config_json import from_config
from servefit.models.vision import count_vision_params

QWEN25_VL_7B_VISION = {
    "model_type": "qwen2_5_vl", "depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
    "in_chans": 3, "patch_size": 14, "temporal_patch_size": 2, "spatial_merge_size": 2, "window_size": 112,
    "fullatt_block_indexes": [7, 15, 23, 31], "out_hidden_size": 3584,
}
QWEN25_7B_TEXT = {
    "num_hidden_layers": 28, "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
    "intermediate_size": 18944, "vocab_size": 152064, "max_position_embeddings": 128000,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def test_qwen25_vl_7b_vision_count_by_hand():
    e, inter, m = 1280, 3420, 1280 * 4
    patch_embed = 3 * 2 * 14 * 14 * e
    block = 2 * e + (e * 3 * e + 3 * e) + (e * e + e) + 2 * (e * inter + inter) + (inter * e + e)
    merger = e + (m * m + m) + (m * 3584 + 3584)
    assert patch_embed + 32 * block + merger == 676_550_144
    assert count_vision_params(QWEN25_VL_7B_VISION, 3584, "qwen2_5_vl") == 676_550_144


def test_qwen2_vl_7b_vision_count():
    # Qwen2-VL-7B: 8,291,375,616 in all, text (Qwen2-7B) 7,615,616,512
    v = {"model_type": "qwen2_vl", "depth": 32, "embed_dim": 1280, "hidden_size": 3584, "mlp_ratio": 4,
         "num_heads": 16, "in_chans": 3, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
    assert count_vision_params(v, 3584, "qwen2_vl") == 8_291_375_616 - 7_615_616_512


CONFIG_7B = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
             **QWEN25_7B_TEXT, "vision_config": QWEN25_VL_7B_VISION}


def test_catalogued_with_the_config_facts():
    # data/models/vision_pending_added.yaml: the same model a config.json gives (the V0 encoder
    # profiling estimate is a known miss, listed in tests/test_accuracy_runner.py KNOWN_OFF)
    cat = resolve_model("Qwen/Qwen2.5-VL-7B-Instruct")
    local = from_config(json.loads(json.dumps(CONFIG_7B)), "local/qwen25vl")
    assert (cat.resolved_from, cat.params, cat.vision_params) == ("catalog", 8_292_166_656, 676_550_144)
    assert count_params(cat) == count_params(local) == 8_292_166_656
    assert (cat.num_hidden_layers, cat.num_key_value_heads, cat.head_dim) == (28, 4, 128)


def test_3b_with_tied_embeddings():
    # 3B: one 151936 x 2048 matrix; vision intermediate 3420, out_hidden 2048
    h, inter, vocab = 2048, 11008, 151936
    cfg = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
           "num_hidden_layers": 36, "hidden_size": h, "num_attention_heads": 16, "num_key_value_heads": 2,
           "intermediate_size": inter, "vocab_size": vocab, "max_position_embeddings": 128000,
           "tie_word_embeddings": True, "torch_dtype": "bfloat16",
           "vision_config": {**QWEN25_VL_7B_VISION, "out_hidden_size": h}}
    small = from_config(cfg, "local/qwen25vl-3b")
    layer = (h * h + h) + 2 * (h * 256 + 256) + h * h + 3 * h * inter + 2 * h
    text = vocab * h + 36 * layer + h
    e, m = 1280, 5120
    vision = (3 * 2 * 14 * 14 * e + 32 * (2 * e + 3 * e * e + 3 * e + e * e + e + 2 * (e * 3420 + 3420) + 3420 * e + e)
              + e + m * m + m + m * h + h)
    assert small.tie_word_embeddings and count_text_params(small) == text
    assert count_params(small) == text + vision == 3_754_622_976


def test_from_config_both_layouts():
    old = CONFIG_7B
    new = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
           "text_config": {"model_type": "qwen2_5_vl_text", **QWEN25_7B_TEXT},
           "vision_config": QWEN25_VL_7B_VISION}
    for cfg in (old, new):
        m = from_config(json.loads(json.dumps(cfg)), "local/qwen25vl")
        assert m.params == 8_292_166_656 and m.vision_params == 676_550_144 and m.vision


def _profile(**kw):
    m = from_config(json.loads(json.dumps(CONFIG_7B)), "local/qwen25vl")
    args = dict(v1=True, max_model_len=8192, max_num_seqs=256, max_num_batched_tokens=2048,
                chunked_prefill=True, db=2)
    args.update(kw.pop("args", {}))
    return encoder.profile(m, kw, **args)


def test_encoder_term_by_hand():
    # V1, max_model_len 8192: 12845056 px / 28^2 = 16384 tokens per item; a video of one frame
    # has as many (tie -> video); budget max(2048, 16384) // 16384 = 1 item = 65536 patches
    p = _profile()
    assert p is not None and (p.items, p.tokens_per_item, p.modality) == (1, 16384, "video")
    # from 0.9.2 the tower casts the float32 pixels into a local that patch_embed's output replaces: the
    # float32 batch alone stays through the blocks (0.33 here); before it the model's .type() copy stays too
    per_patch = 3 * 2 * 14 * 14 * 4 + (3 * 1280 + 3 * 3420) * 2  # pixels fp32, hidden, MLP
    assert p.peak == 65536 * per_patch == 2_156_396_544
    old = _profile(args={"version": (0, 9, 1)})
    assert old is not None and old.peak == 65536 * (per_patch + 3 * 2 * 14 * 14 * 2) == 2_310_537_216
    assert p.outputs == 16384 * 3584 * 2
    # max_pixels 200704 (256 tokens), max_model_len 32768, 8192 batched tokens: video of 14 frames
    # (7 x 256 tokens); items min(8192 // 1792, 256 x 1 x min(999, 32768 // 1792)) = 4
    p = _profile(mm_processor_kwargs='{"max_pixels": 200704}',
                 args={"max_model_len": 32768, "max_num_batched_tokens": 8192})
    assert p is not None and (p.items, p.tokens_per_item) == (4, 1792)
    assert _profile(language_model_only=True) is None
    assert _profile(limit_mm_per_prompt={"image": 0, "video": 0}) is None
    p = _profile(limit_mm_per_prompt={"image": 1, "video": 0})
    assert p is not None and p.modality == "image"


def test_v0_dummy_sequences_are_not_cut():
    # V0 0.8.x: one image + one video of 16384 tokens each; 8192 // 32768 = 0 -> one sequence
    p = _profile(args={"v1": False, "max_num_batched_tokens": 8192, "chunked_prefill": False, "version": (0, 8, 4)})
    assert p is not None and p.seqs == 1 and p.lm_tokens == 32768


def test_v0_pixel_values_stay_on_the_gpu():
    # V0 (model_runner.py::execute_model moves every item's pixel values to the GPU; qwen2_5_vl.py's
    # forward keeps image_input / video_input through the LM forward): 65536 patches of 3 x 2 x 14 x 14
    # float32 pixels per item, one image and one video, twice: the runner's batched [1, 65536, 1176]
    # tensor and the copy _validate_and_reshape_mm_tensor concatenates from it (0.7.3 / 0.8.4 wheels)
    p = _profile(args={"v1": False, "max_num_batched_tokens": 8192, "chunked_prefill": False, "version": (0, 8, 4)})
    pixels = 65536 * 1176 * 4
    assert p is not None and p.inputs == 4 * pixels == 1_233_125_376
    # the video pass keeps the image's pixels and its 16384 output rows beside its own peak, both passes the
    # text embeddings of the 32768 dummy tokens (qwen2_5_vl.py::get_input_embeddings_v0) and the forward's
    # concatenated copies of both items' pixels
    per_patch = 1176 * (4 + 2) + (3 * 1280 + 3 * 3420) * 2
    assert p.peak == 32768 * 3584 * 2 + 65536 * per_patch + pixels + 2 * pixels + 16384 * 3584 * 2
    # the activation peak of the profile: the LM forward over the 32768 uncut tokens plus the held
    # pixel values (profile.py::activation_peak), the larger of that and the encoder's peak
    from servefit.engines.vllm import profile
    from servefit.engines.vllm.plan import Resolved

    m = from_config(json.loads(json.dumps(CONFIG_7B)), "local/qwen25vl")
    r = Resolved(dtype="bfloat16", tp=1, pp=1, util=0.9, max_model_len=8192, derived_len=8192, max_num_seqs=256,
                 max_num_batched_tokens=8192, chunked_prefill=False, block_size=16, kv_dtype="bfloat16", scheme=None,
                 enforce_eager=False, version=(0, 8, 4))
    fwd = profile.forward_bytes(m, r, 32768, profile.EAGER_HIDDEN)  # V0 runs the model eagerly
    assert fwd == 32768 * (3 * 3584 + 3 * 18944) * 2
    assert profile.activation_peak(m, r, True, v1=False, settings={}) == max(fwd + 4 * pixels, p.peak)
    assert fwd + 4 * pixels > p.peak


def test_cli_estimate_qwen25_vl(capsys, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG_7B))
    rc = main(["estimate", "--gpu", "L4", "--format", "json", "--model-config", str(tmp_path / "config.json"),
               "--", "vllm", "serve", "Qwen/Qwen2.5-VL-7B-Instruct", "--max-model-len", "8192"])
    assert rc in (0, 1)
    plan = json.loads(capsys.readouterr().out)
    # the encoder's peak: 65536 patches of float32 pixels (cast inside the tower from 0.9.2), hidden and MLP
    assert plan["memory"]["activation_peak"] == 65536 * (1176 * 4 + (3 * 1280 + 3 * 3420) * 2) == 2_156_396_544
    assert any("vision encoder profiling estimated" in a for a in plan["assumptions"])


# --- GLM-4.1V / GLM-4.5V (models/vision.py _glm4v_params) ---------------------------------------------

GLM41V_VISION = {"model_type": "glm4v", "depth": 24, "hidden_size": 1536, "intermediate_size": 13696, "num_heads": 12,
                 "in_channels": 3, "image_size": 336, "patch_size": 14, "temporal_patch_size": 2,
                 "spatial_merge_size": 2, "out_hidden_size": 4096}


def test_glm41v_vision_count_by_hand():
    e, out, inter = 1536, 4096, 13696
    block = 2 * e + 3 * e * e + e * e + 3 * e * out  # norms, bias-free qkv / proj, SwiGLU of out_hidden_size
    by_hand = ((336 // 14) ** 2 * e + 3 * 2 * 14 * 14 * e + e + 24 * block + 2 * e + e * out * 4 + out
               + out * out + 2 * out + 3 * out * inter)
    assert count_vision_params(GLM41V_VISION, 4096, "glm4v") == by_hand == 892_498_432
    # the catalog entry: GLM-4-9B-0414's text model + this tower = the Hub total (llmfit) exactly
    m = resolve_model("zai-org/GLM-4.1V-9B-Thinking")
    assert (m.vision_params, count_params(m), m.params) == (892_498_432, 10_292_777_472, 10_292_777_472)


def test_glm4v_from_a_config_json_counts_as_the_catalog():
    cfg = {"architectures": ["Glm4vForConditionalGeneration"], "model_type": "glm4v",
           "text_config": {"model_type": "glm4v_text", "vocab_size": 151552, "hidden_size": 4096,
                           "intermediate_size": 13696, "num_hidden_layers": 40, "num_attention_heads": 32,
                           "num_key_value_heads": 2, "max_position_embeddings": 65536},
           "vision_config": GLM41V_VISION}
    m = from_config(cfg, "local/glm-4.1v")
    assert (m.vision_params, count_params(m)) == (892_498_432, 10_292_777_472)


# --- InternVL (models/vision.py _internvl_params) -------------------------------------------------------

INTERNVIT_300M = {"model_type": "internvl_vision", "hidden_size": 1024, "num_hidden_layers": 24,
                  "num_attention_heads": 16, "intermediate_size": 4096, "image_size": 448, "patch_size": 14,
                  "num_channels": 3, "attention_bias": True, "norm_type": "layer_norm", "use_mean_pooling": True,
                  "downsample_ratio": 0.5}


def test_internvit_300m_and_projector_count_by_hand():
    h, inter, text = 1024, 4096, 3584
    layer = 3 * h * h + 3 * h + h * h + h + 2 * 2 * h + (h * inter + inter) + (inter * h + h) + 2 * h
    embeddings = h + 3 * 14 * 14 * h + h + (32 * 32 + 1) * h  # class token, patch conv, positions
    projector = 2 * 4 * h + (4 * h * text + text) + (text * text + text)  # LayerNorm, linear_1, linear_2
    assert count_vision_params(INTERNVIT_300M, text, "qwen2") == embeddings + 24 * layer + projector == 331_552_768
    # InternVL3-8B: Qwen2.5-7B's layout with vocab 151674 + this tower = its Hub total (llmfit) exactly
    m = resolve_model("OpenGVLab/InternVL3-8B-hf")
    assert (m.name, m.vision_params, count_params(m)) == ("OpenGVLab/InternVL3-8B", 331_552_768, 7_944_373_760)


def test_internvit_is_sharded_under_tensor_parallelism():
    assert vision_tower.sharded(resolve_model("OpenGVLab/InternVL3-78B"))  # vLLM intern_vit.py: parallel linears
    assert not vision_tower.sharded(resolve_model("google/gemma-3-27b-it"))  # SigLIP: replicated on every rank


def test_v0_fixed_tower_pixel_values_held():
    # LLaVA-1.5 on V0: 4096 // 576 = 7 dummy sequences of one 336 x 336 image; each image's 576 patches
    # of 3 x 14 x 14 float32 pixels stay on the GPU (the class token carries no pixels)
    m = resolve_model("llava-hf/llava-1.5-7b-hf")
    p = encoder.profile(m, {}, v1=False, max_model_len=4096, max_num_seqs=256, max_num_batched_tokens=4096,
                        chunked_prefill=False, db=2)
    assert p is not None and p.seqs == 7 and p.inputs == 7 * 336 * 336 * 3 * 4 == 9_483_264
    # V1 (0.11.0 / 0.25.1 gpu_model_runner.py::profile_run keeps batched_dummy_mm_inputs until it returns):
    # 4096 // 576 = 7 items of 577 patches
    v1 = encoder.profile(m, {}, v1=True, max_model_len=4096, max_num_seqs=256, max_num_batched_tokens=4096,
                         chunked_prefill=False, db=2)
    assert v1 is not None and v1.items == 7 and v1.inputs == 9_483_264


def test_v1_pixel_values_stay_through_the_lm_forward():
    # V1, Qwen2.5-VL-7B at 8192 tokens: one video item of 65536 patches, its float32 pixels held with the
    # encoder output through the LM forward and the sampler (profile.py::activation_peak)
    from servefit.engines.vllm import profile
    from servefit.engines.vllm.plan import Resolved

    p = _profile(args={"max_num_batched_tokens": 8192})
    assert p is not None and p.inputs == 65536 * 1176 * 4
    # small images (max_pixels 200704: 256 tokens, a 14-frame video of 1792) leave the LM forward the peak
    kw = {"mm_processor_kwargs": '{"max_pixels": 200704}'}
    p = _profile(**kw, args={"max_num_batched_tokens": 8192, "version": (0, 11, 0)})
    assert p is not None and (p.items, p.tokens_per_item) == (4, 1792) and p.inputs == 4 * 1792 * 4 * 1176 * 4
    m = from_config(json.loads(json.dumps(CONFIG_7B)), "local/qwen25vl")
    r = Resolved(dtype="bfloat16", tp=1, pp=1, util=0.9, max_model_len=8192, derived_len=8192, max_num_seqs=256,
                 max_num_batched_tokens=8192, chunked_prefill=True, block_size=16, kv_dtype="bfloat16", scheme=None,
                 enforce_eager=False, version=(0, 11, 0))
    lm = profile.activation_peak(m, r, True, v1=True, settings={"language_model_only": True})
    assert profile.activation_peak(m, r, True, v1=True, settings=kw) == p.outputs + p.inputs + lm > p.peak


def test_qwen3_vl_deepstack_buffers_count_with_the_weights():
    # qwen3_vl.py::Qwen3VLForConditionalGeneration.__init__ (0.11.0, 0.25.1): one max_num_batched_tokens x
    # hidden tensor per deepstack level, in the model's dtype, built with the model
    m = resolve_model("Qwen/Qwen3-VL-2B-Instruct")
    assert len(m.vision["deepstack_visual_indexes"]) == 3 and m.hidden_size == 2048
    assert encoder.deepstack_buffer_bytes(m, {}, 8192, 2) == 3 * 8192 * 2048 * 2 == 100_663_296
    assert encoder.deepstack_buffer_bytes(m, {"limit_mm_per_prompt": {"image": 0, "video": 0}}, 8192, 2) == 0
    assert encoder.deepstack_buffer_bytes(resolve_model("Qwen/Qwen2.5-VL-7B-Instruct"), {}, 8192, 2) == 0
    from servefit.pipeline import Target, evaluate, site_from_argv

    def weights(*flags: str) -> int:
        site = site_from_argv(["vllm", "serve", "Qwen/Qwen3-VL-2B-Instruct", "--max-model-len", "8192", *flags], {})
        return evaluate(site, Target(gpu="L4", engine_version="0.11.0")).plan.memory.weights

    assert weights("--max-num-batched-tokens", "8192") - weights("--max-num-batched-tokens", "4096") == \
        3 * 4096 * 2048 * 2


def test_qwen3_vl_video_item_counts_its_timestamp_text_in_011_and_012():
    # qwen3_vl.py::Qwen3VLProcessingInfo.get_max_video_tokens (0.11.0, 0.12.0 wheels): vision tokens x 12.5;
    # the dummy video is the 4096 x 4096 image as frames (up to 24576 within max_model_len), all frames
    # within the video processor's 25165824 pixels: 24576 frames of 32 x 32 -> 12288 tokens at 64k, two
    # frames of 3520 x 3520 -> 12100 tokens at 8k (the third frame would pass 8192 tokens)
    assert encoder.qwen3_video_tokens(16777216, 32, 16, 65536) == 12288
    assert encoder.qwen3_video_tokens(16777216, 32, 16, 8192) == 220 * 220 // 4 == 12100
    # three frames (2880 x 2880, two temporal pairs) make 2 x 90 x 90 = 16200 tokens: they fit 16200 exactly
    # and more frames follow (up to the cap), but not 16199
    assert encoder.qwen3_video_tokens(16777216, 32, 16, 16200) == 12288
    assert encoder.qwen3_video_tokens(16777216, 32, 16, 16199) == 12100
    m = resolve_model("Qwen/Qwen3-VL-30B-A3B-Instruct")
    rows = 4 * 2048  # out_hidden_size x (1 + three deepstack levels)

    def prof(version):
        return encoder.profile(m, {}, v1=True, max_model_len=65536, max_num_seqs=256, max_num_batched_tokens=8192,
                               chunked_prefill=True, db=2, tp=2, version=version)

    # 0.12: the video (153600 counted tokens) outranks the image (16384); profile_run pads the 12288-row
    # output to 153600 rows (gpu_model_runner.py::profile_run); the encoder runs 12288 x 4 patches
    p = prof((0, 12, 0))
    assert (p.modality, p.items, p.tokens_per_item) == ("video", 1, 153600)
    assert p.outputs == 153600 * rows * 2 and p.inputs == 4 * 1536 * 12288 * 4
    # 0.11 pads to the encoder budget, max(8192, 153600): the same rows here
    assert prof((0, 11, 0)).outputs == p.outputs
    # 0.13 counts the vision tokens and keeps the output as it is: the image (16384 tokens) is profiled
    q = prof((0, 13, 0))
    assert (q.modality, q.tokens_per_item) == ("image", 16384) and q.outputs == 16384 * rows * 2
    # from 0.17 the dummy video is two frames of the largest image within half the pixel cap (3520 x 3520):
    # 12100 tokens whatever max_model_len; 0.14 still searches frames (12288 at 64k)
    assert encoder.qwen3_video_tokens(16777216, 32, 16, 65536, (0, 17, 0)) == 12100
    assert encoder.qwen3_video_tokens(16777216, 32, 16, 65536, (0, 14, 0)) == 12288
    no_image = encoder.profile(m, {"limit_mm_per_prompt": '{"image": 0}'}, v1=True, max_model_len=65536,
                               max_num_seqs=256, max_num_batched_tokens=8192, chunked_prefill=True, db=2, tp=2,
                               version=(0, 25, 1))
    assert no_image is not None and (no_image.modality, no_image.tokens_per_item) == ("video", 12100)
    assert no_image.inputs == 4 * 1536 * 12100 * 4 and no_image.outputs == 12100 * rows * 2


def test_qwen3_vl_012_calibration_case_kv_memory():
    # videocut (0.12.0, Qwen3-VL-30B-A3B, TP2, 64k, 256 seqs) logged 37.23 GiB of KV cache; with the
    # 153600-row padded video output (2.34 GiB) servefit predicts 37.589 (+1.0%; 39.589, +6.3%, without)
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("accuracy_run", Path(__file__).parents[1] / "benchmarks" /
                                                  "accuracy" / "run.py")
    assert spec is not None and spec.loader is not None
    acc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(acc)
    case = next(c for c in acc.load_cases("vllm") if c["id"] == "videocut-2xh100-qwen3-vl-30b-a3b-tp2-64k-s256-0120")
    errors = acc.compare(case)["errors"]
    assert round(errors["kv_cache_gib"], 4) == 0.0097 and round(errors["kv_tokens"], 4) == 0.0098
