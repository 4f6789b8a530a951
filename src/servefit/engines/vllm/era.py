"""What changed between vLLM releases, as facts the memory model switches on.

Eras modelled: <=0.10 (V0 engine before 0.8; V1 from 0.8), 0.11-0.19, 0.20-0.32, 0.33 (current).
Boundaries are the releases named in shared/research/vllm.md §7; where a change's release is not
known exactly the nearer documented release is used and said in the assumptions.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from servefit.engines.base import version_tuple

CURRENT = "0.33.0"


def vtuple(version: str) -> tuple[int, int, int]:
    """The release whose behaviour a version has: the version itself, or for a build of the main
    branch numbered after a minor's last release (see main_build) the next minor's first release."""
    return main_build(version) or version_tuple(version, CURRENT)


@lru_cache(maxsize=256)
def main_build(version: str | None) -> tuple[int, int, int] | None:
    """A pre-release build numbered past the last release of its minor (`0.19.2rc1.dev134`: no 0.19.2
    was released; 0.19.1 was the last) is main on its way to the next minor, and behaves as that
    release does (the 0.19.2rc1.dev134 log's gpu_worker.py line numbers are 0.20.0's, with 0.20's
    CUDA-graph profiling default). None for releases and for builds of a released version (their
    release branch: `0.10.1.dev101`, `0.6.4.post2.dev`). Releases from data/engines/vllm_history.yaml."""
    if not version or not any(t in version for t in ("rc", "dev")):
        return None
    from servefit.engines.options import load_table

    x, y, z = version_tuple(version, CURRENT)
    released = [version_tuple(r, CURRENT) for r in load_table("vllm").releases]
    last = max((r[2] for r in released if r[:2] == (x, y)), default=None)
    if last is None or z <= last or not any(r[:2] == (x, y + 1) for r in released):
        return None
    return x, y + 1, 0


def main_build_note(version: str | None) -> str | None:
    """The assumption main_build makes, in the user's words."""
    planned = main_build(version)
    if planned is None:
        return None
    x, y, z = version_tuple(version, CURRENT)
    return (f"vLLM {version} is a build of the main branch after the last {x}.{y} release ({x}.{y}.{z} was never "
            f"released): planned as {'.'.join(map(str, planned))}, the release it led to")


OLDEST_MODELLED = "0.4.0"  # the memory accounting is read from releases from here on (shared/research/vllm.md)


def before_modelled_note(version: str | None) -> str | None:
    """Said for a release older than any whose memory accounting servefit models (a KServe 0.12 image runs
    vLLM 0.2.7): it is planned with the oldest modelled release's, which is not that release's."""
    if not version or version_tuple(version, CURRENT) >= version_tuple(OLDEST_MODELLED, CURRENT):
        return None
    return (f"vLLM {version} is older than the releases servefit models ({OLDEST_MODELLED} and later): planned "
            f"the way {OLDEST_MODELLED} accounts memory, so its figures are rough")


# The "GPU KV cache size" fix (vllm-project/vllm#40694, after issue #40691: the old count divides the
# blocks evenly over the KV-cache groups at the smallest block size) is in the 0.20.1 release's
# _report_kv_cache_config but not in main builds numbered 0.20.1rcN.devM, made after the 0.20.1 cut: the
# 0.20.1rc1.dev16+g7a1eb8ac2 nightly (2026-05-04) logs "GPU KV cache size" at kv_cache_utils.py:1713 and
# "Maximum concurrency" at :1718, five lines apart as in 0.20.0 (1711 / 1716), where 0.20.1 has 1708 /
# 1709, and its count is 0.20.0's (blocks // groups x block size). The fix reached 0.20.1 on its release
# branch; the 0.20.2rc1.dev9 builds log the new count. Which 0.20.1rc1.devM first had it is not known:
# every pre-release of 0.20.1 is planned with the old count.
TOKENS_FIX = (0, 20, 1)


def prerelease_of(version: str | None, release: tuple[int, int, int]) -> bool:
    """Whether `version` is a pre-release build (rc / dev) numbered as `release`: `0.20.1rc1.dev16+g7a1eb8ac2`
    of (0, 20, 1); not the release itself, nor a later one's build (`0.20.2rc1.dev9`)."""
    if not version or not any(t in version for t in ("rc", "dev")):
        return False
    return version_tuple(version, CURRENT) == release


