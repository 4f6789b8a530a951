#!/usr/bin/env python3
"""Read vLLM's own argument parser and environment table, release by release, and write the
facts servefit's option table needs: which `vllm serve` flags and VLLM_* variables exist in each
release, which take a value, which are negatable, deprecated (and for what), and their defaults.

Static reading only (vLLM cannot be imported here): the `add_argument` calls of
vllm/engine/arg_utils.py (EngineArgs / AsyncEngineArgs.add_cli_args) and
vllm/entrypoints/openai/cli_args.py (make_arg_parser / FrontendArgs.add_cli_args), the config
dataclasses behind `**get_kwargs(SomeConfig)["field"]` (vllm/config.py or vllm/config/*.py, and
FrontendArgs), and the `environment_variables` dict of vllm/envs.py.

Usage (sources unpacked from the wheels, one folder per version, never committed):
    pip download vllm==0.6.3 --no-deps -d /tmp/w && unzip -q /tmp/w/*.whl 'vllm/*' -d /tmp/vsrc/0.6.3
    python3 tools/extract_vllm_options.py /tmp/vsrc/0.4.0 /tmp/vsrc/0.6.3 ... \
        --flags-out tests/data/vllm_flags.yaml --history-out src/servefit/data/engines/vllm_history.yaml
Each folder's name is its version.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from servefit.engines.base import version_tuple  # noqa: E402


def vkey(v: str) -> tuple[int, int, int]:
    """Release order; llama.cpp builds (`b4000`) sort by their number."""
    return (int(v[1:]), 0, 0) if re.fullmatch(r"b\d+", v) else version_tuple(v, "0")

ENGINE_ARGS = "vllm/engine/arg_utils.py"
BOOL_STR_OPTIONAL = False  # set per release while reading its arg_utils.py


def _parser_files(root: Path) -> list[Path]:
    """arg_utils.py and the cli_args.py that defines make_arg_parser (the `vllm serve` parser): it
    moved from entrypoints/openai/ to entrypoints/launchers/ (0.29) and entrypoints/common/ (0.33)."""
    front = [p for p in sorted((root / "vllm/entrypoints").rglob("cli_args.py"))
             if "def make_arg_parser" in p.read_text(errors="replace")]
    return [root / ENGINE_ARGS, *front[:1]]
NO_VALUE = {"store_true", "store_false", "store_const", "count", "BooleanOptionalAction", "help", "version"}
REPLACEMENT = re.compile(r"(?:[Uu]se|replaced (?:by|with)|in favou?r of)\s+[`'\"]*(--[a-z0-9][\w.-]*(?:=[\w.-]+)?)")


def _src_files(root: Path) -> list[Path]:
    out = [root / "vllm/config.py"] + sorted((root / "vllm/config").glob("*.py"))
    out += _parser_files(root)
    return [p for p in out if p.is_file()]


class ClassIndex:
    """Dataclass fields (annotation text, default node, docstring) of every class in the files."""

    def __init__(self, files: list[Path]) -> None:
        self.classes: dict[str, tuple[list[str], dict[str, tuple[str, ast.expr | None, str]], str]] = {}
        for p in files:
            text = p.read_text(encoding="utf-8", errors="replace")
            tree = ast.parse(text)
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    self.classes[node.name] = (
                        [b.id for b in node.bases if isinstance(b, ast.Name)], self._fields(node, text), text)

    @staticmethod
    def _fields(node: ast.ClassDef, text: str) -> dict[str, tuple[str, ast.expr | None, str]]:
        out: dict[str, tuple[str, ast.expr | None, str]] = {}
        body = node.body
        for i, st in enumerate(body):
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                ann = ast.get_source_segment(text, st.annotation) or ""
                if ann.startswith(("ClassVar", "InitVar")) or st.target.id.startswith("_"):
                    continue
                doc = ""
                if i + 1 < len(body) and isinstance(body[i + 1], ast.Expr) and \
                        isinstance(getattr(body[i + 1], "value", None), ast.Constant) and \
                        isinstance(body[i + 1].value.value, str):  # type: ignore[attr-defined]
                    doc = body[i + 1].value.value  # type: ignore[attr-defined]
                out[st.target.id] = (ann, st.value, doc)
        return out

    def fields(self, cls: str) -> dict[str, tuple[str, ast.expr | None, str]]:
        if cls not in self.classes:
            return {}
        bases, own, _ = self.classes[cls]
        out: dict[str, tuple[str, ast.expr | None, str]] = {}
        for b in bases:
            out.update(self.fields(b))
        out.update(own)
        return out

    def default(self, node: ast.expr | None, depth: int = 0) -> Any:
        """A field's default as a plain value; None where it is computed at run time."""
        if node is None or depth > 4:
            return None
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in ("field", "Field"):
            for kw in node.keywords:
                if kw.arg == "default":
                    return self.default(kw.value, depth + 1)
            return self.default(node.args[0], depth + 1) if node.args else None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "envs":
                return f"${node.attr}"
            f = self.fields(node.value.id).get(node.attr)
            return self.default(f[1], depth + 1) if f else None
        try:
            value = ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
        return value if isinstance(value, (str, int, float, bool)) or value is None else None


