"""The tensors convert_hf_to_gguf.py writes for a model's text part, by architecture (names and
ggml shapes; ne[0] is a matrix's input dimension): what models/gguf_quant.py gives types to when a
GGUF is sized from the catalog without the file."""

from __future__ import annotations

from servefit.models.arch_classic import decilm_ffn_width
from servefit.models.arch_laguna import FAMILIES as LAGUNA_LIKE
from servefit.models.arch_openelm import layer_shapes
from servefit.models.architecture import is_moe_layer
from servefit.models.encoders import ENCODERS
from servefit.models.family_traits import is_gated_mlp, traits
from servefit.models.spec import ModelSpec

LEARNED_POSITIONS = ("opt", "gpt2", "gpt_bigcode", "gpt_neo", "bert", "roberta", "xlm-roberta", "mpnet")


def layout(m: ModelSpec, arch: str) -> list[tuple[str, tuple[int, ...]]]:
    """(name, ggml shape) of every tensor convert_hf_to_gguf.py writes for the text model."""
    e, v, hd = m.hidden_size, m.vocab_size, m.head_dim
    out: list[tuple[str, tuple[int, ...]]] = [("token_embd.weight", (e, v))]
    if m.model_type in LEARNED_POSITIONS and not m.layout.get("alibi"):  # as position_embd (JinaBERT: ALiBi)
        out.append(("position_embd.weight", (e, m.max_position_embeddings)))
    gated = is_gated_mlp(m)
    moe_every = int(m.layout.get("moe_every_n_layers") or 0)  # NomicBert MoE: layers with index % n == 1
    kinds = m.kinds()
    if m.model_type in ENCODERS:  # the catalog marks an encoder's layers "none" (no KV cache); each has attention
        kinds = ["full"] * len(kinds)
    mt = m.model_type
    ffn_mult = list(m.layout.get("ffn_mult") or [])  # DeciLM: per-layer FFN width (0: no FFN)
    openelm = layer_shapes(m) if mt == "openelm" else []
    # llama.cpp src/models/nemotron-h.cpp (llm_build_nemotron_h): every block is attn_norm plus ONE
    # of a Mamba2 mixer, attention, or an FFN ("none": relu^2 ffn_up/ffn_down, or the MoE)
    nemotron_h = m.model_type == "nemotron_h"
    ple = int(m.layout.get("hidden_size_per_layer_input") or 0)  # Gemma 4 E2B / E4B (gemma4.cpp)
    n_kv = len(kinds) - int(m.layout.get("num_kv_shared_layers") or 0)
    if ple:
        v_ple = int(m.layout.get("vocab_size_per_layer_input") or v)
        out += [("per_layer_token_embd.weight", (ple * len(kinds), v_ple)),
                ("per_layer_model_proj.weight", (e, ple * len(kinds))), ("per_layer_proj_norm.weight", (ple,))]
    for il, kind in enumerate(kinds):
        p = f"blk.{il}."
        if ple:
            out += [(p + "inp_gate.weight", (e, ple)), (p + "proj.weight", (ple, e)), (p + "post_norm.weight", (e,))]
        out.append((p + "attn_norm.weight", (e,)))
        if mt == "kimi_k3":  # KDA / gated MLA mixer, latent MoE, attention-residual scores
            out += _kimi_k3(m, il, kind, p)
            continue
        if nemotron_h and kind == "none":  # an MLP / MoE block without a mixer (see below)
            out += _nemotron_h_ffn(m, p)
            continue
        if kind == "mamba" and mt in ("lfm2", "lfm2_moe"):  # src/models/lfm2.cpp build_shortconv_block
            out += [(p + "shortconv.in_proj.weight", (e, 3 * e)),
                    (p + "shortconv.conv.weight", (int((m.mamba or {}).get("conv_kernel") or 3), e)),
                    (p + "shortconv.out_proj.weight", (e, e))]
        elif kind == "mamba" and (m.mamba or {}).get("kind") != "mamba2" and mt in ("mamba", "falcon_mamba", "jamba"):
            out += _mamba1(m, p)  # src/models/mamba.cpp / jamba.cpp: Mamba1 mixers
        elif kind == "linear" and (m.mamba or {}).get("kind") == "gated_deltanet":
            out += _gated_deltanet(m, p)
        elif kind in ("mamba", "linear") or mt == "falcon_h1":  # Falcon-H1: Mamba2 beside attention in every layer
            mb = m.mamba or {}
            heads_dim = int(mb.get("num_heads") or 0) * int(mb.get("head_dim") or 0)
            d_inner = int(mb.get("d_inner") or mb.get("intermediate_size") or heads_dim or 2 * e)
            d_state = int(mb.get("d_state") or mb.get("state_size") or 128)
            n_group = int(mb.get("n_groups") or 1)
            n_heads = int(mb.get("n_heads") or mb.get("num_heads") or max(1, d_inner // 64))
            out += [(p + "ssm_in.weight", (e, 2 * d_inner + 2 * n_group * d_state + n_heads)),
                    (p + "ssm_conv1d.weight", (int(mb.get("d_conv") or 4), d_inner + 2 * n_group * d_state)),
                    (p + "ssm_out.weight", (d_inner, e))]
        if (kind in ("mamba", "linear") and mt != "falcon_h1") or kind == "none":
            pass
        elif m.is_mla:
            qk = m.qk_nope_head_dim + m.qk_rope_head_dim
            if m.q_lora_rank:
                out += [(p + "attn_q_a.weight", (e, m.q_lora_rank)), (p + "attn_q_a_norm.weight", (m.q_lora_rank,)),
                        (p + "attn_q_b.weight", (m.q_lora_rank, m.num_attention_heads * qk))]
            else:
                out.append((p + "attn_q.weight", (e, m.num_attention_heads * qk)))
            out += [(p + "attn_kv_a_mqa.weight", (e, m.kv_lora_rank + m.qk_rope_head_dim)),
                    (p + "attn_kv_a_norm.weight", (m.kv_lora_rank,)),
                    (p + "attn_kv_b.weight", (m.kv_lora_rank, m.num_attention_heads * (m.qk_nope_head_dim + m.v_head_dim))),
                    (p + "attn_output.weight", (m.num_attention_heads * m.v_head_dim, e))]
        elif mt == "openelm":  # src/models/openelm.cpp: per-layer heads, fused qkv (arch_openelm.layer_shapes)
            q, kv, _ = openelm[il]
            out += [(p + "attn_qkv.weight", (e, (q + 2 * kv) * hd)), (p + "attn_q_norm.weight", (hd,)),
                    (p + "attn_k_norm.weight", (hd,)), (p + "attn_output.weight", (q * hd, e))]
        elif mt == "mimo_v2_flash":  # llama.cpp src/models/mimo2-iswa.cpp: per-layer n_head_kv, V n_embd_head_v wide
            from servefit.models.arch_mimo_v2 import kv_shape

            kv, k, vd = kv_shape(m, kind)
            nh = m.num_attention_heads
            out += [(p + "attn_q.weight", (e, nh * k)), (p + "attn_k.weight", (e, kv * k)),
                    (p + "attn_v.weight", (e, kv * vd)), (p + "attn_output.weight", (nh * vd, e))]
            if kind == "sliding" and m.layout.get("swa_attention_sinks"):
                out.append((p + "attn_sinks.weight", (nh,)))
        elif mt in LAGUNA_LIKE:  # conversion/laguna.py (MODEL_ARCH.LAGUNA), step35: per-layer heads, attn_gate
            from servefit.models.arch_laguna import gate_width, layer_heads

            q = layer_heads(m)[il]
            kvd = m.num_key_value_heads * hd
            out += [(p + "attn_q.weight", (e, q * hd)), (p + "attn_k.weight", (e, kvd)), (p + "attn_v.weight", (e, kvd)),
                    (p + "attn_output.weight", (q * hd, e)), (p + "attn_q_norm.weight", (hd,)),
                    (p + "attn_k_norm.weight", (hd,)), (p + "attn_gate.weight", (e, gate_width(m, q)))]
        else:
            lhd, lkv = hd, m.num_key_value_heads
            if m.layout.get("global_head_dim"):  # Gemma 4: full layers' own shape, no v_proj with k_eq_v
                from servefit.models.arch_gemma4 import attention_shape

                lhd, lkv = attention_shape(m, kind)
            qd, kvd = m.num_attention_heads * lhd, lkv * lhd
            # Qwen3-Next / 3.5: q_proj also yields the per-head output gate (twice as wide)
            out.append((p + "attn_q.weight", (e, qd * (2 if traits(mt).attn_output_gate else 1))))
            if il < n_kv:  # a KV-shared layer (Gemma 4) has no k/v of its own
                out.append((p + "attn_k.weight", (e, kvd)))
                if not (kind == "full" and m.layout.get("attention_k_eq_v")):
                    out.append((p + "attn_v.weight", (e, kvd)))
            out.append((p + "attn_output.weight", (qd, e)))
            if mt == "gpt_oss":  # conversion GptOssModel / llama.cpp src/models/openai-moe-iswa.cpp: biased q/k/v/o
                # and one attention sink per head (19 tensors a block: the public file's 459 in all)
                out += [(p + "attn_q.bias", (qd,)), (p + "attn_k.bias", (kvd,)), (p + "attn_v.bias", (kvd,)),
                        (p + "attn_output.bias", (e,)), (p + "attn_sinks.weight", (m.num_attention_heads,))]
            if arch in ("qwen2", "qwen2moe"):
                out += [(p + "attn_q.bias", (qd,)), (p + "attn_k.bias", (kvd,)), (p + "attn_v.bias", (kvd,))]
            if arch in ("qwen3", "qwen3moe", "gemma3", "gemma4", "olmo2"):
                out += [(p + "attn_q_norm.weight", (lhd,)), (p + "attn_k_norm.weight", (lhd,))]
        # a mixer-only block (Nemotron-H's Mamba2 / attention, the pure state-space models) or a
        # DeciLM layer whose FFN is a no-op: no FFN
        if nemotron_h or mt in ("mamba", "mamba2", "falcon_mamba") or (ffn_mult and not ffn_mult[il]):
            continue
        out.append((p + "ffn_norm.weight", (e,)))
        if arch.startswith("gemma"):
            out += [(p + "post_attention_norm.weight", (e,)), (p + "post_ffw_norm.weight", (e,))]
        if arch == "gemma4" and m.is_moe:  # gemma4.cpp: the dense FFN runs as a shared expert beside the experts
            out += [(p + "ffn_gate.weight", (e, m.intermediate_size)), (p + "ffn_up.weight", (e, m.intermediate_size)),
                    (p + "ffn_down.weight", (m.intermediate_size, e))]
        if moe_every and il % moe_every == 1:  # src/models/bert.cpp (nomic-bert-moe): ungated experts
            ff, ne = m.intermediate_size, m.num_experts  # models/encoders.py _nomic_layers: experts of the MLP's width
            out += [(p + "ffn_gate_inp.weight", (e, ne)), (p + "ffn_up_exps.weight", (e, ff, ne)),
                    (p + "ffn_down_exps.weight", (ff, e, ne))]
        elif moe_every:
            if gated:
                out.append((p + "ffn_gate.weight", (e, m.intermediate_size)))
            out += [(p + "ffn_up.weight", (e, m.intermediate_size)), (p + "ffn_down.weight", (m.intermediate_size, e))]
        elif is_moe_layer(m, il):  # first_k_dense_replace, and every moe_layer_step-th layer (Jamba, Llama 4)
            ff, ne = m.moe_intermediate_size or m.intermediate_size, m.num_experts
            out += [(p + "ffn_gate_inp.weight", (e, ne)), (p + "ffn_gate_exps.weight", (e, ff, ne)),
                    (p + "ffn_up_exps.weight", (e, ff, ne)), (p + "ffn_down_exps.weight", (ff, e, ne))]
            if mt == "gpt_oss":  # the router's and every expert's biases (openai-moe-iswa.cpp build_moe_ffn)
                out += [(p + "ffn_gate_inp.bias", (ne,)), (p + "ffn_gate_exps.bias", (ff, ne)),
                        (p + "ffn_up_exps.bias", (ff, ne)), (p + "ffn_down_exps.bias", (e, ne))]
            # Granite 4.0-H / granitemoeshared: the shared_mlp (our intermediate_size) beside the
            # experts (llama.cpp src/models/granite-hybrid.cpp build_layer_ffn: ffn_*_shexp)
            granite_shared = m.model_type in ("granitemoehybrid", "granitemoeshared", "granitemoe_swa") and m.intermediate_size
            if m.num_shared_experts or granite_shared:
                sh = ff * m.num_shared_experts if m.num_shared_experts else m.intermediate_size
                out += [(p + "ffn_gate_shexp.weight", (e, sh)), (p + "ffn_up_shexp.weight", (e, sh)),
                        (p + "ffn_down_shexp.weight", (sh, e))]
        else:
            ff = m.intermediate_size * (2 if m.layout.get("use_double_wide_mlp") and il >= n_kv else 1)
            if ffn_mult:  # llama.cpp reads each layer's width from the GGUF (deci.cpp)
                ff = decilm_ffn_width(ffn_mult[il], e)
            elif openelm:
                ff = openelm[il][2]
            if gated:
                out.append((p + "ffn_gate.weight", (e, ff)))
            out += [(p + "ffn_up.weight", (e, ff)), (p + "ffn_down.weight", (ff, e))]
    out.append(("output_norm.weight", (e,)))
    if mt == "kimi_k3" and m.layout.get("attn_res_block_size"):
        out.append(("output_res_score.weight", (e,)))
    if not m.tie_word_embeddings and m.model_type not in ENCODERS:  # an encoder has no LM head
        out.append(("output.weight", (e, v)))
    return out


def _mamba1(m: ModelSpec, p: str) -> list[tuple[str, tuple[int, ...]]]:
    """A Mamba1 mixer as convert_hf_to_gguf.py writes it (llama-arch.cpp LLM_ARCH_MAMBA): in / out
    projections, the depthwise conv, x_proj to dt_rank + 2 x state, dt_proj, A and D."""
    mb, e = m.mamba or {}, m.hidden_size
    d, state = int(mb.get("d_inner") or 2 * e), int(mb.get("state_size") or 16)
    rank, kernel = int(mb.get("dt_rank") or -(-e // 16)), int(mb.get("conv_kernel") or 4)
    return [(p + "ssm_in.weight", (e, 2 * d)), (p + "ssm_conv1d.weight", (kernel, d)), (p + "ssm_conv1d.bias", (d,)),
            (p + "ssm_x.weight", (d, rank + 2 * state)), (p + "ssm_dt.weight", (rank, d)), (p + "ssm_dt.bias", (d,)),
            (p + "ssm_a", (state, d)), (p + "ssm_d", (d,)), (p + "ssm_out.weight", (d, e))]


def _kimi_k3(m: ModelSpec, il: int, kind: str, p: str) -> list[tuple[str, tuple[int, ...]]]:
    """One Kimi-K3 block as llama.cpp src/models/kimi-k3.cpp load_arch_tensors creates it: a KDA mixer
    (q/k/v convs, q/k/v, f_a / f_b, beta, a plain [n_head] A_log, dt bias, the full-rank gate ssm_g,
    ssm_norm, attn_output) or the MLA one with its output gate (attn_gate); one score vector per
    attention residual (attn_res_score / ffn_res_score); a dense FFN or the router with exp_probs_b,
    routed experts in the latent width, ffn_routed_down / _up / _norm and the shared experts."""
    e, mb = m.hidden_size, m.mamba or {}
    heads, hd = int(mb.get("num_value_heads") or 0), int(mb.get("value_head_dim") or 0)
    d_inner, d_conv = heads * hd, int(mb.get("conv_kernel") or 4)
    out: list[tuple[str, tuple[int, ...]]] = [(p + "ffn_norm.weight", (e,))]
    if m.layout.get("attn_res_block_size"):
        out += [(p + "attn_res_score.weight", (e,)), (p + "ffn_res_score.weight", (e,))]
    if kind == "linear":
        out += [(p + f"ssm_conv1d_{x}.weight", (d_conv, 1, d_inner)) for x in "qkv"]
        out += [(p + f"attn_{x}.weight", (e, d_inner)) for x in "qkv"]
        out += [(p + "ssm_f_a.weight", (e, hd)), (p + "ssm_f_b.weight", (hd, d_inner)), (p + "ssm_beta.weight", (e, heads)),
                (p + "ssm_a", (heads,)), (p + "ssm_dt.bias", (d_inner,)), (p + "ssm_g.weight", (e, d_inner)),
                (p + "ssm_norm.weight", (hd,)), (p + "attn_output.weight", (d_inner, e))]
    else:
        nh, v = m.num_attention_heads, m.v_head_dim
        out += [(p + "attn_q_a_norm.weight", (m.q_lora_rank,)), (p + "attn_kv_a_norm.weight", (m.kv_lora_rank,)),
                (p + "attn_q_a.weight", (e, m.q_lora_rank)),
                (p + "attn_q_b.weight", (m.q_lora_rank, nh * (m.qk_nope_head_dim + m.qk_rope_head_dim))),
                (p + "attn_kv_a_mqa.weight", (e, m.kv_lora_rank + m.qk_rope_head_dim)),
                (p + "attn_kv_b.weight", (m.kv_lora_rank, nh * (m.qk_nope_head_dim + v))),
                (p + "attn_gate.weight", (e, nh * v)), (p + "attn_output.weight", (nh * v, e))]
    if il < m.first_k_dense_replace:
        ff = m.intermediate_size
        return out + [(p + "ffn_gate.weight", (e, ff)), (p + "ffn_up.weight", (e, ff)), (p + "ffn_down.weight", (ff, e))]
    ff, ne, lat = m.moe_intermediate_size, m.num_experts, int(m.layout.get("moe_latent_size") or e)
    sh = ff * max(m.num_shared_experts, 1)
    out += [(p + "ffn_gate_inp.weight", (e, ne)), (p + "exp_probs_b.bias", (ne,)),
            (p + "ffn_gate_exps.weight", (lat, ff, ne)), (p + "ffn_up_exps.weight", (lat, ff, ne)),
            (p + "ffn_down_exps.weight", (ff, lat, ne)),
            (p + "ffn_gate_shexp.weight", (e, sh)), (p + "ffn_up_shexp.weight", (e, sh)), (p + "ffn_down_shexp.weight", (sh, e))]
    if lat != e:
        out += [(p + "ffn_routed_down.weight", (e, lat)), (p + "ffn_routed_up.weight", (lat, e)),
                (p + "ffn_routed_norm.weight", (lat,))]
    return out


def _gated_deltanet(m: ModelSpec, p: str) -> list[tuple[str, tuple[int, ...]]]:
    """A Gated DeltaNet layer (llama-arch.cpp LLM_ARCH_QWEN3NEXT / QWEN35): fused q/k/v, the output
    gate z, beta and alpha, the short conv over q/k/v, dt bias, A, the gated norm, out_proj."""
    mb, e = m.mamba or {}, m.hidden_size
    nk, nv = int(mb.get("num_key_heads") or 0), int(mb.get("num_value_heads") or 0)
    key_dim, value_dim = nk * int(mb.get("key_head_dim") or 0), nv * int(mb.get("value_head_dim") or 0)
    conv = 2 * key_dim + value_dim
    return [(p + "attn_qkv.weight", (e, conv)), (p + "attn_gate.weight", (e, value_dim)),
            (p + "ssm_beta.weight", (e, nv)), (p + "ssm_alpha.weight", (e, nv)),
            (p + "ssm_conv1d.weight", (int(mb.get("conv_kernel") or 4), conv)), (p + "ssm_dt.bias", (nv,)),
            (p + "ssm_a", (nv,)), (p + "ssm_norm.weight", (int(mb.get("value_head_dim") or 0),)),
            (p + "ssm_out.weight", (value_dim, e))]


def _nemotron_h_ffn(m: ModelSpec, p: str) -> list[tuple[str, tuple[int, ...]]]:
    """Nemotron-H's FFN block (llama.cpp src/models/nemotron-h.cpp build_ffn_layer): ungated relu^2
    up / down, or (Nemotron 3) the router, its score bias, ungated experts and a shared expert."""
    e = m.hidden_size
    if not m.is_moe:
        return [(p + "ffn_up.weight", (e, m.intermediate_size)), (p + "ffn_down.weight", (m.intermediate_size, e))]
    ff, ne = m.moe_intermediate_size or m.intermediate_size, m.num_experts
    sh = int(m.layout.get("moe_shared_expert_intermediate_size") or 0)
    lat = int(m.layout.get("moe_latent_size") or 0)  # Nemotron 3 Super: experts in a latent width
    x = lat or e
    out: list[tuple[str, tuple[int, ...]]] = [
        (p + "ffn_gate_inp.weight", (e, ne)), (p + "exp_probs_b.bias", (ne,)),
        (p + "ffn_up_exps.weight", (x, ff, ne)), (p + "ffn_down_exps.weight", (ff, x, ne))]
    if lat:  # fc1 / fc2_latent_proj, sized as the checkpoint holds them; the names are servefit's own,
        # so they take the file type's default quantization
        out += [(p + "ffn_latent_in.weight", (e, lat)), (p + "ffn_latent_out.weight", (lat, e))]
    if sh:
        out += [(p + "ffn_up_shexp.weight", (e, sh)), (p + "ffn_down_shexp.weight", (sh, e))]
    return out
