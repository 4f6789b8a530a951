"""The model lock (`servefit.lock`): what `servefit models lock` read from the Hub, so lint,
estimate, explain and tune size the same models offline, and the resolution context that
carries it (with `[tool.servefit.models]`) to `resolve_model`.

The file is JSON with sorted keys and a format version (docs/model-lock.md); writing the same
facts twice gives the same bytes. Standard library only: this is on the lint path.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from servefit.core import UsageError

LOCK_NAME = "servefit.lock"
FORMAT_VERSION = 1
DEFAULT_GGUF_QUANT = "Q4_K_M"  # llama.cpp common/arg.cpp: `-hf repo` without a tag asks for Q4_K_M


@dataclass
class Lock:
    """A parsed lock file: entries by reference, and the references that could not be locked."""

    path: str
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    unresolved: dict[str, str] = field(default_factory=dict)

    def entry(self, key: str) -> dict[str, Any] | None:
        hit = self.models.get(key)
        if hit is not None:
            return hit
        low = key.lower()  # Hub ids are case-insensitive (the Hub redirects)
        return next((v for k, v in self.models.items() if k.lower() == low), None)


@dataclass
class ModelContext:
    """What model resolution may use besides the reference: the lock, the config's
    `[tool.servefit.models]` mapping (values relative to `root`), and whether the Hub may be
    asked."""

    lock: Lock | None = None
    mapping: dict[str, str] = field(default_factory=dict)
    root: str = "."
    mapping_file: str | None = None
    online: bool = False
    hf_home: str | None = None

    def mapped(self, ref: str) -> str | None:
        """The mapping's target for `ref` (exact, or the same path without a trailing slash)."""
        if not self.mapping or not ref:
            return None
        for cand in (ref, ref.rstrip("/"), os.path.normpath(ref) if ref.startswith((".", "/")) else ref):
            if cand in self.mapping:
                return self.mapping[cand]
        return None

    def mapped_path(self, value: str) -> str | None:
        """A mapping value that names a config.json (or its directory), as a path; None for a Hub id."""
        path = os.path.expanduser(value)
        if not os.path.isabs(path):
            path = os.path.join(self.root, path)
        if value.endswith(".json") or value.startswith((".", "/", "~")):
            return path
        if os.path.isfile(os.path.join(path, "config.json")):
            return path
        return None


# ------------------------------------------------------------------------- keys


def gguf_key(repo_ref: str, hf_file: str | None = None) -> str:
    """The lock key of a GGUF reference: `ORG/REPO:QUANT` for `-hf ORG/REPO[:QUANT]` and
    Ollama's `hf.co/ORG/REPO:QUANT` (no tag: Q4_K_M, llama.cpp's default), `ORG/REPO/FILE`
    for `--hf-repo ORG/REPO --hf-file FILE`."""
    ref = repo_ref.strip()
    for prefix in ("https://huggingface.co/", "huggingface.co/", "hf.co/"):
        if ref.startswith(prefix):
            ref = ref[len(prefix):]
    repo, _, tag = ref.partition(":")
    if hf_file:
        return f"{repo}/{hf_file.lstrip('/')}"
    if repo.count("/") > 1:  # already ORG/REPO/FILE.gguf
        return repo
    return f"{repo}:{(tag or DEFAULT_GGUF_QUANT).upper()}"


# ------------------------------------------------------------------------- reading


def find_lock(start: str) -> str | None:
    """The nearest servefit.lock from `start` upwards, stopping at the repository root."""
    d = os.path.abspath(start)
    if not os.path.isdir(d):
        d = os.path.dirname(d)
    while True:
        p = os.path.join(d, LOCK_NAME)
        if os.path.isfile(p):
            return p
        if os.path.exists(os.path.join(d, ".git")):
            return None
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def read_lock(path: str) -> Lock:
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the model lock ({exc.strerror})") from None
    return _read_cached(os.path.abspath(path), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=8)
def _read_cached(path: str, mtime_ns: int, size: int) -> Lock:
    from servefit.models.checkpoint_files import load_json_bounded

    try:
        doc = load_json_bounded(path, 64 << 20)  # a regular file, bounded in size and nesting
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a servefit model lock ({exc}); run `servefit models lock` again") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("models"), dict):
        raise UsageError(f"{path}: not a servefit model lock (no \"models\" object)")
    version = doc.get("version")
    if version != FORMAT_VERSION:
        raise UsageError(f"{path}: model lock format {version!r} is not supported (this servefit reads "
                         f"{FORMAT_VERSION}); run `servefit models lock` again")
    unresolved = doc.get("unresolved")
    pairs = unresolved.items() if isinstance(unresolved, dict) else ()
    return Lock(path=path, models=doc["models"], unresolved={str(k): str(v) for k, v in pairs})


def dumps(models: dict[str, dict[str, Any]], unresolved: dict[str, str]) -> str:
    """The lock's bytes: sorted keys, two-space indent, one trailing newline."""
    import json  # `models lock` only: lint reads locks through checkpoint_files

    doc = {"version": FORMAT_VERSION, "generator": "servefit models lock", "models": models,
           "unresolved": unresolved}
    return json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def write_lock(path: str, models: dict[str, dict[str, Any]], unresolved: dict[str, str]) -> bool:
    """Write the lock; False when the file already holds exactly these bytes (left untouched)."""
    text = dumps(models, unresolved)
    try:
        with open(path, encoding="utf-8") as fh:
            if fh.read() == text:
                return False
    except OSError:
        pass
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
    os.replace(tmp, path)
    return True


