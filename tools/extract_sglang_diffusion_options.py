#!/usr/bin/env python3
"""Read SGLang's diffusion server parser (sglang.multimodal_gen, `sglang serve --model-type
diffusion`) and write its flags as servefit's option table data/engines/sglang_diffusion.yaml.

Static reading (SGLang cannot be imported here): every `parser.add_argument(...)` in
runtime/server_args/server_args.py (ServerArgs.add_cli_args), configs/pipeline_configs/base.py
(PipelineConfig.add_cli_args, called with no prefix), configs/quantization/nunchaku.py and the
VAE / DiT config readers (prefixes `vae-config.` / `dit-config.`), plus `--config` that
runtime/entrypoints/cli/serve.py adds. An f-string flag takes the prefix its caller passes.

Usage (sources from the wheel, never committed):
    pip download sglang==0.5.23 --no-deps -d /tmp/w && unzip -q /tmp/w/*.whl 'sglang/multimodal_gen/*' -d /tmp/sg
    python3 tools/extract_sglang_diffusion_options.py /tmp/sg 0.5.23 > src/servefit/data/engines/sglang_diffusion.yaml
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

# file, the function's enclosing class, and the value each f-string placeholder takes there
SOURCES = (
    ("runtime/server_args/server_args.py", "ServerArgs", ""),
    ("configs/pipeline_configs/base.py", "PipelineConfig", ""),
    ("configs/quantization/nunchaku.py", "NunchakuSVDQuantArgs", ""),
    ("configs/models/vaes/base.py", "VAEConfig", "vae-config"),
    ("configs/models/dits/base.py", "DiTConfig", "dit-config"),
)


def _flag(node: ast.expr, fill: str) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else fill for v in node.values)
    return None


def _calls(path: Path, cls: str, fill: str) -> list[tuple[list[str], str, str | None, list[str], str]]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name == cls):
            continue
        for fn in node.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name == "add_cli_args"):
                continue
            for call in ast.walk(fn):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr == "add_argument"):
                    continue
                flags = [f for a in call.args if (f := _flag(a, fill)) and f.startswith("-")]
                kw = {k.arg: k.value for k in call.keywords}
                action = kw.get("action")
                act = action.value if isinstance(action, ast.Constant) else getattr(action, "id", "")
                nargs = kw.get("nargs")
                na = nargs.value if isinstance(nargs, ast.Constant) else None
                t = kw.get("type")
                typ = t.id if isinstance(t, ast.Name) and t.id in ("int", "float") else "str"
                choices = kw.get("choices")
                ch = [c.value for c in choices.elts if isinstance(c, ast.Constant)] \
                    if isinstance(choices, (ast.List, ast.Tuple)) else []
                out.append((flags, str(act), na, [str(c) for c in ch], typ))
    return out


def main(root: Path, version: str) -> None:
    base = root / "sglang" / "multimodal_gen" if (root / "sglang").is_dir() else root
    print("# SGLang's diffusion server (sglang.multimodal_gen): `sglang serve --model-type diffusion`,")
    print("# `python -m sglang.multimodal_gen.runtime.launch_server`. Written by")
    print(f"# tools/extract_sglang_diffusion_options.py from the {version} wheel's parser; every flag is")
    print("# kept so that a real one is told from a typo. servefit has no memory model for diffusion")
    print("# pipelines: no option here is marked memory.")
    print("engine: sglang_diffusion")
    print("normalize_underscores: false")
    print("allow_abbrev: true")
    print("codes: {unknown: SGL001, invalid: SGL002}")
    print(f"sources: sgl-project/sglang python/sglang/multimodal_gen ({version}) ServerArgs.add_cli_args,"
          " PipelineConfig.add_cli_args, entrypoints/cli/serve.py")
    print("options:")
    print("- {name: config, flags: [--config], type: str}")
    seen = {"--config"}
    for rel, cls, fill in SOURCES:
        for flags, act, nargs, choices, ptype in _calls(base / rel, cls, fill):
            flags = [f for f in flags if f not in seen]
            if not flags:
                continue
            seen.update(flags)
            name = flags[0].lstrip("-").replace("-", "_").replace(".", "__")
            typ, extra = ptype, ""
            if act in ("store_true", "store_false"):
                typ = "bool"
            elif act == "StoreBoolean":
                typ, extra = "bool", ", nargs: '?'"
            elif nargs:
                extra = f", nargs: '{nargs}'"
            if choices:
                extra += ", choices: [" + ", ".join(f"'{c}'" for c in choices) + "]"
            print(f"- {{name: {name}, flags: [{', '.join(flags)}], type: {typ}{extra}}}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
