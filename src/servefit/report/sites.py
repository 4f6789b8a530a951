"""`servefit lint --list-sites`: what was found in each file, as a table or as JSON objects
(`file`, `line`, `engine`, `model`, `settings`, `env`, `gpu`, `engine_version`, `unresolved`).
Values of secret settings, variables and flags are masked (servefit.redact)."""

from __future__ import annotations

import json
from typing import Any

from servefit.core import LaunchSite
from servefit.linter.run import SiteReport
from servefit.redact import MASK, is_secret_name, redact_argv, redact_env, redact_text
from servefit.termsafe import one_line

MODEL_FLAGS = {
    "vllm": ("--model",),
    "llamacpp": ("-m", "--model", "-hf", "--hf-repo", "-hfr", "--hf-file"),
    "tgi": ("--model-id",),
    "sglang": ("--model-path", "--model"),
}
MODEL_ENV = {"tgi": "MODEL_ID", "llamacpp": "LLAMA_ARG_MODEL"}


def _plain(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return str(v)


def raw_model(site: LaunchSite) -> str | None:
    """The model as written, for servers whose engine plugin is not installed."""
    from servefit.sources.detect import recognise

    words = [t.text for t in site.argv]
    hit = recognise(words)
    n = hit[1] if hit else 0
    flags = MODEL_FLAGS.get(site.engine or "", ())
    for i, w in enumerate(words[n:], n):
        key, eq, val = w.partition("=")
        if key in flags:
            return val if eq else (words[i + 1] if i + 1 < len(words) else None)
    if site.engine == "vllm" and len(words) > n and not words[n].startswith("-"):
        return words[n]
    env = MODEL_ENV.get(site.engine or "")
    if env and env in site.env:
        return site.env[env].text
    models = site.extra.get("ollama_models")
    return models[0] if models else None


def site_dict(rep: SiteReport) -> dict[str, Any]:
    site, cfg = rep.site, rep.config
    if cfg is not None:
        model = cfg.model_ref
        settings = {k: (MASK if is_secret_name(k) and cfg.settings.get(k) not in (None, False, "")
                        else _plain(cfg.settings.get(k))) for k in sorted(cfg.explicit) if k != "model"}
    else:
        model, settings = raw_model(site), {}
    if site.engine == "ollama" and not model:
        models = site.extra.get("ollama_models")
        model = models[0] if models else None
    out: dict[str, Any] = {
        "file": site.file, "line": site.line, "name": site.name, "engine": site.engine,
        "model": redact_text(model) if isinstance(model, str) else model,
        "settings": settings, "env": redact_env({k: t.text for k, t in site.env.items()}),
        "gpu": {"name": rep.gpu_name, "count": rep.gpu_count, "source": rep.gpu_source or None},
        "engine_version": site.engine_version, "unresolved": list(site.unresolved),
        "image": site.image,
    }
    if cfg is None:
        out["argv"] = redact_argv(t.text for t in site.argv)
    for key in ("shm", "modelfile_refs", "ollama_models", "config_only"):
        if key in site.extra:
            out[key] = _plain(site.extra[key])
    return out


def to_json(reports: list[SiteReport]) -> str:
    return json.dumps([site_dict(r) for r in reports], indent=2) + "\n"


def to_table(reports: list[SiteReport]) -> str:
    if not reports:
        return "no servers found\n"
    rows = [("LOCATION", "ENGINE", "MODEL", "SETTINGS", "GPU", "VERSION")]
    for rep in reports:
        d = site_dict(rep)
        if d["settings"]:
            settings = " ".join(f"{k}={v}" for k, v in d["settings"].items())
        else:
            settings = " ".join(d.get("argv", [])[:8]) + (" …" if len(d.get("argv", [])) > 8 else "")
        g = d["gpu"]
        gpu = f"{g['name'] or '?'}×{g['count'] or '?'} ({g['source']})" if g["name"] or g["count"] else "-"
        if d["unresolved"]:
            settings += f" [unresolved: {', '.join(d['unresolved'])}]"
        row = (f"{d['file']}:{d['line']}", d["engine"] or "?", d["model"] or "-", settings or "-", gpu,
               d["engine_version"] or "-")
        rows.append(tuple(one_line(str(c)) for c in row))  # type: ignore[arg-type]
    widths = [min(max(len(r[i]) for r in rows), 60) for i in range(5)]
    lines = []
    for row in rows:
        cells = [row[i].ljust(widths[i]) if len(row[i]) <= widths[i] else row[i] for i in range(5)]
        lines.append("  ".join(cells + [row[5]]).rstrip())
    return "\n".join(lines) + "\n"
