"""Which engine a command line or a container image runs, the engine version an image tag
names, and the command an engine image runs when a file gives only arguments.

What identifies each built-in engine is data: the `recognise` key of data/engines/<name>.yaml
(programs, python modules, images, image entrypoints, file markers), read without importing the
engine's code, so a server is found even while its plugin is missing. Engines from other
packages answer through their plugin (`command_length`, `matches_image`, `markers`).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from servefit.engines.base import program
from servefit.engines.base import python_module as _python_module

SHELLS = {"sh", "bash", "dash", "zsh", "ash", "ksh"}
# A word that starts a command which mentions an engine without running it.
NOT_LAUNCH = {
    "echo", "printf", "cat", "grep", "egrep", "which", "type", "command", "pip", "pip3", "uv", "git",
    "curl", "wget", "kill", "pkill", "pgrep", "ps", "huggingface-cli", "hf", "test", "[", "[[", "ls",
    "rm", "cp", "mv", "mkdir", "chmod", "chown", "tee", "sed", "awk", "find", "tail", "head", "wait",
    "sleep", "cd", "source", ".", "apt-get", "apt", "conda", "mamba", "docker-compose", "kubectl", "helm",
}
# Environment managers whose `run` verb runs the command after their own options in a project's
# environment (`uv run vllm serve`, `conda run -n llm vllm serve`, `poetry run python -m ...`): the
# engine's command is the first among the words that follow; their other verbs (`uv pip install
# vllm`) only mention it.
RUNNERS = {"uv", "conda", "mamba", "micromamba", "poetry", "pipenv", "pixi", "pdm", "hatch", "rye"}


@cache
def engine_tables() -> tuple[tuple[str, dict[str, Any]], ...]:
    """(engine, recognition table) for every built-in engine, in image-priority order: the
    `recognise` key of data/engines/<name>.yaml."""
    from servefit import data
    from servefit.engines import BUILTIN

    def build() -> list[tuple[str, dict[str, Any]]]:
        out = []
        for name in BUILTIN:
            try:
                table = data.load(f"engines/{name}.yaml").get("recognise")
            except (OSError, ValueError):
                continue
            if table:
                out.append((name, table))
        return sorted(out, key=lambda nt: int(nt[1].get("priority", 100)))

    # kept in the data cache: the option tables around them are ~120 KB to read on every run
    files = [data.DATA_DIR / "engines" / f"{name}.yaml" for name in BUILTIN]
    try:
        return tuple(data.derived("recognise", [*files, __file__], build))
    except OSError:  # an engine's data file is missing: the others still count
        return tuple(build())


@cache
def _image_patterns() -> tuple[tuple[str, tuple[re.Pattern[str], ...], dict[str, Any]], ...]:
    return tuple((name, tuple(re.compile(p) for p in t.get("images") or ()), t) for name, t in engine_tables())


@cache
def markers() -> re.Pattern[str]:
    """The words that make a file worth reading: every engine's markers, and llama-swap."""
    parts = [m for _, t in engine_tables() for m in t.get("markers") or ()] + [r"llama[-_.]?swap"]
    return re.compile("|".join(parts), re.I)


def recognise(words: list[str]) -> tuple[str, int] | None:
    """(engine, number of command words) when `words` starts an engine server."""
    if not words:
        return None
    prog = program(words[0])
    for name, t in engine_tables():
        for entry in t.get("programs") or ():
            if not _names_program(entry, prog) or entry.get("path_contains", "") not in words[0]:
                continue
            then = entry.get("then")
            if then is None:
                return name, 1
            return (name, 2) if len(words) > 1 and words[1] == then else None
    mod, n = _python_module(words)
    if mod is not None:
        for name, t in engine_tables():
            for entry in t.get("python_modules") or ():
                if entry["module"] != mod:
                    continue
                then = entry.get("then")
                if then is None:
                    return name, n
                return (name, n + 1) if n < len(words) and words[n] == then else None
    return _plugin_command(words)


def python_modules(engine: str) -> tuple[str, ...]:
    """The `python -m` modules that start this engine's server (data/engines/<name>.yaml)."""
    return tuple(e["module"] for e in engine_data(engine).get("python_modules") or ())


def wrapper_of(words: list[str]) -> dict[str, Any] | None:
    """The launcher a `python -m MODULE` command runs the engine through (the data's `wrapper`:
    its name and the prefix of its own options), or None."""
    mod, _ = _python_module(words)
    if mod is None:
        return None
    return next((e["wrapper"] for _, t in engine_tables() for e in t.get("python_modules") or ()
                 if e["module"] == mod and e.get("wrapper")), None)


def _names_program(entry: dict[str, Any], prog: str) -> bool:
    """The program as the data names it, or a copy kept per build (`llama-server-ec9e0301`,
    `llama-server-b5000`, as llama-swap's own example config runs it) when the data gives the
    build suffix's pattern."""
    if prog == entry["program"]:
        return True
    suffix = entry.get("build_suffix")
    return isinstance(suffix, str) and prog.startswith(entry["program"]) \
        and re.fullmatch(suffix, prog[len(entry["program"]):]) is not None


def _plugin_command(words: list[str]) -> tuple[str, int] | None:
    """An engine another package registers (servefit.engines entry points) recognises its own
    command."""
    from servefit.engines import plugins

    for eng in plugins():
        try:
            n = eng.command_length(words)
        except Exception:  # noqa: BLE001 - a plugin bug must not stop the scan
            continue
        if n:
            return eng.name, n
    return None


# a command line that asks the engine for its usage or version: every engine prints it and exits (argparse's
# -h/--help in vLLM and SGLang, clap's in TGI's launcher, llama.cpp's common/arg.cpp -h/--help/--usage and
# --version, Ollama's cobra -h/--help/--version), so it starts no server
INFO_ONLY = frozenset({"-h", "--help", "--usage", "--version"})


