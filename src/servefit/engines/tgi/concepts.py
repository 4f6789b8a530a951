"""data/concepts.yaml: one concept (context, concurrency, memory fraction, KV dtype, quantization,
parallelism ...) named per engine. Used for cross-engine hints: a TGI config that writes vLLM's
`--max-model-len` is told TGI's name for the same concept. Shared by the TGI and SGLang plugins
(any engine may use it; it lives here only because of file ownership)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from servefit import data


@lru_cache(maxsize=1)
def concepts() -> dict[str, dict[str, Any]]:
    return data.load("concepts.yaml") or {}


def name_for(concept: str, engine: str) -> str | None:
    """The canonical setting name `engine` uses for `concept` (None if it has none)."""
    entry = concepts().get(concept, {}).get(engine)
    return entry.get("setting") if isinstance(entry, dict) else None


def _spellings(entry: dict[str, Any]) -> list[str]:
    return list(entry.get("flags") or []) + list(entry.get("env") or [])


def translate(word: str, engine: str) -> tuple[str, str, str] | None:
    """For a flag / variable another engine uses: (concept, other engine, this engine's spelling),
    or None. `--max-model-len` for tgi -> ("context", "vllm", "--max-total-tokens")."""
    key = word.split("=", 1)[0]
    for concept, entry in concepts().items():
        mine = entry.get(engine)
        if not isinstance(mine, dict) or key in _spellings(mine):
            continue
        for other, theirs in entry.items():
            if other in (engine, "title") or not isinstance(theirs, dict):
                continue
            if key in _spellings(theirs):
                ours = _spellings(mine)
                flags = [s for s in ours if s.startswith("-")] if key.startswith("-") else ours
                if flags or ours:
                    return concept, other, (flags or ours)[0]
    return None


def add_hints(findings: list, unknown_code: str, engine: str, title: str) -> None:
    """Where an unknown flag is another engine's name for a concept, say so (replacing a
    spelling-based did-you-mean): `--max-model-len` -> "vllm's context setting; SGLang calls it
    --context-length"."""
    import re

    for f in findings:
        if f.code != unknown_code:
            continue
        m = re.search(r"(?:argument: |argument ')(-[-\w]+)", f.message)
        if not m:
            continue
        hit = translate(m.group(1), engine)
        if hit:
            concept, other, ours = hit
            f.message = re.sub(r" \(did you mean [^)]*\)|; tip: a similar argument exists: '[^']*'", "", f.message)
            f.message += f" ({m.group(1)} is {other}'s {concept.replace('_', ' ')} setting; {title} calls it {ours})"
