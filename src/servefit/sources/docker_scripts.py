"""A container that runs a script of the repository: a Dockerfile's COPY of it (`COPY start.sh
/app/start.sh` then `ENTRYPOINT ["/bin/bash", "/app/start.sh"]`) or a compose bind mount of it.
The server is the one that script starts, in that image: read through the Dockerfile or compose
file, it gets the image's engine version and environment; the script read alone would get neither
(the newest release is then assumed), so the run keeps that reading (see drop_run_scripts)."""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass

from servefit.core import LaunchSite, Token
from servefit.sources import detect, image_release
from servefit.sources.launch import Ctx, Launch
from servefit.sources.shell import Vars, Word, split_commands
from servefit.sources.text import Src


@dataclass
class Copy:
    """One `COPY` / `ADD` of build-context files: its sources, destination and the WORKDIR then."""

    sources: list[str]
    dest: str
    workdir: str


def copy_of(words: list[str], workdir: str) -> Copy | None:
    """A COPY/ADD instruction's words (after the keyword); None for a copy from another stage or
    image (`--from=`), a URL or a heredoc, which put no repository file in the image."""
    if any(w.startswith("--from") for w in words):
        return None
    plain = [w for w in words if not w.startswith("--")]
    if len(plain) < 2 or any("://" in w or w.startswith("<<") for w in plain):
        return None
    return Copy(plain[:-1], plain[-1], workdir)


def _container_path(word: str, workdir: str, shell_arg: bool) -> str | None:
    """The path a command word names in the container: `./start.sh` and `scripts/run.sh` are
    relative to WORKDIR, and so is a bare name given to a shell (`bash entrypoint.sh`); a bare
    program name is looked up on PATH."""
    if word.startswith("/"):
        return posixpath.normpath(word)
    if "/" in word or (shell_arg and word and not word.startswith("$")):
        return posixpath.normpath(posixpath.join(workdir or "/", word))
    return None


def _is_script(local: str) -> bool:
    """A file run directly as the command: a shell script (by its name, or its `#!` line)."""
    if local.endswith((".sh", ".bash")):
        return True
    from servefit.sources import _head

    head = (_head(local) or "").split("\n", 1)[0]
    return head.startswith("#!") and "sh" in head


def _in_context(source: str, context: str) -> str:
    """The repository file a COPY source names: in the Dockerfile's folder, else in the nearest folder
    above it (inside the repository) that holds that path, as a build run from the repository root
    (`docker build -f containers/tgi/gpu/3.0.1/Dockerfile .` copying `containers/tgi/gpu/3.0.1/entrypoint.sh`)
    gives it; the Dockerfile's folder where no folder holds it."""
    from servefit.sources.base import _repo_of, _within

    rel = source.lstrip("/")  # `COPY /src/x`: in the context
    first = os.path.normpath(os.path.join(context, rel))
    if "/" not in rel.rstrip("/") or os.path.exists(first):
        return first
    root, d = _repo_of(context), os.path.abspath(context)
    while (parent := os.path.dirname(d)) != d and _within(parent, root):
        d = parent
        cand = os.path.normpath(os.path.join(d, rel))
        if os.path.exists(cand):
            return cand
    return first


def _local_file(path: str, copies: list[Copy], context: str) -> str | None:
    """The build-context file the image holds at `path`, from the last COPY that puts one there."""
    for c in reversed(copies):
        dest = posixpath.normpath(posixpath.join(c.workdir or "/", c.dest))
        as_dir = c.dest.endswith("/") or len(c.sources) > 1
        for s in c.sources:
            if any(ch in s for ch in "*?[$"):
                continue
            local = _in_context(s, context)
            if os.path.isdir(local):  # a folder's contents land under dest
                if path.startswith(dest.rstrip("/") + "/"):
                    cand = os.path.join(local, *path[len(dest.rstrip("/")) + 1:].split("/"))
                    if os.path.isfile(cand):
                        return cand
            elif os.path.isfile(local):  # into dest, or into the folder dest names
                base = posixpath.join(dest, posixpath.basename(s))
                if path == base or (not as_dir and path == dest):
                    return local
    return None


def copied_script(words: list[Word], copies: list[Copy], workdir: str,
                  context: str) -> tuple[list[Word], int, str | None] | None:
    """Where the container's command runs a script (`/app/start.sh`, `bash ./run.sh`): (the
    command's words, with an `sh -c` payload split; the index of the script word; its file in the
    build context, or None when no COPY of the repository puts it there); None when it runs none."""
    if words and detect.program(words[0].text) in detect.SHELLS and len(words) > 2 and words[1].text == "-c":
        cmds = split_commands(words[2].to_src(), None)
        if len(cmds) != 1:
            return None
        words = list(cmds[0].words)
    if not words:
        return None
    i = 1 if detect.program(words[0].text) in detect.SHELLS else 0
    if i >= len(words) or words[i].text.startswith("-"):
        return None
    path = _container_path(words[i].text, workdir, i == 1)
    if path is None:
        return None
    local = _local_file(path, copies, context)
    if i == 0 and not (path.endswith(".sh") or (local is not None and _is_script(local))):
        return None  # `/usr/bin/python3 -m vllm...`, a copied binary: a program, not a script
    return words, i, local


