"""A compose service built from the repository's own Dockerfile (`build: .`, `build: {context,
dockerfile, target}`): the container runs that Dockerfile's stage, so its ENTRYPOINT / CMD, its
base image's entrypoint and its ENV are the service's, under the service's own `entrypoint`,
`command` and `environment` (compose's rules: an `entrypoint` drops the image's CMD, a `command`
replaces it). The Dockerfile read alone is then the same server without the service's settings:
assemble.link keeps the compose one (see drop_built)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from functools import lru_cache

from yaml.nodes import MappingNode, Node, ScalarNode

from servefit.core import LaunchSite
from servefit.sources.launch import Ctx, Launch
from servefit.sources.shell import Vars, Word

_BUILD = re.compile(r"^[ \t]+build:", re.M)
_BUILD_PATHS = re.compile(r"^[ \t]+(build|context|dockerfile):[ \t]*['\"]?([^'\"#\s{}]+)", re.M)


def builds_here(path: str, text: str) -> bool:
    """A compose file with a `build:` whose Dockerfile names an engine (read even when the compose
    file itself names none); an application's own compose file stays unread, as before."""
    if not os.path.basename(path).startswith(("compose.", "docker-compose.", "compose-", "docker-compose-")) \
            or _BUILD.search(text) is None:
        return False
    from servefit.safe_io import read_text
    from servefit.sources import _mentions_engine

    here = os.path.dirname(path)
    found = [(m.group(1), m.group(2)) for m in _BUILD_PATHS.finditer(text)]
    contexts = {v for k, v in found if k != "dockerfile"} | {"."}
    files = {v for k, v in found if k == "dockerfile"} | {"Dockerfile"}
    for cand in {os.path.join(here, c, f) for c in contexts for f in files}:
        if os.path.isfile(cand):
            try:
                if _mentions_engine(read_text(cand, 1 << 20)):
                    return True
            except (OSError, ValueError):
                continue
    return False


_DOCKER_RUN = re.compile(r"\b(?:docker|podman)\s+(?:container\s+)?run\b")


def runs_built_image(path: str, text: str) -> bool:
    """A script that runs `docker run` beside a Makefile or script that builds an image from a
    Dockerfile naming an engine (`docker build -t NAME .` over `FROM <engine image>`): read even
    when the script itself names no engine (docker_run takes the image from tagged_dockerfile)."""
    if _DOCKER_RUN.search(text) is None:
        return False
    from servefit.safe_io import read_text
    from servefit.sources import _mentions_engine

    for df in _built_dockerfiles(os.path.dirname(path) or "."):
        try:
            if _mentions_engine(read_text(df, 1 << 20)):
                return True
        except (OSError, ValueError):
            continue
    return False


def dockerfile_of(y, build: Node | None, compose_path: str) -> tuple[str, str | None] | None:  # type: ignore[no-untyped-def]
    """(the Dockerfile path, the build target) of a `build:` in the repository, or None (a remote
    context, a file that is not there)."""
    if isinstance(build, ScalarNode):
        context, name, target = y.str(build), None, None
    elif isinstance(build, MappingNode):
        context, name, target = y.str(y.get(build, "context")) or ".", y.str(y.get(build, "dockerfile")), \
            y.str(y.get(build, "target"))
    else:
        return None
    if not context or "://" in context or context.startswith(("git@", "$")) or (name or "").startswith("$"):
        return None
    path = os.path.normpath(os.path.join(os.path.dirname(compose_path), context, name or "Dockerfile"))
    return (path, target) if os.path.isfile(path) else None


