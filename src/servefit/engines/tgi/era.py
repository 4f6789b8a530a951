"""What changes between TGI releases for memory, read off the v1.0.0 ... v3.3.7 tags of
huggingface/text-generation-inference.

- Before 0.9.4 the router does not infer max_batch_total_tokens: it is a launcher Arg with
  default 16000 (launcher/src/main.rs::main checks max_batch_prefill_tokens and max_total_tokens
  against it), and the shard's warm-up allocates ceil(max_batch_total_tokens / 16) + 10 blocks
  before the prefill (models/flash_causal_lm.py::FlashCausalLM.warmup(batch, max_total_tokens));
  from 0.9.4 warm-up returns the KV capacity it found room for (router/src/main.rs: "Setting max
  batch total tokens to N").
- Launcher defaults for max_input_tokens / max_total_tokens / max_batch_prefill_tokens
  (launcher/src/main.rs::main):
  * < 2.0: Args defaults 1024 / 2048 / 4096.
  * 2.0 - 2.4.0: from config.json's max_position_embeddings capped at 4096 ("max_default"):
    input = mpe - 1, total = mpe, prefill = input + 50 (or max_batch_size x input).
  * 2.4.1: input / total left to the shard (None); prefill = min(4096, capped mpe).
  * >= 3.0: input / total left to the shard; prefill from compute_optimal / vram_maximum.
- Warmup free memory (server/.../models/flash_causal_lm.py::warmup and
  utils/import_utils.py::get_cuda_free_memory):
  * < 1.4.1: free // block (no wiggle room); 1.4.1 - 2.2: free x 0.95;
    2.3: free x TGI_WIGGLE_ROOM (0.95); 2.4: free x TGI_WIGGLE_ROOM (0.90);
  * >= 3.0: get_free_memory(device, CUDA_MEMORY_FRACTION x TGI_WIGGLE_ROOM), i.e. the
    wiggle room is a share of the *total* memory (3.0: 0.95, 3.1 - 3.2: 0.93, >= 3.3: 0.90).
- Warm-up blocks added back to the count: 0.9.4 - 2.0.x the cache manager's, 2.1.0 - 2.4.0 those of the
  batch generate_token returns (`batch.num_blocks if batch is not None else 0`: none when every warm-up
  request asked one new token and finished in the prefill), from 2.4.1 batch.num_blocks read before it.
- The router's warmup requests ask for prefill log-probabilities of every prompt token before
  3.0 (the shard honours it); from 3.0 the shard ignores them unless REQUEST_LOGPROBS=1
  (models/flash_causal_lm.py: `if not REQUEST_LOGPROBS: r.prefill_logprobs = False`).
  From 2.4.0 FlashCausalLM.generate_token takes those log-probabilities in place,
  `torch.log_softmax(out, -1, out=out)` (#2661, "avoid copying the `out` tensor
  (max_batch_prefill_tokens * vocab_size)"); before, `torch.log_softmax(out, -1)` allocated a
  second tokens x vocab tensor in the model dtype.
- Attention backend and block size (models/globals.py; launcher resolve_attention): 16 before
  2.3; from 2.3 flashinfer (block 1) by default, paged (16) below compute capability 8.0,
  flashdecoding (256) for head sizes flashinfer lacks.
- The launcher checks `max_batch_prefill_tokens >= max_input_tokens` and (with a user
  max_batch_total_tokens) `max_batch_prefill_tokens <= max_batch_total_tokens` before 2.4.0; from
  2.4.0 backends/v3/src/main.rs checks them after warm-up (the first one only without chunking).
- Prefill chunking (models/model.py::Model.__init__: support_chunking and PREFILL_CHUNKING):
  the code is there from 2.4.1, but models/globals.py defaults PREFILL_CHUNKING to "0" in 2.4.x
  and to "1" from 3.0.0.
- CUDA graphs: none before 1.4.0; 1.4.x captures [1, 2, 4, 8, 16, ..., 64] only with
  --enable-cuda-graphs (models/globals.py ENABLE_CUDA_GRAPHS, default false); from 2.0.0 the
  launcher defaults --cuda-graphs to [1, 2, 4, 8, 16, 32].
- From 2.3 the router is backends/v3: a shard max_total_tokens above the inferred KV capacity
  raises V3Error::NotEnoughMemory; before, the router's ArgumentValidation names it.
"""

