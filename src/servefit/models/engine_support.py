"""Models only some engines can serve, or whose cache servefit models only for some: one clear line
instead of a plan that sizes the model as something it is not.

- DeepSeek-V4: models/arch_deepseek_v4.py require_planned (its caches are modelled for vLLM and SGLang);
- ZAYA1 (zaya): SGLang 0.5.23 srt/models/zaya.py is the only engine model; vLLM 0.33.0's registry,
  llama.cpp (src/llama-arch.cpp up to b8390), Ollama and TGI have none;
- Inkling (inkling_mm_model): SGLang 0.5.23 srt/models/inkling.py; vLLM 0.33.0 and TGI have none, and
  llama.cpp / Ollama builds that load its GGUFs (after b8390) are not modelled.
"""

from __future__ import annotations

from servefit.models.spec import ModelSpec

# model_type -> (engines whose plan is modelled, the engine model file, what the model is)
_ONLY = {
    "zaya": (("SGLang",), "sglang/srt/models/zaya.py", "ZAYA1's CCA attention and router MLP"),
    "inkling_mm_model": (("SGLang",), "sglang/srt/models/inkling.py",
                         "Inkling's per-kind attention, short-convolution states and hybrid pools"),
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

    raise UsageError(f"servefit does not model how {engine} serves {model.name} ({only[2]}; vLLM 0.33.0 and TGI have "
                     f"no model for it), so it cannot plan this server; {' / '.join(only[0])} is modelled ({only[1]})")
