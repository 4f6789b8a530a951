"""GitHub Actions workflows: each step's `run:` is a bash script (servers started in CI for an
end-to-end test), read like a shell script with the workflow's, job's and step's `env:` in
effect. `${{ ... }}` expressions are filled in by GitHub before the shell runs: a value written
as one is not known here, and is said (SF001), not guessed."""

from __future__ import annotations

import re

from yaml.nodes import MappingNode, Node, SequenceNode

from servefit.sources.base import FileCtx
from servefit.sources.launch import Facts, from_commands
from servefit.sources.shell import Vars, split_commands
from servefit.sources.text import Src
from servefit.sources.yamlpos import Y

_EXPR = re.compile(r"\$\{\{(.*?)\}\}")
# GitHub's standard hosted Linux and Windows runners, none with a GPU (docs.github.com, actions/reference/runners/
# github-hosted-runners: the workflow labels of the standard runners; GPU runners are larger runners, labelled by
# the organization)
_HOSTED = re.compile(r"^(?:ubuntu-(?:latest|slim|\d{2}\.04)(?:-arm)?|windows-(?:latest|\d{4}|11-arm))$")


def is_workflow(y: Y, doc: Node) -> bool:
    jobs = y.get(doc, "jobs")
    return isinstance(jobs, MappingNode) and any(y.get(j, "steps") is not None for _, _, j in y.items(jobs))


def _env(y: Y, node: Node | None, env: Vars) -> None:
    for k, _, v in y.items(y.get(node, "env")):
        tok = y.tok(v)
        if tok is not None and not _EXPR.search(tok.text):
            env.set(k, tok)
            env.exported.add(k)


def _shell_src(src: Src) -> Src:
    """The step's script with each `${{ expr }}` written as a shell variable of the same length
    (`${GH_matrix_model}`), so the shell reader says where a value is not known."""

    def var(m: re.Match[str]) -> str:
        n = len(m.group(0)) - 3
        return "${" + ("GH_" + re.sub(r"\W", "_", m.group(1).strip()))[:n].ljust(n, "_") + "}"

    return Src(_EXPR.sub(var, src.text), src.li, src.base, src.offs)


def _hosted(y: Y, job: Node) -> str | None:
    """The job's runner when it is one of GitHub's standard hosted runners (`runs-on: ubuntu-latest`)."""
    node = y.get(job, "runs-on")
    labels = [y.str(n) for n in y.seq(node)] if isinstance(node, SequenceNode) else [y.str(node)]
    return labels[0] if len(labels) == 1 and labels[0] and _HOSTED.match(labels[0]) else None


def scan(y: Y, doc: Node, fc: FileCtx) -> None:
    top = Vars()
    _env(y, doc, top)
    for job_name, _, job in y.items(y.get(doc, "jobs")):
        job_env = top.copy()
        _env(y, job, job_env)
        runner = _hosted(y, job)
        facts = Facts(runtime="github-actions") if runner is None else \
            Facts(runtime="github-actions", no_gpu_request=True, runner=runner)
        for i, step in enumerate(y.seq(y.get(job, "steps"))):
            run = y.get(step, "run")
            if y.tok(run) is None:
                continue
            env = job_env.copy()
            _env(y, step, env)
            src = y.scalar_src(run)  # type: ignore[arg-type]
            if "${{" in src.text:
                src = _shell_src(src)
            ctx = fc.ctx(exported_only=True)
            launches = from_commands(split_commands(src, env), ctx, env)
            name = y.str(y.get(step, "name")) or f"step {i + 1}"
            fc.add(launches, f"workflow/{job_name}/{name}", None, facts, ctx.ollama_models)