# ------------------------------------------------------------------------- context


_shared: dict[tuple[str, str, bool, str | None], ModelContext] | None = None


@contextmanager
def one_context_per_folder() -> Iterator[None]:
    """Inside, every file of a folder gets the same context from context_for (found from the
    folder once: a lint run reads each folder's lock and configuration once, not per server)."""
    global _shared
    outer, _shared = _shared, {}
    try:
        yield
    finally:
        _shared = outer


def context_for(start: str, *, online: bool = False, config: Any = None, hf_home: str | None = None
                ) -> ModelContext:
    """The lock and mapping that apply to a file: the nearest servefit.lock and the model
    mapping of `config` (servefit's Config) or of the config found from `start` upwards."""
    if _shared is not None and config is None:
        # what the two searches start from: find_lock's folder, and find_config's (symlinks resolved)
        folder, real = os.path.abspath(start), os.path.realpath(start)
        key = (folder if os.path.isdir(folder) else os.path.dirname(folder),
               real if not os.path.isfile(real) else os.path.dirname(real), online, hf_home)
        found = _shared.get(key)
        if found is None:
            found = _shared[key] = _context_for(start, online=online, config=None, hf_home=hf_home)
        return found
    return _context_for(start, online=online, config=config, hf_home=hf_home)


def _context_for(start: str, *, online: bool, config: Any, hf_home: str | None) -> ModelContext:
    lock_path = find_lock(start)
    lock = read_lock(lock_path) if lock_path else None
    mapping: dict[str, str] = {}
    root, where = ".", None
    if config is not None:
        mapping = dict(getattr(config, "models", {}) or {})
        root, where = getattr(config, "root", "."), getattr(config, "path", None)
    else:
        found = _config_mapping(start)
        if found is not None:
            where, mapping = found
            root = os.path.dirname(where)
    return ModelContext(lock=lock, mapping=mapping, root=root, mapping_file=where, online=online,
                        hf_home=hf_home)


def _config_mapping(start: str) -> tuple[str, dict[str, str]] | None:
    from servefit.config import find_config

    try:
        found = find_config(start)
    except UsageError:
        return None  # a broken config is reported by the command that loads it
    if not found:
        return None
    path, data = found
    models = (data or {}).get("models")
    if not isinstance(models, dict):
        return path, {}
    return path, {str(k): str(v) for k, v in models.items() if isinstance(v, str)}


# ------------------------------------------------------------------------- entries -> specs


def spec_from_entry(entry: dict[str, Any], name: str, source: str = "lock") -> Any:
    """A ModelSpec from a lock entry (a config.json repo or a GGUF header)."""
    if entry.get("kind") == "gguf":
        return _spec_from_gguf_entry(entry, name, source)
    from servefit.models.config_json import from_config

    cfg = entry.get("config")
    if not isinstance(cfg, dict):
        raise UsageError(f"model lock entry {name!r} has no config.json; run `servefit models lock` again")
    spec = from_config(cfg, name, resolved_from=source)
    params = entry.get("params")
    where = "servefit.lock" if source == "lock" else "the Hugging Face Hub" if source == "hub" else "the HF cache"
    rev = str(entry.get("revision") or "")[:12]
    if isinstance(params, int) and params > 0:
        spec.params = params
    else:
        spec.assumptions.append(f"parameters of '{name}' counted from the architecture "
                                f"({spec.params / 1e9:.2f}B); {where} has no safetensors count for it")
    if source != "lock":
        spec.assumptions.append(f"config.json of '{name}' read from {where}" + (f" (revision {rev})" if rev else ""))
    return spec


def gguf_info(entry: dict[str, Any]) -> Any:
    """The GgufInfo a locked GGUF header stands for (tensor bytes from ggml's type table)."""
    from servefit.models.gguf import ArrayLen, GgufInfo, TensorInfo, type_by_name

    g = entry.get("gguf") or {}
    kv: dict[str, Any] = {}
    for k, v in (g.get("kv") or {}).items():
        kv[k] = ArrayLen(int(v["array_len"]), int(v.get("item_type", 8))) \
            if isinstance(v, dict) and "array_len" in v else v
    table = type_by_name()
    tensors = []
    for line in g.get("tensors") or []:
        tname, ttype, dims = str(line).split(" ")
        shape = tuple(int(d) for d in dims.split("x")) if dims else ()
        n = 1
        for d in shape:
            n *= d
        _, blk, size = table.get(ttype.upper(), (0, 1, 0))
        tensors.append(TensorInfo(tname, shape, ttype, n // blk * size))
    files = entry.get("files") or ["model.gguf"]
    return GgufInfo(path=str(files[0]), version=int(g.get("version", 3)), kv=kv, tensors=tensors)


def _spec_from_gguf_entry(entry: dict[str, Any], name: str, source: str) -> Any:
    from servefit.models.gguf_spec import spec_from_gguf

    info = gguf_info(entry)
    spec = spec_from_gguf(info)
    spec.resolved_from = source
    spec.gguf = info
    if source != "lock":
        spec.assumptions.append(f"GGUF header of '{name}' ({info.path}) read from the Hugging Face Hub")
    return spec
