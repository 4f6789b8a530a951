"""Which engine release an image tag, a pip pin or a source tag names, and what an engine image
runs: whether an image is the engine's own (its tags are the engine's releases), someone's build of
it, or a fork with other options, and the entrypoint and CMD it starts when a file gives only
arguments. The engines' data (`recognise` in data/engines/<name>.yaml) says which images are whose."""

from __future__ import annotations

import re
from typing import Any

from servefit.sources.detect import engine_data, engine_of_image, engine_tables, launcher_image, split_image

VERSION = re.compile(r"^v?(\d+\.\d+(?:\.\d+)?(?:\.post\d+|rc\d+|\.dev\d+)?)")
LLAMA_BUILD = re.compile(r"\bb(\d{3,5})\b")


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v)[:3])


def version_of_image(image: str | None) -> str | None:
    """The engine version an image tag names (`v0.11.0` -> "0.11.0"; llama.cpp `server-b6000`
    -> "b6000"); None for `latest`, `main`, digests and tags without a version."""
    if not image:
        return None
    repo, tag = split_image(image)
    if not tag:
        return None
    eng = image_engine(image)
    m = VERSION.match(tag)
    build = image_build(image) or {}
    if build.get("tag_version"):  # the engine's version is elsewhere in the tag (2.1.1-tgi1.4.0-gpu-...)
        hit = re.search(build["tag_version"], tag)
        return hit.group(1) if hit else None
    if eng is not None and any(re.search(p, repo.lower()) for p in engine_data(eng).get("own_release_images") or ()):
        # a rebuild numbering its own releases (nm-vllm v0.1.0 is no vLLM 0.1.0): the engine inside
        # only where the build's release notes say it (NGC's vLLM 25.10 carries vLLM 0.10.2)
        return (build.get("versions") or {}).get(m.group(1)) if m else None
    if release_image(image) is False:
        # someone's own image of the engine (myorg/vllm-srv:1.0): its tag names that image's
        # releases, not the engine's, so the version is unknown (SF005 says which one is assumed)
        return None
    if m:
        return m.group(1)
    m = LLAMA_BUILD.search(tag.replace("-", " "))
    if m and eng is not None and engine_data(eng).get("build_tags"):
        return "b" + m.group(1)
    return None


def image_build(image: str | None) -> dict[str, Any] | None:
    """The engine data's entry (`image_builds`) for a build of the engine by others whose tags or
    environment differ from the engine's own images (NGC's, SageMaker's); None for any other."""
    eng = engine_of_image(image)
    if eng is None or image is None:
        return None
    repo = split_image(image)[0].lower()
    return next((b for b in engine_data(eng).get("image_builds") or () if re.search(b["image"], repo)), None)


def build_env(engine: str | None) -> dict[str, str]:
    """The variables builds of the engine by others pass on under the engine's names (the
    SageMaker TGI container's entrypoint: SM_NUM_GPUS -> NUM_SHARD), from its image_builds data."""
    out: dict[str, str] = {}
    for b in engine_data(engine).get("image_builds") or () if engine else ():
        out.update(b.get("env") or {})
    return out


def official_image(image: str) -> bool | None:
    """Whether the image is the engine's own (`vllm/vllm-openai`) rather than someone's build of it
    (`opea/vllm-gaudi`) or a fork's image of the same name (IBM's TGIS); None where the engine's data
    lists no official images."""
    eng = engine_of_image(image)
    if eng is not None and fork_of(image) is not None:
        return False
    return _one_of(image, engine_data(eng).get("official_images") if eng else None)


# `vllm==0.11.2`, `vllm==0.10.1.1` (a four-part patch release), `sglang[all]==0.4.6.post1`: a requirement
# pinned to one release
_PIP_PIN = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[\w,.-]*\])?==v?(\d+\.\d+(?:\.\d+){0,2}(?:\.post\d+|rc\d+)?)$")


def pip_release(requirement: str) -> tuple[str, str] | None:
    """(engine, release) for a pip requirement that pins one of an engine's packages (the engine data's
    `pip_packages`) with `==`, else None."""
    m = _PIP_PIN.match(requirement)
    if m is None:
        return None
    pkg = m.group(1).lower()
    return next(((name, m.group(2)) for name, table in engine_tables() if pkg in (table.get("pip_packages") or ())), None)


def source_release(url: str, tag: str) -> tuple[str, str] | None:
    """(engine, release) for a build that fetches the engine's own repository (`url`) at a release tag
    (the engine data's `source_repos`: llama.cpp's bNNNN, TGI's vX.Y.Z, whose release is X.Y.Z), or None."""
    for name, table in engine_tables():
        for src in table.get("source_repos") or ():
            m = re.fullmatch(src["release"], tag)
            if re.search(src["repo"], url) and m:
                return name, (m.group(1) if m.re.groups else tag)
    return None