def _text(node: ast.expr | None) -> str:
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)  # type: ignore[misc]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left) + _text(node.right)
    return ""


def _action(node: ast.expr | None) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _kwargs_sources(tree: ast.AST) -> dict[str, str]:
    """`model_kwargs = get_kwargs(ModelConfig)` -> {"model_kwargs": "ModelConfig"}; `get_kwargs(cls)`
    inside a classmethod of a base class is the subclass the parser calls (FrontendArgs)."""
    out: dict[str, str] = {}
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    for klass in [None, *classes]:
        body = ast.walk(klass) if klass is not None else ast.walk(tree)
        for node in body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                    getattr(node.value.func, "id", getattr(node.value.func, "attr", "")) == "get_kwargs" and \
                    node.value.args and isinstance(node.value.args[0], ast.Name):
                name = node.value.args[0].id
                if name == "cls":
                    if klass is None:
                        continue
                    subs = [c.name for c in classes if any(getattr(b, "id", "") == klass.name for b in c.bases)]
                    name = subs[-1] if subs else klass.name
                for t in node.targets:
                    if isinstance(t, ast.Name) and (name != "cls"):
                        out[t.id] = name
    return out


def _deleted_keys(tree: ast.AST) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Delete):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and \
                        isinstance(t.slice, ast.Constant):
                    out.setdefault(t.value.id, set()).add(str(t.slice.value))
    return out


def extract(root: Path) -> dict[str, Any]:
    idx = ClassIndex(_src_files(root))
    bool_negatable = False
    flags: dict[str, dict[str, Any]] = {}
    for p in _parser_files(root):
        if not p.is_file():
            continue
        text = p.read_text(encoding="utf-8", errors="replace")
        tree = ast.parse(text)
        if "BooleanOptionalAction" in text and p.name == "arg_utils.py":
            bool_negatable = _get_kwargs_negates(tree)
        if p.name == "arg_utils.py":  # get_kwargs: bool | str | None is an optional-valued flag
            global BOOL_STR_OPTIONAL
            BOOL_STR_OPTIONAL = "{bool, str, type(None)}" in text
        sources = _kwargs_sources(tree)
        deleted = _deleted_keys(tree)
        loops = _loops(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
                continue
            kws = {k.arg: k.value for k in node.keywords if k.arg}
            star = [k.value for k in node.keywords if k.arg is None]
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            field_info: tuple[str, ast.expr | None, str] | None = None
            if any(isinstance(a, ast.JoinedStr) for a in node.args):
                var = loops.get(id(node))
                cls = sources.get(var or "")
                if cls:  # for key, value in get_kwargs(Cls).items(): add_argument(f"--{key}", **value)
                    for fname, finfo in idx.fields(cls).items():
                        if fname in deleted.get(var or "", set()):
                            continue
                        _record(flags, [f"--{fname.replace('_', '-')}"], {}, finfo, idx, bool_negatable)
                continue
            if not names or not names[0].startswith("-"):
                continue
            for d in [s for s in star if isinstance(s, ast.Dict)]:  # **{**kwargs["f"], "default": None}
                for k, val in zip(d.keys, d.values, strict=True):
                    if k is None:
                        star.append(val)
                    elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                        kws.setdefault(k.value, val)
            for s in star:
                if isinstance(s, ast.Subscript) and isinstance(s.value, ast.Name) and \
                        isinstance(s.slice, ast.Constant):
                    cls = sources.get(s.value.id)
                    if cls:
                        field_info = idx.fields(cls).get(str(s.slice.value))
            _record(flags, names, kws, field_info, idx, bool_negatable)
    env = _env(root)
    utils = [root / "vllm/utils.py", *sorted((root / "vllm/utils").glob("*.py"))]
    texts = [p.read_text(errors="replace") for p in utils if p.is_file()]
    flexible = any("class FlexibleArgumentParser" in t for t in texts)
    if any('arg.startswith("-O")' in t for t in texts):  # FlexibleArgumentParser rewrites -O3 / -O 3
        flags.setdefault("-O", {"arity": "1"})
    for f in flags.values():
        if f.get("replacement", "").split("=")[0] not in flags:
            f.pop("replacement", None)
    return {"flags": flags, "env": env, "underscores": flexible, "has_envs": (root / "vllm/envs.py").is_file()}


def _get_kwargs_negates(tree: ast.AST) -> bool:
    return any(isinstance(node, ast.FunctionDef) and node.name in ("get_kwargs", "_compute_kwargs")
               and "BooleanOptionalAction" in ast.dump(node) for node in ast.walk(tree))


def _loops(tree: ast.AST) -> dict[int, str]:
    """add_argument calls inside `for k, v in <var>.items():` -> var."""
    out: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and \
                isinstance(node.iter.func, ast.Attribute) and node.iter.func.attr == "items" and \
                isinstance(node.iter.func.value, ast.Name):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call):
                    out[id(sub)] = node.iter.func.value.id
    return out


