"""A container whose `command` is a script mounted from a ConfigMap of the same file (CAST AI's
vLLM chart: `command: ["/scripts/startup.sh"]`, the ConfigMap's `startup.sh` running
`exec vllm serve --model=X "$@"`, the container's `args` passed on): the script is read as a
shell script run with those arguments. A script of an engine image that is not in the file is
said (SF116), not skipped."""

from __future__ import annotations

import posixpath

from yaml import Node

from servefit.core import Token
from servefit.sources.launch import Ctx, Launch, from_words
from servefit.sources.shell import Vars, split_commands
from servefit.sources.text import Src
from servefit.sources.words import Word
from servefit.sources.yamlpos import Y


class ConfigMaps(dict[str, dict[str, Token]]):
    """The file's ConfigMaps (name -> key -> value), and each value as text that maps to the file."""

    def __init__(self) -> None:
        super().__init__()
        self.srcs: dict[tuple[str, str], Src] = {}


def mounted_files(y: Y, pod: Node | None, c: Node) -> dict[str, tuple[str, str]]:
    """Path in the container -> (ConfigMap, key) for the container's ConfigMap volume mounts
    (`items` remap keys to paths; a `subPath` mount is one key at the mount path)."""
    volumes: dict[str, tuple[str, dict[str, str]]] = {}
    for v in y.seq(y.get(pod, "volumes")):
        cm = y.str(y.get(v, "configMap", "name"))
        if cm is None:
            continue
        items = {y.str(y.get(i, "path")) or "": y.str(y.get(i, "key")) or "" for i in y.seq(y.get(v, "configMap", "items"))}
        volumes[y.str(y.get(v, "name")) or ""] = (cm, items)
    out: dict[str, tuple[str, str]] = {}
    for m in y.seq(y.get(c, "volumeMounts")):
        vol = volumes.get(y.str(y.get(m, "name")) or "")
        path = y.str(y.get(m, "mountPath"))
        if vol is None or not path:
            continue
        cm, items = vol
        sub = y.str(y.get(m, "subPath"))
        if sub:
            out[posixpath.normpath(path)] = (cm, items.get(sub, sub))
        else:
            for p, key in items.items():
                out[posixpath.normpath(posixpath.join(path, p))] = (cm, key)
            out.setdefault(posixpath.normpath(path), (cm, ""))  # the directory: any key under it
    return out


def script_of(words: list[Word] | None, files: dict[str, tuple[str, str]],
              cms: ConfigMaps) -> tuple[int, Src | None] | None:
    """Where the command runs a mounted script: (index of the script word, its text or None when
    the ConfigMap is not in this file); None when the command runs no mounted file."""
    for i, w in enumerate((words or [])[:2]):  # `script` or `bash script`
        path = posixpath.normpath(w.text) if w.text.startswith("/") else ""
        if not path:
            continue
        hit = files.get(path)
        if hit is None or not hit[1]:
            d = files.get(posixpath.dirname(path))
            hit = (d[0], posixpath.basename(path)) if d is not None and not d[1] else None
        if hit is not None:
            return i, cms.srcs.get(hit)
    return None


def script_launches(src: Src, args: list[Word], ctx: Ctx, env: Vars) -> list[Launch]:
    """The servers the script starts when run with `args` as its "$@" (placed where "$@" is written)."""
    out: list[Launch] = []
    for cmd in split_commands(src, env.copy()):
        at = [sp for var, sp in cmd.unresolved if var in ("$@", "$*")]
        words = list(cmd.words)
        if at:
            cut = at[0].start if at[0] is not None else -1
            k = next((j for j, w in enumerate(words) if cut >= 0 and w.start > cut), len(words))
            words[k:k] = args
        found = from_words(words, ctx, cmd.env if cmd.env is not None else env)
        for launch in found:
            launch.unresolved.extend(u for u in cmd.unresolved if u[0] not in ("$@", "$*"))
        out.extend(found)
    return out


def run_script(image: Token | None, script: tuple[int, Src | None], words: list[Word], cname: str | None,
               ctx: Ctx, env: Vars, owner: str = "") -> list[Launch]:
    """The servers a container starts through a mounted script (`words`: its command then args); `owner`
    names the container outside Kubernetes (a compose service, a Dockerfile's image), `{image}` standing for its image."""
    from servefit.sources.container import container

    i, src = script
    if src is None:
        found = container(image, words[:i + 1], words[i + 1:], ctx, env)
    else:
        found = script_launches(src, words[i + 1:], ctx, env)
        for launch in found:
            launch.image = launch.image or (image.text if image is not None else None)
            if image is not None and image.span is not None:
                launch.facts.setdefault("image_span", image.span)
    if not found:
        unread_script(image, words[i], src is not None, cname, ctx, owner)
    return found


def unread_script(image: Token | None, script: Word, in_file: bool, cname: str | None, ctx: Ctx,
                  owner: str = "") -> None:
    """SF116 where an engine image runs a script and no server was read from it. A compose service or a
    Dockerfile (`owner`) has its script from the repository (a bind mount, a COPY): one not read is a file
    the repository lacks, not a ConfigMap's."""
    from servefit.engines import get
    from servefit.sources import detect
    from servefit.sources.problems import unread_server

    eng = detect.engine_of_image(image.text if image is not None else None)
    if eng is None or image is None:
        return
    why = ("it starts no server servefit can read" if in_file else
           "the file it is copied or mounted from is not in the repository" if owner else
           "its text is not in this file (mounted from a ConfigMap or volume elsewhere, or built into the image)")
    who = owner.replace("{image}", image.text) if owner else f"container '{cname or 'container'}' of {image.text}"
    ctx.findings.append(unread_server(
        f"{who} runs {get(eng).title} through the "
        f"script {script.text}, "
        f"and {why}: no server was read here, so its settings and memory are not checked. Lint the script "
        "itself, or start the engine in the container's command", span=script.token().span))
