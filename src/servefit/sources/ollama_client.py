"""Client commands beside a server: `ollama pull|run MODEL`, `ollama create NAME -f PATH` and
`docker exec CONTAINER ollama pull MODEL` name the models an Ollama server will load."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.sources import detect

if TYPE_CHECKING:
    from servefit.sources.launch import Ctx
    from servefit.sources.shell import Word

EXEC_VALUE = {"-e", "--env", "-u", "--user", "-w", "--workdir", "--env-file", "--detach-keys", "--index"}


def container_exec(words: list[Word], ctx: Ctx) -> None:
    """`docker exec [-it] ollama ollama pull MODEL` (and `docker compose exec SERVICE ...`): a
    command run inside a server's container, which names the models it will load."""
    texts = [w.text for w in words]
    k = 0
    while k < len(texts) and texts[k].startswith("-"):
        k += 2 if texts[k] in EXEC_VALUE else 1
    if k + 1 < len(words):
        ollama_client(words[k + 1:], ctx)


def ollama_client(words: list[Word], ctx: Ctx) -> None:
    """`ollama pull|run MODEL` and `ollama create NAME -f PATH`: what an Ollama server beside
    this command will load."""
    texts = [w.text for w in words]
    if detect.mentions_ollama_model(texts):
        ctx.ollama_models.append(words[2].token())
        ctx.pulled_vars.extend(v for v in words[2].unresolved if v not in ctx.pulled_vars)
    ref = detect.modelfile_ref(texts)
    if ref is not None:
        ctx.modelfile_refs.append(ref)
        ctx.created.append(texts[2])
