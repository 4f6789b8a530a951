"""Where tune writes the settings that are not flags of the command: an environment variable (its
entry among the server's others, else the first of a new block of its compose service, k8s
container or Dockerfile, else a `VAR=value` prefix of a shell command), a Modelfile
PARAMETER line, and the model reference. A mixin of tune/patch.py's Patcher."""

from __future__ import annotations

import os
import re
from typing import Any

from servefit.core import Edit, Token
from servefit.engines.ollama_modelfile import modelfile_of
from servefit.redact import is_secret_name
from servefit.tune import style
from servefit.tune.patch_yaml import YamlPlacement
from servefit.tune.placed import DISPLAY, Placed, fmt

COMMAND_KEY = re.compile(r"([ \t]*)(?:command|entrypoint|args)[ \t]*:")
DOCKER_COMMAND = re.compile(r"(?:ENTRYPOINT|CMD)\b", re.I)


def env_block(text: str, pos: int, shape: str, name: str, value: str) -> tuple[int, int, str] | None:
    """The first environment variable of a compose service (`environment:` list), a k8s container
    (`env:` list) or a Dockerfile (`ENV`), placed just before the key or instruction that holds
    the command word at pos; None where that key is not found above the word, below its owner."""
    a, b, _ = style.line_bounds(text, pos)
    floor: int | None = None  # the least indentation of the lines passed: the key's is less
    while True:
        line = text[a:b]
        m = (DOCKER_COMMAND.match(line) if shape == "dockerfile" else COMMAND_KEY.match(line))
        indent = len(line) - len(line.lstrip(" \t"))
        if m and (floor is None or indent < floor):
            break
        if line.strip():
            if shape == "dockerfile" and not text[:a].rstrip("\r\n").endswith("\\"):
                return None  # the instruction's first line is passed: not ENTRYPOINT or CMD
            if floor is not None and indent < floor and shape != "dockerfile":
                return None  # out of the command's value without meeting its key
            floor = indent if floor is None else min(floor, indent)
        if a == 0:
            return None
        a, b, _ = style.line_bounds(text, a - 1)
    eol = style.eol_of(text, a)
    ind = line[:len(line) - len(line.lstrip(" \t"))]
    head = {"compose": f"{ind}environment:{eol}", "k8s": f"{ind}env:{eol}"}.get(shape, "")
    return a, a, head + env_block_entry(shape, ind, name, value, eol)


def env_block_entry(shape: str, ind: str, name: str, value: str, eol: str) -> str:
    """One variable of a block env_block starts (the next ones join the same block)."""
    if shape == "compose":
        return f"{ind}  - {name}={value}{eol}"
    if shape == "k8s":
        return f"{ind}  - name: {name}{eol}{ind}    value: {style.yaml_quote(value, style.DQ)}{eol}"
    return f"ENV {name}={value}{eol}"


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
        work = self.site.workload
        if work.list_separator:  # Cloud Run's --set-env-vars A=1,B=2: one more item, else by hand
            end = work.env_list_end
            if end is not None and self.readable(end.file) and style.PLAIN_SHELL.match(value):
                p.edits.append(Edit(self.span(end.file, end.end, end.end), f",{var}={value}"))
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
        if self._env_block(p, var, value):
            return
        cmd = next((t for t in self.site.argv if t.span is not None), None)
        if cmd is not None and cmd is self.site.argv[0] and self.exact(cmd) and self.site.workload.kind is None:
            assert cmd.span is not None
            piece = style.prefix_env(self.read(cmd.span.file), cmd.span, var, value)
            if piece is not None:
                p.edits.append(Edit(self.span(cmd.span.file, piece[0], piece[1]), piece[2]))
                return
        p.applicability = DISPLAY

    def _env_block(self, p: Placed, var: str, value: str) -> bool:
        """A compose service, k8s container or Dockerfile whose file sets no variable for the server
        yet: the first one, in that file's own block, just before the command."""
        work = self.site.workload
        cmd = next((t for t in self.site.argv if t.span is not None and self.exact(t)), None)
        if cmd is None or cmd.span is None or work.env_opaque:
            return False
        file = cmd.span.file
        if any(t.span is not None and t.span.file == file for t in self.site.env.values()):
            return False  # the file has an environment, in a shape env_entry did not take
        name = os.path.basename(file).lower()
        shape = ("compose" if work.service else "k8s" if work.container else
                 "dockerfile" if "dockerfile" in name or "containerfile" in name else None)
        started = getattr(self, "_block", None)
        if started is not None and shape is not None:  # a second variable joins the block the first began
            owner, i, ind, eol = started
            edit = owner.edits[i]
            owner.edits[i] = Edit(edit.span, edit.text + env_block_entry(shape, ind, var, value, eol))
            return True
        text = self.read(file)
        piece = env_block(text, cmd.span.start, shape, var, value) if shape else None
        if piece is None:
            return False
        p.edits.append(Edit(self.span(file, piece[0], piece[1]), piece[2]))
        line = text[piece[0]:text.find("\n", piece[0]) + 1 or len(text)]
        self._block = (p, len(p.edits) - 1, line[:len(line) - len(line.lstrip(" \t"))], style.eol_of(text, piece[0]))
        return True

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
