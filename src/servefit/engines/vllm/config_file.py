"""vLLM `--config` YAML files: each top-level key is the long option of the same name
(`max-model-len: 8192` or `max_model_len: 8192`), as FlexibleArgumentParser reads them.

`config_tokens(path)` gives the argv words such a file stands for, with spans into the file
(the flag word has the key's span, the value the value's); the vLLM plugin splices them in for
`--config FILE`. A config file found on its own is also listed as a server (`vllm serve` plus
its options), marked `config_only` so that a run which also finds the command using it can drop
the duplicate.
"""

from __future__ import annotations

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from servefit.core import Token
from servefit.sources.base import FileCtx, read_text
from servefit.sources.launch import Launch
from servefit.sources.text import whole
from servefit.sources.yamlpos import Y, YamlProblem, compose_all

KEYS = {"model", "max-model-len", "gpu-memory-utilization", "tensor-parallel-size", "pipeline-parallel-size",
        "max-num-seqs", "max-num-batched-tokens", "kv-cache-dtype", "quantization", "dtype", "enforce-eager",
        "served-model-name", "enable-prefix-caching", "enable-chunked-prefill", "trust-remote-code",
        "swap-space", "cpu-offload-gb", "block-size", "port", "host", "tokenizer", "revision"}
BOOL = "tag:yaml.org,2002:bool"
NULL = "tag:yaml.org,2002:null"


def looks_like(y: Y, root: Node) -> bool:
    if not isinstance(root, MappingNode):
        return False
    keys = {k.replace("_", "-") for k, _, _ in y.items(root)}
    return len(keys & KEYS) >= 2 and ("model" in keys or len(keys & KEYS) >= 3) and \
        not keys & {"apiversion", "services", "run", "models", "image"}


def tokens(y: Y, root: Node) -> list[Token]:
    out: list[Token] = []
    for key, kn, v in y.items(root):
        flag = "--" + key.replace("_", "-")
        fspan = y.span(kn)
        if isinstance(v, ScalarNode):
            if v.tag == NULL:
                continue
            if v.tag == BOOL:
                on = str(v.value).lower() in ("true", "yes", "on")
                out.append(Token(flag if on else "--no-" + flag[2:], fspan))
                continue
            t = y.tok(v)
            if t is not None:
                out += [Token(flag, fspan), t]
        elif isinstance(v, SequenceNode):
            if v.value:
                out.append(Token(flag, fspan))
                out += [t for i in v.value if (t := y.tok(i)) is not None]
        else:  # a mapping, which vLLM takes as JSON text
            import json  # only then: a plain config file needs none

            try:
                val = yaml.safe_load(y.text[v.start_mark.index:v.end_mark.index])
            except yaml.YAMLError:
                continue
            out += [Token(flag, fspan), Token(json.dumps(val), y.span(v))]
    return out


def config_tokens(path: str) -> list[Token]:
    text = read_text(path)
    if text is None:
        return []
    src = whole(text, path)
    try:
        docs = compose_all(src)
    except YamlProblem:
        return []
    y = Y(src)
    return tokens(y, docs[0]) if docs and isinstance(docs[0], MappingNode) else []


def scan(y: Y, root: Node, fc: FileCtx) -> None:
    argv = [Token("vllm"), Token("serve")] + tokens(y, root)
    launch = Launch("vllm", argv, {}, y.line(root))
    fc.add([launch], "vllm-config", None, {"config_only": True})