from __future__ import annotations

from dataclasses import dataclass

from servefit.engines.base import version_tuple

CURRENT = "3.3.7"


def vtuple(v: str | None) -> tuple[int, int, int]:
    return version_tuple(v, CURRENT)


@dataclass(frozen=True)
class Era:
    """A TGI release and the memory behaviour that changed across releases (launcher defaults, wiggle room,
    warm-up, attention backends), so the plan follows the release in use."""

    version: str
    v: tuple[int, int, int]
    defaults: str  # "v1" | "mpe4096" | "shard" (2.4.1) | "compute" (>= 3.0)
    wiggle: float  # default TGI_WIGGLE_ROOM (or the hard-coded factor)
    wiggle_of_total: bool  # >= 3.0: the wiggle room is a share of the total memory
    warmup_logprobs: bool  # < 3.0: warmup computes log-probs of every prompt token
    attention_backends: bool  # >= 2.3: flashinfer / flashdecoding / paged
    router_v3: bool  # >= 2.3
    max_new_from_total: bool  # >= 1.1.1: warmup requests ask max_total - truncate new tokens
    mpe_clamp: bool  # >= 3.0.1: shard default max_total_tokens also capped by max_position_embeddings
    chunking: bool  # >= 2.4.1 shard side prefill chunking (flashinfer / flashdecoding)
    inplace_logsoftmax: bool = False  # >= 2.4.0: prefill log-probs overwrite the lm_head output
    infers_batch_total: bool = True  # >= 0.9.4: warm-up sizes the KV cache (before: max_batch_total_tokens, 16000)
    launcher_prefill_checks: bool = False  # < 2.4.0: prefill limits checked by the launcher, before warm-up
    chunking_default: bool = True  # PREFILL_CHUNKING's default: "1" from 3.0.0, "0" in 2.4.x
    # 2.1.0 - 2.4.0: warm-up adds back the blocks of the batch generate_token returns, None when every
    # warm-up request finished in the prefill (then no block is added back)
    blocks_of_returned_batch: bool = False


def era(version: str | None) -> Era:
    v = vtuple(version)
    if v < (1, 4, 1):  # v1.4.1 flash_causal_lm.py::FlashCausalLM.warmup: int((free_memory * 0.95) // ...)
        wiggle = 1.0
    elif v < (2, 4, 0):
        wiggle = 0.95
    elif v < (3, 0, 0):
        wiggle = 0.90
    elif v < (3, 1, 0):
        wiggle = 0.95
    elif v < (3, 3, 0):
        wiggle = 0.93
    else:
        wiggle = 0.90
    if v < (2, 0, 0):
        defaults = "v1"
    elif v < (2, 4, 1):
        defaults = "mpe4096"
    elif v < (3, 0, 0):
        defaults = "shard"
    else:
        defaults = "compute"
    return Era(version=version or CURRENT, v=v, defaults=defaults, wiggle=wiggle, wiggle_of_total=v >= (3, 0, 0),
               warmup_logprobs=v < (3, 0, 0), attention_backends=v >= (2, 3, 0), router_v3=v >= (2, 3, 0),
               max_new_from_total=v >= (1, 1, 1), mpe_clamp=v >= (3, 0, 1), chunking=v >= (2, 4, 1),
               inplace_logsoftmax=v >= (2, 4, 0), infers_batch_total=v >= (0, 9, 4),
               launcher_prefill_checks=v < (2, 4, 0), chunking_default=v >= (3, 0, 0),
               blocks_of_returned_batch=(2, 1, 0) <= v < (2, 4, 1))


# launcher/src/main.rs Args before 0.9.4: `#[clap(default_value = "16000", long, env)] max_batch_total_tokens: u32`
LEGACY_BATCH_TOTAL = 16000
