"""`servefit lint --list-sites`: the assembly made visible. Per server, as a table or as JSON
objects: where it is (`file`, `line`, `name`), `engine`, the model as written and what it
resolved to (`model_ref`), each setting as the file writes it with its span, the value the engine
receives and what servefit parsed it to (`settings_raw`; `settings` keeps the parsed values),
the `target` (GPU, count, GPU memory, model, engine version, each with where it came from) and
the `verdict`. Values of secret settings, variables and flags are masked (servefit.redact)."""

from __future__ import annotations

import json
import re
from typing import Any

from servefit.core import LaunchSite, Span
from servefit.engines.base import moving_tag
from servefit.linter.run import SiteReport
from servefit.redact import MASK, is_secret_name, redact_argv, redact_env, redact_text
from servefit.termsafe import one_line

MAX_READ = 2 << 20


def _plain(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return str(v)


def raw_model(site: LaunchSite) -> str | None:
    """The model as written, for servers whose engine plugin is not installed (where the
    command names it: the `recognise.model` key of data/engines/<name>.yaml)."""
    from servefit.sources.detect import model_keys, recognise

    words = [t.text for t in site.argv]
    hit = recognise(words)
    n = hit[1] if hit else 0
    keys = model_keys(site.engine or "")
    flags = tuple(keys.get("flags") or ())
    for i, w in enumerate(words[n:], n):
        key, eq, val = w.partition("=")
        if key in flags:
            return val if eq else (words[i + 1] if i + 1 < len(words) else None)
    if keys.get("positional") and len(words) > n and not words[n].startswith("-"):
        return words[n]
    env = keys.get("env")
    if env and env in site.env:
        return site.env[env].text
    models = site.inputs.pulled
    return models[0].text if models else None


def _token_at(site: LaunchSite, span: Span) -> str | None:
    """The value the engine receives at `span` (an argv word or an environment value)."""
    for t in list(site.argv) + list(site.env.values()):
        if t.span == span:
            return t.text
    return None


def _written(span: Span | None, texts: dict[str, str | None]) -> str | None:
    """The characters the file holds at `span`, exactly as written."""
    if span is None or span.start < 0:
        return None
    if span.file not in texts:
        from servefit.safe_io import open_regular

        try:
            with open_regular(span.file) as fh:
                texts[span.file] = fh.read(MAX_READ).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            texts[span.file] = None
    text = texts[span.file]
    return text[span.start:span.end] if text is not None and span.end <= len(text) else None


def _mask(name: str, value: Any) -> Any:
    if is_secret_name(name) and value not in (None, False, ""):
        return MASK
    return redact_text(value) if isinstance(value, str) else _plain(value)


def setting_rows(rep: SiteReport, texts: dict[str, str | None]) -> dict[str, dict[str, Any]]:
    """Each setting the file writes: as written (with its span), the value the engine receives,
    and what the engine plugin parsed it to (null where servefit does not model it)."""
    site, cfg = rep.site, rep.config
    if cfg is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(set(cfg.explicit) | set(cfg.spans)):
        span = cfg.spans.get(name)
        received = _token_at(site, span) if span is not None else None
        parsed = cfg.settings.get(name)
        out[name] = {"written": _mask(name, _written(span, texts)), "value": _mask(name, received),
                     "parsed": _mask(name, parsed), "modelled": name in cfg.settings,
                     "location": span.as_dict() if span is not None else None}
    return out


def _switch_or_value(name: str, value: Any) -> Any:
    """A setting servefit does not model, as the engine receives it: a bare switch (`--jinja`, whose
    place is the flag itself) is on, the `--no-` form of a setting (`--no-mmap` for mmap) off; any
    other value as written."""
    if isinstance(value, str) and re.fullmatch(r"--?[A-Za-z][\w-]*", value):
        return not (value.startswith("--no-") and not name.startswith("no_"))
    return value


def site_dict(rep: SiteReport, texts: dict[str, str | None] | None = None) -> dict[str, Any]:
    texts = {} if texts is None else texts
    site, cfg = rep.site, rep.config
    rows = setting_rows(rep, texts)
    if cfg is not None:
        model = cfg.model_ref
        settings = {k: (row["parsed"] if row["modelled"] else _switch_or_value(k, row["value"])) for k, row in rows.items()
                    if k in cfg.explicit and k != "model"}
    else:
        model, settings = raw_model(site), {}
    if not model:  # a server that loads models on request: the ones its init jobs pull
        models = site.inputs.pulled
        model = models[0].text if models else None
    ev = rep.evaluation
    mspan = cfg.spans.get("model") if cfg is not None else None
    tgt = rep.target
    out: dict[str, Any] = {
        "file": site.file, "line": site.line, "name": site.name, "engine": site.engine,
        "model": redact_text(model) if isinstance(model, str) else model,
        "model_ref": {
            "written": redact_text(w) if isinstance(w := _written(mspan, texts), str) else None,
            "location": mspan.as_dict() if mspan is not None else None,
            "parsed": redact_text(model) if isinstance(model, str) else model,
            "override": tgt.model.as_dict() if tgt.model is not None else None,
            "resolved": ev.model.name if ev is not None else None,
            "resolved_from": ev.model.resolved_from if ev is not None else None,
        },
        "settings": settings, "settings_raw": rows,
        "env": redact_env({k: t.text for k, t in site.env.items()}),
        "gpu": {"name": rep.gpu_name, "count": rep.gpu_count, "source": rep.gpu_source or None,
                "resolved": ev.gpu.name if ev is not None else None},
        "target": tgt.as_dict(),
        # the release modelled (a flag over a directive over the image tag), as estimate's header names it
        "engine_version": (cfg.version if cfg is not None else None) or (str(tgt.engine_version.value)
                                                                         if tgt.engine_version is not None else None),
        "unresolved": list(site.unresolved),
        "image": site.image,
        "verdict": ev.plan.outcome if ev is not None else None,
        "not_planned": redact_text(rep.error) if ev is None and rep.error else None,
    }
    if cfg is None:
        out["argv"] = redact_argv(t.text for t in site.argv)
    if site.workload.shm is not None:
        out["shm"] = site.workload.shm
    if site.config_only:
        out["config_only"] = True
    if site.inputs.file_refs:
        out["modelfile_refs"] = _plain(site.inputs.file_refs)
    if site.inputs.pulled:
        out["ollama_models"] = _plain([t.text for t in site.inputs.pulled])
    return out


def to_json(reports: list[SiteReport]) -> str:
    texts: dict[str, str | None] = {}
    return json.dumps([site_dict(r, texts) for r in reports], indent=2) + "\n"


def to_table(reports: list[SiteReport]) -> str:
    if not reports:
        return "no servers found\n"
    rows = [("LOCATION", "ENGINE", "MODEL", "SETTINGS", "GPU", "VERSION", "VERDICT")]
    texts: dict[str, str | None] = {}
    for rep in reports:
        d = site_dict(rep, texts)
        if d["settings"]:
            settings = " ".join(f"{k}={v}" for k, v in d["settings"].items())
        else:
            settings = " ".join(d.get("argv", [])[:8]) + (" …" if len(d.get("argv", [])) > 8 else "")
        gpu = _gpu_cell(d)
        if d["unresolved"]:
            settings += f" [unresolved: {', '.join(d['unresolved'])}]"
        m = d["model_ref"]
        model = d["model"] or "-"
        if m["written"] and m["written"] != model:
            model = f"{m['written']} ({model})"
        if m["resolved"] and m["resolved"] != d["model"]:
            model += f" → {m['resolved']}"
        ver = d["target"]["engine_version"]
        version = f"{ver['value']} ({ver['source']})" if ver else "-"
        if not ver and rep.site is not None and (tag := moving_tag(rep.site)):  # the newest release runs there
            version = f"{d['engine_version']} (image tag {tag}: the newest release)"
        row = (f"{d['file']}:{d['line']}", d["engine"] or "?", model, settings or "-", gpu, version,
               _verdict_cell(d))
        rows.append(tuple(one_line(str(c)) for c in row))  # type: ignore[arg-type]
    n = len(rows[0]) - 1
    widths = [min(max(len(r[i]) for r in rows), 60) for i in range(n)]
    lines = []
    for row in rows:
        cells = [row[i].ljust(widths[i]) if len(row[i]) <= widths[i] else row[i] for i in range(n)]
        lines.append("  ".join(cells + [row[n]]).rstrip())
    return "\n".join(lines) + "\n"


def _gpu_cell(d: dict[str, Any]) -> str:
    """The GPU and where it came from, in words: no Python `None`, and a count read from the file
    keeps its source when no GPU model is named."""
    g, tgt = d["gpu"], d["target"]
    if not (g["name"] or g["count"]):
        return "-"
    sources = [g["source"]] if g["source"] else [p["source"] for p in (tgt.get("gpu"), tgt.get("count")) if p]
    cell = f"{g['name'] or 'no GPU named'}×{g['count'] or '?'}"
    return f"{cell} ({'; '.join(sources)})" if sources else cell


def _verdict_cell(d: dict[str, Any]) -> str:
    """The verdict in estimate's words ("starts", "refuses to start: ..."), or why none was made."""
    from servefit.report.plan import VERDICT

    if d["verdict"]:
        return str(VERDICT.get(d["verdict"], d["verdict"]))
    return f"not checked: {d['not_planned']}" if d["not_planned"] else "-"

