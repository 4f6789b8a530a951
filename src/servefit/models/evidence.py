"""What else the same file says about a server whose model is a path without a model name
(`--model-id /data`, `-m /path/to/model.gguf`): the name the command serves the model under,
the tokenizer it loads, the folder a mount puts at that path, the repository a download in the
same script writes there. Each is a candidate the resolver tries in turn; none is a guess from
nothing, and the one used is said in the assumptions.

Read in this order (the first that resolves wins):
1. a bind mount (`docker run -v HOST:/data`, compose `volumes:`) whose container folder holds
   the path: the host folder's name (site.workload.path_map, sources/launch.py, compose.py);
2. `huggingface-cli download ORG/NAME --local-dir DIR` / `hf download ...` in the same file,
   where DIR is the path;
3. the engine's own options whose value names a model: `--served-model-name` (vLLM, SGLang; the
   first name), `--tokenizer` (vLLM), `--tokenizer-path` (SGLang), `--alias` / `-a` (llama-server),
   found through the engine's option table;
4. only when the path names no model family at all (`/data`, `model.gguf`, not `mixtral.gguf`):
   the names the file gives the server (Workload.names: a llama-swap `models:` key, a compose
   service or container_name, a k8s label that names a model, the object's name, app labels, a
   Helm values `modelName`, a unit's Description=), each only when it carries a catalogued family
   and a size the catalog has for it (`llama-3.1-8b`; never `llm`, `inference`, `vllm-server`).
Standard library only: this is on the lint path.
"""

from __future__ import annotations

import os
import re
from typing import Any

# engine options whose value names the model the server loads, by their name in the engine's
# option table (data/engines/<engine>.yaml: vLLM --served-model-name / --tokenizer, SGLang
# --served-model-name / --tokenizer-path, llama-server --alias / -a)
_OPTIONS = ("served_model_name", "tokenizer", "tokenizer_path", "alias")
_TOKENIZERS = ("tokenizer", "tokenizer_path")  # paths or Hub ids: not the names a server answers to
_DOWNLOAD = re.compile(
    r"\b(?:huggingface-cli|hf)\s+download\s+(?:--\S+\s+)*[\"']?([\w.-]+/[\w.-]+)[\"']?([^\n;&|]*)")
_LOCAL_DIR = re.compile(r"--local-dir(?:=|\s+)[\"']?([^\s\"']+)")
_MAX_FILE = 1 << 20


def is_unnamed_path(ref: str) -> bool:
    """Whether `ref` is a local path or file (what the evidence may stand in for), not a Hub id
    or an Ollama tag."""
    r = ref.strip()
    return bool(r) and (r.startswith(("/", ".", "~", "$")) or "\\" in r or r.lower().endswith(".gguf")
                        or r.count("/") > 1 or (len(r) > 1 and r[1] == ":"))


def under_variable(ref: str) -> str | None:
    """`${HOME}/models/x.gguf`, `$MODEL_DIR/Qwen2.5-7B-Instruct`: the path below its last variable folder
    ('/models/x.gguf'), where a variable names only a folder and the model's file or folder name is written
    out (the name is what sizes it); None for any other reference."""
    from servefit.models import catalog

    parts = ref.strip().split("/")
    last = max((k for k, p in enumerate(parts) if "$" in p), default=-1)
    rest = "/" + "/".join(p for p in parts[last + 1:] if p)
    if last < 0 or any(c in ref for c in "`()") or any(c in rest for c in "{}") \
            or not all(p.count("{") == p.count("}") for p in parts[:last + 1]):
        return None
    return rest if catalog.names_a_family(rest) else None


def _usable(value: str) -> bool:
    v = value.strip().strip("\"'")
    return bool(v) and "$" not in v and "{" not in v and any(c.isalpha() for c in v)