def _record(flags: dict[str, dict[str, Any]], names: list[str], kws: dict[str, ast.expr],
            field_info: tuple[str, ast.expr | None, str] | None, idx: ClassIndex, bool_negatable: bool) -> None:
    action = _action(kws.get("action"))
    help_text = _text(kws.get("help")) or (field_info[2] if field_info else "")
    ann = field_info[0] if field_info else ""
    words = re.findall(r"\w+", ann)  # get_kwargs: any Union containing bool -> BooleanOptionalAction
    is_bool = "bool" in words and words[0] not in ("dict", "Dict", "list", "List", "tuple", "Tuple", "Callable")
    optional_value = BOOL_STR_OPTIONAL and sorted(set(words) - {"Optional", "Union"}) == ["None", "bool", "str"]
    if not action and field_info is not None and is_bool and bool_negatable and not optional_value:
        action = "BooleanOptionalAction"
    fact: dict[str, Any] = {"arity": "0" if action in NO_VALUE else ("?" if optional_value and not action else "1")}
    if kws.get("nargs") is not None and action not in NO_VALUE:
        try:
            fact["arity"] = str(ast.literal_eval(kws["nargs"]))
        except ValueError:
            pass
    if action == "BooleanOptionalAction":
        fact["negatable"] = True
    if "default" in kws:
        d = idx.default(kws["default"])
    elif field_info is not None:
        d = idx.default(field_info[1])
    else:
        d = False if action == "store_true" else (True if action == "store_false" else None)
    if d is not None:
        fact["default"] = d
    dep = kws.get("deprecated")
    deprecated = isinstance(dep, ast.Constant) and dep.value is True
    low = help_text.lower()
    if deprecated or "[deprecated]" in low or low.startswith("deprecated") or "is deprecated" in low \
            or "will be removed" in low or "(deprecated" in low:
        fact["deprecated"] = True
        m = REPLACEMENT.search(help_text)
        if m and m.group(1) not in names:
            fact["replacement"] = m.group(1).rstrip(".,`'\"")
        elif names[0].startswith("--disable-"):
            fact["replacement"] = "--enable-" + names[0][len("--disable-"):]  # checked to exist below
    for n in names:
        flags[n] = dict(fact)
        if fact.get("negatable") and n.startswith("--"):
            flags["--no-" + n[2:]] = {"arity": "0", "negates": n}


