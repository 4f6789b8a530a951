"""Qwen3-Omni (Qwen3OmniMoeForConditionalGeneration): the thinker vLLM serves, from its config.json
(thinker_config with text, vision and audio configs) to the parameter count of the published checkpoint."""

from servefit.models.architecture import count_params
from servefit.models.catalog import lookup
from servefit.models.config_json import from_config
from servefit.models.vision_towers import count_audio

AUDIO = {"model_type": "qwen3_omni_moe_audio_encoder", "d_model": 1280, "encoder_layers": 32, "encoder_ffn_dim": 5120,
         "encoder_attention_heads": 20, "num_mel_bins": 128, "output_dim": 2048, "downsample_hidden_size": 480}
VISION = {"model_type": "qwen3_omni_moe_vision_encoder", "depth": 27, "hidden_size": 1152, "intermediate_size": 4304,
          "num_heads": 16, "in_channels": 3, "patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2,
          "out_hidden_size": 2048, "num_position_embeddings": 2304, "deepstack_visual_indexes": [8, 16, 24]}
TEXT = {"model_type": "qwen3_omni_moe_text", "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
        "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 768, "moe_intermediate_size": 768,
        "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 152064, "max_position_embeddings": 65536,
        "tie_word_embeddings": False}
CONFIG = {"architectures": ["Qwen3OmniMoeForConditionalGeneration"], "model_type": "qwen3_omni_moe",
          "thinker_config": {"model_type": "qwen3_omni_moe_thinker", "audio_config": AUDIO, "vision_config": VISION,
                             "text_config": TEXT, "tie_word_embeddings": False},
          "talker_config": {"text_config": {"hidden_size": 1024}}}


def test_qwen3_omni_config_counts_the_thinker():
    spec = from_config(CONFIG, "Qwen/Qwen3-Omni-30B-A3B-Instruct")
    # llmfit's count of a thinker-only repack; the published total minus talker and code2wav
    assert count_params(spec) == 31719205488
    assert spec.num_experts == 128 and spec.vision_params == 538631408 + 647927168


def test_qwen3_omni_audio_encoder_layout():
    # Conv2d front end (1 -> 480 -> 480 -> 480), conv_out 480 x 16 -> 1280, 32 Whisper layers with a k bias,
    # proj1 / proj2: the module tree of the released checkpoint
    convs = (9 * 480 + 480) + 2 * (9 * 480 * 480 + 480) + 480 * 16 * 1280
    layer = 4 * (1280 * 1280 + 1280) + 4 * 1280 + 2 * 1280 * 5120 + 5120 + 1280
    tail = 2 * 1280 + 1280 * 1280 + 1280 + 1280 * 2048 + 2048
    assert count_audio(AUDIO, 2048) == convs + 32 * layer + tail == 647927168
    # without downsample_hidden_size the encoder is Qwen2.5-Omni's (Conv1d front end, no k bias)
    plain = {k: v for k, v in AUDIO.items() if k != "downsample_hidden_size"}
    assert count_audio(plain, 2048) != count_audio(AUDIO, 2048)


def test_thinking_checkpoint_is_the_same_thinker():
    assert lookup("Qwen/Qwen3-Omni-30B-A3B-Thinking").name == "Qwen/Qwen3-Omni-30B-A3B-Instruct"
