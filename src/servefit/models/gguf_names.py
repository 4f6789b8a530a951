"""GGUF references -> the model they hold: a file name, a Hub repo with a quant tag
(`unsloth/Qwen3-8B-GGUF:Q4_K_M`, `hf.co/...`), or a local file whose header is read
(models/gguf.py reads headers; this module only names things)."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any

from servefit import data
from servefit.core import UsageError
from servefit.models.gguf import read_gguf
from servefit.models.gguf_spec import spec_from_gguf
from servefit.models.name_words import file_name
from servefit.models.seq2seq import name_line

_FAMILY_ORG = [("llama", "meta-llama"), ("qwen", "Qwen"), ("qwq", "Qwen"), ("gemma", "google"),
               ("mistral", "mistralai"), ("mixtral", "mistralai"), ("ministral", "mistralai"),
               ("phi", "microsoft"), ("deepseek", "deepseek-ai"), ("gpt-oss", "openai"), ("granite", "ibm-granite"),
               ("glm", "zai-org"), ("olmo", "allenai"), ("smollm", "HuggingFaceTB")]


@lru_cache(maxsize=1)
def _quant_names() -> list[str]:
    q = data.load("gguf_quants.yaml")
    names = set(q["ftypes"]) | set(q["aliases"])
    return sorted(names, key=len, reverse=True)


def canonical_quant(text: str) -> str | None:
    """`q4_k_m` / `Q4_K_M` / `mxfp4` -> the llama.cpp file type name."""
    up = text.upper().replace("-", "_")
    q = data.load("gguf_quants.yaml")
    if up in q["ftypes"]:
        return up
    return q["aliases"].get(up)


def split_quant(name: str) -> tuple[str, str | None]:
    """(base name, quant) from a GGUF file or repo name: `Meta-Llama-3.1-8B-Instruct-Q4_K_M`."""
    base = re.sub(r"\.gguf$", "", file_name(name), flags=re.I)
    base = re.sub(r"-\d{5}-of-\d{5}$", "", base)
    base = re.sub(r"[-_.]gguf$", "", base, flags=re.I)
    for q in _quant_names():
        m = re.search(rf"(?:^|[-_.])(?:UD[-_]|i1[-_])?{re.escape(q)}(?:[-_.]?(?:XL|L|M|S))?$", base, re.I)
        if m:
            stem = base[: m.start()].rstrip("-_.")
            return stem or base, canonical_quant(q)
    m = re.search(r"[-_.]qat[-_.]q4$", base, re.I)
    if m:  # Google's quantization-aware-trained releases ship one GGUF, Q4_0 (google/gemma-3-27b-it-qat-q4_0-gguf):
        # a `-qat-q4` file is that release (its tensors are Q4_0, the tied embedding Q6_K as llama-quantize makes it)
        return base[: m.start() + 4], "Q4_0"
    for q in _quant_names():  # the file type first: Q4_K_M-Qwen2.5-7B-Instruct.gguf
        m = re.match(rf"(?:UD[-_])?{re.escape(q)}[-_.](?=[A-Za-z])", base, re.I)
        if m:
            return base[m.end():], canonical_quant(q)
    return base, None


def dynamic_quant(ref: str) -> str | None:
    """`UD-Q8_K_XL` for a file or `-hf repo:TAG` naming an Unsloth Dynamic quant: a mix whose
    per-tensor types only the file's header tells (the name gives its base type alone)."""
    m = re.search(r"(?:^|[-_.:/])(UD[-_][A-Z0-9_]+?)(?:-\d{5}-of-\d{5})?(?:\.gguf)?$", str(ref), re.I)
    return "UD-" + m.group(1)[3:].upper() if m else None


def catalog_candidates(base: str) -> list[str]:
    """Names to try in the catalog for a GGUF base name, most specific first."""
    out = [base]
    short = re.sub(r"^Meta-", "", base, flags=re.I)
    if short != base:
        out.append(short)
    low = short.lower()
    for prefix, org in _FAMILY_ORG:
        if low.startswith(prefix):
            out.append(f"{org}/{short}")
            break
    return list(dict.fromkeys(out))


def _ollama_export(base: str, quant: str | None) -> tuple[Any, str] | None:
    """(tag table answer, `name:tag`) for a GGUF named after an Ollama model with its colon
    written as `_` (`deepseek-r1_8b-llama-distill-q4_K_M.gguf`, a blob copied out of Ollama's
    store), where the name is a library name and the tag starts with one of its sizes."""
    name, sep, tag = os.path.basename(base).partition("_")
    if not sep or not tag:
        return None
    from servefit.engines.ollama.tags import library_size

    full = f"{tag}-{quant.lower()}" if quant else tag
    found = library_size(name, full)
    return (found, f"{name.lower()}:{full}") if found is not None else None


