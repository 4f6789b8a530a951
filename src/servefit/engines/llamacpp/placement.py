"""Where llama.cpp puts each tensor and each layer's KV cache (src/llama-model.cpp::
llama_model_base::load_tensors):
- layers [0, n_layer] (index n_layer = the output layer: output_norm + output.weight) go to a GPU
  iff il >= i_gpu_start = max(n_layer + 1 - ngl, 0) (b7467+: the output layer is offloaded first);
  before b7467 i_gpu_start = max(n_layer - ngl, 0) and the output layer needs ngl > n_layer;
- token_embd (the input layer) always stays on the CPU (dev_input = cpu_dev); with tied embeddings
  it is loaded a second time as the output tensor (TENSOR_DUPLICATED);
- Gemma 3n / 4 per-layer embeddings: per_layer_model_proj and per_layer_proj_norm are
  LLM_TENSOR_LAYER_REPEATING in llama-arch.cpp's LLM_TENSOR_INFOS and named with layer 0
  (tn(..., "weight", 0) in the gemma3n / gemma4 loaders), so they go where layer 0 goes;
  per_layer_token_embd is LLM_TENSOR_LAYER_INPUT (the CPU) on every backend but one: on Apple
  Metal with the file memory-mapped, llama.cpp logs it in the MTL model buffer (a b8700 Gemma-4
  E2B log: CPU_Mapped 216 MiB is token_embd alone), while with --no-mmap the CPU buffer holds it
  (docker/desktop-feedback#443, Gemma-4 E4B on Metal: CPU 2288 MiB). The loader path that moves
  it was not found in load_tensors / make_cpu_buft_list; this follows the logs;
- -sm layer: device = upper_bound(splits, (il - i_gpu_start) / act_gpu_layers), splits the
  normalised cumulative -ts (default: each device's free memory); -sm none: all on -mg;
- -ot regex=BUFT overrides, -cmoe / -ncmoe N move ffn_*_exps to the CPU.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field

from servefit.engines.llamacpp import versions as V
from servefit.engines.llamacpp.model import LModel

CPU = -1
_EXPS = re.compile(r"\.ffn_(up|down|gate|gate_up)_(ch|)exps")


def layer_of(name: str, n_layer: int) -> int | None:
    """Layer index of a tensor; n_layer for the output layer; None for the input layer."""
    if name.startswith("blk."):
        try:
            return int(name.split(".")[1])
        except ValueError:
            return None
    if name.startswith("output"):
        return n_layer
    return None


def layer_devices(n_layer: int, ngl: int, n_dev: int, split_mode: str, splits: list[float],
                  main_gpu: int, b: int) -> list[int]:
    """Device of each layer index 0..n_layer (CPU = -1)."""
    ngl = max(0, min(ngl, n_layer + 1))
    if n_dev == 0 or ngl == 0:
        return [CPU] * (n_layer + 1)
    if b >= V.OUTPUT_FIRST:
        start = max(n_layer + 1 - ngl, 0)
        on_gpu = [il >= start for il in range(n_layer + 1)]
    else:
        start = max(n_layer - ngl, 0)
        on_gpu = [il >= start for il in range(n_layer)] + [ngl > n_layer]
    act = max(1, sum(on_gpu))
    cum, acc = [], 0.0
    total = sum(splits) or 1.0
    for s in splits:
        acc += s / total
        cum.append(acc)
    out = []
    for il in range(n_layer + 1):
        if not on_gpu[il]:
            out.append(CPU)
        elif split_mode == "none" or n_dev == 1:
            out.append(min(main_gpu, n_dev - 1))
        else:
            out.append(min(bisect_right(cum, (il - start) / act), n_dev - 1))
    return out


class _FirstLayersExperts:
    r"""-ncmoe N as one rule: llama.cpp adds `^blk\.{il}\.ffn_(up|down|gate|gate_up)_(ch|)exps` for
    il < N (common/arg.cpp), all to the CPU; one test instead of N patterns per tensor (explain
    and --fit place every tensor thousands of times)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def search(self, name: str) -> bool:
        if not name.startswith("blk."):
            return False
        il = name[4:name.find(".", 4)]
        return il.isdigit() and int(il) < self.n and _EXPS.match(name, 4 + len(il)) is not None


