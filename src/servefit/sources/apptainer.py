"""Apptainer / Singularity: `apptainer run [OPTIONS] IMAGE [ARGS...]` runs the image's runscript, which for an
image built from a Docker one (`docker://vllm/vllm-openai:v0.8.5`) is its ENTRYPOINT with ARGS in place of its
CMD, so the engine image's own entrypoint is filled in as for `docker run`; `apptainer exec [OPTIONS] IMAGE
COMMAND...` runs COMMAND in it (`instance run IMAGE NAME [ARGS]` starts the runscript as a named instance).
`--env K=V` is set in the container; a Docker image's tag names the engine release. A local `.sif` file
named as `apptainer pull docker://REPO/NAME:TAG` names it, NAME_TAG.sif (GetName in apptainer's
internal/pkg/util/uri/uri.go: `docker://sylabs.io/lolcow:3.7` -> lolcow_3.7.sif), is that engine image; another
`.sif` run with a model option is said to be unread (its runscript is not in the repository).
(apptainer.org/docs/user/main/cli/apptainer_run.html, apptainer_exec.html, apptainer_pull.html, docker_and_oci.html)
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from servefit.core import Token
from servefit.sources import detect
from servefit.sources.problems import not_read
from servefit.sources.shell import Vars, Word

if TYPE_CHECKING:
    from servefit.sources.launch import Ctx, Launch

# the options of run / exec that take a value (`apptainer exec --help`); `-e` is --cleanenv, a flag
VALUE = {"-B", "--bind", "--env", "--env-file", "-H", "--home", "-W", "--workdir", "--pwd", "--overlay", "-o",
         "--mount", "--security", "--network", "--network-args", "--hostname", "--app", "-S", "--scratch",
         "--apply-cgroups", "--dns", "--fusemount", "--add-caps", "--drop-caps", "--cpus", "--memory",
         "--memory-reservation", "--memory-swap", "--cpu-shares", "--cpuset-cpus", "--cpuset-mems", "--blkio-weight",
         "--pids-limit", "--oci-conf", "--sharens", "--cwd"}


# the options that name the model in the engines' servers: a .sif run with one starts a server
MODEL_OPTIONS = {"--model", "--model-id", "--model-path", "-m", "--hf-repo", "-hf", "-hfr"}
SIF = re.compile(r"(?:^|/)([^/]+)\.sif$")


def pulled_image(path: str) -> str | None:
    """`NAME:TAG` for a .sif named as `apptainer pull docker://.../NAME:TAG` names it (NAME_TAG.sif), when NAME
    is an engine's image; None otherwise. A name or tag may hold `_`: each split is tried, the tag's last."""
    m = SIF.search(path)
    if m is None:
        return None
    stem = m.group(1)
    for i in [k for k, c in enumerate(stem) if c == "_"][::-1]:
        ref = f"{stem[:i]}:{stem[i + 1:]}"
        if stem[i + 1:] and detect.engine_of_image(ref) is not None:
            return ref
    return None


def apptainer(words: list[Word], ctx: Ctx, env: Vars) -> list[Launch]:
    """`words` after the program name: `run|exec|instance run [OPTIONS] IMAGE ...`."""
    from servefit.sources.container import container
    from servefit.sources.launch import from_words

    texts = [w.text for w in words]
    instance = texts[:2] == ["instance", "run"]
    verb = "run" if instance else texts[0] if texts else ""
    if verb not in ("run", "exec"):
        return []  # `instance start` runs the image's startscript, not known here
    j = 2 if instance else 1
    cenv = Vars(env.values)
    cenv.exported = set(env.exported)
    while j < len(words) and texts[j].startswith("-"):
        flag, eq, val = texts[j].partition("=")
        value = words[j].after(len(flag) + 1) if eq else words[j + 1] if j + 1 < len(words) else None
        if flag == "--env" and value is not None and value.pieces:
            for item in value.split_on(","):
                name, has_eq, _ = item.text.partition("=")
                if has_eq:  # `--env PORT=$PORT` with PORT unset here: unknown, as `docker run -e` has it
                    v = item.after(len(name) + 1)
                    cenv.set(name, v.token(), v.unresolved)
                    cenv.exported.add(name)
        j += 1 if eq or flag not in VALUE else 2
    if j >= len(words):
        return []
    image = words[j]
    rest = words[j + 2:] if instance else words[j + 1:]  # `instance run IMAGE NAME [ARGS]`
    ref = image.text[len("docker://"):] if image.text.startswith("docker://") else None
    if verb == "exec":
        found = from_words(rest, ctx, cenv)
    elif ref is not None:
        s = image.token().span
        found = container(Token(ref, s.skip(len("docker://")) if s else None), None, rest, ctx, cenv)
    elif (ref := pulled_image(image.text)) is not None:
        found = container(Token(ref, None), None, rest, ctx, cenv)
    else:
        if any(w.text.split("=", 1)[0] in MODEL_OPTIONS for w in rest):
            ctx.findings.append(not_read(
                f"`apptainer {verb}` starts the runscript of {image.text}, which servefit cannot read, so the server "
                "it starts with these options was not checked: run the engine's image as docker://REPO:TAG, or "
                "keep the name `apptainer pull docker://REPO:TAG` gives it (NAME_TAG.sif)", span=image.token().span))
        return []
    for launch in found:
        if ref is not None and launch.image is None:
            launch.image = ref
    return found
