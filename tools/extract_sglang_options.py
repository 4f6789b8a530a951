#!/usr/bin/env python3
"""Read SGLang's server argument parser release by release and write which flags each release
has, which take a value, their defaults and which are deprecated (and for what).

Static reading (SGLang cannot be imported here):
- python/sglang/srt/server_args.py: every `parser.add_argument("--x", ...)` (ServerArgs.add_cli_args);
- from 0.5.16, the fields `name: A[T, "help"]` / `A[T, Arg(...)]` that add_cli_args_from_dataclass
  turns into flags (server_args.py's ServerArgs, and arg_groups/fields/*.py where the fields moved):
  `--field-name` or Arg(cli_name=...), plus Arg(aliases=[...]); Arg(no_cli=True) has none; a bool
  is store_true, a list takes nargs (default "+").
A flag registered with `action=DeprecatedAction` is one the release rejects (its __call__ raises
the help text), so it counts as absent; DeprecatedStoreTrueAction / a help starting "Deprecated"
still works and is deprecated, its replacement read from `new_flag=` or the help.

Usage (sources from the wheels, never committed):
    pip download sglang==0.4.6.post5 --no-deps -d /tmp/w && unzip -q /tmp/w/*.whl \
        'sglang/srt/server_args*.py' 'sglang/srt/arg_groups/*' -d /tmp/sgsrc/0.4.6.post5
    python3 tools/extract_sglang_options.py /tmp/sgsrc/* \
        --flags-out tests/data/sglang_flags.yaml --history-out src/servefit/data/engines/sglang_history.yaml
Each folder's name is its version.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extract_vllm_options import _action, _text  # the same AST readers
from history_common import main_for  # noqa: E402

NO_VALUE = {"store_true", "store_false", "store_const", "count", "help", "version", "BooleanOptionalAction",
            "DeprecatedStoreTrueAction"}
REPLACEMENT = re.compile(r"(?:[Uu]se|replaced (?:by|with)|in favou?r of|renamed to)\s+[`'\"]*(--[a-z0-9][\w-]*)")


def _lit(node: ast.expr | None) -> Any:
    if node is None:
        return None
    try:
        v = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return v if isinstance(v, (str, int, float, bool)) or v is None else None


def _fact(names: list[str], action: str, nargs: Any, default: Any, help_text: str,
          new_flag: str = "") -> dict[str, Any]:
    fact: dict[str, Any] = {"arity": "0" if action in NO_VALUE or action == "DeprecatedAction" and nargs in (None, 0)
                            else str(nargs) if nargs not in (None, 1) else "1"}
    if action == "BooleanOptionalAction":
        fact["negatable"] = True
    if default is not None:
        fact["default"] = default
    elif action == "store_true" or action == "DeprecatedStoreTrueAction":
        fact["default"] = False
    low = help_text.lower()
    if action.startswith("Deprecated") or low.startswith("deprecated") or "(deprecated" in low \
            or "is deprecated" in low or "[deprecated]" in low or "will be removed" in low:
        fact["deprecated"] = True
        m = re.search(r"--[a-z0-9][\w-]*", new_flag) if new_flag else REPLACEMENT.search(help_text)
        rep = m.group(1) if m and m.groups() else (m.group(0) if m else "")
        if rep and rep not in names:
            fact["replacement"] = rep
    return fact


def _add_argument_calls(tree: ast.AST, flags: dict[str, dict[str, Any]]) -> None:
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not names or not names[0].startswith("-"):
            continue
        kws = {k.arg: k.value for k in node.keywords if k.arg}
        action = _action(kws.get("action"))
        if action == "DeprecatedAction":
            continue  # the release raises on it: not a flag it takes
        nargs = _lit(kws.get("nargs")) if "nargs" in kws else None
        fact = _fact(names, action, nargs, _lit(kws.get("default")), _text(kws.get("help")),
                     _text(kws.get("new_flag")))
        for n in names:
            flags[n] = dict(fact)
            if fact.get("negatable") and n.startswith("--"):
                flags["--no-" + n[2:]] = {"arity": "0", "negates": n}


def _type_words(node: ast.expr) -> list[str]:
    return re.findall(r"\w+", ast.unparse(node))


def _annotated_fields(tree: ast.AST, flags: dict[str, dict[str, Any]]) -> None:
    """`name: A[T, "help"] = default` / `A[T, Arg(...)]` fields (add_cli_args_from_dataclass)."""
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
        for st in cls.body:
            if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
                continue
            ann = st.annotation
            if not (isinstance(ann, ast.Subscript) and getattr(ann.value, "id", "") == "A"
                    and isinstance(ann.slice, ast.Tuple) and len(ann.slice.elts) >= 2):
                continue
            typ, meta = ann.slice.elts[0], ann.slice.elts[1]
            kws: dict[str, ast.expr] = {}
            help_text = _text(meta)
            if isinstance(meta, ast.Call) and getattr(meta.func, "id", "") == "Arg":
                kws = {k.arg: k.value for k in meta.keywords if k.arg}
                help_text = _text(kws.get("help"))
            elif not help_text:
                continue
            if _lit(kws.get("no_cli")) is True:
                continue
            field = st.target.id
            names = [_lit(kws.get("cli_name")) or "--" + field.replace("_", "-")]
            if isinstance(kws.get("aliases"), (ast.List, ast.Tuple)):
                names += [e.value for e in kws["aliases"].elts  # type: ignore[attr-defined]
                          if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            words = [w for w in _type_words(typ) if w not in ("Optional", "None", "Union")]
            action = _action(kws.get("action")) if "action" in kws else ""
            nargs = _lit(kws.get("nargs"))
            if not action and words[:1] == ["bool"] and len(words) == 1:
                action = "store_true"
            elif not action and words[:1] in (["List"], ["list"]) and "type_parser" not in kws:
                nargs = nargs or "+"
            default = _lit(st.value) if st.value is not None else None
            fact = _fact(names, action, nargs, default, help_text, _text(kws.get("new_flag")))
            for n in names:
                flags.setdefault(n, dict(fact))


def extract(root: Path) -> dict[str, Any]:
    srt = root / "sglang/srt"
    flags: dict[str, dict[str, Any]] = {}
    main = ast.parse((srt / "server_args.py").read_text(encoding="utf-8", errors="replace"))
    _add_argument_calls(main, flags)
    if "add_cli_args_from_dataclass" in ast.dump(main):
        _annotated_fields(main, flags)
        for p in sorted((srt / "arg_groups" / "fields").glob("*.py")):
            _annotated_fields(ast.parse(p.read_text(encoding="utf-8", errors="replace")), flags)
    for f in flags.values():
        if f.get("replacement") and f["replacement"] not in flags:
            f.pop("replacement")
    return {"flags": flags, "env": {}, "underscores": False, "has_envs": False}


if __name__ == "__main__":
    raise SystemExit(main_for(
        "sglang", extract, __doc__ or "",
        "# Generated by tools/extract_sglang_options.py from SGLang's own python/sglang/srt/server_args.py\n"
        "# (and arg_groups/fields/*.py from 0.5.16) in each release's wheel.\n"))
