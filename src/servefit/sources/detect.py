"""Which engine a command line or a container image runs, the engine version an image tag
names, and the command an engine image runs when a file gives only arguments.

The sources keep their own small table (rather than asking the engine plugins) so that a
server is found even while its engine plugin is missing; the plugins parse the argv the
sources hand them, command words included.
"""

from __future__ import annotations

import re

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
VLLM_MODULES = {"vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server",
                "vllm.entrypoints.cli.main"}
SGLANG_MODULES = {"sglang.launch_server", "sglang_router.launch_server"}


def recognise(words: list[str]) -> tuple[str, int] | None:
    """(engine, number of command words) when `words` starts an engine server."""
    if not words:
        return None
    prog = program(words[0])
    if prog == "vllm":
        return ("vllm", 2) if len(words) > 1 and words[1] == "serve" else None
    if prog in ("llama-server", "llama-server.exe") or (prog == "server" and "llama" in words[0]):
        return "llamacpp", 1
    if prog == "ollama":
        return ("ollama", 2) if len(words) > 1 and words[1] == "serve" else None
    if prog == "text-generation-launcher":
        return "tgi", 1
    if prog == "sglang" and len(words) > 1 and words[1] == "serve":
        return "sglang", 2
    mod, n = _python_module(words)
    if mod in VLLM_MODULES:
        if mod == "vllm.entrypoints.cli.main":
            return ("vllm", n + 1) if n < len(words) and words[n] == "serve" else None
        return "vllm", n
    if mod in SGLANG_MODULES:
        return "sglang", n
    return _plugin_command(words)


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


def find_engine(words: list[str]) -> tuple[int, str, int] | None:
    """The first position where an engine command starts: (index, engine, length)."""
    for k in range(len(words)):
        hit = recognise(words[k:])
        if hit is not None:
            return k, hit[0], hit[1]
    return None


def mentions_ollama_model(words: list[str]) -> str | None:
    """`ollama pull|run MODEL`: the model a script makes the server load."""
    if len(words) >= 3 and program(words[0]) == "ollama" and words[1] in ("pull", "run", "create"):
        return words[2] if words[1] != "create" else None
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
    if "sglang" in r:
        return "sglang"
    if "text-generation-inference" in r or re.search(r"(^|/)tgi([-_/]|$)", r):
        return "tgi"
    if "ollama" in r:
        return "ollama"
    if "vllm" in r:
        return "vllm"
    if any(k in r for k in ("llama.cpp", "llama-cpp", "llamacpp", "llama-server")) and "python" not in r:
        return "llamacpp" if ("server" in r or "server" in t) else None
    from servefit.engines import plugins

    return next((eng.name for eng in plugins() if eng.matches_image(image)), None)


VERSION = re.compile(r"^v?(\d+\.\d+(?:\.\d+)?(?:\.post\d+|rc\d+|\.dev\d+)?)")
LLAMA_BUILD = re.compile(r"\bb(\d{3,5})\b")


def version_of_image(image: str | None) -> str | None:
    """The engine version an image tag names (`v0.11.0` -> "0.11.0"; llama.cpp `server-b6000`
    -> "b6000"); None for `latest`, `main`, digests and tags without a version."""
    if not image:
        return None
    _, tag = split_image(image)
    if not tag:
        return None
    m = VERSION.match(tag)
    if m:
        return m.group(1)
    m = LLAMA_BUILD.search(tag.replace("-", " "))
    if m and engine_of_image(image) == "llamacpp":
        return "b" + m.group(1)
    return None


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v)[:3])


OFFICIAL = ("vllm/vllm-openai", "ollama/ollama", "ghcr.io/huggingface/text-generation-inference",
            "ghcr.io/ggml-org/llama.cpp", "ghcr.io/ggerganov/llama.cpp")


def image_entrypoint(image: str | None) -> tuple[list[str], list[str], bool] | None:
    """(the ENTRYPOINT an engine image runs, its default CMD, whether that is the official
    image's documented entrypoint rather than servefit's assumption for a rebuild)."""
    eng = engine_of_image(image)
    if eng is None or image is None:
        return None
    repo, _ = split_image(image)
    known = repo.lower().removeprefix("docker.io/") in OFFICIAL
    if eng == "vllm":
        ver = version_of_image(image)
        if ver and _vkey(ver) < (0, 9):
            return ["python3", "-m", "vllm.entrypoints.openai.api_server"], [], known
        return ["vllm", "serve"], [], known
    if eng == "llamacpp":
        return ["/app/llama-server"], [], known
    if eng == "ollama":
        return ["/bin/ollama"], ["serve"], known
    if eng == "tgi":
        return ["text-generation-launcher"], [], known
    if eng == "sglang":
        return ["python3", "-m", "sglang.launch_server"], [], False
    from servefit.engines import get

    cmd = get(eng).image_command(image)
    return (cmd, [], False) if cmd else None
