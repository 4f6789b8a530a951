"""SGLang's GPU-dependent defaults, by release, read from the wheels' python/sglang/srt/
server_args.py::ServerArgs.__post_init__ / _handle_gpu_memory_settings (0.4.6 ... 0.5.19) and
arg_groups/memory_hook.py::handle_gpu_memory_settings (0.5.20+).

`gpu_mem` is what get_device_memory_capacity() returns: nvidia-smi's memory.total in MiB (the
smallest over visible GPUs).

mem_fraction_static when unset:
- < 0.4.8 ("table"): by tp x pp on GPUs <= 80 GiB: 0.79 (>=16), 0.81 (>=8), 0.85 (>=4), 0.87 (>=2),
  0.88; otherwise 0.88, raised on > 96 GiB cards to min(f + 48 GiB x (1 - f) / gpu_mem,
  (gpu_mem - 18 GiB) / gpu_mem).
- 0.4.8 - 0.5.2 ("tier"): reserved = (2.8 + p/10) GiB below 35 GiB, (9.5 + p/2) GiB below 90 GiB,
  (12 + p/2) GiB below 160 GiB, else 32 GiB (+2 GiB speculative, +4 GiB DP attention).
- >= 0.5.3 ("formula"): reserved = 512 MiB + max(chunked_prefill_size, 2048) x 1.5 MiB
  + cuda_graph_max_bs x 2 MiB + tp x pp / 8 GiB (+ DP attention terms) (+ prefill / piecewise
  graph reserve from 0.5.10: 8 MiB per captured size, 1.5 GiB on MLA), at least 10 GiB on
  > 60 GiB GPUs (+2 / +4 / +6 GiB speculative).
  Then round((gpu_mem - reserved) / gpu_mem, 3); unknown GPU: 0.88 (0.95 from 0.5.20).
"""

from __future__ import annotations

from dataclasses import dataclass

from servefit.engines.base import version_tuple

CURRENT = "0.5.23"


def vtuple(v: str | None) -> tuple[int, int, int]:
    return version_tuple(v, CURRENT)


@dataclass(frozen=True)
class Era:
    """An SGLang release and the memory behaviour that changed across releases, so the plan follows the
    release in use."""

    version: str
    v: tuple[int, int, int]

    @property
    def mem_rule(self) -> str:
        return "table" if self.v < (0, 4, 8) else "tier" if self.v < (0, 5, 3) else "formula"

    @property
    def prefill_graph_reserve(self) -> bool:  # piecewise (0.5.10) / breakable (0.5.16) prefill graphs
        return self.v >= (0, 5, 10)

    @property
    def req_pool_plus_one(self) -> bool:  # ReqToTokenPool(size=max_num_reqs + 1) before 0.4.7
        return self.v < (0, 4, 7)

    @property
    def human_context(self) -> bool:  # --context-length parsed by human_readable_int
        return self.v >= (0, 5, 16)

    @property
    def unknown_fraction(self) -> float:
        return 0.95 if self.v >= (0, 5, 20) else 0.88


def era(version: str | None) -> Era:
    return Era(version=version or CURRENT, v=vtuple(version))