def find_engine(words: list[str]) -> tuple[int, str, int] | None:
    """The first position where an engine command starts: (index, engine, length); None where the
    command only prints the engine's usage or version (INFO_ONLY)."""
    for k in range(len(words)):
        hit = recognise(words[k:])
        if hit is not None:
            return None if INFO_ONLY.intersection(words[k + hit[1]:]) else (k, hit[0], hit[1])
    return None


def trait(engine: str | None, key: str) -> Any:
    """One of an engine's recognition facts (`models_on_request`, `image_serves`, `kubeai`...): the
    built-ins' from their data, a plugin's from its attribute of that name; None when absent."""
    if not engine:
        return None
    table = engine_data(engine)
    if table:
        return table.get(key)
    from servefit.engines import plugins

    eng = next((p for p in plugins() if p.name == engine), None)
    return getattr(eng, key, None) if eng is not None else None


def models_on_request(engine: str | None) -> bool:
    """The server loads models when requests name them (`ollama serve`): the models and model
    files that other commands in the same file pull or create are its."""
    return bool(trait(engine, "models_on_request"))


def owners(key: str) -> list[tuple[str, Any]]:
    """(engine, value) for every built-in engine whose recognition data has `key`."""
    return [(name, t[key]) for name, t in engine_tables() if t.get(key)]


def server_command(engine: str) -> list[str]:
    """The command that starts the engine's server (`ollama serve`), from its first program."""
    for entry in engine_data(engine).get("programs") or ():
        return [entry["program"]] + ([entry["then"]] if entry.get("then") else [])
    return [engine]


def modelfile_ref(words: list[str]) -> str | None:
    """`ollama create NAME -f PATH`: the model file a server beside this command will serve (the
    engines' `modelfile_commands`)."""
    if len(words) < 3:
        return None
    prog = program(words[0])
    for _, t in engine_tables():
        for entry in t.get("modelfile_commands") or ():
            if entry["program"] == prog and words[1] in entry["verbs"]:
                for j in range(2, len(words) - 1):
                    if words[j] in entry["file_flags"]:
                        return words[j + 1]
    return None


def mentions_ollama_model(words: list[str]) -> str | None:
    """`ollama pull|run MODEL`: the model a script makes the server load (the engines'
    `model_commands`)."""
    if len(words) < 3:
        return None
    prog = program(words[0])
    for _, t in engine_tables():
        for entry in t.get("model_commands") or ():
            if entry["program"] == prog and words[1] in entry["verbs"]:
                return words[2]
    return None


def split_image(image: str) -> tuple[str, str | None]:
    """("ghcr.io/org/name", "tag") from "ghcr.io/org/name:tag@sha256:..."."""
    ref = image.strip().split("@", 1)[0]
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > slash:
        return ref[:colon], ref[colon + 1:]
    return ref, None


def engine_of_image(image: str | None) -> str | None:
    if not image:
        return None
    repo, tag = split_image(image)
    r = repo.lower()
    t = (tag or "").lower()
    if "router" in r or "${" in r or "{{" in r:
        return None
    for name, pats, table in _image_patterns():
        if not any(p.search(r) for p in pats):
            continue
        if table.get("image_excludes") and table["image_excludes"] in r:
            continue
        need = table.get("image_requires")
        return name if not need or need in r or need in t else None
    from servefit.engines import plugins

    return next((eng.name for eng in plugins() if eng.matches_image(image)), None)


def server_build_image(image: str | None, args: list[str]) -> str | None:
    """The engine of an image named after it whose name and tag do not say it is the server build
    (a custom llama.cpp build: `quay.io/x/llama.cpp-mma:v8`), when the container passes it only
    arguments and one of them is a flag only that engine's server takes; None otherwise."""
    if not image or not args or not args[0].startswith("-"):
        return None
    r = split_image(image)[0].lower()
    for name, pats, table in _image_patterns():
        flags = set(table.get("image_server_flags") or ())
        if flags and any(p.search(r) for p in pats) and not (table.get("image_excludes") and table["image_excludes"] in r) \
                and any(a.split("=", 1)[0] in flags for a in args):
            return name
    return None


def launcher_image(image: str | None) -> tuple[str, str] | None:
    """(engine, the commands that start it) for an image of another project that carries an engine
    but runs it only when a command starts it (IPEX-LLM's Ollama); None for any other image."""
    if not image:
        return None
    repo = split_image(image)[0].lower()
    for name, table in engine_tables():
        for entry in table.get("launcher_images") or ():
            if re.search(entry["image"], repo):
                return name, entry["starts"]
    return None


def model_keys(engine: str) -> dict[str, Any]:
    """Where an engine's command names the model: {flags, env, positional}."""
    return dict(engine_data(engine).get("model") or {})


def reads_setting_env(engine: str, name: str) -> bool:
    """Whether the engine takes a setting or its model from this environment variable (TGI's
    NUM_SHARD and MODEL_ID, llama.cpp's LLAMA_ARG_*): a value there the repository leaves unset
    is as unknown as one on the command line."""
    from servefit.engines.options import load_table

    try:
        return name in load_table(engine).by_env
    except Exception:  # noqa: BLE001 - a plugin engine without an option table reads none that servefit knows
        return False


@cache
def engine_data(engine: str) -> dict[str, Any]:
    return next((t for name, t in engine_tables() if name == engine), {})


def engine_of_chart_repo(url: str) -> str | None:
    """The engine whose own Helm chart a chart repository's URL serves (the engines' `chart_repos`)."""
    return next((name for name, t in engine_tables() for p in t.get("chart_repos") or () if re.search(p, url)), None)