def built(path: str, target: str | None, entry: list[Word] | None, cmd: list[Word] | None, entry_set: bool,
          env: Vars, ctx: Ctx) -> list[Launch]:
    """The service's launches when it runs the Dockerfile at `path` (stage `target`, else the last);
    the models the stage's RUN commands pull (`ollama pull $MODEL`) are the ones its server has."""
    from servefit.safe_io import read_text
    from servefit.sources.base import FileCtx
    from servefit.sources.dockerfile import run_stage, source_releases, stages

    try:
        fc = FileCtx.of(path, read_text(path, 1 << 20))
    except (OSError, ValueError):
        return []
    found = stages(fc)
    st = next((s for s in found if target and s.name == target), found[-1] if found else None)
    if st is None:
        return []
    image_entry = st.entry if st.entry != [] else None
    if entry_set:  # the service's entrypoint replaces the image's, and drops its CMD
        use_entry, use_cmd = entry, cmd
    else:
        use_entry, use_cmd = image_entry, cmd if cmd is not None else (st.cmd or None)
        if st.entry == [] and use_cmd:
            use_entry, use_cmd = use_cmd, None
    merged = st.runtime.copy()
    for k, v in env.values.items():
        merged.set(k, v, env.taint.get(k, []))
    merged.exported = set(merged.values)
    launches = run_stage(st, use_entry, use_cmd, ctx, merged, os.path.dirname(path) or ".", path, source_releases(found))
    if launches:
        from servefit.sources.ollama_client import ollama_client

        for words in st.built:
            ollama_client(words, ctx)
    return launches


def drop_built(sites: list[LaunchSite]) -> list[LaunchSite]:
    """A Dockerfile's own server where a compose service, or a script's `docker run` of the image it
    builds, runs it (its words are written there): the service's or the script's is the one that runs."""
    at = os.path.abspath
    from servefit.sources.launch import RUNS_IMAGES

    runs = [s for s in sites if s.workload.service or s.workload.runtime in RUNS_IMAGES]
    used = {at(t.span.file) for s in runs for t in s.argv if t.span is not None and at(t.span.file) != at(s.file)}
    used |= {at(s.image_span.file) for s in runs if s.image_span is not None and at(s.image_span.file) != at(s.file)}
    # a build's ENV reaches only the containers of its image
    used |= {at(t.span.file) for s in runs for t in s.env.values() if t.span is not None and at(t.span.file) != at(s.file)
             and os.path.basename(t.span.file).lower().startswith(("dockerfile", "containerfile"))}
    return [s for s in sites if not (s.name.startswith("dockerfile") and at(s.file) in used)]


_BUILD_CMD = re.compile(r"(?:^|[\s;&|(])(?:docker|podman|\$\(DOCKER\)|\$\{?DOCKER\}?)\s+(?:image\s+|buildx\s+)?build\s+(.*)")
_MAKE_VAR = re.compile(r"^[ \t]*(?:export[ \t]+)?([A-Za-z_]\w*)[ \t]*(?:::=|:=|\?=|=)[ \t]*(.*?)[ \t]*$", re.M)
# the folder's own name, as a Makefile or a script writes it (`$(notdir $(CURDIR))`, `$(basename "$PWD")`)
_DIR_NAME = re.compile(r"\$\((?:notdir \$\(CURDIR\)|shell basename \$\(CURDIR\)|basename \"?\$\{?PWD\}?\"?)\)"
                       r"|\$\{PWD##\*/\}")


def _builders(folder: str) -> list[str]:
    """Makefiles and scripts in the folder that may run `docker build`."""
    out = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        if name in ("Makefile", "makefile", "GNUmakefile") or name.endswith((".mk", ".sh", ".bash")):
            out.append(path)
        elif "." not in name:
            try:
                with open(path, "rb") as fh:
                    if fh.read(64).startswith(b"#!"):
                        out.append(path)
            except OSError:
                continue
    return out


