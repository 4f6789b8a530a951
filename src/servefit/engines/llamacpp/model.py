"""The model as llama.cpp sees it: hparams per layer (src/llama-hparams.cpp) and the GGUF tensor
table, from a local GGUF header or from a catalog ModelSpec plus the llama-quantize type model."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from servefit import data
from servefit.core import UsageError
from servefit.engines.llamacpp.versions import MLA_V_LESS
from servefit.memory.kv import MHA_CACHE_MLA_TYPES
from servefit.models.gguf import ArrayLen, GgufInfo, TensorInfo, read_gguf
from servefit.models.gguf_names import dynamic_quant
from servefit.models.gguf_quant import hf_to_arch, synth_tensors
from servefit.models.gguf_spec import swa_layers
from servefit.models.spec import ModelSpec

RECURRENT_ARCHS = {"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"}
FALCON_H1 = ("falcon-h1", "falcon_h1")  # the GGUF's name and the catalog's model_type
HYBRID_ARCHS = {"jamba", "falcon-h1", "nemotron_h", "nemotron_h_moe", "granitehybrid", "qwen3next", "lfm2",
                "lfm2moe", "plamo2", "kimi-linear", "kimi-k3", "qwen35", "qwen35moe"}


@dataclass
class LModel:
    """The model as llama.cpp's loader sees it: per-layer hyperparameters and the tensor table, from a GGUF
    header or a catalog entry (with what had to be assumed)."""

    arch: str
    name: str
    n_layer: int  # block_count (n_layer_all)
    n_embd: int
    n_vocab: int
    n_ctx_train: int
    n_head: list[int]
    n_head_kv: list[int]  # 0: no attention in that layer
    head_k: int
    head_v: int
    head_k_swa: int
    head_v_swa: int
    swa: list[bool]
    n_swa: int
    mla: bool = False  # K-only cache (has_v = !is_mla)
    recurrent: list[bool] = field(default_factory=list)
    n_embd_r: int = 0
    n_embd_s: int = 0
    n_layer_kv_from_start: int = -1  # layers at or past this share an earlier layer's cache
    n_ff: int = 0
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    embedding: bool = False  # pooling_type present
    n_embd_per_layer: int = 0  # Gemma 4 E2B / E4B per-layer input embeddings (embedding_length_per_layer_input)
    n_nextn: int = 0  # MTP blocks appended as the last layers (mtp.with_nextn)
    nextn_kv_heads: int = 0  # their KV heads (cached in the MTP draft context)
    tensors: list[TensorInfo] = field(default_factory=list)
    ftype: str | None = None
    source: str = "gguf"
    assumptions: list[str] = field(default_factory=list)

    @property
    def n_head_max(self) -> int:
        return max(self.n_head) if self.n_head else 1

    @property
    def tied(self) -> bool:
        return not any(t.name == "output.weight" for t in self.tensors)

    def has_kv(self, il: int) -> bool:
        if self.recurrent and self.recurrent[il] and self.arch not in FALCON_H1:  # Falcon-H1: attention and SSM
            return False
        if self.n_head_kv[il] == 0:
            return False
        return not (0 <= self.n_layer_kv_from_start <= il)

    def k_width(self, il: int) -> int:
        """hparams.n_embd_k_gqa(il) (SWA layers use the _swa head size)."""
        hd = self.head_k_swa if self.swa[il] else self.head_k
        return hd * self.n_head_kv[il]

    def v_width(self, il: int, b: int | None = None) -> int:
        """hparams.n_embd_v_gqa(il) as cached at build b (None: the newest). MLA models (hparams.is_mla()) cache
        no V from PR #19067 (src/llama-kv-cache.cpp llama_kv_cache::llama_kv_cache: has_v = !is_mla); before it V
        held n_embd_head_v = kv_lora_rank (the GGUF's value_length) per cell as well."""
        if self.mla and (b is None or b >= MLA_V_LESS):
            return 0
        hd = self.head_v_swa if self.swa[il] else self.head_v
        return hd * self.n_head_kv[il]

    @property
    def weight_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)


def _per_layer(v: Any, n: int, default: int) -> list[int]:
    if isinstance(v, list):
        vals = [int(x) for x in v][:n]
        return vals + [vals[-1] if vals else default] * (n - len(vals))
    if isinstance(v, ArrayLen) or v is None:
        return [default] * n
    return [int(v)] * n