def _ollama_family(base: str) -> tuple[Any, str] | None:
    """(tag table answer, library name) for a GGUF file named by a family alone (`mixtral.gguf`,
    `zephyr_zephyr_q4km.gguf`, `qwen3-instruct.gguf`): the name is one Ollama library name and no
    size, its other words only release words (instruct, chat, v2), so the size `ollama pull NAME`
    downloads is a documented guess. Never for a name with any other word (`my-solar-panel`)."""
    from servefit.engines.ollama.tags import table
    from servefit.models.name_rules import rules
    from servefit.models.name_words import STOP_WORDS, size_at, word_tuple

    ws = list(word_tuple(os.path.basename(base)))
    if not ws or any(size_at(ws, i) for i in range(len(ws))):
        return None
    lib = table()["library"]
    found: set[str] = set()
    covered: set[int] = set()
    for n in range(len(ws), 0, -1):  # the longest library name first: qwen2.5-coder before qwen2.5
        for i in range(len(ws) - n + 1):
            name = "-".join(ws[i:i + n])
            if name in lib and not covered.intersection(range(i, i + n)):
                found.add(name)
                covered.update(range(i, i + n))
    loose = {str(w) for w in rules().get("generic_words") or ()} | STOP_WORDS
    if len(found) != 1 or not all(w in loose or re.fullmatch(r"v?\d[\d.]*", w)
                                  for k, w in enumerate(ws) if k not in covered):
        return None
    name = found.pop()
    from servefit.engines.ollama.tags import lookup

    tag = lookup(name)
    return (tag, name) if tag.model else None


def table_default(name: str) -> str:
    """The size `ollama pull NAME` downloads, per servefit's Ollama tag table."""
    from servefit.engines.ollama.tags import table

    return str(table()["library"][name]["default"])


def parse_ref(ref: str) -> tuple[str, str | None, bool]:
    """(base model name, quant, is_local_file) for `-m PATH`, `-hf repo[:QUANT]` or a file name."""
    if os.path.isfile(ref):
        return ref, None, True
    repo, _, tag = ref.partition(":") if "/" in ref and not ref.lower().endswith(".gguf") else (ref, "", "")
    if tag:  # a bare quant (`:Q4_K_M`) or a file-name prefix (`:DeepSeek-R1-UD-IQ1_M`)
        base, _ = split_quant(repo.split("/")[-1])
        return base, canonical_quant(tag) or split_quant(tag)[1] or tag.upper(), False
    if "/" in ref and not ref.lower().endswith(".gguf"):  # -hf repo without a tag: Q4_K_M by default
        base, q = split_quant(ref.split("/")[-1])
        return base, q or "Q4_K_M", False
    base, q = split_quant(ref)
    return base, q, False


def resolve_gguf_ref(ref: str, online: bool = False, context: Any = None, hf_repo: str | None = None) -> Any:
    """A ModelSpec for a GGUF reference: the header of a local file, the header in the model
    lock or the HF cache (`context`: models/lock.ModelContext), or the catalog model a file /
    repo name stands for (found by name; the quant is recorded in the assumptions); the Hub's
    header last, with `online`."""
    from servefit.models.spec import ModelSpec

    base, quant, local = parse_ref(ref)
    if local:
        return spec_from_gguf(read_gguf(ref))
    from servefit.models.resolve import resolve_gguf

    mapped = context.mapped(ref) if context is not None else None
    if mapped is not None and ":" not in mapped and not mapped.lower().endswith(".gguf"):
        from servefit.models.resolve import resolve_model

        return resolve_model(ref, online=online, context=context)  # the mapping names a config
    if mapped is not None:
        ref, hf_repo = mapped, None
        base, quant, _ = parse_ref(ref)
    found = resolve_gguf(ref, hf_repo, context, online=online)
    if found is not None:
        return found
    try:
        from servefit.models import resolve_model  # type: ignore[attr-defined]
    except ImportError:
        raise UsageError(f"{ref}: no model catalog to resolve {base!r} against") from None
    first: Exception | None = None
    for cand in catalog_candidates(base):
        try:
            spec: ModelSpec = resolve_model(cand, online=online)
        except Exception as exc:  # UsageError with nearest names, KeyError, ...
            first = first or exc
            continue
        dyn = dynamic_quant(ref)
        label = f"{dyn}, an Unsloth Dynamic mix sized as plain {quant}" if dyn else quant
        spec.assumptions.append(f"GGUF {file_name(ref)!r} taken as {spec.name} "
                                f"(by its name{f', quant {label}' if quant else ''}; no file to read)")
        spec.resolved_from = "derivative"
        return spec
    exported = _ollama_export(base, quant)
    if exported is not None:
        tag, name = exported
        spec = resolve_model(tag.model, online=online)
        spec.assumptions.append(f"GGUF {file_name(ref)!r} taken as {spec.name}: its name is Ollama's "
                                f"{name} written as a file name ({tag.quant}; no file to read)")
        spec.resolved_from = "derivative"
        return spec
    family = _ollama_family(base) if not os.path.isfile(ref) else None
    if family is not None:
        tag, name = family
        spec = resolve_model(tag.model, online=online)
        default = str(table_default(name))
        spec.assumptions.append(f"GGUF {file_name(ref)!r} taken as {spec.name}: its name carries the family "
                                f"'{name}' and no size, so the size `ollama pull {name}` downloads ({default}) was "
                                f"assumed (no file to read; pass --model-config or name the size in the file name)")
        spec.resolved_from = "derivative"
        return spec
    if online or (context is not None and context.online):
        found = resolve_gguf(ref, hf_repo, context, online=online, fetch=True)
        if found is not None:
            return found
    seq2seq = name_line(base)
    if seq2seq:  # a T5 / Whisper GGUF: models/seq2seq.py's one line, not "cannot tell which model"
        raise UsageError(f"{ref}: {seq2seq}")
    raise UsageError(f"{ref}: cannot tell which model this GGUF is ({first})")
