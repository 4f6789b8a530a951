"""The tensor table llama-quantize would write for a model, without the file.

`synth_tensors(spec, ftype)` lays out the tensors convert_hf_to_gguf.py produces for the
architecture (names and ggml shapes: ne[0] is the input dimension of a matrix) and gives each
the type llama-quantize picks for that file type, following src/llama-quant.cpp:
- tensor_allows_quantization: only >=2-D `*weight` tensors; norms, ffn_gate_inp (router) and
  ssm_conv1d stay as converted (F32 for 1-D tensors);
- llama_tensor_get_type_impl: output.weight (and a tied token_embd) -> Q6_K (Q5_K for the
  IQ1/IQ2/IQ3_XXS mixes, Q8_0 for MXFP4_MOE and Falcon); attn_v / attn_qkv / attn_kv_b and
  ffn_down raised on the "use_more_bits" layers for Q4_K_M / Q5_K_M, Q3_K_* and IQ mixes;
  8-expert models get Q8_0 attn_v/attn_k; 70B (80-layer llama/qwen2) attn_v Q4_K/Q3_K -> Q5_K;
- tensor_type_fallback: a row length not divisible by the block size falls back
  (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ* -> IQ4_NL, Q2_K/Q3_K -> Q4_0, else F16).
Tensors are visited in layer order (llama_model_loader::weights_map is ordered by layer).
"""

from __future__ import annotations

from dataclasses import dataclass

from servefit import data
from servefit.models.arch_classic import decilm_ffn_width
from servefit.models.arch_laguna import FAMILIES as LAGUNA_LIKE
from servefit.models.arch_openelm import layer_shapes
from servefit.models.architecture import is_gated_mlp, is_moe_layer, traits
from servefit.models.encoders import ENCODERS
from servefit.models.gguf import TensorInfo, type_by_name
from servefit.models.spec import ModelSpec

IQ_LOW = {"IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"}
FALLBACK = {"IQ1_S": "IQ4_NL", "IQ1_M": "IQ4_NL", "IQ2_XXS": "IQ4_NL", "IQ2_XS": "IQ4_NL", "IQ2_S": "IQ4_NL",
            "IQ3_XXS": "IQ4_NL", "IQ3_S": "IQ4_NL", "IQ4_XS": "IQ4_NL", "Q2_0": "Q4_0", "Q2_K": "Q4_0",
            "Q3_K": "Q4_0", "TQ1_0": "Q4_0", "TQ2_0": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}


def default_type(ftype: str) -> str:
    return str(data.load("gguf_quants.yaml")["ftypes"][ftype][1])


def hf_to_arch(model_type: str) -> str:
    return str(data.load("gguf_quants.yaml")["hf_arch"].get(model_type, model_type))


def _more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


@dataclass
class _State:
    """Counters llama-quantize keeps while it visits the tensors: the type of an attn_v or ffn_down tensor
    depends on how many came before it."""

    n_attn_v: int
    n_layer: int
    n_gqa: int
    n_expert: int
    is_70b: bool
    arch: str
    tied: bool
    i_attn_v: int = 0
    i_ffn_down: int = 0


def _category(name: str) -> str:
    if name == "output.weight":
        return "output"
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return "token_embd"
    for key, cat in (("attn_qkv.weight", "attn_v"), ("attn_kv_b.weight", "attn_v"), ("attn_v.weight", "attn_v"),
                     ("attn_k.weight", "attn_k"), ("attn_q.weight", "attn_q"), ("attn_output.weight", "attn_output"),
                     ("ffn_up", "ffn_up"), ("ffn_gate", "ffn_gate"), ("ffn_down", "ffn_down")):
        if key in name:
            return "attn_qkv" if key == "attn_qkv.weight" else cat
    return "other"


def _allows(name: str, ndim: int) -> bool:
    if ndim < 2 or not name.endswith("weight") or "_norm.weight" in name:
        return False
    return not any(s in name for s in ("ffn_gate_inp.weight", "ssm_conv1d", "shortconv.conv.weight", "altup",
                                       "laurel", "per_layer_model_proj", "attn_rel_b.weight"))