def _expand(word: str, names: dict[str, str], folder: str) -> str:
    """A Makefile's / script's `$(VAR)` / `${VAR}` / `$VAR` from its own assignments, the folder's
    name where it is written as one."""
    def one(m: re.Match[str]) -> str:
        return _DIR_NAME.sub(os.path.basename(os.path.abspath(folder)), names.get(m.group(1) or m.group(2), m.group(0)))

    word = _DIR_NAME.sub(os.path.basename(os.path.abspath(folder)), word)
    for _ in range(3):
        word = re.sub(r"\$[({](\w+)[)}]|\$(\w+)", one, word)
    return word


_BUILD_OPTS = {"-t": "tag", "--tag": "tag", "-f": "file", "--file": "file", "--target": "target"}
_VALUE_OPTS = {"--build-arg", "--label", "--platform", "--network", "--secret", "--ssh", "--cache-from", "--cache-to",
               "--progress", "-o", "--output", "--iidfile", "--add-host", "--shm-size", "--ulimit", "-m", "--memory",
               "--build-context", "--builder", "--metadata-file", "--annotation", "--attest", "--allow"}


def _build_args(words: list[str]) -> dict[str, str]:
    """`docker build` options that name the image: tag, file, target, and the context."""
    out: dict[str, str] = {}
    i = 0
    while i < len(words):
        flag, eq, val = words[i].partition("=")
        if flag in _BUILD_OPTS:
            if not eq and i + 1 < len(words):
                val, i = words[i + 1], i + 1
            out.setdefault(_BUILD_OPTS[flag], val)
        elif flag in _VALUE_OPTS and not eq:
            i += 1
        elif not words[i].startswith("-") and "context" not in out:
            out["context"] = words[i]
        i += 1
    return out


def _latest(tag: str) -> str:
    return tag if ":" in tag.rsplit("/", 1)[-1] else tag + ":latest"


def _builds(folder: str) -> tuple[tuple[str, str, str | None], ...]:
    """(tag, Dockerfile, target) of each `docker build -t TAG` that a Makefile or script in the
    folder runs over a Dockerfile that is there; read once per version of the folder's builders
    (a folder of many scripts that each `docker run` asks for them once)."""
    builders = _builders(folder)
    sig = []
    for path in builders:
        try:
            st = os.stat(path)
        except OSError:
            continue
        sig.append((path, st.st_mtime_ns, st.st_size))
    return _builds_of(folder, tuple(sig))


@lru_cache(maxsize=64)
def _builds_of(folder: str, builders: tuple[tuple[str, int, int], ...]) -> tuple[tuple[str, str, str | None], ...]:
    return tuple(_read_builds(folder, [p for p, _, _ in builders]))


def _read_builds(folder: str, builders: list[str]) -> Iterator[tuple[str, str, str | None]]:
    import shlex

    from servefit.safe_io import read_text

    for path in builders:
        try:
            text = read_text(path, 1 << 20).replace("\\\n", " ")
        except (OSError, ValueError):
            continue
        names = {m.group(1): m.group(2) for m in _MAKE_VAR.finditer(text)}
        for m in _BUILD_CMD.finditer(text):
            try:
                words = shlex.split(_expand(m.group(1).split(";")[0].split("&&")[0], names, folder), comments=True)
            except ValueError:
                continue
            args = _build_args(words)
            if "tag" not in args or "context" not in args:
                continue
            df = os.path.normpath(os.path.join(folder, args["file"]) if "file" in args
                                  else os.path.join(folder, args["context"], "Dockerfile"))
            if os.path.isfile(df):
                yield args["tag"], df, args.get("target")


def _built_dockerfiles(folder: str) -> set[str]:
    return {df for _, df, _ in _builds(folder)}


def tagged_dockerfile(image: str, compose_path: str) -> tuple[str, str | None] | None:
    """(the Dockerfile, its target) that a Makefile or script beside the compose file builds as
    `image` (`docker build --target serve -t IMAGE .`), or None."""
    folder = os.path.dirname(compose_path) or "."  # as the user named it: spans name files as every other one does
    return next(((df, target) for tag, df, target in _builds(folder) if _latest(tag) == _latest(image)), None)
