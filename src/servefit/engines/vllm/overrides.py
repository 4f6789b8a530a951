"""The model config vLLM builds after `--rope-scaling` and `--hf-overrides`, release by release.

- Up to 0.11.0 `--rope-scaling JSON` is merged into the overrides (config.py::ModelConfig.__post_init__,
  0.10: `hf_overrides_kw.update({"rope_scaling": ...})`) and every override is applied with
  `config.update` before transformers_utils/config.py::patch_rope_scaling (legacy `type` becomes
  `rope_type`, `su` becomes `longrope`). The flag is gone from 0.11.1.
- From 0.11.1 dict-valued overrides are set after the config is loaded
  (config/model.py::ModelConfig._apply_dict_overrides; nested configs such as `text_config` are
  updated key by key), flat ones (`max_position_embeddings`) still with `config.update`.
- From 0.12 `_get_and_verify_max_len` reads `rope_parameters`, filled from `rope_scaling` while the
  config loads (patch_rope_parameters). An override of `rope_scaling` set after that changes
  nothing with transformers 4 (0.12-0.19 require transformers < 5); transformers 5, which 0.20 and
  later allow and pip installs, maps `rope_scaling` onto `rope_parameters`
  (configuration_utils.py::PreTrainedConfig.rope_scaling setter). `rope_parameters` itself is
  read from 0.12 on.
"""

from __future__ import annotations

import copy
from typing import Any

from servefit.core import EngineConfig
from servefit.engines.vllm.era import vtuple
from servefit.models.spec import ModelSpec


def as_loaded(cfg: EngineConfig, model: ModelSpec) -> ModelSpec:
    """`model` with the command line's rope and length overrides applied as vLLM `cfg.version`
    applies them (the same object when there are none); what is ignored is said in
    cfg.assumptions."""
    s = cfg.settings
    raw, flag = s.get("hf_overrides"), s.get("rope_scaling")
    hf: dict[str, Any] = raw if isinstance(raw, dict) else {}
    rope_flag: dict[str, Any] | None = flag if isinstance(flag, dict) else None
    if not hf and not rope_flag:
        return model
    v = vtuple(cfg.version or "")
    out = copy.copy(model)
    if v < (0, 11, 1):
        flat = dict(hf)
        if rope_flag:
            flat["rope_scaling"] = rope_flag  # the flag wins over an hf-overrides key of that name
        _apply(out, flat)
        return out
    _apply(out, {k: x for k, x in hf.items() if not isinstance(x, dict)})
    nested = {k: x for k, x in hf.items() if isinstance(x, dict)}
    text = nested.pop("text_config", None)
    if isinstance(text, dict):  # _update_nested: the text model's keys, one by one
        _apply(out, {k: x for k, x in text.items() if not isinstance(x, dict)})
        nested.update({k: x for k, x in text.items() if isinstance(x, dict)})
    _apply_dicts(out, nested, v, cfg)
    return out


def _apply(m: ModelSpec, flat: dict[str, Any]) -> None:
    """Top-level keys through config.update (integers) and, up to 0.11.0, rope_scaling too."""
    for key in ("max_position_embeddings", "original_max_position_embeddings", "model_max_length"):
        val = flat.get(key)
        if isinstance(val, int) and not isinstance(val, bool) and val > 0:
            setattr(m, key, val)
    rope = flat.get("rope_scaling")
    if isinstance(rope, dict):
        _set_rope(m, rope)


def _apply_dicts(m: ModelSpec, nested: dict[str, Any], v: tuple[int, int, int], cfg: EngineConfig) -> None:
    rope, params = nested.get("rope_scaling"), nested.get("rope_parameters")
    if isinstance(params, dict) and v >= (0, 12, 0):
        _set_rope(m, params)
    elif isinstance(rope, dict) and (v < (0, 12, 0) or v >= (0, 20, 0)):
        _set_rope(m, rope)
    elif isinstance(rope, dict):
        note = (f"--hf-overrides rope_scaling does not change the model's length on vLLM {cfg.version}: from 0.12 "
                "vLLM reads rope_parameters, which transformers 4 (required up to 0.19) does not update; "
                "pass the same dict as rope_parameters")
        if note not in cfg.assumptions:
            cfg.assumptions.append(note)
    elif isinstance(params, dict):
        note = f"--hf-overrides rope_parameters is not read by vLLM {cfg.version} (from 0.12); use rope_scaling"
        if note not in cfg.assumptions:
            cfg.assumptions.append(note)


def _set_rope(m: ModelSpec, rope: dict[str, Any]) -> None:
    """The rope dict as patch_rope_scaling / patch_rope_parameters leave it: `type` read as
    `rope_type`, `su` as `longrope`; its original_max_position_embeddings is the one YaRN scales."""
    r = dict(rope)
    if "rope_type" not in r and "type" in r:
        r["rope_type"] = r["type"]
    if r.get("rope_type") == "su":
        r["rope_type"] = "longrope"
    m.rope_scaling = r
    orig = r.get("original_max_position_embeddings")
    if isinstance(orig, int) and not isinstance(orig, bool) and orig > 0:
        m.original_max_position_embeddings = orig
