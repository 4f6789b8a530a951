"""Models only some engines can serve, or whose cache servefit models only for some: one clear line
instead of a plan that sizes the model as something it is not.

- DeepSeek-V4: models/arch_deepseek_v4.py require_planned (its caches are modelled for vLLM and SGLang);
- ZAYA1 (zaya): SGLang 0.5.23 srt/models/zaya.py is the only engine model; vLLM 0.33.0's registry,
  llama.cpp (src/llama-arch.cpp up to b8390), Ollama and TGI have none;
- Inkling (inkling_mm_model): SGLang 0.5.23 srt/models/inkling.py is modelled; vLLM's (vllm/models/inkling,
  from 0.26.0: the short-convolution state as a SlidingWindowSpec group padded to the attention page,
  nvidia/sconv_swa_attn.py) is not, TGI has none, and llama.cpp / Ollama builds that load its GGUFs (after
  b8390) are not modelled.
"""

from __future__ import annotations

from servefit.models.spec import ModelSpec

# model_type -> (engines whose plan is modelled, the engine model file, what the others lack)
_ONLY = {
    "zaya": (("SGLang",), "sglang/srt/models/zaya.py",
             "ZAYA1's CCA attention and router MLP: vLLM 0.33.0, TGI and llama.cpp have no model for it"),
    "inkling_mm_model": (("SGLang",), "sglang/srt/models/inkling.py",
                         "servefit models Inkling's per-kind KV heads and short-convolution states for SGLang only: "
                         "vLLM (from 0.26.0) keeps those states as a sliding-window cache group that is not modelled, "
                         "TGI has no model for it"),
}


def require_planned(model: ModelSpec, engine: str) -> None:
    """Raise a UsageError (exit 2, one line) when `engine` cannot serve `model` or servefit does not
    model how it caches it."""
    from servefit.models.arch_deepseek_v4 import require_planned as v4

    if engine not in ("vLLM", "SGLang"):  # both plan DeepSeek-V4's compressed caches
        v4(model, engine)
    only = _ONLY.get(model.model_type)
    if only is None or engine in only[0]:
        return
    from servefit.core import UsageError

    raise UsageError(f"servefit does not model how {engine} serves {model.name} ({only[2]}), so it cannot plan this "
                     f"server; {' / '.join(only[0])} is modelled ({only[1]})")