def _env_prefix(words: list[Word], env: Vars) -> tuple[list[Word], Vars]:
    """`env NAME=V ... CMD` (compose `entrypoint: ["env", "LLM_NAME=llama3.1", "/bin/sh", "/scripts/run.sh"]`):
    CMD runs with those variables set, as env(1) runs it."""
    if not words or detect.program(words[0].text) != "env":
        return words, env
    k, out = 1, env.copy()
    while k < len(words) and (m := ASSIGN.match(words[k].text)) is not None:
        src = words[k].to_src()
        out.set(m.group(1), Token(m.group(2), src.span(m.start(2), m.end(2))))
        out.exported.add(m.group(1))
        k += 1
    return (words[k:], out) if k > 1 else (words, env)


ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)


def run_copied(image: Token | None, entry: list[Word] | None, cmd: list[Word] | None, ctx: Ctx, env: Vars,
               copies: list[Copy], workdir: str, context: str, owner: str) -> list[Launch] | None:
    """The servers a container starts through a script of the repository that the image holds
    (a Dockerfile's COPY) or that is mounted into it (a compose bind mount); None when its command
    runs no script. A CMD alone follows an engine image's own entrypoint: it is not run. `owner` names the
    container in what is said of a script not read ("service 'ollama' of {image}")."""
    from servefit.sources.k8s_scripts import run_script

    words = list(entry or []) + list(cmd or [])
    own = bool(entry) or image_release.image_entrypoint(image.text if image else None) is None
    words, env = _env_prefix(words, env)
    hit = copied_script(words, copies, workdir, context) if own and words else None
    if hit is None:
        return None
    src = script_src(hit[2], context) if hit[2] is not None else None
    found = run_script(image, (hit[1], src), hit[0], None, ctx, env, owner)
    for launch in found:  # the server is where the container runs the script; its words are the script's
        launch.line = words[0].line
    return found


def mounts_as_copies(mounts: dict[str, str]) -> list[Copy]:
    """Bind mounts (container path -> host path, relative to the compose file) as the copies that
    put those files in the container; a home-relative or variable host path is not followed."""
    return [Copy([src], dst, "/") for dst, src in mounts.items() if not src.startswith(("~", "$"))]


def script_src(local: str, context: str) -> Src | None:
    """The script's text, mapped to its own file (findings and tune's edits point there); None for
    a file outside the repository, which is neither read nor written."""
    from servefit.sources.base import FileCtx, _repo_of, _within, read_text

    if not _within(local, _repo_of(context)):
        return None
    text = read_text(local)
    return FileCtx.of(local, text).src if text is not None else None


def drop_run_scripts(sites: list[LaunchSite], runners: list[LaunchSite] | None = None) -> list[LaunchSite]:
    """A script's own server where a Dockerfile in the run (or a compose service built from it)
    starts it, its words the script's: that reading carries the image's version and environment.
    `runners`: the sites before a compose overlay shadowed its base (the base's service still runs
    its script: GardenVarietyAI/rose's CPU compose file beside its CUDA overlay)."""
    at = os.path.abspath
    used = {at(t.span.file) for s in (runners if runners is not None else sites) if not s.name.startswith("script:")
            for t in s.argv if t.span is not None and at(t.span.file) != at(s.file)}
    return [s for s in sites if not (s.name.startswith("script:") and at(s.file) in used)]


def runners_of(named: list[str], walked: list[str], sites: list[LaunchSite]) -> list[str]:
    """Dockerfiles and compose files beside a named script (in its folder or up to two above, inside the repository)
    that may run it, where the run did not read them: `servefit lint start.sh` (a pre-commit hook
    passes the files it changed) is about the server that script starts in its image."""
    from servefit.sources import file_kind
    from servefit.sources.base import _repo_of, _within

    have = {os.path.abspath(w) for w in walked}
    scripts = {os.path.abspath(s.file) for s in sites if s.name.startswith("script:")}
    out: list[str] = []
    for p in named:
        if os.path.abspath(p) not in scripts:
            continue
        root = _repo_of(os.path.dirname(p) or ".")
        d = os.path.dirname(os.path.abspath(p))
        for _ in range(3):
            try:
                names = sorted(os.listdir(d))
            except OSError:
                break
            for n in names:
                f = os.path.join(d, n)
                if _runs_containers(f, file_kind(f)) and os.path.abspath(f) not in have \
                        and _mentions(f, os.path.basename(p)):
                    out.append(os.path.relpath(f) if _within(f, os.getcwd()) else f)
            parent = os.path.dirname(d)
            if parent == d or not _within(parent, root):
                break
            d = parent
    return list(dict.fromkeys(out))


def _runs_containers(path: str, kind: str | None) -> bool:
    """A Dockerfile, or a compose file (which may bind-mount the script and run it)."""
    base = os.path.basename(path)
    return kind == "dockerfile" or (base.startswith(("compose", "docker-compose")) and base.endswith((".yaml", ".yml")))


def _mentions(path: str, name: str) -> bool:
    from servefit.sources.base import read_text

    text = read_text(path)
    return text is not None and name in text
