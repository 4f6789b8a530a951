"""Apptainer / Singularity: `apptainer run [OPTIONS] IMAGE [ARGS...]` runs the image's runscript, which for an
image built from a Docker one (`docker://vllm/vllm-openai:v0.8.5`) is its ENTRYPOINT with ARGS in place of its
CMD, so the engine image's own entrypoint is filled in as for `docker run`; `apptainer exec [OPTIONS] IMAGE
COMMAND...` runs COMMAND in it (`instance run IMAGE NAME [ARGS]` starts the runscript as a named instance).
`--env K=V` is set in the container; a Docker image's tag names the engine release. A local `.sif` file's
runscript is not known: nothing is said about what `run` starts from it.
(apptainer.org/docs/user/main/cli/apptainer_run.html, apptainer_exec.html, docker_and_oci.html)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.core import Token
from servefit.sources.shell import Vars, Word

if TYPE_CHECKING:
    from servefit.sources.launch import Ctx, Launch

# the options of run / exec that take a value (`apptainer exec --help`); `-e` is --cleanenv, a flag
VALUE = {"-B", "--bind", "--env", "--env-file", "-H", "--home", "-W", "--workdir", "--pwd", "--overlay", "-o",
         "--mount", "--security", "--network", "--network-args", "--hostname", "--app", "-S", "--scratch",
         "--apply-cgroups", "--dns", "--fusemount", "--add-caps", "--drop-caps", "--cpus", "--memory",
         "--memory-reservation", "--memory-swap", "--cpu-shares", "--cpuset-cpus", "--cpuset-mems", "--blkio-weight",
         "--pids-limit", "--oci-conf", "--sharens", "--cwd"}


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
        if flag == "--env":
            for item in (val if eq else texts[j + 1] if j + 1 < len(words) else "").split(","):
                name, has_eq, v = item.partition("=")
                if has_eq:
                    cenv.set(name, Token(v, None))
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
    else:
        return []  # a local .sif: its runscript is not known
    for launch in found:
        if ref is not None and launch.image is None:
            launch.image = ref
    return found
