"""Issue 13 catalog additions: the new layouts (Gemma 4 unified, GLM-OCR, Step-3.7,
HunyuanOCR, Muse-Glimmer) and the Qwen3.5 text-only model types reproduce the public totals exactly.

Each expected total is a number read from a document (llmfit 1.1.17's parameters_raw, less the
multi-token-prediction layer or the stored second copy of a tied embedding the catalog notes say are
left out), so a wrong term in a layout changes the total and fails here; the catalog-wide test only
holds entries to 0.5%."""

from __future__ import annotations

import pytest

from servefit.models import resolve_model
from servefit.models.arch_gemma4 import attention_shape
from servefit.models.architecture import count_params

# (name, llmfit parameters_raw, what the catalog leaves out of it, the vision part)
COUNTS = [
    # text 11907350320 + encoder-free audio projection 640 x 3840; vision embedder 49922304
    ("google/gemma-4-12B-it", 11_959_730_224, 0, 49_922_304),
    # one NextN layer (217819648) and 32768 unexplained are left out; see the entry's note
    ("zai-org/GLM-OCR", 1_325_258_240, 217_852_416, 434_120_192),
    ("stepfun-ai/Step-3.7-Flash", 201_365_316_160, 3 * 775_704_832, 1_981_014_784),  # three MTP layers
    ("tencent/HunyuanOCR", 1_119_925_744, 120_818 * 1024, 457_198_064),  # lm_head stored beside the tied table
    ("meta-models/Muse-Glimmer-30B", 29_776_626_688, 0, 1_852_639_744 + 69_206_016),  # tower + adapter
    ("OpenGVLab/InternVL3_5-GPT-OSS-20B-A4B-Preview-HF", 21_232_768_704, 0, 324_117_120),
    ("baidu/Qianfan-OCR", 4_741_408_256, 0, 321_064_960),
    ("datalab-to/surya-ocr-2", 686_154_304, 20_452_864, 100_592_896),  # Qwen3.5-0.8B's MTP layer
    ("CMSManhattan/JiRackDeltaNet_27b", 27_320_697_856, 424_699_392, 0),  # Qwen3.5-27B's MTP layer
    ("flywheel-ai/automotive", 34_660_610_688, 0, 0),
    ("ibm-research/PowerMoE-3b", 3_374_286_336, 0, 0),
    # LCO-Embedding-Omni-3B's record: the thinker with an untied lm_head, the tower and audio encoder
    ("Qwen/Qwen2.5-Omni-3B", 4_703_464_448, 0, None),
    ("stepfun-ai/Step3-VL-10B", 10_171_750_144, 0, 1_981_014_784),  # Qwen3-8B + Step-3.7's tower
    ("Open-Bee/Bee-8B-RL", 8_675_017_504, 0, None),  # Qwen3-8B + LLaVA-OV SigLIP + Bee's projector
    ("YannQi/R-4B", 4_819_012_384, 0, None),  # Qwen3-4B + LLaVA-OV SigLIP + RVL's pre-norm projector
    ("xlangai/OpenCUA-7B", 8_292_168_448, 28 * 64, None),  # Qwen2.5-VL-7B; the rest fits rotary buffers
    ("lmms-lab-encoder/LLaVA-OneVision-2-8B-Instruct", 8_527_213_568, 0, 336_478_208),
    ("PerceptronAI/Isaac-0.1", 2_567_073_008, 151_936 * 2048, 535_333_104),  # lm_head stored beside the tied table
    ("AIDC-AI/Ovis2.5-9B", 9_174_807_784, 0, 984_072_424),  # Qwen3-8B + SigLIP2-NaViT, head and vte
    ("AIDC-AI/Ovis2.6-30B-A3B", 31_381_977_320, 0, 849_854_696),  # Qwen3-30B-A3B + the same, vte 2048 wide
    # the lm_head beside the tied table, and the SigLIP pooling head + packing table vLLM skips
    ("PaddlePaddle/PaddleOCR-VL", 958_588_736, 103_424 * 1024 + 52_987_088, 438_947_440),
]


@pytest.mark.parametrize(("name", "raw", "left_out", "vision"), COUNTS)
def test_new_entries_reproduce_the_public_totals(name, raw, left_out, vision):
    m = resolve_model(name)  # params is the entry's recorded total; count_params recounts the layout
    assert (m.params, count_params(m)) == (raw - left_out, raw - left_out)
    assert vision is None or m.vision_params == vision


def test_qwen3_5_text_model_types_count_as_qwen3_5():
    """A Qwen3_5ForCausalLM checkpoint (model_type qwen3_5_text) is Qwen3.5-27B without its tower."""
    text_only = resolve_model("CMSManhattan/JiRackDeltaNet_27b")
    full = resolve_model("Qwen/Qwen3.5-27B")
    assert count_params(text_only) == count_params(full) - full.vision_params


def test_gemma4_unified_uses_gemma4_attention_shapes():
    """Gemma 4 12B's full layers (every 6th) take the global head size with one KV head."""
    m = resolve_model("google/gemma-4-12B-it")
    assert m.kinds().count("full") == 8 and m.kinds().count("sliding") == 40
    assert attention_shape(m, "full") == (512, 1)
    assert attention_shape(m, "sliding") == (256, 8)


def test_repacks_of_the_new_entries_resolve_to_them():
    assert resolve_model("ibm/PowerMoE-3b").params == resolve_model("ibm-research/PowerMoE-3b").params
