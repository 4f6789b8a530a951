"""Nemotron 3 Super (nemotron_h with a latent MoE) and Nemotron 3 Nano 4B: their config.json
topologies as public artifact checks quote them, counted to the Hub totals."""

from servefit.models.architecture import count_params
from servefit.models.config_json import from_config

SUPER_PATTERN = ("MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*"
                 "EMEMEMEME")
SUPER = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "num_hidden_layers": 88,
         "hidden_size": 4096, "vocab_size": 131072, "num_attention_heads": 32, "num_key_value_heads": 2,
         "head_dim": 128, "mamba_num_heads": 128, "mamba_head_dim": 64, "ssm_state_size": 128, "conv_kernel": 4,
         "n_groups": 8, "n_routed_experts": 512, "num_experts_per_tok": 22, "moe_latent_size": 1024,
         "moe_intermediate_size": 2688, "moe_shared_expert_intermediate_size": 5376, "n_shared_experts": 1,
         "hybrid_override_pattern": SUPER_PATTERN, "max_position_embeddings": 262144, "tie_word_embeddings": False,
         "num_nextn_predict_layers": 1, "mtp_hybrid_override_pattern": "*E"}


def test_nemotron_3_super_latent_moe_counts_the_main_model():
    spec = from_config(dict(SUPER), "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16")
    assert spec.kinds().count("mamba") == 40 and spec.kinds().count("full") == 8
    # llmfit's count of an MTP-less copy; the NVIDIA upload adds the MTP layer (2942324736)
    assert count_params(spec) == 120668687360


def test_without_the_latent_width_experts_are_counted_in_the_hidden_width():
    dense = {k: v for k, v in SUPER.items() if k != "moe_latent_size"}
    spec = from_config(dense, "x")
    assert count_params(spec) - 120668687360 == 40 * (512 * 2 * (4096 - 1024) * 2688 - 2 * 4096 * 1024)


def test_nemotron_3_nano_4b_config_counts_the_hub_total():
    cfg = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 3136,
           "intermediate_size": 12544, "vocab_size": 131072, "num_hidden_layers": 42,
           "hybrid_override_pattern": "M-M-M-MM-M-M*-M-M*-M-M-M*-M-M-MM*-MMM-M-M-", "mamba_num_heads": 96,
           "mamba_head_dim": 80, "n_groups": 8, "ssm_state_size": 128, "conv_kernel": 4, "num_attention_heads": 40,
           "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 262144, "tie_word_embeddings": False}
    assert count_params(from_config(cfg, "nvidia/NVIDIA-Nemotron-3-Nano-4B-BF16")) == 3973556832