def tokens_fix_note(version: str | None) -> str | None:
    """The TOKENS_FIX assumption, in the user's words, for a pre-release of 0.20.1."""
    if not prerelease_of(version, TOKENS_FIX):
        return None
    return (f"vLLM {version} is a build made before the 0.20.1 release: its 'GPU KV cache size' is planned as "
            "0.20.0 logs it (the blocks divided evenly over the KV-cache groups), not as the 0.20.1 release's "
            "concurrency x max-model-len; which 0.20.1 pre-release first logs the new count is not known")


@dataclass(frozen=True)
class Era:
    """A vLLM release as the facts the memory model switches on, so a command is planned the way that release
    would run it."""

    version: str
    v1: bool  # V1 engine (default from 0.8; VLLM_USE_V1=0 selects V0 up to 0.10)
    default_util: float  # CacheConfig.gpu_memory_utilization default
    ceil_budget: bool  # request_memory: ceil(total x util) vs a float product
    cudagraph_subtracted: bool  # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default on
    null_block_in_check: bool  # _check_enough_kv_cache_memory sees available - one block
    tokens_from_concurrency: bool  # "GPU KV cache size" = int(concurrency x max_model_len)
    group_merge_ratio: float  # KV groups take the largest kind's layer count below this ratio (0: never)
    hybrid_kv_manager: bool  # V1 keeps sliding-window layers in their own KV groups
    auto_max_model_len: bool  # --max-model-len auto / -1
    big_gpu_tier: bool  # >=160 GiB batch-default row
    yarn_uses_original: bool  # derived len = original_max_position_embeddings x factor
    capture_stride16: bool  # capture sizes step 16 above 256 (else 8 all the way)
    has_bnb_gguf: bool


def era(version: str | None, env: dict[str, str] | None = None) -> Era:
    v = vtuple(version or CURRENT)
    env = env or {}
    use_v1 = env.get("VLLM_USE_V1")
    v1 = v >= (0, 8, 0) if use_v1 is None else (use_v1 not in ("0", "false", "False") or v >= (0, 11, 0))
    return Era(
        version=version or CURRENT,
        v1=v1,
        default_util=0.92 if v >= (0, 20, 0) else 0.9,
        ceil_budget=v >= (0, 20, 0),
        # gpu_worker.py::Worker.determine_available_memory subtracts profile_cudagraph_memory's estimate
        # where envs.VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is on: the variable exists from 0.18.0 (absent
        # from the 0.17.0 wheel's envs.py, where setting it does nothing), default "0" there, "1" from 0.20.0
        cudagraph_subtracted=v >= (0, 18, 0) and _env_flag(env, "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS",
                                                           v >= (0, 20, 0)),
        null_block_in_check=v >= (0, 33, 0),
        # v1/core/kv_cache_utils.py::_report_kv_cache_config: int(max_concurrency x max_model_len) from
        # 0.20.1 (0.20.0 still logs num_blocks // len(kv_cache_groups) x min block size); see TOKENS_FIX
        tokens_from_concurrency=v >= TOKENS_FIX and not prerelease_of(version, TOKENS_FIX),
        # _get_kv_cache_groups_uniform_page_size: group size = the smallest kind's count up to 0.11;
        # the largest kind's when max < min x 1.25 from 0.12, x 1.5 from 0.18 (checked in each wheel)
        group_merge_ratio=1.5 if v >= (0, 18, 0) else (1.25 if v >= (0, 12, 0) else 0.0),
        # kv_cache_utils.py::get_kv_cache_config: up to 0.9.0 unify_hybrid_kv_cache_specs turns every
        # sliding-window layer into full attention; from 0.9.1 only with --disable-hybrid-kv-cache-manager
        hybrid_kv_manager=v >= (0, 9, 1),
        auto_max_model_len=v >= (0, 20, 0),
        big_gpu_tier=v >= (0, 28, 0),  # engine/arg_utils.py::get_batch_defaults (0.27.1 vs 0.28.0)
        yarn_uses_original=v < (0, 33, 0),
        # config/vllm.py::VllmConfig._set_cudagraph_sizes: [1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)
        # from 0.11.1 (read in the 0.11.1 and 0.11.2 wheels); 0.11.0 steps by 8 up to the ceiling
        capture_stride16=v >= (0, 11, 1),
        has_bnb_gguf=v < (0, 33, 0),
    )


def _env_flag(env: dict[str, str], name: str, default: bool) -> bool:
    val = env.get(name)
    if val is None:
        return default
    return val.strip().lower() in ("1", "true", "yes")
