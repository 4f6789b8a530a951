"""otwld ollama-helm's values as a server: `ollama.gpu.{enabled,number}`, `ollama.models.{pull,run}`
(the models the server loads), `image`, `extraEnv`, `extraArgs`."""

from __future__ import annotations

from yaml.nodes import MappingNode, Node

from servefit.core import Token
from servefit.sources.base import FileCtx
from servefit.sources.helm import arg_words, env_vars, hint_of, true
from servefit.sources.hints import to_int
from servefit.sources.launch import Launch
from servefit.sources.ports import Exposure
from servefit.sources.ports import add as add_exposure
from servefit.sources.yamlpos import Y


def ollama_chart(y: Y, root: Node, fc: FileCtx, label: str) -> None:
    o = y.get(root, "ollama")
    repo = y.tok(y.get(root, "image", "repository"))
    tag = y.str(y.get(root, "image", "tag"))
    image = (repo.text if repo else "ollama/ollama") + (f":{tag}" if tag else "")
    env = env_vars(y, y.get(root, "extraEnv"))
    args = arg_words(y, y.get(root, "extraArgs"))
    argv = [Token("/bin/ollama")] + ([w.token() for w in args] if args else [Token("serve")])
    launch = Launch("ollama", argv, dict(env.values), y.line(o) if o is not None else 1, image=image)
    models = [m for key in ("pull", "run") for n in y.seq(y.get(o, "models", key)) if (m := y.tok(n))]
    gpu = y.get(o, "gpu")
    hint = None
    if true(y, y.get(gpu, "enabled")):
        num = y.tok(y.get(gpu, "number"))
        hint = hint_of(y, root, count=(to_int(num.text) if num else 1, num, "ollama.gpu.number"))
    fc.add([launch], f"{label}/ollama", hint, {"chart": "ollama-helm"}, models)
    typ = y.tok(y.get(root, "service", "type"))  # templates/service.yaml: `type: {{ .Values.service.type }}`
    if typ is not None and typ.text in ("LoadBalancer", "NodePort") and fc.sites:
        add_exposure(fc.sites[-1], Exposure(f"the chart's Service of type {typ.text} (service.type)", typ.span))


def scan_values(y: Y, root: Node, fc: FileCtx, label: str) -> bool:
    o = y.get(root, "ollama")
    if isinstance(o, MappingNode) and (y.get(o, "gpu") is not None or y.get(o, "models") is not None):
        ollama_chart(y, root, fc, label)
        return True
    return False
