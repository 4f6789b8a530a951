#!/usr/bin/env python3
"""Read vLLM's model registry, release by release, and write which architecture names
(config.json `architectures`) each release can load: servefit/data/engines/vllm_architectures.yaml.

Static reading only (vLLM cannot be imported here): the module-level tables of
vllm/model_executor/models/registry.py (vllm/model_executor/models/__init__.py up to 0.6.1)
whose entries map an architecture to a (module, class) pair, kept where the table is merged into
the registry vLLM builds (`_VLLM_MODELS`, `_MODELS`); whether unregistered names fall back to the
Transformers backend (model_loader/utils.py::resolve_transformers_fallback from 0.7.2, then
registry.py::_try_resolve_transformers), the suffixes `_normalize_arch` converts
(config `_SUFFIX_TO_DEFAULTS`), `_PREVIOUSLY_SUPPORTED_MODELS`, the words vLLM refuses with, and
the transformers release the wheel requires at least (METADATA).

Usage (one wheel at a time, only these files unpacked, the wheel deleted after; never committed):
    pip download vllm==0.6.3 --no-deps -d /tmp/w && unzip -q /tmp/w/*.whl \
        'vllm/model_executor/models/registry.py' 'vllm/model_executor/models/__init__.py' \
        'vllm/model_executor/model_loader/*.py' 'vllm/config.py' 'vllm/config/model.py' \
        '*.dist-info/METADATA' -d /tmp/varch/0.6.3 && rm -r /tmp/w
    pip download transformers==4.48.2 --no-deps -d /tmp/t && unzip -q /tmp/t/*.whl \
        'transformers/modeling_utils.py' 'transformers/models/*/modeling_*.py' -d /tmp/tf/4.48.2
    python3 tools/extract_vllm_architectures.py /tmp/varch/0.3.3 ... /tmp/varch/0.33.0 \
        --transformers /tmp/tf/4.48.2 ... --out src/servefit/data/engines/vllm_architectures.yaml
Each folder's name is its version. The vLLM releases are vllm_history.yaml's `releases_read`; the
transformers releases the lowest each vLLM wheel from 0.7.2 on asks for, and the newest the newest
vLLM accepts.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extract_vllm_options import _ranges, vkey  # noqa: E402

MODELS = "vllm/model_executor/models"
UNIONS = ("_VLLM_MODELS", "_MODELS")
UNSUPPORTED = "Model architectures {architectures} are not supported for now. Supported architectures: [...]"  # the table the registry is built from, newest spelling first


def _registry_file(root: Path) -> Path:
    reg = root / MODELS / "registry.py"
    return reg if reg.is_file() else root / MODELS / "__init__.py"


def _tables(tree: ast.Module) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Module-level dicts: {name: [architectures mapped to a (module, class) pair]} and
    {name: [tables merged into it with **]}."""
    own: dict[str, list[str]] = {}
    merged: dict[str, list[str]] = {}
    for st in tree.body:
        target = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else \
            (st.target if isinstance(st, ast.AnnAssign) else None)
        value = st.value if isinstance(st, (ast.Assign, ast.AnnAssign)) else None
        if not isinstance(target, ast.Name) or not isinstance(value, ast.Dict):
            continue
        keys = [k.value for k, v in zip(value.keys, value.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Tuple)]
        subs = [v.id for k, v in zip(value.keys, value.values, strict=True) if k is None and isinstance(v, ast.Name)]
        if keys:
            own[target.id] = keys
        if subs:
            merged[target.id] = subs
    return own, merged


def _expand(name: str, own: dict[str, list[str]], merged: dict[str, list[str]], depth: int = 0) -> list[str]:
    """The tables a union is made of, in merge order (a table both owns entries and merges others)."""
    if depth > 5:
        return []
    out = [name] if name in own else []
    for sub in merged.get(name, []):
        out += _expand(sub, own, merged, depth + 1)
    return out


