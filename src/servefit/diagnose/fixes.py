"""Root cause -> what to change, and where it is written.

  kv_cache_overflow       lower the context length, a smaller KV cache dtype, more GPUs
  batch_misconfiguration  fewer sequences / batched tokens / prefill tokens / parallel slots
  profiling_peak          a smaller batch for the start-up profiling run (it comes before the KV cache)
  cuda_graph_capture      more room or fewer graphs (capture comes after the KV cache took its share)
  fragmentation           PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, more headroom, scheduled restarts
  model_too_large         quantize, tensor parallelism, a GPU with more memory

The engine plugin writes the lines in its own flags (Engine.oom_fixes, engines/<name>/diagnose.py)
with `Fixing`'s helpers; the lines here are for a log no engine claims (a PyTorch script). With a
config (a LaunchSite) the setting is located: first through the engine's own parser (its
EngineConfig gives each setting's span), then by looking for the flag or environment variable
(the engine's `logs.fix.settings`) among the site's tokens.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from servefit.diagnose.model import Diagnosis, Setting

if TYPE_CHECKING:
    from servefit.core import LaunchSite, Span


def _fix_table(engine: str) -> dict[str, Any]:
    from servefit.diagnose.catalog import catalog

    return catalog().fix.get(engine, {})


def flags_of(engine: str, name: str) -> tuple[str, ...]:
    """The flags (then environment variables) that set `name` for this engine."""
    return tuple((_fix_table(engine).get("settings") or {}).get(name) or ())


def _display(engine: str, name: str) -> str:
    flags = flags_of(engine, name)
    return flags[0] if flags else name


def _span_value(site: LaunchSite, flags: tuple[str, ...]) -> tuple[str, Span | None] | None:
    argv = site.argv
    for i, tok in enumerate(argv):
        for flag in (f for f in flags if f.startswith("-")):
            if tok.text == flag and i + 1 < len(argv):
                return argv[i + 1].text, argv[i + 1].span or tok.span
            if tok.text.startswith(flag + "="):
                return tok.text[len(flag) + 1:], tok.span
    for env in (f for f in flags if not f.startswith("-")):
        if env in site.env:
            return site.env[env].text, site.env[env].span
    return None


def _parsed(site: LaunchSite) -> Any:
    """The engine's own EngineConfig for the site, or None if its parser is not available."""
    try:
        from servefit.pipeline import engine_for

        eng = engine_for(site)
        return eng.parse(site, site.engine_version)
    except Exception:  # engine plugins are optional; fall back to reading the tokens
        return None


def locate(site: LaunchSite, engine: str, names: tuple[str, ...]) -> Setting | None:
    """The first of `names` the site sets explicitly, else the first one, unset."""
    cfg = _parsed(site)
    for name in names:
        flags = flags_of(engine, name) or (name,)
        span = cfg.spans.get(name) if cfg is not None else None
        if span is not None and name in cfg.explicit:
            val = cfg.settings.get(name)
            return Setting(name, _display(engine, name), None if val is None else str(val), span.file, span.line,
                           span.col)
        found = _span_value(site, flags)
        if found is not None:
            text, sp = found
            return Setting(name, _display(engine, name), text, sp.file if sp else site.file,
                           sp.line if sp else site.line, sp.col if sp else None)
    return Setting(names[0], _display(engine, names[0]), None, site.file, site.line or None, None, explicit=False)


@dataclass
class Fixing:
    """What a fix is written from: the diagnosis, the engine, the setting located in the user's
    file (None without a config), and whether PYTORCH_CUDA_ALLOC_CONF already has expandable
    segments. Engines build their fix lines with these helpers."""

    diag: Diagnosis
    engine: str
    setting: Setting | None = None
    env_set: bool = False
    site_version: str | None = None  # the release the config names (an image tag, a pin), when the log names none

    @property
    def figures(self) -> dict[str, Any]:
        return self.diag.figures

    @property
    def host(self) -> bool:
        """The kernel's OOM killer or Kubernetes ended the process: host memory ran out."""
        return (self.diag.signature or "").startswith(("kernel", "k8s"))

    def current(self, *log_names: str) -> Any:
        """The value the config or the log gives the first of these settings."""
        setting = self.setting
        if setting is not None and setting.value is not None and setting.name in log_names:
            return setting.value
        aliases = _fix_table(self.engine).get("log_names") or {}
        for n in log_names:
            for key in (n, *aliases.get(n, ())):
                if self.diag.settings_in_log.get(key) is not None:
                    return self.diag.settings_in_log[key]
                if self.diag.figures.get(key) is not None and not isinstance(self.diag.figures[key], dict):
                    return self.diag.figures[key]
        return None

    @property
    def version(self) -> str | None:
        """The engine release: the one the log names, else the config's."""
        v = self.figures.get("engine_version") or self.figures.get("engine_version2") or self.site_version
        return str(v).lstrip("v") if v else None

    def flag(self, newer: str, older: str) -> str:
        """The spelling of a renamed flag the release takes (the engine's own parser per release, its option
        table): `newer` or `older`; with no release known, `newer` with `older` named for the releases
        before it (e.g. "--max-input-tokens (--max-input-length before 2.0.0)")."""
        from servefit.engines.options import load_table

        table = load_table(self.engine)
        if self.version is not None:
            return newer if table.in_release(newer, self.version) or not table.in_release(older, self.version) \
                else older
        printed = self.diag.names_in_log  # the names the start-up lines printed are the release's spelling
        dest = {f: f.lstrip("-").replace("-", "_") for f in (newer, older)}
        if dest[older] in printed and dest[newer] not in printed:
            return older
        if dest[newer] in printed:
            return newer
        first = next((r for r in table.releases if table.in_release(newer, r)), None)
        return f"{newer} ({older} before {first})" if first and first != table.releases[0] else newer

    def has(self, flag: str) -> bool:
        """Whether the release (the newest when none is known) takes `flag`."""
        from servefit.engines.options import load_table

        return load_table(self.engine).in_release(flag, self.version)

    @staticmethod
    def num(v: Any) -> float | None:
        try:
            return float(v)
        except (TypeError, ValueError):
            return None

    @staticmethod
    def was(v: Any) -> str:
        return f" (now {v})" if v is not None else ""

    def alloc_conf(self) -> str:
        """PyTorch's allocator setting that makes cached blocks reusable across sizes."""
        if self.env_set:
            return "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True is already set; keep it"
        return "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the server's environment"

    def host_growth(self) -> list[str]:
        """Host memory that grew over uptime until the kernel ended the process."""
        return ["Host memory grew until the kernel killed the process: restart on a schedule and look for a leak",
                "Give the container a memory limit with headroom above its steady-state use"]

    def restarts(self) -> str:
        return "Schedule restarts in a low-traffic window (e.g. a daily `kubectl rollout restart`)"

    def growth_or_restarts(self) -> list[str]:
        """Fragmentation where the engine has no memory fraction to lower (llama.cpp, Ollama)."""
        return self.host_growth() if self.host else [self.restarts()]

    def by_cause(self, table: Mapping[str, Callable[[Fixing], list[str]]]) -> list[str] | None:
        """An engine's fixes for this diagnosis' root cause (engines/<name>/diagnose.py `FIXES`),
        or None where the engine has none of its own for it."""
        fn = table.get(self.diag.root_cause)
        return fn(self) if fn is not None else None