def recurrent_layers(info: GgufInfo, arch: str, n: int, n_head_kv: list[int]) -> list[bool]:
    """hparams.recurrent_layer_arr as src/llama-model.cpp::load_hparams sets it per architecture (read in the copy
    Ollama vendored at llama.cpp a5bb8ba4, and src/models/qwen35.cpp): Falcon-H1 every layer (each also holds
    attention KV: create_memory's filter_attn and filter_recr both return true); Qwen3-Next / Qwen3.5 every layer
    but each full_attention_interval-th (default 4; an attention.recurrent_layers array wins), whatever
    head_count_kv says; Nemotron-H the layers with neither KV heads nor a feed-forward (its MLP / MoE blocks are
    neither); the other hybrids the layers without KV heads."""
    if arch in RECURRENT_ARCHS or arch in FALCON_H1:
        return [True] * n
    if arch in ("qwen3next", "qwen35", "qwen35moe"):
        arr = info.get("attention.recurrent_layers")
        if isinstance(arr, list) and arr:
            return [bool(x) for x in arr[:n]] + [False] * max(0, n - len(arr))
        every = int(info.get("full_attention_interval", 4) or 4)
        return [(i + 1) % every != 0 for i in range(n)]
    if arch in ("nemotron_h", "nemotron_h_moe"):
        ff = _per_layer(info.get("feed_forward_length"), n, 0)
        return [n_head_kv[i] == 0 and ff[i] == 0 for i in range(n)]
    return [arch in HYBRID_ARCHS and n_head_kv[i] == 0 for i in range(n)]


def from_gguf(info: GgufInfo) -> LModel:
    """src/llama-model.cpp::load_hparams over the keys of docs PART C."""
    n = int(info.get("block_count", 0) or 0)
    n_embd = int(info.get("embedding_length", 0) or 0)
    n_head = _per_layer(info.get("attention.head_count"), n, 1)
    n_head_kv = _per_layer(info.get("attention.head_count_kv"), n, n_head[0] if n_head else 1)
    if info.get("attention.head_count_kv") is None:
        n_head_kv = list(n_head)
    hk_default = n_embd // max(1, max(n_head))
    head_k = int(info.get("attention.key_length", 0) or hk_default)
    head_v = int(info.get("attention.value_length", 0) or hk_default)
    swa, window = swa_layers(info, n)
    arch = info.arch
    recurrent = recurrent_layers(info, arch, n, n_head_kv)
    d_conv = int(info.get("ssm.conv_kernel", 0) or 0)
    d_inner = int(info.get("ssm.inner_size", 0) or 0)
    d_state = int(info.get("ssm.state_size", 0) or 0)
    n_group = int(info.get("ssm.group_count", 0) or 0)
    if arch.startswith("rwkv"):
        n_embd_r = int(info.get("token_shift_count", 2) or 2) * n_embd
        n_embd_s = n_embd * int(info.get("wkv.head_size", 64) or 64)
    elif arch in ("lfm2", "lfm2moe"):
        n_embd_r, n_embd_s = n_embd * (int(info.get("shortconv.l_cache", 3) or 3) - 1), 0
    else:  # llama_hparams::n_embd_r / n_embd_s (Mamba / Mamba-2 / gated delta net)
        n_embd_r = max(0, d_conv - 1) * (d_inner + 2 * n_group * d_state)
        n_embd_s = d_state * d_inner
    shared = int(info.get("attention.shared_kv_layers", 0) or 0)
    ff = info.get("feed_forward_length")
    mla = f"{arch}.attention.key_length_mla" in info.kv
    return LModel(
        arch=arch, name=str(info.kv.get("general.name") or os.path.basename(info.path)), n_layer=n, n_embd=n_embd,
        n_vocab=info.n_vocab, n_ctx_train=int(info.get("context_length", 0) or 0), n_head=n_head,
        n_head_kv=n_head_kv, head_k=head_k, head_v=head_v,
        head_k_swa=int(info.get("attention.key_length_swa", 0) or head_k),
        head_v_swa=int(info.get("attention.value_length_swa", 0) or head_v),
        swa=swa, n_swa=window, mla=mla, recurrent=recurrent, n_embd_r=n_embd_r, n_embd_s=n_embd_s,
        n_layer_kv_from_start=n - shared if shared else -1,
        n_ff=max(ff) if isinstance(ff, list) and ff else int(ff or 0),
        n_expert=int(info.get("expert_count", 0) or 0), n_expert_used=int(info.get("expert_used_count", 0) or 0),
        n_ff_exp=int(info.get("expert_feed_forward_length", 0) or 0),
        embedding=info.get("pooling_type") is not None, tensors=list(info.tensors),
        n_embd_per_layer=int(info.get("embedding_length_per_layer_input", 0) or 0),
        ftype=None, source="gguf")


