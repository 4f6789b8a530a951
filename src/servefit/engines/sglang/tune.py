"""SGLang as tune sees it: context_length, KV dtype, mem_fraction_static, tp_size,
max_running_requests."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.tune.adapters import GenericAdapter

if TYPE_CHECKING:
    pass


class SglangAdapter(GenericAdapter):
    engine = "sglang"
    context_name = "context_length"
    seqs_name = "max_running_requests"
    fraction_name = "mem_fraction_static"
    tp_name = "tp_size"
    fraction_ceiling = 0.9  # SGLang's own default is often far lower; its OOM message says to raise it
