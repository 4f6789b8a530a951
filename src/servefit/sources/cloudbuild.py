"""Cloud Build configs (`cloudbuild.yaml`): each step runs its builder image's program with the step's
`args` (one word an item, as Cloud Build passes them) or its `script`, so a step that runs
`gcloud run deploy ... --args=...` or `docker run ... vllm/vllm-openai ...` is read like the same
command in a shell script. The program is the step's `entrypoint`, else the builder's own
(`gcr.io/cloud-builders/gcloud` runs gcloud, `.../docker` docker). Cloud Build fills in
`$_NAME` / `${_NAME}` from `substitutions:` before the step runs; its built-in ones (`$PROJECT_ID`)
and any the file does not set are not known here, and are said (SF001)."""

from __future__ import annotations

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from servefit.core import Token
from servefit.sources.base import FileCtx
from servefit.sources.launch import from_commands, from_words
from servefit.sources.shell import Vars, expand_word, split_commands
from servefit.sources.text import Src
from servefit.sources.words import Word
from servefit.sources.yamlpos import Y

# the program a builder image runs when the step names no entrypoint (cloud-builders' own images:
# https://github.com/GoogleCloudPlatform/cloud-builders, each builder's Dockerfile ENTRYPOINT)
_BUILDER_ENTRYPOINTS = {"gcloud": "gcloud", "docker": "docker", "kubectl": "kubectl", "gke-deploy": "gke-deploy"}


def is_cloudbuild(y: Y, doc: Node) -> bool:
    steps = y.get(doc, "steps")
    return isinstance(steps, SequenceNode) and bool(steps.value) and all(
        isinstance(s, MappingNode) and y.get(s, "name") is not None for s in steps.value)


def _builder_program(image: str) -> str | None:
    """`gcr.io/cloud-builders/gcloud:latest` -> gcloud; None for an image whose entrypoint is not known here."""
    repo = image.split("@", 1)[0].rsplit(":", 1)[0] if image.rfind(":") > image.rfind("/") else image.split("@", 1)[0]
    if "/cloud-builders/" not in "/" + repo:
        return None
    return _BUILDER_ENTRYPOINTS.get(repo.rsplit("/", 1)[-1])


def _substitutions(y: Y, doc: Node, env: Vars) -> None:
    for key, _, v in y.items(y.get(doc, "substitutions")):
        tok = y.tok(v)
        if tok is not None:
            env.set(key, tok)
            env.exported.add(key)


def _step_env(y: Y, node: Node | None, env: Vars) -> None:
    """`env: ["KEY=VALUE", ...]` (a step's, or `options.env` for every step): exported to its program."""
    for item in y.seq(node):
        tok = y.tok(item)
        if tok is None or "=" not in tok.text:
            continue
        key, _, _ = tok.text.partition("=")
        s = tok.span
        k = len(key) + 1
        value = Token(tok.text[k:], s.skip(k) if s is not None and s.line == s.end_line else s)
        env.set(key, value)
        env.exported.add(key)


def scan(y: Y, doc: Node, fc: FileCtx) -> None:
    top = Vars()
    _substitutions(y, doc, top)
    _step_env(y, y.get(doc, "options", "env"), top)
    for i, step in enumerate(y.seq(y.get(doc, "steps"))):
        env = top.copy()
        _step_env(y, y.get(step, "env"), env)
        label = f"cloudbuild/{y.str(y.get(step, 'id')) or f'step {i + 1}'}"
        ctx = fc.ctx(exported_only=True)
        script = y.get(step, "script")
        if isinstance(script, ScalarNode) and str(script.value).strip():
            fc.add(from_commands(split_commands(y.scalar_src(script), env), ctx, env), label, None, None,
                   ctx.ollama_models)
            continue
        entry = y.get(step, "entrypoint")
        words: list[Word] = []
        if isinstance(entry, ScalarNode) and str(entry.value).strip():
            words.append(expand_word(y.scalar_src(entry), env))
        else:
            program = _builder_program(y.str(y.get(step, "name")) or "")
            if program is None:
                continue
            at = y.span(y.get(step, "name")).start  # type: ignore[arg-type]  # the builder names the program
            words.append(expand_word(Src(program, fc.li, at, [at] * (len(program) + 1)), None))
        args = y.get(step, "args")
        if isinstance(args, SequenceNode):
            words += [expand_word(y.scalar_src(a), env) for a in args.value if isinstance(a, ScalarNode)]
        elif isinstance(args, ScalarNode) and str(args.value).strip():
            words.append(expand_word(y.scalar_src(args), env))
        fc.add(from_words(words, ctx, env), label, None, None, ctx.ollama_models)