def from_spec(m: ModelSpec, ftype: str) -> LModel:
    """The GGUF convert_hf_to_gguf.py + llama-quantize would make of a catalog model."""
    arch = hf_to_arch(m.model_type)
    n = m.num_hidden_layers
    kinds = m.kinds()

    swa_arch = data.load("gguf_quants.yaml")["swa_arch"].get(arch)
    window = m.sliding_window or m.attention_chunk_size or (swa_arch or {}).get("window", 0)
    if swa_arch and window:
        if any(k in ("sliding", "chunked") for k in kinds):
            swa = [k in ("sliding", "chunked") for k in kinds]
        else:
            p = int(swa_arch["pattern"])
            swa = [(il % p) < (p - 1) for il in range(n)]
    else:
        swa, window = [False] * n, 0
    recurrent = [k in ("mamba", "linear") for k in kinds]
    if arch in FALCON_H1:  # load_hparams LLM_ARCH_FALCON_H1: recurrent_layer_arr all true, attention in every layer too
        recurrent = [True] * n
    # MiniCPM3: llama.cpp reads no key_length_mla for it (llama-model.cpp LLM_ARCH_MINICPM3 hparams:
    # q/kv LoRA ranks only), so hparams.is_mla() is false and K and V are cached per head as in vLLM
    # (V width taken as head_dim here: the GGUF's value_length was not confirmed)
    mla = m.is_mla and m.model_type not in MHA_CACHE_MLA_TYPES
    if mla:
        head_k = m.kv_lora_rank + m.qk_rope_head_dim
        n_head_kv = [0 if k in ("mamba", "linear", "none") else 1 for k in kinds]
    else:
        head_k = m.head_dim
        n_head_kv = [0 if k in ("mamba", "linear", "none") else m.num_key_value_heads for k in kinds]
    n_head = [m.num_attention_heads] * n
    if m.model_type == "openelm":
        # convert_hf_to_gguf.py OpenELMModel writes head_count / head_count_kv per layer (layer-wise scaling) and
        # llama.cpp caches each layer's own n_embd_k_gqa(il); the catalog's num_key_value_heads is the widest
        from servefit.models.arch_openelm import layer_shapes

        shapes = layer_shapes(m)
        n_head, n_head_kv = [q for q, _, _ in shapes], [kv for _, kv, _ in shapes]
    head_swa = head_k
    if m.layout.get("global_head_dim"):
        # Gemma 4 (src/models/gemma4.cpp): full layers carry the global head size and KV heads
        # (n_embd_head_k == n_embd_head_v, so V is cached too), SWA layers key_length_swa
        from servefit.models.arch_gemma4 import attention_shape

        head_k, kv_full = attention_shape(m, "full")
        n_head_kv = [kv_full if k == "full" else h for k, h in zip(kinds, n_head_kv, strict=True)]
    head_v = head_k if head_swa != head_k else m.head_dim
    if mla:  # convert_hf_to_gguf.py DeepseekV2Model.set_gguf_parameters: value_length = kv_lora_rank
        head_v = m.kv_lora_rank
    if m.model_type == "mimo_v2_flash":  # src/models/mimo2-iswa.cpp: n_head_kv(il), K n_embd_head_k, V n_embd_head_v
        from servefit.models.arch_mimo_v2 import kv_shape

        n_head_kv = [kv_shape(m, k)[0] for k in kinds]
        head_v = kv_shape(m, "full")[2]
    shared = int(m.layout.get("num_kv_shared_layers") or 0)  # gemma4.cpp: n_layer_kv_from_start
    mb = m.mamba or {}
    # Mamba-2 configs that give heads x head size instead (Falcon-H1's mamba_d_ssm = mamba_n_heads x mamba_d_head,
    # which convert_hf_to_gguf.py writes as ssm.inner_size)
    d_inner = int(mb.get("d_inner") or mb.get("intermediate_size")
                  or int(mb.get("num_heads") or 0) * int(mb.get("head_dim") or 0))
    d_state = int(mb.get("d_state") or mb.get("state_size") or 0)
    d_conv = int(mb.get("d_conv") or mb.get("conv_kernel") or 0)
    n_group = int(mb.get("n_groups") or 0)
    n_embd_r, n_embd_s = max(0, d_conv - 1) * (d_inner + 2 * n_group * d_state), d_state * d_inner
    if mb.get("kind") == "kda":  # llama-hparams.cpp n_embd_r / n_embd_s with n_embd_head_kda (Kimi KDA layers)
        kda_heads, kda_hd = int(mb.get("num_value_heads") or 0), int(mb.get("value_head_dim") or 0)
        n_embd_r, n_embd_s = 3 * max(0, d_conv - 1) * kda_heads * kda_hd, kda_hd * kda_hd * kda_heads
    if mb.get("conv_state_elems") is not None:  # the catalog's per-layer state (models/recurrent_state.py) is
        # llama_hparams::n_embd_r / n_embd_s (src/llama-hparams.cpp): (d_conv - 1) x (d_inner + 2 n_group d_state)
        # and d_state x d_inner, with Qwen3.5's ssm_d_inner = value heads x head_v_dim, ssm_n_group = key heads,
        # ssm_d_state = head_k_dim (src/models/qwen35.cpp load_arch_tensors), LFM2's n_embd x (L_cache - 1)
        n_embd_r, n_embd_s = int(mb["conv_state_elems"]), int(mb.get("ssm_state_elems") or 0)
    lm = LModel(
        arch=arch, name=m.name, n_layer=n, n_embd=m.hidden_size, n_vocab=m.vocab_size,
        n_ctx_train=m.max_position_embeddings, n_head=n_head, n_head_kv=n_head_kv,
        head_k=head_k, head_v=head_v, head_k_swa=head_swa,
        head_v_swa=head_v if m.model_type == "mimo_v2_flash" else m.head_dim, swa=swa, n_swa=int(window),
        mla=mla, recurrent=recurrent, n_embd_r=n_embd_r, n_embd_s=n_embd_s, n_ff=_widest_ff(m), n_expert=m.num_experts,
        n_expert_used=m.num_experts_per_tok, n_ff_exp=m.moe_intermediate_size,
        n_embd_per_layer=int(m.layout.get("hidden_size_per_layer_input") or 0),
        n_layer_kv_from_start=n - shared if shared else -1,
        tensors=_synth(m, ftype, arch), ftype=ftype, source="catalog")
    return lm