def _under(path: str, folder: str) -> str | None:
    """The rest of `path` below `folder` ("" for the folder itself), or None."""
    p, f = path.rstrip("/") or "/", folder.rstrip("/") or "/"
    if p == f:
        return ""
    if p.startswith(f + "/") or f == "/":
        return p[len(f):].lstrip("/")
    return None


def _flag_values(argv: list[str], engine: str, options: tuple[str, ...]) -> list[tuple[str, str]]:
    from servefit.engines.options import load_table

    try:
        table = load_table(engine)
    except (OSError, KeyError, ValueError):
        return []
    out = []
    for i, w in enumerate(argv):
        if not w.startswith("-"):
            continue
        flag, eq, inline = w.partition("=")
        opt, negated = table.lookup(flag)
        if opt is None or negated or opt.name not in options:
            continue
        value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else "")
        if opt.name == "served_model_name":  # a list: the first name
            value = value.split(",")[0].split()[0] if value.split() else ""
        if _usable(value) and not value.startswith("-"):
            out.append((value.strip("\"'"), f"the same command's {flag} {value}"))
    return out


def _downloads(file: str, ref: str) -> list[tuple[str, str]]:
    """`huggingface-cli download ORG/NAME --local-dir DIR` lines of `file` whose DIR holds `ref`."""
    try:
        if not os.path.isfile(file) or os.path.getsize(file) > _MAX_FILE:
            return []
        with open(file, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return []
    if "download" not in text:
        return []
    text = re.sub(r"\\\r?\n", " ", text)  # backslash continuations
    out = []
    for m in _DOWNLOAD.finditer(text):
        d = _LOCAL_DIR.search(m.group(2))
        if d is None:
            continue
        folder = d.group(1)
        if _under(ref, folder) == "":
            shown = " ".join(m.group(0).split())[:120]
            out.append((m.group(1), f"`{shown}` in the same file downloads it to {folder}"))
    return out


def deployment_names(site: Any, ref: str) -> list[tuple[str, str]]:
    """(name, why) for the names the file gives the server, where `ref` names no model family
    and the name resolves to a catalogued family and size by name (catalog.names_a_model)."""
    from servefit.models import catalog

    work = getattr(site, "workload", None)
    if work is None or not work.names or catalog.names_a_family(ref):
        return []
    return [(name, f"{where} is '{name}'") for name, where in work.names
            if _usable(name) and catalog.names_a_model(name)]


def candidates(site: Any, engine: str, ref: str) -> list[tuple[str, str]]:
    """(model reference, why) pairs the file gives for the path `ref`, in the order above."""
    if not is_unnamed_path(ref):
        return []
    out: list[tuple[str, str]] = []
    pmap = getattr(getattr(site, "workload", None), "path_map", None) or {}
    for cdir, hdir in sorted(pmap.items(), key=lambda kv: -len(kv[0])):
        rest = _under(ref, str(cdir))
        if rest is not None and _usable(os.path.basename(str(hdir).rstrip("/")) or ""):
            host = str(hdir).rstrip("/") + (f"/{rest}" if rest else "")
            if host.startswith("$"):  # `$PWD/models/X`: the folder's name is what counts
                host = "/" + host.split("/", 1)[-1] if "/" in host else host
            out.append((host, f"the file mounts {hdir} at {cdir}"))
            break
    out.extend(_downloads(str(getattr(site, "file", "") or ""), ref))
    argv = [getattr(t, "text", str(t)) for t in getattr(site, "argv", [])]
    from servefit.models import catalog

    named = catalog.names_a_family(ref)  # `/data/GLM-4.5-Air-REAP-82B-A12B-AWQ-4bit` names its model, one the
    # catalog lacks: an alias the command serves it under (`--served-model-name glm45-air-reap`) is no better
    out.extend(_flag_values(argv, engine, _TOKENIZERS if named else _OPTIONS))
    out.extend(deployment_names(site, ref))
    seen: set[str] = set()
    return [c for c in out if not (c[0] in seen or seen.add(c[0]))]  # type: ignore[func-returns-value]