def chunk_and_graph_bs(e: Era, gpu_mem: float | None, tp: int) -> tuple[int, int]:
    """Default (chunked_prefill_size, decode cuda-graph max batch size) by GPU memory (MiB)."""
    if e.v < (0, 5, 3):
        if gpu_mem is None:
            return 4096, 160
        if e.v < (0, 4, 8):
            chunk = 2048 if gpu_mem < 25_000 else 8192
        else:
            chunk = 2048 if gpu_mem < 35 * 1024 else 8192 if gpu_mem < 160 * 1024 else 16384
        bs = (8 if tp < 4 else 80) if gpu_mem < (25_000 if e.v < (0, 4, 8) else 35 * 1024) else 160
        return chunk, bs
    if gpu_mem is None:
        return 4096, 160
    if gpu_mem < 20 * 1024:
        return 2048, 8
    if gpu_mem < 35 * 1024:
        if e.v >= (0, 5, 20):
            return 4096, 48 if tp < 4 else 160
        return 2048, (16 if e.v < (0, 5, 5) else 24) if tp < 4 else 80
    if gpu_mem < 60 * 1024:
        return 4096, 32 if tp < 4 else 160
    if gpu_mem < 160 * 1024:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def prefill_graph_sizes(max_tokens: int) -> int:
    """How many prefill graph sizes SGLang captures up to `max_tokens`
    (_generate_piecewise_cuda_graph_tokens / generate_prefill_cuda_graph_batch_sizes)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)))
    tail = len(range(4608, max_tokens + 1, 512))  # counted, not listed: the limit can be huge
    return len([s for s in sizes if s <= max_tokens]) + tail


def mem_fraction_static(e: Era, gpu_mem: float | None, tp: int, pp: int, chunk: int, max_prefill: int,
                        graph_bs: int, graphs: bool, dp_attention: int, speculative: str | None,
                        mla: bool) -> tuple[float, float]:
    """(mem_fraction_static, reserved MiB) as SGLang computes them when the flag is unset."""
    p = tp * pp
    if gpu_mem is None:
        return e.unknown_fraction, 0.0
    if e.mem_rule == "table":
        f = 0.88
        if gpu_mem <= 81920:
            f = 0.79 if p >= 16 else 0.81 if p >= 8 else 0.85 if p >= 4 else 0.87 if p >= 2 else 0.88
        if gpu_mem > 96 * 1024:
            f = min(f + 48 * 1024 * (1 - f) / gpu_mem, (gpu_mem - 1024 * 18) / gpu_mem)
        return f, (1 - f) * gpu_mem
    if e.mem_rule == "tier":
        if gpu_mem < 35 * 1024:
            reserved = (2.8 + p / 10) * 1024
        elif gpu_mem < 90 * 1024:
            reserved = (9.5 + p / 2) * 1024
        elif gpu_mem < 160 * 1024:
            reserved = (12 + p / 2) * 1024
        else:
            reserved = 32 * 1024
        reserved += (2 * 1024 if speculative else 0) + (4 * 1024 if dp_attention > 1 else 0)
        return round((gpu_mem - reserved) / gpu_mem, 3), reserved
    reserved = 512 + max(chunk if chunk > 0 else max_prefill, 2048) * 1.5 + p / 8 * 1024
    reserved += graph_bs * 2 if graphs else 0
    if dp_attention > 1:
        reserved += graph_bs * dp_attention * 3 + (graph_bs * dp_attention * 1.5 if graph_bs > 300 else 0)
    if e.prefill_graph_reserve and graphs:
        reserved += 1.5 * 1024 if mla else prefill_graph_sizes(chunk if chunk > 0 else 2048) * 8
    if gpu_mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if speculative:
        reserved += 6 * 1024 if speculative == "STANDALONE" else 0 if speculative == "NGRAM" else \
            (4 * 1024 if e.v >= (0, 5, 12) else 2 * 1024)
    return round((gpu_mem - reserved) / gpu_mem, 3), reserved


def human_readable_int(text: str, e: Era) -> int:
    """--context-length: int, or from 0.5.16 SI (k, M, G, T: x1000, decimals allowed) and IEC
    (Ki, Mi, Gi, Ti: x1024) suffixes, case-sensitive (srt/utils/common.py::human_readable_int).
    Unlike vLLM, `32K` is not a valid value."""
    import re
    from decimal import Decimal

    t = text.strip()
    if e.human_context:
        m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", t)
        if m:
            num, suf = m.groups()
            iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
            if suf in iec:
                if "." in num:
                    raise ValueError(f"Decimals are not allowed with IEC suffixes like '{suf}'")
                return int(num) * iec[suf]
            return int(Decimal(num) * {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}[suf])
    return int(t)