def _string_dict(tree: ast.Module, name: str) -> dict[str, str]:
    for st in tree.body:
        target = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else \
            (st.target if isinstance(st, ast.AnnAssign) else None)
        if isinstance(target, ast.Name) and target.id == name and isinstance(st.value, ast.Dict):  # type: ignore[union-attr]
            d = st.value  # type: ignore[union-attr]
            return {k.value: v.value for k, v in zip(d.keys, d.values, strict=True)
                    if isinstance(k, ast.Constant) and isinstance(v, ast.Constant) and isinstance(v.value, str)}
    return {}


def _suffixes(root: Path, registry_text: str) -> list[str]:
    """Architecture suffixes `_normalize_arch` swaps to find the base model it converts
    (config `_SUFFIX_TO_DEFAULTS`), where this release's registry normalizes."""
    if "try_match_architecture_defaults" not in registry_text:
        return []
    for p in [root / "vllm/config/model.py", root / "vllm/config.py"]:
        if p.is_file():
            text = p.read_text(errors="replace")
            m = re.search(r"_SUFFIX_TO_DEFAULTS[^=]*=\s*\[(.*?)\n\]", text, re.S)
            if m:
                return re.findall(r'\(\s*"(\w+)",\s*\(', m.group(1))
    return []


def _fstrings(code: str) -> list[str]:
    """Every f-string of the code, `{arch}`-style placeholders kept (vLLM's error messages)."""
    out = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.JoinedStr):
            out.append("".join(v.value if isinstance(v, ast.Constant)
                               else "{" + ast.unparse(v.value) + "}"  # type: ignore[attr-defined]
                               for v in node.values))
    return out


def _transformers_pin(root: Path) -> tuple[str | None, str | None]:
    """The transformers releases the wheel accepts (METADATA Requires-Dist): (at least, below)."""
    for meta in root.glob("*.dist-info/METADATA"):
        line = re.search(r"^Requires-Dist: transformers\b(.*)$", meta.read_text(errors="replace"), re.M)
        if line:
            least = re.search(r">=\s*([\d.]+)", line.group(1))
            below = re.search(r"(?<![!<>=])<\s*([\d.]+)", line.group(1))
            cap = below.group(1) if below else None
            return (least.group(1) if least else None), (cap if cap is None or "." in cap else f"{cap}.0")
    return None, None


def extract(root: Path) -> dict[str, Any]:
    reg = _registry_file(root)
    text = reg.read_text(encoding="utf-8", errors="replace")
    tree = ast.parse(text)
    own, merged = _tables(tree)
    union = next((u for u in UNIONS if u in merged or u in own), None)
    tables = _expand(union, own, merged) if union else []
    archs: dict[str, str] = {}
    for t in tables:
        for a in own[t]:
            archs.setdefault(a, t)
    loaders = [p for p in sorted((root / "vllm/model_executor").rglob("*.py")) if "model_loader" in p.parts]
    loader = "\n".join(p.read_text(errors="replace") for p in loaders)
    # what the fallback asks of the transformers class: _supports_flex_attn (0.7.2-0.7.3 read
    # `hasattr(mod, "supports_backend")`, which no transformers class has), is_backend_compatible(),
    # or that or _can_set_attn_implementation() (registry.py::_try_resolve_transformers)
    check = "flex_attn" if "_supports_flex_attn" in loader else \
        ("backend_or_settable" if "_can_set_attn_implementation" in text else "backend")
    if "_try_resolve_transformers" in text:  # registry.py: a failed fallback ends in _raise_for_unsupported
        fallback, refusal = "registry", UNSUPPORTED
    elif "resolve_transformers_fallback" in loader or "resolve_transformers_arch" in loader:
        fallback = "loader"  # model_loader/utils.py: unknown names go to the Transformers backend class
        texts = [t for p in loaders for t in _fstrings(p.read_text(errors="replace"))]
        said = [t for t in texts if "has no vLLM implementation and the Transformers" in t] or \
            [t for t in texts if t.startswith("The Transformers implementation of")]
        refusal = said[0] if said else UNSUPPORTED
    else:
        fallback, refusal = "", UNSUPPORTED
    return {"archs": archs, "fallback": fallback, "check": check if fallback else "", "refusal": refusal,
            "suffixes": _suffixes(root, text),
            "previously": _string_dict(tree, "_PREVIOUSLY_SUPPORTED_MODELS"),
            "transformers": _transformers_pin(root)}