# a GitHub source archive at a tag: https://github.com/OWNER/REPO/archive/refs/tags/v3.0.1.tar.gz (or /archive/v3.0.1.zip)
ARCHIVE = re.compile(r"^(https?://github\.com/[^/]+/[^/]+)/archive/(?:refs/tags/)?(.+?)\.(?:tar\.gz|tgz|zip)$")


def archive_release(url: str) -> tuple[str, str] | None:
    """(engine, release) for a source archive of the engine's repository at a release tag, or None."""
    m = ARCHIVE.match(url.strip("'\""))
    return source_release(m.group(1), m.group(2)) if m else None


def fork_of(image: str | None) -> str | None:
    """What an image named after an engine runs when it is another project's server with its own
    options (the engine data's `forks`: quay.io/opendatahub/text-generation-inference is IBM's TGIS),
    as the finding names it; None for any other image."""
    eng = engine_of_image(image)
    if eng is None or image is None:
        return None
    repo = split_image(image)[0].lower()
    return next((f["name"] for f in engine_data(eng).get("forks") or () if re.search(f["image"], repo)), None)


def _one_of(image: str, names: list[str] | None) -> bool | None:
    """Whether the image is one of `names` (None where there are none). A mirror or pull-through
    cache keeps the image's name behind its own host and path (harbor.corp/vllm/vllm-openai,
    us-docker.pkg.dev/acme/library/vllm-openai, mirror.corp/ggml-org/llama.cpp)."""
    if not names:
        return None
    repo = split_image(image)[0].lower().removeprefix("docker.io/")
    return repo in names or repo.rsplit("/", 1)[-1] in {o.rsplit("/", 1)[-1] for o in names}


def release_image(image: str) -> bool | None:
    """Whether the image's tags are the engine's releases: the engine's own images (official_images,
    or release_images where the official ones document no entrypoint, as SGLang's), not someone's
    build of it (myorg/vllm-srv:1.0); None where the engine's data lists neither."""
    eng = engine_of_image(image)
    t = engine_data(eng) if eng else {}
    return _one_of(image, t.get("release_images") or t.get("official_images"))


def _by_tag(image: str, key: str) -> tuple[str, dict[str, Any]] | None:
    """(engine, entry) for an engine's own image whose tag one of its `key` entries names (image_dispatch,
    image_clients in data/engines/<name>.yaml); None for any other image."""
    tag = (split_image(image)[1] or "").lower()
    for name, table in engine_tables():
        for entry in table.get(key) or ():
            if re.search(entry["tag"], tag) and _one_of(image, table.get("official_images")):
                return name, entry
    return None


def _dispatch(image: str) -> tuple[str, dict[str, Any]] | None:
    """(engine, image_dispatch entry) for an engine's own image whose entrypoint is a dispatch script."""
    return _by_tag(image, "image_dispatch")


def client_image(image: str | None) -> tuple[str, dict[str, Any]] | None:
    """(engine, image_clients entry) for an engine's own image whose tag runs a command-line client, not the
    server (llama.cpp's light images run llama-cli); None for any other."""
    return _by_tag(image, "image_clients") if image else None


def image_engine(image: str) -> str | None:
    """The engine an image carries: as its name says, or as its dispatch script runs it (llama.cpp's full-b6000)."""
    return engine_of_image(image) or ((_dispatch(image) or (None,))[0])


def dispatched(image: str | None, args: list[str]) -> tuple[str, list[str]] | None:
    """(engine, the server's command) where an engine's own image runs a script that picks the program by its
    first argument and these arguments pick the server (llama.cpp's full images: `--server ...`); None otherwise."""
    hit = _dispatch(image) if image and args else None
    return (hit[0], list(hit[1]["command"])) if hit is not None and args[0] in hit[1]["first"] else None


def image_entrypoint(image: str | None, engine: str | None = None) -> tuple[list[str], list[str], bool] | None:
    """(the ENTRYPOINT an engine image runs, its default CMD, whether that is the official
    image's documented entrypoint rather than servefit's assumption for a rebuild). `engine`: the
    engine the image is known to carry (server_build_image) where its name alone does not say."""
    eng = engine or engine_of_image(image)
    if eng is None or image is None or launcher_image(image) is not None:
        return None  # an image that runs its engine only when a command starts it has no engine entrypoint
    table = engine_data(eng)
    if not table:
        from servefit.engines import get

        cmd = get(eng).image_command(image)
        return (cmd, [], False) if cmd else None
    known = bool(official_image(image))
    ver = version_of_image(image)
    for entry in table.get("image_entrypoint") or ():
        before = entry.get("before")
        if before is not None and not (ver and _vkey(ver) < _vkey(str(before))):
            continue
        return list(entry["command"]), list(entry.get("cmd") or ()), known
    return None