def _widest_ff(m: ModelSpec) -> int:
    """hparams.n_ff(il)'s largest value: Gemma 4's KV-shared layers are twice as wide with use_double_wide_mlp
    (src/models/gemma4.cpp load_arch_tensors: n_ff_cur = hparams.n_ff(i); the GGUF's per-layer feed_forward_length)."""
    if m.model_type == "gemma4" and m.layout.get("use_double_wide_mlp"):
        from servefit.models.arch_gemma4 import layer_mlp_width

        return max(layer_mlp_width(m, i) for i in range(m.num_hidden_layers))
    return m.intermediate_size


_SYNTH: dict[tuple[str, str, str], tuple[TensorInfo, ...]] = {}


def _synth(m: ModelSpec, ftype: str, arch: str) -> list[TensorInfo]:
    """synth_tensors once per model and file type in a run (a repo of many servers of one
    model; TensorInfo is frozen, so the table is shared, the list is each model's own)."""
    key = (ftype, arch, repr(m))
    hit = _SYNTH.get(key)
    if hit is None:
        if len(_SYNTH) > 256:
            _SYNTH.clear()
        hit = _SYNTH[key] = tuple(synth_tensors(m, ftype, arch))
    return list(hit)


def load(settings: dict[str, Any], spec: ModelSpec, assumptions: list[str]) -> LModel:
    """From the local GGUF when `-m` names a readable file, else from the catalog spec."""
    path = settings.get("model")
    if isinstance(path, str) and path.lower().endswith(".gguf") and os.path.isfile(path):
        return from_gguf(read_gguf(path))
    if spec.gguf is not None:  # a GGUF header from the model lock or the Hub (models/lock.py)
        return from_gguf(spec.gguf)
    quant = settings.get("gguf_quant")
    if not quant:
        quant = "Q4_K_M"
        assumptions.append("GGUF quantization unknown: Q4_K_M assumed (put the quant in the file name or -hf repo:QUANT)")
    quant = str(quant)
    if quant not in data.load("gguf_quants.yaml")["ftypes"]:
        raise UsageError(f"the GGUF quantization {quant!r} is not a llama.cpp file type servefit can size "
                         "(Q4_K_M, Q5_K_M, Q6_K, Q8_0, IQ4_XS, F16, ...): name the file type in the file name or "
                         "-hf repo:QUANT, or point -m at the GGUF file so its header is read")
    lm = from_spec(spec, quant)
    dyn = dynamic_quant(str(settings.get("model") or ""))
    if dyn:  # Unsloth keeps some tensors above the base type; which ones, only the file's header says
        assumptions.append(f"{dyn} is an Unsloth Dynamic quant: some of its tensors are stored at higher precision "
                           f"than {quant}, in a per-file mix that cannot be known without the file, so its weights were "
                           f"sized as plain {quant} ({lm.weight_bytes / 2**30:.2f} GiB; the file is likely larger: "
                           "a model lock or --online reads its header)")
        return lm
    maker = "Ollama's converter writes it" if quant == "OLLAMA_MXFP4" else f"llama-quantize makes {quant}"
    said = any(f" taken as {spec.name}" in a for a in spec.assumptions)  # the GGUF's name resolution names it
    assumptions.append(f"weights sized {'' if said else f'from {spec.name} '}as {maker} "
                       f"({lm.weight_bytes / 2**30:.2f} GiB; the real file may differ slightly)")
    return lm
