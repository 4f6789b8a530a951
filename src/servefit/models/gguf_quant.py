"""The tensor table llama-quantize would write for a model, without the file.

`synth_tensors(spec, ftype)` takes the tensors convert_hf_to_gguf.py produces for the
architecture (models/gguf_layout.py) and gives each the type llama-quantize picks for that file
type, following src/llama-quant.cpp:
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
from servefit.models.gguf import TensorInfo, type_by_name
from servefit.models.gguf_layout import layout
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
        if ftype == "OLLAMA_MXFP4" and native_mxfp4 and name.endswith("_exps.bias"):
            t = "F16"  # Ollama's converter (convert/reader.go tensorBase.Kind): a 2-D tensor is F16
        elif len(shape) < 2 or (native_mxfp4 and name.endswith("_exps.bias")):  # F32 in the public files (289 F32
            t = "F32"                                                          # tensors: 12 a block, + output_norm)
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
