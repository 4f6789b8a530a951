"""Ollama Modelfiles as launch sites: one `ollama serve` site per Modelfile, carrying the parsed
document (site.inputs.definition) so the Ollama engine reads its FROM and PARAMETERs with spans.
servefit.engines.ollama_link.link_modelfiles later merges it with the server that uses it."""

from __future__ import annotations

import os
import re

from servefit.core import Finding, LaunchSite, ModelInputs, Token
from servefit.engines.ollama_modelfile import parse_modelfile
from servefit.sources import detect as detect_engines

_NAME = re.compile(r"(^|[._-])modelfile([._-]|$)", re.I)
_FIRST = re.compile(r"^\s*(#.*)?$")


def detect(path: str, text: str) -> bool:
    """`Modelfile`, `Modelfile.llama`, `llama.modelfile`; or a text whose first instruction is FROM
    followed by Modelfile instructions (no YAML/Dockerfile look-alikes)."""
    base = os.path.basename(path)
    if _NAME.search(base) and not base.lower().endswith((".yaml", ".yml", ".json", ".py", ".md")):
        return True
    lines = [ln for ln in text.splitlines()[:50] if not _FIRST.match(ln)]
    if not lines or not re.match(r"^\s*FROM\s+\S", lines[0], re.I):
        return False
    return any(re.match(r"^\s*(PARAMETER|TEMPLATE|SYSTEM|ADAPTER|MESSAGE)\s", ln, re.I) for ln in lines[1:])


def scan(path: str, text: str) -> tuple[list[LaunchSite], list[Finding]]:
    if text.startswith("\ufeff"):  # the parser drops a BOM, which would shift every offset by one
        text = " " + text[1:]
    doc = parse_modelfile(text, path)
    frm = doc.from_ref
    line = frm.span.line if frm is not None and frm.span is not None else 1
    engine = next((name for name, kinds in detect_engines.owners("file_kinds") if "modelfile" in kinds), None)
    if engine is None:  # no engine that reads Modelfiles is installed
        return [], []
    site = LaunchSite(file=path, line=line, argv=[Token(w) for w in detect_engines.server_command(engine)],
                      engine=engine, name=f"Modelfile {os.path.basename(path)}", inputs=ModelInputs(definition=doc))
    # parse findings travel with the site (the engine re-checks PARAMETERs for its version)
    return [site], []