CLASS = re.compile(r"^class (\w+)\(([^)]*)\):", re.M)


def _flagged(blocks: dict[str, tuple[str, str]], cls: str, flag: str, depth: int = 0) -> bool:
    """`_supports_<flag> = True` in the class's body or a base's defined in the same file."""
    if cls not in blocks or depth > 8:
        return False
    bases, body = blocks[cls]
    return re.search(rf"^    _supports_{flag} = True", body, re.M) is not None or \
        any(_flagged(blocks, b.strip().split(".")[-1], flag, depth + 1) for b in bases.split(","))


def transformers_classes(root: Path) -> dict[str, set[str]]:
    """One transformers release's modeling files (transformers/models/*/modeling_*.py): the
    exported classes (the file's `__all__`) vLLM's fallback can take, by what it checks:
    `_supports_flex_attn` / `_supports_attention_backend` set on the class or a base in its file
    (modeling_utils.py::is_backend_compatible), and `settable`: _can_set_attn_implementation's
    heuristic (no `class *Attention*(nn.Module)` in the module, or ALL_ATTENTION_FUNCTIONS.get_interface()
    used; transformers 5)."""
    out: dict[str, set[str]] = {"flex_attn": set(), "backend": set(), "settable": set()}
    can_set = "def _can_set_attn_implementation" in (root / "transformers/modeling_utils.py").read_text(errors="replace")
    for p in sorted((root / "transformers/models").glob("*/modeling_*.py")):
        code = p.read_text(encoding="utf-8", errors="replace")
        m = re.search(r"^__all__\s*=\s*\[(.*?)\]", code, re.M | re.S)
        exported = set(re.findall(r'"(\w+)"', m.group(1))) if m else set()
        blocks = {m.group(1): (m.group(2), code[m.end():code.find("\nclass ", m.end()) % (len(code) + 1)])
                  for m in CLASS.finditer(code)}  # class name -> (bases, body up to the next class)
        settable = can_set and (not re.search(r"^class \w*Attention\w*\(nn\.Module\):", code, re.M)
                                or "ALL_ATTENTION_FUNCTIONS.get_interface(" in code)
        for c in exported & set(blocks):
            if _flagged(blocks, c, "flex_attn"):
                out["flex_attn"].add(c)
            if _flagged(blocks, c, "attention_backend"):
                out["backend"].add(c)
            if settable:
                out["settable"].add(c)
    return out


