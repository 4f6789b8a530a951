"""`gcloud run deploy SERVICE --image IMAGE ...` in a script: a Cloud Run service, read as the container
it runs. Its list flags (`--args`, `--command`, `--set-env-vars`) are comma-separated, or split on
the delimiter a `^D^` prefix names (gcloud topic escaping); `--gpu N --gpu-type nvidia-l4` is the GPU
(nvidia-l4 when --gpu is given alone, Cloud Run's default type). A service answers only callers with
IAM permission unless `--allow-unauthenticated` grants every caller: that, with ingress not internal,
publishes it on the internet."""

from __future__ import annotations

from servefit.core import GpuHint
from servefit.sources.container import container
from servefit.sources.hints import to_int
from servefit.sources.launch import Ctx, Launch
from servefit.sources.ports import Exposure
from servefit.sources.words import Vars, Word

# gcloud run deploy's flags that take no value (the rest take one, `--flag=value` or `--flag value`)
SWITCHES = {"--allow-unauthenticated", "--no-allow-unauthenticated", "--no-cpu-throttling", "--cpu-throttling",
            "--cpu-boost", "--no-cpu-boost", "--async", "--quiet", "-q", "--no-traffic", "--use-http2",
            "--no-use-http2", "--session-affinity", "--no-session-affinity", "--no-gpu-zonal-redundancy",
            "--gpu-zonal-redundancy", "--default-url", "--no-default-url", "--invoker-iam-check",
            "--no-invoker-iam-check", "--clear-env-vars", "--clear-secrets", "--clear-labels", "--no-build"}
DEFAULT_GPU_TYPE = "nvidia-l4"


def delimited(word: Word) -> tuple[str, Word]:
    """(the delimiter, the items' text) of a list flag's value: `,`, or the one a `^D^` prefix names (`^;^a;b`)."""
    text = word.text
    return (text[1], word.after(3)) if text.startswith("^") and text.find("^", 1) == 2 else (",", word)


def items(word: Word) -> list[Word]:
    """A list flag's value split into its items."""
    sep, body = delimited(word)
    return body.split_on(sep)


def _from_source(source: Word, entry: list[Word] | None, args: list[Word], ctx: Ctx, env: Vars) -> list[Launch]:
    """`--source DIR`: Cloud Build builds DIR's Dockerfile (buildpacks where it has none, which name no
    server); the service runs that image, as a compose service built from it does (compose_build.built)."""
    import os

    from servefit.sources.base import _repo_of, _within
    from servefit.sources.compose_build import built

    if source.unresolved:
        return []
    here = os.path.dirname(ctx.file) or "."
    path = os.path.normpath(os.path.join(here, source.text, "Dockerfile"))
    if not os.path.isfile(path) or not _within(path, _repo_of(here)):
        return []
    launches = built(path, None, entry, args or None, entry is not None, env, ctx)
    line = source.token().span
    for launch in launches:  # the server is this command: its line, as for an image
        launch.line = line.line if line is not None else launch.line
    return launches


def gcloud_run_deploy(words: list[Word], ctx: Ctx, env: Vars) -> list[Launch]:
    """The words after `gcloud [beta] run deploy`."""
    vals: dict[str, Word] = {}
    switches: set[str] = set()
    j = 0
    while j < len(words):
        t = words[j].text
        if not t.startswith("-"):
            j += 1  # the service's name
            continue
        flag, eq, _ = t.partition("=")
        if eq:
            vals[flag] = words[j].after(len(flag) + 1)
        elif t in SWITCHES or j + 1 >= len(words):
            switches.add(t)
        else:
            vals[flag] = words[j + 1]
            j += 1
        j += 1
    image = vals.get("--image")
    source = vals.get("--source")
    if image is None and source is None:
        return []
    denv = env.copy()
    env_end = None
    for key in ("--set-env-vars", "--update-env-vars"):
        for item in items(vals[key]) if key in vals else []:
            name, has_eq, _ = item.text.partition("=")
            if has_eq:
                value = item.after(len(name) + 1)
                denv.set(name, value.token(), value.unresolved)
                denv.exported.add(name)
                env_end = item.token().span if delimited(vals[key])[0] == "," else None  # tune adds `,NAME=VALUE`
    entry = items(vals["--command"]) if "--command" in vals else None
    args = items(vals["--args"]) if "--args" in vals else []
    if image is not None:
        launches = container(image.token(), entry, args, ctx, denv)
    else:
        assert source is not None
        launches = _from_source(source, entry, args, ctx, denv)
        image = source
    gpus = vals.get("--gpu")
    kind = vals.get("--gpu-type")
    hint = None
    if gpus is not None or kind is not None:
        where = kind or gpus
        assert where is not None
        hint = GpuHint(kind.text if kind is not None else DEFAULT_GPU_TYPE,
                       to_int(gpus.text) if gpus is not None else 1,
                       "gcloud run deploy --gpu-type" if kind is not None else "gcloud run deploy --gpu (nvidia-l4 by "
                       "default)", where.token().span)
    public = "--allow-unauthenticated" in switches and (vals["--ingress"].text if "--ingress" in vals else "all") == "all"
    for launch in launches:
        if hint is not None:
            launch.gpu = hint
        launch.facts["runtime"] = "Cloud Run"
        launch.facts["list_separator"] = delimited(vals["--args"])[0] if "--args" in vals else ","
        launch.facts["env_list_end"] = env_end
        launch.facts["exposure"] = [Exposure("Cloud Run service with --allow-unauthenticated (public on the internet)",
                                             image.token().span)] if public else []
    return launches
