"""Where tune writes the settings that are not flags of the command: an environment variable (its
entry among the server's others, else a `VAR=value` prefix of a shell command), a Modelfile
PARAMETER line, and the model reference. A mixin of tune/patch.py's Patcher."""

from __future__ import annotations

import re
from typing import Any

from servefit.core import Edit, Token
from servefit.engines.ollama_modelfile import modelfile_of
from servefit.redact import is_secret_name
from servefit.tune import style
from servefit.tune.patch_yaml import YamlPlacement
from servefit.tune.placed import DISPLAY, Placed, fmt


class EnvPlacement(YamlPlacement):
    """The Patcher's placement of environment variables, Modelfile parameters and the model."""

    space: Any  # tune.space.Space

    def replace(self, p: Placed, tok: Token, text: str, offset: int = 0) -> None:
        raise NotImplementedError

    def env(self, p: Placed, var: str, shown: bool = True) -> None:
        value = fmt(p.new)
        if isinstance(p.new, bool):
            value = "1" if p.new else "0"
        if shown:
            p.shown = f"{var}={value}"
        if is_secret_name(var):
            p.applicability = DISPLAY
            return
        tok = self.site.env.get(var)
        if tok is not None:
            found = self._anchor_name(tok)
            if found is not None and re.search(r"\*" + re.escape(found[1]) + r"(?![\w.-])", found[0]):
                p.applicability = DISPLAY  # a value shared through a YAML anchor: not changed for all
                return
            if self.exact(tok):
                self.replace(p, tok, value)
            else:
                p.applicability = DISPLAY
            return
        sibs = [t for t in self.site.env.values() if self.exact(t)]
        sibs.sort(key=lambda t: (t.span is None or t.span.file != self.site.file, -(t.span.end if t.span else 0)))
        for sib in sibs:
            assert sib.span is not None
            piece = style.env_entry(self.read(sib.span.file), sib.span, var, value)
            if piece is not None:
                p.edits.append(Edit(self.span(sib.span.file, piece[0], piece[1]), piece[2]))
                return
        cmd = next((t for t in self.site.argv if t.span is not None), None)
        if cmd is not None and cmd is self.site.argv[0] and self.exact(cmd) and self.site.workload.kind is None:
            assert cmd.span is not None
            piece = style.prefix_env(self.read(cmd.span.file), cmd.span, var, value)
            if piece is not None:
                p.edits.append(Edit(self.span(cmd.span.file, piece[0], piece[1]), piece[2]))
                return
        p.applicability = DISPLAY

    def parameter(self, p: Placed, name: str) -> None:
        doc = modelfile_of(self.site)
        p.shown = f"PARAMETER {name} {fmt(p.new)}"
        toks = doc.parameters.get(name) if doc is not None else None
        if toks:
            if self.exact(toks[-1]):
                self.replace(p, toks[-1], fmt(p.new))
            else:
                p.applicability = DISPLAY
            return
        after = None
        for ins in doc.instructions if doc is not None else []:
            if ins.name in ("from", "parameter") and ins.keyword.span is not None:
                after = ins.keyword.span
        if after is None or not self.readable(after.file):
            p.applicability = DISPLAY
            return
        s, e, t = style.parameter_line(self.read(after.file), after, name, fmt(p.new))
        p.edits.append(Edit(self.span(after.file, s, e), t))

    def model(self, p: Placed) -> None:
        span = self.space.ev.config.spans.get("model")
        p.shown = f"model {p.new}"
        tok = next((t for t in self.site.argv if t.span == span and span is not None), None)
        if tok is None:
            doc = modelfile_of(self.site)
            tok = doc.from_ref if doc is not None else None
        if tok is not None and self.exact(tok):
            self.replace(p, tok, fmt(p.new))
        else:
            p.applicability = DISPLAY
