"""SkyPilot task YAML: the `run` script (shell rules, `envs` exported to it), the GPU from
`resources.accelerators` (`A100:4`, `{A100: 4}`, a candidate list: the first is taken and the
source says so; `any_of` / `ordered` alternatives likewise), and `SKYPILOT_NUM_GPUS_PER_NODE` /
`SKYPILOT_NUM_NODES` resolved from the accelerator count and `num_nodes` (their spans point
there), and the container `resources.image_id: docker:IMAGE` the run script runs in (its tag
names the engine version). Variables SkyPilot fills in per node (`SKYPILOT_NODE_RANK`, IPs) are kept as written.
"""

from __future__ import annotations

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from servefit.core import GpuHint, Token
from servefit.sources.base import FileCtx
from servefit.sources.hints import to_int
from servefit.sources.launch import Facts, from_commands
from servefit.sources.ports import Exposure, port_list
from servefit.sources.shell import Vars, split_commands
from servefit.sources.yamlpos import Y

PROVIDED = frozenset({"SKYPILOT_NODE_RANK", "SKYPILOT_NODE_IPS", "SKYPILOT_TASK_ID", "SKYPILOT_CLUSTER_INFO",
                      "SKYPILOT_SETUP_NODE_IPS", "SKYPILOT_SETUP_NODE_RANK", "SKYPILOT_SERVE_REPLICA_ID"})


def _acc(y: Y, node: Node | None) -> tuple[Node | None, str]:
    """`accelerators`, or its alias `gpus` (sky/resources.py RESOURCE_CONFIG_ALIASES), and the key used."""
    for key in ("accelerators", "gpus"):
        if y.get(node, key) is not None:
            return y.get(node, key), key
    return None, "accelerators"


def accelerators(y: Y, res: Node | None) -> GpuHint | None:
    acc, field = _acc(y, res)
    note = ""
    if acc is None:
        for alt in ("any_of", "ordered"):
            opts = y.seq(y.get(res, alt))
            for o in opts:
                acc, field = _acc(y, o)
                if acc is not None:
                    note = f" (first of resources.{alt})"
                    break
            if acc is not None:
                break
    if isinstance(acc, SequenceNode) and acc.value:
        note = f" (first of {len(acc.value)} candidates)"
        acc = acc.value[0]
    if isinstance(acc, MappingNode):
        items = y.items(acc)
        if not items:
            return None
        key, kn, v = items[0]
        if len(items) > 1:  # `{H100: 8, A100: 8}`: a set of candidates, any of which SkyPilot may pick
            note = f" (first of {len(items)} candidates)"
        ctok = y.tok(v)
        if (ctok is None or not ctok.text or v.tag == "tag:yaml.org,2002:null") and ":" in key:
            # `{ H100:8, H200:8 }` (SkyPilot's set form): YAML reads each `NAME:COUNT` as a key
            name, _, cnt = key.partition(":")
            return GpuHint(name.strip(), to_int(cnt.strip()) or 1, f"SkyPilot resources.{field}" + note,
                           y.span(kn))
        return GpuHint(key, to_int(ctok.text) if ctok else 1, f"SkyPilot resources.{field}" + note,
                       ctok.span if ctok is not None else y.span(kn))
    if isinstance(acc, ScalarNode):
        t = y.tok(acc)
        if t is None or not t.text:
            return None
        name, _, cnt = t.text.partition(":")
        return GpuHint(name.strip(), to_int(cnt) if cnt else 1, f"SkyPilot resources.{field}" + note, t.span)
    return None


def _count_token(hint: GpuHint) -> Token:
    """The count as a value, located at the count (`A100:4` -> the `4`, `{H100: 8}` -> the `8`)."""
    text = str(hint.count)
    s = hint.span
    if s is not None and s.line == s.end_line and s.end - s.start > len(text):
        k = s.end - s.start - len(text)
        return Token(text, s.skip(k))
    return Token(text, s)


def scan(y: Y, root: Node, fc: FileCtx) -> None:
    run = y.get(root, "run")
    if not isinstance(run, ScalarNode):
        return
    res = y.get(root, "resources")
    hint = accelerators(y, res)
    env = Vars()
    for k, _, v in y.items(y.get(root, "envs")):
        t = y.tok(v)
        if t is not None and v.tag != "tag:yaml.org,2002:null":
            env.set(k, t)
    if hint is not None and hint.count:
        env.set("SKYPILOT_NUM_GPUS_PER_NODE", _count_token(hint))
    nodes = y.tok(y.get(root, "num_nodes"))
    env.set("SKYPILOT_NUM_NODES", nodes if nodes is not None else Token("1"))
    env.exported = set(env.values)
    cmds = split_commands(y.scalar_src(run), env, provided=PROVIDED)
    ctx = fc.ctx(exported_only=True)
    exposure = []
    ports = y.get(res, "ports")
    if ports is not None:
        shown = y.str(ports) or ", ".join(y.str(p) or "" for p in y.seq(ports))
        exposure.append(Exposure(f"SkyPilot resources.ports {shown} (opened to the internet)", y.span(ports),
                                 port_list(shown)))
    service = y.key_node(root, "service")
    if service is not None:
        exposure.append(Exposure("SkyServe service (a public load-balancer endpoint)", y.span(service),
                                 port_list(y.str(y.get(root, "service", "ports")) or "")))
    image = y.get(res, "image_id")
    image_tok = y.tok(image) if isinstance(image, ScalarNode) else None
    facts: Facts = {"exposure": list(exposure)}
    docker = None
    if image_tok is not None and image_tok.text.startswith("docker:"):
        docker = image_tok.text[len("docker:"):].strip()  # the run script runs in this container
        if image_tok.span is not None:
            facts["image_span"] = image_tok.span
    for launch in from_commands(cmds, ctx, env):
        if docker and launch.image is None:
            launch.image = docker
        fc.add([launch], f"skypilot/run:{launch.line}", hint, Facts(**facts), ctx.ollama_models)