def _env(root: Path) -> dict[str, Any]:
    p = root / "vllm/envs.py"
    if not p.is_file():
        return {}
    text = p.read_text(encoding="utf-8", errors="replace")
    tree = ast.parse(text)
    defaults: dict[str, Any] = {}
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                    try:
                        v = ast.literal_eval(st.value)
                    except (ValueError, TypeError, SyntaxError):
                        continue
                    if isinstance(v, (str, int, float, bool)) or v is None:
                        defaults[st.target.id] = v
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == "environment_variables" for t in targets) and \
                isinstance(node.value, ast.Dict):  # type: ignore[attr-defined]
            names += [k.value for k in node.value.keys  # type: ignore[attr-defined]
                      if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return {n: ({"default": defaults[n]} if n in defaults else {}) for n in names}


# ---------------------------------------------------------------- history


def _ranges(present: list[bool], versions: list[str]) -> list[list[str | None]]:
    """[[since, removed_in], ...]: since = first release with it (None = the oldest read),
    removed_in = first release read without it after it (None = still there)."""
    out: list[list[str | None]] = []
    start: int | None = None
    for i, here in enumerate(present + [False]):
        if here and start is None:
            start = i
        elif not here and start is not None:
            out.append([None if start == 0 else versions[start], versions[i] if i < len(versions) else None])
            start = None
    return out


def _changes(values: list[Any], present: list[bool], versions: list[str]) -> dict[str, Any]:
    """{version: value} at each release where the value changes (releases without the flag skipped)."""
    out: dict[str, Any] = {}
    last: Any = object()
    for v, val, here in zip(versions, values, present, strict=True):
        if here and val is not None and val != last:
            out[v] = val
            last = val
    return out


def history(per: dict[str, dict[str, Any]], engine: str = "vllm") -> dict[str, Any]:
    versions = sorted(per, key=vkey)
    out: dict[str, Any] = {"engine": engine, "releases_read": versions, "flags": {}, "env": {}}
    out["underscore_dash_same_since"] = next((v for v in versions if per[v]["underscores"]), None)
    for kind in ("flags", "env"):
        versions = [v for v in out["releases_read"] if kind == "flags" or per[v]["has_envs"]]
        names = sorted({n for v in versions for n in per[v][kind]})
        for n in names:
            present = [n in per[v][kind] for v in versions]
            facts = [per[v][kind].get(n, {}) for v in versions]
            entry: dict[str, Any] = {"in": _ranges(present, versions)}
            if kind == "flags":
                if any(f.get("negates") for f in facts):
                    entry["negates"] = next(f["negates"] for f in facts if f.get("negates"))
                arity = _changes([f.get("arity") for f in facts], present, versions)
                if set(arity.values()) != {"1"} and not entry.get("negates"):
                    entry["arity"] = arity if len(arity) > 1 else next(iter(arity.values()))
                dep = _changes([bool(f.get("deprecated")) for f in facts], present, versions)
                since = [v for v, d in dep.items() if d]
                if since:
                    entry["deprecated_since"] = since[-1]
                    rep = next((f.get("replacement") for f in reversed(facts) if f.get("replacement")), None)
                    if rep:
                        entry["replacement"] = rep
            defaults = _changes([f.get("default") for f in facts], present, versions)
            if any(d is not None for d in defaults.values()):
                entry["default"] = defaults
            out[kind][n] = entry
    return out


def _dump_history(h: dict[str, Any]) -> str:
    """Block style at the top, one line per flag / variable (flow style) so diffs stay readable."""
    import yaml

    def flow(x: Any) -> str:
        text = str(yaml.safe_dump(x, default_flow_style=True, width=10**6, sort_keys=False)).strip()
        return text[:-3].strip() if text.endswith("\n...") else text  # a bare scalar's end marker

    lines = [f"{k}: {flow(v)}" for k, v in h.items() if k not in ("flags", "env")]
    for kind in [k for k in ("flags", "env") if k in h]:
        lines.append(f"{kind}:" if h[kind] else f"{kind}: {{}}")
        lines += [f"  {flow(k)}: {flow(v)}" for k, v in h[kind].items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from history_common import main_for  # the command line every extractor shares

    return main_for("vllm", extract, __doc__ or "",
                    "# Generated by tools/extract_vllm_options.py from the vLLM wheels' own sources\n"
                    "# (vllm/engine/arg_utils.py, vllm/entrypoints/openai/cli_args.py, vllm/config*, vllm/envs.py).\n",
                    argv)


if __name__ == "__main__":
    raise SystemExit(main())