def history(per: dict[str, dict[str, Any]], tf: dict[str, dict[str, set[str]]] | None = None) -> dict[str, Any]:
    versions = sorted(per, key=vkey)
    names = sorted({a for v in versions for a in per[v]["archs"]})
    out: dict[str, Any] = {"engine": "vllm", "releases_read": versions, "eras": {}, "architectures": {}}
    last: dict[str, Any] = {}
    for v in versions:  # one entry where what vLLM does with an unknown name changes
        era = {"transformers_fallback": per[v]["fallback"] or None, "fallback_check": per[v]["check"] or None,
               "refusal": per[v]["refusal"],
               "convert_suffixes": per[v]["suffixes"], "transformers_min": per[v]["transformers"][0],
               "transformers_below": per[v]["transformers"][1]}
        if era != last:
            out["eras"][v] = {k: x for k, x in era.items() if x not in (None, [])}
            last = era
    for a in names:
        present = [a in per[v]["archs"] for v in versions]
        tables = sorted({per[v]["archs"][a] for v in versions if a in per[v]["archs"]},
                        key=lambda t: [per[v]["archs"].get(a) for v in versions].index(t))
        entry: dict[str, Any] = {"in": _ranges(present, versions), "table": tables[-1]}
        if len(tables) > 1:
            entry["tables"] = tables
        listed = [v for v in versions if a in per[v]["previously"]]
        if listed:  # vLLM's own _PREVIOUSLY_SUPPORTED_MODELS: its words from the first release listing it
            entry["last_supported"] = per[listed[-1]]["previously"][a]
            entry["listed_since"] = listed[0]
        hf = {k: next((t for t in sorted(tf or {}, key=vkey) if a in tf[t][k]), None)  # type: ignore[index]
              for k in ("flex_attn", "backend", "settable")}
        if any(hf.values()):
            entry["transformers"] = {k: t for k, t in hf.items() if t}  # first transformers read that passes
        out["architectures"][a] = entry
    if tf:
        out["transformers_read"] = sorted(tf, key=vkey)
    return out


def dump(h: dict[str, Any]) -> str:
    """Block style at the top, one line per architecture (flow style) so diffs stay readable."""
    import yaml

    def flow(x: Any) -> str:
        text = str(yaml.safe_dump(x, default_flow_style=True, width=10**6, sort_keys=False)).strip()
        return text[:-3].strip() if text.endswith("\n...") else text

    lines = [f"engine: {h['engine']}", f"releases_read: {flow(h['releases_read'])}"]
    if h.get("transformers_read"):
        lines.append(f"transformers_read: {flow(h['transformers_read'])}")
    lines.append("eras:")
    lines += [f"  {flow(v)}: {flow(e)}" for v, e in h["eras"].items()]
    lines.append("architectures:")
    lines += [f"  {flow(a)}: {flow(e)}" for a, e in h["architectures"].items()]
    return "\n".join(lines) + "\n"


HEADER = ("# Generated by tools/extract_vllm_architectures.py from the vLLM wheels' own model registry\n"
          "# (vllm/model_executor/models/registry.py, models/__init__.py up to 0.6.1; model_loader/utils.py,\n"
          "# config `_SUFFIX_TO_DEFAULTS`, the wheel's METADATA). Ranges are [since, removed_in) over\n"
          "# releases_read (the releases vllm_history.yaml reads); since null = the oldest read.\n"
          "# `table`: the registry table the name is in at its newest release (`tables`: every one, in order).\n"
          "# `transformers`: the first of transformers_read (the lowest transformers each wheel from 0.7.2 on asks for,\n"
          "# and the newest 0.33.0 accepts; transformers/models/*/modeling_*.py) whose class passes each fallback check.\n"
          "# Schema: servefit/schemas/engine_architectures.schema.json\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("roots", nargs="+", help="source folders, each named by its release")
    ap.add_argument("--out", help="the architecture history (YAML)")
    ap.add_argument("--transformers", nargs="*", default=[],
                    help="transformers sources (transformers/modeling_utils.py, transformers/models/*/modeling_*.py), "
                         "one folder per release, named by it")
    args = ap.parse_args(argv)
    per = {os.path.basename(os.path.normpath(r)): extract(Path(r)) for r in args.roots}
    tf = {os.path.basename(os.path.normpath(r)): transformers_classes(Path(r)) for r in args.transformers}
    h = history(per, tf)
    if args.out:
        Path(args.out).write_text(HEADER + dump(h))
    prev: set[str] = set()
    for v in h["releases_read"]:
        now = set(per[v]["archs"])
        print(f"{v}: {len(now)} architectures, +{len(now - prev)} -{len(prev - now)}"
              + (f" (fallback: {per[v]['fallback']})" if per[v]["fallback"] else ""))
        prev = now
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
