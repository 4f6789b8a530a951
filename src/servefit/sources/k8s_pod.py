"""A Kubernetes container's environment and shared memory as its pod gives them: `env` / `envFrom`
values from ConfigMaps of the same file (Secrets and fieldRefs are set only when the pod starts), and
/dev/shm from an emptyDir of medium Memory, the host's /dev/shm or hostIPC."""

from __future__ import annotations

from yaml.nodes import Node, ScalarNode

from servefit.budget import charge_entries
from servefit.core import Token
from servefit.sources.launch import Launch
from servefit.sources.shell import Vars, expand_word
from servefit.sources.yamlpos import Y


def container_env(y: Y, c: Node | None, cms: dict[str, dict[str, Token]], extra_env: list[Node] | None = None) -> Vars:
    env = Vars()
    for ef in y.seq(y.get(c, "envFrom")):
        cm = y.str(y.get(ef, "configMapRef", "name"))
        prefix = y.str(y.get(ef, "prefix")) or ""
        entries = cms.get(cm or "", {})
        charge_entries(len(entries))  # containers x ConfigMap entries: bounded per file
        for k, t in entries.items():
            env.set(prefix + k, t)
    for e in list(y.seq(y.get(c, "env"))) + list(extra_env or []):
        name = y.str(y.get(e, "name"))
        if not name:
            continue
        v = y.get(e, "value")
        if isinstance(v, ScalarNode):
            w = expand_word(y.scalar_src(v), None, k8s=env)
            env.set(name, w.token(), w.unresolved)
            continue
        ref = y.get(e, "valueFrom", "configMapKeyRef")
        if ref is not None:
            tok = cms.get(y.str(y.get(ref, "name")) or "", {}).get(y.str(y.get(ref, "key")) or "")
            if tok is not None:
                env.set(name, tok)
    env.exported = set(env.values)
    return env


def runtime_env(y: Y, c: Node | None, cms: dict[str, dict[str, Token]]) -> tuple[list[str], bool]:
    """(variables set when the pod starts from Secrets, fieldRefs or ConfigMaps not in this file,
    whether some variables come from such a source under names not known here: `envFrom`)."""
    names = []
    for e in y.seq(y.get(c, "env")):
        name = y.str(y.get(e, "name"))
        ref = y.get(e, "valueFrom")
        if name and ref is not None and not (y.get(ref, "configMapKeyRef") is not None and
                                             y.str(y.get(ref, "configMapKeyRef", "name")) in cms):
            names.append(name)
    opaque = any(y.get(ef, "secretRef") is not None or
                 (y.get(ef, "configMapRef") is not None and y.str(y.get(ef, "configMapRef", "name")) not in cms)
                 for ef in y.seq(y.get(c, "envFrom")))
    return names, opaque


def memory_volumes(y: Y, *pods: Node | None) -> dict[str | None, str | None]:
    """The pod's volumes that can back /dev/shm (an emptyDir of medium Memory, the host's
    /dev/shm): name -> a sizeLimit below SHM_MIN as written, else None."""
    out: dict[str | None, str | None] = {}
    for pod in pods:
        for v in y.seq(y.get(pod, "volumes")):
            if (y.str(y.get(v, "emptyDir", "medium")) or "").lower() == "memory" or \
                    y.str(y.get(v, "hostPath", "path")) == "/dev/shm":
                out[y.str(y.get(v, "name"))] = _small_limit(y.str(y.get(v, "emptyDir", "sizeLimit")))
    return out


def set_shm(y: Y, c: Node, launches: list[Launch], host_ipc: bool, mem_vols: dict[str | None, str | None]) -> None:
    """Whether the container has shared memory for NCCL: hostIPC, or one of `mem_vols` mounted
    at /dev/shm (a sizeLimit too small is kept as a fact for the finding)."""
    shm_vols = [y.str(y.get(m, "name")) for m in y.seq(y.get(c, "volumeMounts"))
                if y.str(y.get(m, "mountPath")) == "/dev/shm" and y.str(y.get(m, "name")) in mem_vols]
    small = [mem_vols[v] for v in shm_vols if mem_vols[v]]
    shm = host_ipc or (bool(shm_vols) and not small)
    for launch in launches:
        if launch.shm is None:
            launch.shm = shm
            if small and not host_ipc:
                launch.facts["shm_limit"] = small[0]


def _small_limit(text: str | None) -> str | None:
    """An emptyDir `sizeLimit` too small for NCCL's shared memory, as the user wrote it with its
    size (Kubernetes quantities: `m` is milli, so `1000m` is one byte), else None."""
    from servefit.sources.hints import SHM_MIN
    from servefit.units import k8s_quantity

    q = k8s_quantity(text)
    if text is None or q is None or q >= SHM_MIN:
        return None
    size = f"{float(q) / 2**20:.0f} MiB" if q >= 2**20 else f"{int(q)} byte{'s' if int(q) != 1 else ''}"
    return f"sizeLimit {text.strip()} ({size})"
