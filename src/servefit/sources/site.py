"""A LaunchSite from a launch found in a file and what its wrapper knows (workload, hardware)."""

from __future__ import annotations

import re

from servefit.core import GpuHint, LaunchSite, ModelInputs, Workload
from servefit.sources import detect, image_release
from servefit.sources.launch import Facts, Launch

# a program run from an environment named after the release it holds: `~/miniconda3/envs/vllm-0.10.1/bin/vllm`,
# `/opt/venvs/sglang_0.4.6.post1/bin/python`
_ENV_RELEASE = re.compile(r"(?:^|/)(vllm|sglang)[-_]?v?(\d+\.\d+(?:\.\d+)?(?:\.?post\d+)?)/bin/[^/]+$", re.I)


def env_release(launch: Launch) -> tuple[str, str] | None:
    """The release the environment the program runs from is named after (its only word for the version:
    no image tag, no pin), and where that is said; None when its path names none, or another engine."""
    m = _ENV_RELEASE.search(launch.argv[0].text) if launch.argv else None
    if m is None or m.group(1).lower() != launch.engine:
        return None
    return m.group(2), f"the name of the environment it runs from ({launch.argv[0].text})"


def to_site(launch: Launch, file: str, name: str, gpu: GpuHint | None = None,
            facts: Facts | None = None) -> LaunchSite:
    """A LaunchSite from a launch plus what the wrapper knows (name, hardware)."""
    seen: set[str] = set()
    unresolved = []
    aliases = image_release.build_env(launch.engine)  # the SageMaker TGI container's SM_NUM_GPUS is read as NUM_SHARD
    for var, taint in launch.env_taint.items():  # a setting's variable written with an unset one
        if var in launch.env and detect.reads_setting_env(launch.engine, aliases.get(var, var)):
            launch.unresolved.extend(t for t in taint if t not in launch.unresolved)
    for var, _ in launch.unresolved:
        if var not in seen:
            seen.add(var)
            unresolved.append(var)
    x = launch.facts.copy()
    if facts:
        x.update(facts)
    if not x.get("engine_version") and (found := env_release(launch)) is not None:
        x["engine_version"], x["version_source"] = found
    work = Workload(kind=x.get("k8s_kind"), chart=x.get("chart"), service=x.get("service"),
                    container=x.get("container"), runtime=x.get("runtime"), runtime_env=x.get("runtime_env", []),
                    env_opaque=x.get("env_opaque", False), ports=x.get("ports", []),
                    exposures=x.get("exposure", []), shm=launch.shm, shm_limit=x.get("shm_limit"),
                    path_map=x.get("path_map", {}), compose_files=x.get("compose_files", []),
                    compose_extends=x.get("compose_extends", []), notes=list(x.get("notes", [])),
                    version_source=x.get("version_source"), list_separator=x.get("list_separator", ""),
                    env_list_end=x.get("env_list_end"), no_gpu_request=x.get("no_gpu_request", False),
                    args_at_run=x.get("args_at_run", False), runner=x.get("runner"),
                    profile_off_gpu=x.get("profile_off_gpu"),
                    refused=x.get("refused", ""))
    config_only = bool(x.get("config_only", False))
    hint = gpu
    if launch.gpu is not None:
        if hint is None:
            hint = launch.gpu
        elif hint.count is None and launch.gpu.count is not None:
            hint = GpuHint(hint.name, launch.gpu.count, f"{hint.source}; count from {launch.gpu.source}", hint.span)
    version = x.get("engine_version") or (
        image_release.version_of_image(launch.image)
        if launch.image and image_release.image_engine(launch.image) == launch.engine else None)
    return LaunchSite(file=file, line=launch.line, argv=launch.argv, env=launch.env, engine=launch.engine,
                      image=launch.image, engine_version=version,
                      gpu=hint, name=name, unresolved=unresolved, workload=work,
                      unresolved_spans=[(v, s) for v, s in launch.unresolved], config_only=config_only,
                      image_span=x.get("image_span"), inputs=ModelInputs(file_refs=x.get("model_file_refs", [])),
                      packages=list(x.get("packages", [])))


def host_file(site: LaunchSite, path: str) -> str:
    """The repository file a path in the server's command names: a container path through the
    folders the file mounts there (site.workload.path_map: `../configs/vllm:/workspace/configs`),
    a relative one beside the site's file; only inside the repository. `path` itself otherwise."""
    import os

    from servefit.sources.base import _repo_of, _within

    if not site.file or not os.path.exists(site.file):
        return path
    here = os.path.dirname(site.file) or "."
    if not os.path.isabs(path):
        cand = os.path.join(here, path)
        return cand if os.path.exists(cand) else path
    for cdir, hdir in sorted(site.workload.path_map.items(), key=lambda kv: -len(kv[0])):
        c = cdir.rstrip("/")
        if c and (path == c or path.startswith(c + "/")) and "$" not in hdir:
            host = os.path.join(os.path.expanduser(hdir), path[len(c):].lstrip("/"))
            cand = host if os.path.isabs(host) else os.path.join(here, host)
            return cand if os.path.exists(cand) and _within(cand, _repo_of(here)) else path
    return path
