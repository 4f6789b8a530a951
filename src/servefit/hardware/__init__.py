"""Hardware: the GPU catalog and the names that resolve to it."""

from servefit.hardware.catalog import (
    all_gpus,
    catalog_assumption,
    lookup,
    lookup_instance,
    resolve_gpu,
    resolve_target,
    with_memory,
)
from servefit.hardware.spec import GpuSpec
from servefit.hardware.unlisted import unlisted

__all__ = [
    "GpuSpec",
    "all_gpus",
    "catalog_assumption",
    "lookup",
    "lookup_instance",
    "resolve_gpu",
    "resolve_target",
    "unlisted",
    "with_memory",
]