def generic(fx: Fixing) -> list[str]:
    """Fix lines in no engine's terms (a PyTorch script, or an engine that gives none)."""
    root = fx.diag.root_cause
    if root == "kv_cache_overflow":
        return ["Shorten the maximum sequence length",
                "Store the KV cache in a smaller dtype (FP8 or 8-bit) where the framework supports it",
                "Spread the model over more GPUs (tensor parallelism)"]
    if root in ("batch_misconfiguration", "profiling_peak"):
        return ["Lower the batch size / number of concurrent sequences"]
    if root == "cuda_graph_capture":
        return ["Leave more memory for CUDA graphs, or capture fewer batch sizes", "Or run without CUDA graphs"]
    if root == "fragmentation":
        if fx.host:
            return fx.host_growth()
        return [fx.alloc_conf(), "Call torch.cuda.empty_cache() between large batches", fx.restarts()]
    if fx.host:
        return ["Raise the host / container memory limit: loading the checkpoint goes through host RAM",
                "Load a smaller checkpoint: a quantized one (AWQ/GPTQ/FP8) needs about half the RAM to load"]
    return ["Quantize: an AWQ or GPTQ checkpoint, or FP8 on Ada/Hopper (about half the weights)",
            "Shard over more GPUs (tensor parallelism)", "Use a GPU with more memory"]


def tune_command(site: LaunchSite, diag: Diagnosis, gpu: str | None) -> str:
    words = ["servefit", "tune", site.file]
    if gpu:
        words += ["--gpu", gpu]
    need = diag.figures.get("long_request_tokens") if diag.timing == "long_request" else None
    if diag.root_cause == "kv_cache_overflow" and isinstance(need, int):
        words += ["--min-context", f"{-(-need // 1024)}k"]
    words.append("--diff")
    return " ".join(shlex.quote(w) for w in words)


def _lines(fx: Fixing) -> list[str]:
    from servefit import engines
    from servefit.core import UsageError

    try:
        eng = engines.get(fx.engine) if fx.engine != "torch" else None
    except (UsageError, ImportError, AttributeError):
        eng = None
    lines = eng.oom_fixes(fx) if eng is not None else None
    return list(lines) if lines else generic(fx)


def apply(diag: Diagnosis, site: LaunchSite | None = None) -> None:
    """Fill diag.fix (and, with a site, diag.setting and diag.tune)."""
    root = diag.root_cause
    if root in ("none", "not_oom", "killed", "recovered"):
        return
    engine = diag.engine or "torch"
    if site is not None and site.engine and engine == "torch":
        engine = site.engine
    setting: Setting | None = None
    env_set = False
    if site is not None:
        table = _fix_table(engine)
        pat = _pattern(diag.signature)
        names = tuple(pat.targets if pat is not None and pat.targets else
                      (table.get("targets") or {}).get(root) or ())
        if names:
            setting = locate(site, engine, names)
        pcac = site.env.get("PYTORCH_CUDA_ALLOC_CONF")
        env_set = pcac is not None and "expandable_segments:True" in pcac.text
        if setting is not None and setting.name == "PYTORCH_CUDA_ALLOC_CONF" and env_set:
            setting = locate(site, engine, names[1:]) if len(names) > 1 else setting
    lines = _lines(Fixing(diag, engine, setting, env_set, site.engine_version if site is not None else None))
    if site is not None:
        if setting is not None and setting.explicit and setting.line:
            lines[0] = f"{setting.file}:{setting.line}: {lines[0]}"
        elif setting is not None:
            lines[0] = f"{site.file}:{site.line}: {lines[0]} ({setting.flag} is not set for this server yet)"
        gpu = site.gpu.name if site.gpu is not None and site.gpu.name else diag.figures.get("gpu_name")
        diag.tune = tune_command(site, diag, gpu if isinstance(gpu, str) else None)
        lines.append(f"Or let servefit search the settings: {diag.tune}")
    diag.setting = setting
    diag.fix = lines


def _pattern(name: str | None) -> Any:
    from servefit.diagnose.catalog import catalog

    return catalog().pattern(name) if name else None
