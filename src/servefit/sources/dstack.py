"""dstack run configurations (`.dstack.yml`, `type: task` / `service`): the `commands` list runs as one
shell script in the container `image` (its tag names the engine version), with `env` (`- K=V` items or a
mapping) exported to it. `resources.gpu` names the GPU (`H100:4`, `A100:80GB:8`, `{name: [L4, A10G],
count: 2}`; a memory-only spec such as `24GB` names no model, one GPU) and `DSTACK_GPUS_PER_NODE` / `DSTACK_GPUS_NUM`
/ `DSTACK_NODES_NUM` resolve from its count and `nodes`, pointing there. Variables dstack fills in per node
(`DSTACK_NODE_RANK`, `DSTACK_MASTER_NODE_IP`) are kept as written. Each `replicas` group's own `commands`
is read the same way.
"""

from __future__ import annotations

import re

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from servefit.core import GpuHint, Token
from servefit.sources.base import FileCtx
from servefit.sources.hints import to_int
from servefit.sources.launch import Facts, from_commands
from servefit.sources.ports import Exposure, port_list
from servefit.sources.shell import Vars, split_commands
from servefit.sources.skypilot import _count_token
from servefit.sources.yamlpos import Y

PROVIDED = frozenset({"DSTACK_NODE_RANK", "DSTACK_MASTER_NODE_IP", "DSTACK_NODES_IPS", "DSTACK_RUN_NAME",
                      "DSTACK_REPO_ID", "DSTACK_REPLICA_NUM", "DSTACK_MPI_HOSTFILE"})
_MEMORY = re.compile(r"^\d+(\.\d+)?\s*(MB|GB|TB)", re.I)
_COUNT = re.compile(r"^(\d+)(\.\.\d*)?$")
_VENDORS = {"nvidia", "amd", "tpu", "intel", "tenstorrent"}


def is_dstack(y: Y, root: Node) -> bool:
    kind = y.str(y.get(root, "type"))
    return kind in ("task", "service") and (y.get(root, "commands") is not None
                                           or y.get(root, "replicas") is not None)


def gpu_hint(y: Y, res: Node | None) -> GpuHint | None:
    """`resources.gpu` as dstack's GPU spec reads it: `[vendor:]name[,name]:[memory]:[count]`, any part
    optional; a range count (`1..2`) takes its lower bound, a list of names its first (and says so)."""
    gpu = y.get(res, "gpu")
    src = "dstack resources.gpu"
    if isinstance(gpu, MappingNode):
        names = y.get(gpu, "name")
        if isinstance(names, SequenceNode) and names.value:
            src += f" (first of {len(names.value)} names)" if len(names.value) > 1 else ""
            names = names.value[0]
        name = y.str(names) if isinstance(names, ScalarNode) else None
        cnt = _COUNT.match(y.str(y.get(gpu, "count")) or "1")
        return GpuHint(name or None, int(cnt.group(1)) if cnt else 1, src, y.span(gpu))
    t = y.tok(gpu) if isinstance(gpu, ScalarNode) else None
    if t is None or not t.text:
        return None
    name, count = None, 1
    for part in t.text.split(":"):
        part = part.strip()
        c = _COUNT.match(part)
        if c:
            count = int(c.group(1))
        elif part and not _MEMORY.match(part) and part.lower() not in _VENDORS:
            listed = part.split(",")
            if len(listed) > 1:
                src += f" (first of {len(listed)} names)"
            name = listed[0].strip()
    return GpuHint(name or None, count, src, t.span)  # `24GB`: one GPU of that much memory, any model


def _env(y: Y, node: Node | None, env: Vars) -> None:
    if isinstance(node, MappingNode):
        for k, _, v in y.items(node):
            t = y.tok(v)
            if t is not None and v.tag != "tag:yaml.org,2002:null":
                env.set(k, t)
        return
    for item in y.seq(node):
        t = y.tok(item)
        if t is None or "=" not in t.text:
            continue  # `- HF_TOKEN`: passed in at `dstack apply` time
        key, _, val = t.text.partition("=")
        off = len(key) + 1
        s = t.span
        if s is not None and s.line == s.end_line and s.end - s.start == len(t.text):
            s = s.skip(off)
        env.set(key.strip(), Token(val, s))


def scan(y: Y, root: Node, fc: FileCtx) -> None:
    env = Vars()
    _env(y, y.get(root, "env"), env)
    facts: Facts = {"exposure": []}
    auth = y.get(root, "auth")
    if y.str(y.get(root, "type")) == "service" and auth is not None and y.str(auth) in ("false", "False"):
        # a service's endpoint asks for the user's dstack token unless `auth: false`
        facts["exposure"] = [Exposure("dstack service with auth: false (open through the dstack gateway)",
                                      y.span(auth), port_list(y.str(y.get(root, "port")) or ""))]
    _group(y, root, root, "commands", env, facts, fc)
    for k, rep in enumerate(y.seq(y.get(root, "replicas"))):
        _group(y, root, rep, f"replicas[{k}].commands", env, facts, fc)


def _group(y: Y, root: Node, group: Node, where: str, env: Vars, facts: Facts, fc: FileCtx) -> None:
    """One `commands` list, with the `resources` and `image` of its replica group (else the run's)."""
    res = y.get(group, "resources") if y.get(group, "resources") is not None else y.get(root, "resources")
    hint = gpu_hint(y, res)
    genv = Vars(env.values)
    nodes = to_int(y.str(y.get(root, "nodes")) or "1") or 1
    if hint is not None and hint.count:
        per_node = _count_token(hint)
        genv.set("DSTACK_GPUS_PER_NODE", per_node)
        genv.set("DSTACK_GPUS_NUM", per_node if nodes == 1 else Token(str(hint.count * nodes)))
    nodes_tok = y.tok(y.get(root, "nodes"))
    genv.set("DSTACK_NODES_NUM", nodes_tok if nodes_tok is not None else Token("1"))
    genv.exported = set(genv.values)
    image = y.get(group, "image") if y.get(group, "image") is not None else y.get(root, "image")
    image_tok = y.tok(image) if isinstance(image, ScalarNode) else None
    gfacts = Facts(**facts)
    if image_tok is not None and image_tok.span is not None:
        gfacts["image_span"] = image_tok.span
    cmds = []
    for item in y.seq(y.get(group, "commands")):
        if isinstance(item, ScalarNode):
            cmds += split_commands(y.scalar_src(item), genv, provided=PROVIDED)
    ctx = fc.ctx(exported_only=True)
    for launch in from_commands(cmds, ctx, genv):
        if image_tok is not None and launch.image is None:
            launch.image = image_tok.text
        fc.add([launch], f"dstack/{where}:{launch.line}", hint, Facts(**gfacts), ctx.ollama_models)