Rule = tuple["re.Pattern[str] | _FirstLayersExperts", int]


def _override_device(name: str, rules: list[Rule]) -> int | None:
    for pat, dev in rules:
        if pat.search(name):
            return dev
    return None


def parse_overrides(items: list[str], cpu_moe: bool, n_cpu_moe: int) -> list[Rule]:
    """-ot pattern=BUFT (CPU, CPU_REPACK, CUDA1, ...), then -cmoe / -ncmoe as llama.cpp adds them."""
    rules: list[Rule] = []
    for item in items:
        pat, _, buft = item.rpartition("=")
        m = re.search(r"(\d+)$", buft)
        dev = CPU if buft.upper().startswith("CPU") or not m else int(m.group(1))
        try:
            rules.append((re.compile(pat), dev))
        except re.error:
            continue
    if cpu_moe:
        rules.append((_EXPS, CPU))
    if n_cpu_moe > 0:
        rules.append((_FirstLayersExperts(n_cpu_moe), CPU))
    return rules


@dataclass
class Placement:
    """The device llama.cpp puts each layer on, and the weight bytes that end up on each device."""

    layer_dev: list[int]
    weights: dict[int, int] = field(default_factory=dict)  # device -> bytes (CPU = -1)
    n_offloaded: int = 0  # layers (output included) on a GPU, as "offloaded X/Y layers"

    def on(self, dev: int) -> int:
        return self.weights.get(dev, 0)


def _own_device(name: str, devs: list[int], metal_mapped: bool) -> int | None:
    """The device of a tensor outside the blocks that is not the input layer's (see the module
    docstring): the Gemma per-layer projection goes with layer 0; the per-layer embedding table
    with the first offloaded layer on Metal with mmap. None: the input layer's CPU."""
    if name in ("per_layer_model_proj.weight", "per_layer_proj_norm.weight"):
        return devs[0]
    if name == "per_layer_token_embd.weight" and metal_mapped:
        return next((d for d in devs if d != CPU), CPU)
    return None


def place(lm: LModel, ngl: int, n_dev: int, split_mode: str, splits: list[float], main_gpu: int,
          overrides: list[Rule], b: int, metal_mapped: bool = False) -> Placement:
    devs = layer_devices(lm.n_layer, ngl, n_dev, split_mode, splits, main_gpu, b)
    pl = Placement(layer_dev=devs, n_offloaded=sum(1 for d in devs if d != CPU))
    row = split_mode == "row" and n_dev > 1
    total_split = sum(splits) or 1.0
    tensors = list(lm.tensors)
    if lm.tied:
        emb = next((t for t in tensors if t.name == "token_embd.weight"), None)
        if emb is not None:  # TENSOR_DUPLICATED: the output layer's copy of the tied embedding
            from servefit.models.gguf import TensorInfo

            tensors.append(TensorInfo("output.weight", emb.shape, emb.type, emb.nbytes))
    for t in tensors:
        if t.name.startswith(("v.", "mm.", "a.")):  # inline vision/audio towers belong to mtmd
            continue
        il = layer_of(t.name, lm.n_layer)
        own = _own_device(t.name, devs, metal_mapped) if il is None else None
        dev = devs[il] if il is not None else CPU if own is None else own
        ov = _override_device(t.name, overrides)
        if ov is not None:
            dev = ov if ov == CPU or ov < max(n_dev, 1) else dev
        if row and dev != CPU and len(t.shape) >= 2 and il is not None and il < lm.n_layer:
            for d, frac in enumerate(splits):  # -sm row: matrix rows split by -ts
                pl.weights[d] = pl.weights.get(d, 0) + int(t.nbytes * frac / total_split)
            continue
        pl.weights[dev] = pl.weights.get(dev, 0) + t.nbytes
    return pl


def kv_devices(pl: Placement, n_layer: int, offload: bool, split_mode: str, main_gpu: int) -> list[int]:
    """The device of each layer's KV cache: the layer's device (model.dev_layer(il)), the CPU with
    -nkvo, or the main GPU with -sm row."""
    out = []
    for il in range(n_layer):
        d = pl.layer_dev[il]
        if not offload:
            d = CPU
        elif split_mode == "row" and d != CPU:
            d = main_gpu
        out.append(d)
    return out