def _layer_of(name: str, fallback: int) -> int:
    if name.startswith("blk."):
        try:
            return int(name.split(".")[1])
        except ValueError:
            pass
    return fallback


def _pick(st: _State, name: str, ft: str, new: str, ne0: int) -> str:  # noqa: C901 (mirrors the C++)
    cat = _category(name)
    if cat == "output" or (st.tied and cat == "token_embd"):
        blk = type_by_name()[new][1]
        if ft == "MXFP4_MOE" or st.arch == "falcon" or ne0 % blk:
            return "Q8_0"
        if ft in ("IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"):
            return "Q5_K"
        return new if new == "Q8_0" else "Q6_K"
    if ft == "MXFP4_MOE":
        return "MXFP4" if "_exps." in name else "Q8_0"
    if cat == "token_embd":
        if ft in ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ1_M"):
            return "Q2_K"
        if ft in ("IQ2_S", "IQ2_M", "IQ3_XXS"):
            return "IQ3_S"
        if ft in ("TQ1_0", "TQ2_0"):
            return "Q4_K"
        return new
    if ft in IQ_LOW:
        if cat in ("attn_v", "attn_qkv"):
            st.i_attn_v += 1
            if st.n_gqa >= 4 or st.n_expert >= 4:
                return "Q4_K"
            return "IQ3_S" if ft in ("IQ2_S", "IQ2_M") else "Q2_K"
        if st.n_expert == 8 and cat == "attn_k":
            return "Q4_K"
        if cat == "ffn_down":
            i = st.i_ffn_down
            st.i_ffn_down += 1
            if i < st.n_layer // 8:
                return "IQ3_S" if ft in ("IQ2_S", "IQ2_M") else "Q2_K"
            return new
        if cat == "attn_output":
            if st.n_expert == 8:
                return "Q5_K"
            if ft in ("IQ1_S", "IQ1_M"):
                return "IQ2_XXS"
            if ft in ("IQ2_S", "IQ2_M"):
                return "IQ3_S"
        return new
    if cat in ("attn_v", "attn_qkv"):  # category_is_attn_v: attn_v, attn_qkv, attn_kv_b
        i, n = st.i_attn_v, st.n_attn_v
        if ft == "Q2_K":
            new = "Q4_K" if st.n_gqa >= 4 else "Q3_K"
        elif ft == "Q2_K_S" and st.n_gqa >= 4:
            new = "Q4_K"
        elif ft == "IQ3_XXS":
            new = "Q4_K" if st.n_gqa >= 4 else "IQ3_S"
        elif ft in ("IQ3_XS", "IQ3_S") and st.n_gqa >= 4:
            new = "Q4_K"
        elif ft == "IQ3_M":
            new = "Q4_K"
        elif ft == "Q3_K_M":
            new = "Q5_K" if i < 2 else "Q4_K"
        elif ft == "Q3_K_L":
            new = "Q5_K"
        elif ft in ("IQ4_NL", "IQ4_XS") and st.n_gqa >= 4:
            new = "Q5_K"
        elif ft in ("Q4_K_M", "Q5_K_M") and _more_bits(i, n):
            new = "Q6_K"
        elif ft == "Q4_K_S" and i < 4:
            new = "Q5_K"
        if st.is_70b and new in ("Q3_K", "Q4_K"):
            new = "Q5_K"
        if st.n_expert == 8:
            new = "Q8_0"
        st.i_attn_v += 1
        return new
    if cat == "attn_k":
        if st.n_expert == 8:
            return "Q8_0"
        return {"IQ3_XS": "IQ3_XXS", "IQ3_XXS": "IQ2_S"}.get(ft, new)
    if cat == "attn_q":
        return {"IQ3_XS": "IQ3_XXS", "IQ3_XXS": "IQ2_S"}.get(ft, new)
    if cat == "ffn_down":
        i = _layer_of(name, st.i_ffn_down) if st.n_expert > 1 else st.i_ffn_down
        n = st.n_layer
        st.i_ffn_down += 1
        falcon = st.arch == "falcon"
        if ft == "Q2_K":
            return "Q3_K"
        if ft == "Q2_K_S":
            return "Q4_K" if i < n // 8 else new
        if ft == "IQ3_XXS":
            return "Q4_K" if i < n // 8 else "Q3_K"  # without an imatrix
        if ft == "Q3_K_M":
            return "Q5_K" if i < n // 16 else ("Q4_K" if not falcon or _more_bits(i, n) else "Q3_K")
        if ft == "IQ3_M" and (i < n // 8 or (st.n_expert == 8 and _more_bits(i, n))):
            return "Q4_K"
        if ft == "Q3_K_L":
            return "Q4_K" if falcon else "Q5_K"
        if ft == "Q4_K_M":
            if falcon:
                return "Q6_K" if i < n // 16 else ("Q5_K" if _more_bits(i, n) else "Q4_K")
            return "Q6_K" if _more_bits(i, n) else new
        if i < n // 8 and ft in ("IQ4_NL", "IQ4_XS"):
            return "Q5_K"
        if ft == "Q5_K_M" and _more_bits(i, n):
            return "Q6_K"
        if ft == "Q4_K_S" and not falcon and i < n // 8:
            return "Q5_K"
        return new
    if cat == "attn_output":
        if st.arch == "falcon":
            return "Q4_K" if ft == "Q3_K_L" else new
        if st.n_expert == 8:
            if ft in ("Q2_K", "IQ3_XS", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ3_S",
                      "IQ3_M", "IQ4_XS"):
                return "Q5_K"
            return new
        return {"Q2_K": "Q3_K", "IQ3_XXS": "IQ3_S", "Q3_K_M": "Q4_K", "Q3_K_L": "Q5_K", "IQ3_M": "Q4_K"}.get(ft, new)
    if cat in ("ffn_gate", "ffn_up") and ft == "IQ3_XS":
        i = _layer_of(name, 0)
        if st.n_layer // 8 <= i < 7 * st.n_layer // 8:
            return "IQ3_XXS"
    return new


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


def synth_tensors(m: ModelSpec, ftype: str, arch: str | None = None) -> list[TensorInfo]:
    """The GGUF tensor table for `m` quantized to `ftype` (a llama.cpp file type name)."""
    arch = arch or hf_to_arch(m.model_type)
    ftypes = data.load("gguf_quants.yaml")["ftypes"]
    if ftype not in ftypes:
        raise KeyError(ftype)
    base = default_type(ftype)
    lay = layout(m, arch)
    src_float = "BF16" if ftype == "BF16" else ("F32" if ftype == "F32" else "F16")
    n_attn_v = sum(1 for n, _ in lay if _category(n) in ("attn_v", "attn_qkv"))
    n_gqa = m.num_attention_heads // max(1, m.num_key_value_heads)
    st = _State(n_attn_v=n_attn_v, n_layer=m.num_hidden_layers, n_gqa=n_gqa, n_expert=m.num_experts,
                is_70b=m.num_hidden_layers == 80 and arch in ("llama", "qwen2"), arch=arch,
                tied=m.tie_word_embeddings)
    sizes = type_by_name()
    # gpt-oss ships its experts as MXFP4 blocks: convert_hf_to_gguf.py (GptOssModel) writes them as they
    # are for every --outtype, and llama-quantize keeps them (public F16 / Q5_K_M files and their logged
    # model buffers: the experts are MXFP4 in both), so only the other tensors follow the file type
    native_mxfp4 = m.model_type == "gpt_oss"
    out = []
    for name, shape in lay:
        n = 1
        for d in shape:
            n *= d
        if len(shape) < 2:
            t = "F32"
        elif native_mxfp4 and "_exps." in name:
            t = "MXFP4"
        elif not _allows(name, len(shape)):
            t = "F32" if "ffn_gate_inp" in name or "ssm_conv1d" in name else src_float
        elif base in ("F16", "BF16", "F32"):
            t = base
        else:
            t = _pick(st, name, ftype, base, shape[0])
            if shape[0] % sizes[t][1]:
                t = FALLBACK.get(t, "F16")
                if shape[0] % sizes[t][1]:
                    t = "F16"
        _, blk, size = sizes[t]
        out.append(TensorInfo(name, shape, t, n // blk * size))
    return out
