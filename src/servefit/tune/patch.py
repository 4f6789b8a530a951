"""The tuned point as edits on the spans the sources found: a value that is written is replaced
in place (only its characters change), a flag that is absent is inserted in the file's own style
(tune/style.py), a boolean flag turned off is removed. Each change carries an applicability, as
ruff's fixes do: `safe` for settings, `unsafe` for a change of checkpoint or quantization (applied
only with --unsafe), `display-only` where servefit cannot place the edit and shows it instead.
"""

from __future__ import annotations

import re
from typing import Any

from servefit.core import Edit, Span, Token
from servefit.sources.text import LineIndex
from servefit.tune import style
from servefit.tune.json_patch_lists import keep_list_positions
from servefit.tune.occurrences import Occurrence, occurrences, option_table
from servefit.tune.patch_env import EnvPlacement
from servefit.tune.placed import DISPLAY, SAFE, UNSAFE, Patch, Placed, Reader, fmt, keep_to_own_files, reader
from servefit.tune.space import WEIGHTS, Space
from servefit.tune.write import apply_edits, by_file

__all__ = ["DISPLAY", "SAFE", "UNSAFE", "Patch", "Reader", "apply_edits", "by_file", "fmt", "make_patch", "reader"]


def settings_changes(space: Space, point: dict[str, Any]) -> list[tuple[str, Any, Any, bool]]:
    """(setting, old, new, unsafe) the point asks for."""
    out: list[tuple[str, Any, Any, bool]] = []
    cur = space.current()
    changed = {k: v for k, v in space.changed(point).items() if k != WEIGHTS}
    settings = space.ev.config.settings
    for name, val in space.adapter.writes(changed, point, cur, space.ev.config).items():
        out.append((name, cur.get(name, settings.get(name)), val, False))
    var = space.variants.get(point.get(WEIGHTS, "none"))
    if var is not None and var.changes_checkpoint:
        for k, v in var.settings.items():
            out.append((k, space.ev.config.settings.get(k), v, True))
        if var.ref:
            out.append(("model", space.ev.config.model_ref, var.ref, True))
    return out


class Patcher(EnvPlacement):
    def __init__(self, space: Space, read: Reader) -> None:
        from servefit.engines import get

        self.space, self.read = space, read
        self.site = space.ev.site
        self.engine = space.ev.config.engine
        self.table = option_table(self.engine)
        words = [t.text for t in self.site.argv]
        self.skip = get(self.engine).command_length(words) if words else 0
        self.argv = list(self.site.argv)
        self.plugin = get(self.engine)
        self.argv = self.argv[:self.skip] + self.plugin.expand_args(self.argv[self.skip:], self.site)
        self.alias_quote: dict[int, str] = {}
        self.shared: set[int] = set()  # tokens at a YAML anchor that other places also use
        self.argv = [self._through_alias(i, t) for i, t in enumerate(self.argv)]
        self.occ = occurrences(self.site, self.table, self.skip, self.argv)
        self.pending_words: list[tuple[Placed, list[str]]] = []
        self.pending_keys: list[tuple[Placed, str, str]] = []  # (placed, --flag, value or "" for a switch)
        work = space.ev.site.workload
        self.prodstack = work.chart == "vllm-production-stack" or work.kind == "VLLMRuntime"
        # llm-d-modelservice writes the command from its keys (engines/vllm/llmd.py): a new flag
        # goes in the container's `args` list, after the flags the chart writes
        self.args_only = work.chart == "llm-d-modelservice"
        self.keyed = self._keyed()
        self.inline = self.inline_style(self.site.file, everywhere=True)

    # -- helpers
    def inline_style(self, file: str, everywhere: bool = False) -> bool:
        """Whether most flags that take a value are written `--flag=value` (in file, or anywhere in
        the command); a switch has no style of its own."""
        took = [o.inline for name, o in self.occ.items() if o.flag.span is not None  # servefit's own: no style
                and (everywhere or o.flag.span.file == file) and self._takes_value(name)]
        return sum(took) > len(took) / 2 if took else False

    def _takes_value(self, name: str) -> bool:
        opt = self.table.by_name.get(name) if self.table is not None else None
        return opt is None or bool(opt.takes_value)

    def span(self, file: str, start: int, end: int) -> Span:
        return LineIndex(self.read(file), file).span(start, end)

    def exact(self, tok: Token | None) -> bool:
        if tok is None or tok.span is None or id(tok) in getattr(self, "shared", ()):
            return False
        try:
            text = self.read(tok.span.file)
        except (OSError, UnicodeDecodeError):
            return False
        return style.exact(text, tok.span, tok.text)

    def readable(self, path: str) -> bool:
        try:
            self.read(path)
            return True
        except (OSError, UnicodeDecodeError):
            return False

    def replace(self, p: Placed, tok: Token, text: str, offset: int = 0) -> None:
        s = tok.span
        assert s is not None
        var = next((v for v, sp in self.site.unresolved_spans if sp is not None and sp.file == s.file
                    and s.start <= sp.start < s.end), None)
        if var is not None:  # `${CONTEXT_SIZE}` set outside the repository: the value belongs there
            p.applicability = DISPLAY
            ref = var if var[:1] in "%$" else f"${var}"  # a batch `%CTX%` or PowerShell `$env:CTX` as written
            name = var.strip("%").rsplit(":", 1)[-1].lstrip("$")
            p.shown = f"{name}={text} where {ref} is set (it gives {p.shown.split(' ', 1)[0] or 'this setting'})"
            return
        if offset and (s.end - s.start != len(tok.text)):
            p.applicability = DISPLAY
            return
        if tok.text.startswith("*") and s.start in self.alias_quote:  # a YAML alias: a scalar in its place
            p.edits.append(Edit(s, style.yaml_quote(text, self.alias_quote[s.start])))
            return
        if not style.PLAIN_SHELL.match(text) and not self._quoted(tok):
            p.applicability = DISPLAY
            return
        p.edits.append(Edit(self.span(s.file, s.start + offset, s.end), text))

    def _quoted(self, tok: Token) -> bool:
        assert tok.span is not None
        return bool(style.quote_of(self.read(tok.span.file), tok.span))

    def anchor(self) -> Token | None:
        """The last word of the command as written in the site's file (not a value expanded
        from a variable defined elsewhere), or the last item of a list in a rendered chart's own
        values (tune/patch_yaml.py::values_list_anchor)."""
        listed = self.values_list_anchor()
        if listed is not None:
            return listed
        env_spans = {t.span for t in self.site.env.values() if t.span is not None}
        # the command is written in the site's file, or all of it in one other file (a script a
        # Dockerfile copies and runs: sources/docker_scripts.py)
        files = {t.span.file for t in self.argv if t.span is not None}
        home = self.site.file if self.site.file in files or len(files) != 1 else next(iter(files))
        cands = [t for t in self.argv if t.span is not None and t.span not in env_spans
                 and t.span.file == home and self.exact(t) and not self.keyed_value(t)]
        if self.prodstack or self.args_only:  # the chart's template writes the command; only args items are words
            cands = [t for t in cands if self._after_last_key(t)]
        # a word followed (in the command) by one that is not written right after it, such as a
        # flag whose value is `${CTX}` defined elsewhere: inserting there would split the pair (a
        # next word that is a flag splits nothing: `-m x.gguf ${args}` takes words after the GGUF)
        nxt = {id(a): b for a, b in zip(self.argv, self.argv[1:], strict=False)}

        def closes(t: Token) -> bool:
            n = nxt.get(id(t))
            return n is None or n.text.startswith("-") or (n.span is not None and t.span is not None and n.span.file == t.span.file
                                 and n.span.start >= t.span.end and self.exact(n) and not self._a_default(n))
        # nor after the default of `${CTX:-131072}`: a word there would land inside the expansion; nor after a
        # value a shell variable is assigned (`TP_SIZE=4`, expanded in the command): that writes into the
        # assignment; nor between the program's words (`vllm` of `vllm serve $MODEL`)
        inner = self.argv[:max(0, self.skip - 1)]
        cands = [t for t in cands if closes(t) and not self._a_default(t) and not self._assigned(t)
                 and not any(t is a for a in inner)]
        if self.site.file.endswith((".yaml", ".yml")) and any(n for n, w in self.site.workload.names
                                                               if "llama-swap" in w):
            # a llama-swap macro (declared above the model's cmd) is every model's that uses it
            cands = [t for t in cands if t.span is not None and t.span.line >= self.site.line]
        if not cands:
            return None
        first = next((t for t in self.argv if t.span is not None and t in cands), None)
        start = first.span.start if first is not None and first.span is not None else 0
        cands = [t for t in cands if t.span is not None and t.span.start >= start]
        return max(cands, key=lambda t: t.span.end if t.span else 0) if cands else None

    def _assigned(self, t: Token) -> bool:
        """The value of a shell assignment (`NAME=value`, `export NAME="value"`), not a word of the command."""
        if t.span is None or t.span.file.endswith((".yaml", ".yml", ".json")):
            return False
        text = self.read(t.span.file)
        head = text[text.rfind("\n", 0, t.span.start) + 1:t.span.start]
        return re.search(r"(?:^|[\s;&|(])(?:export\s+|local\s+|readonly\s+|declare\s+(?:-\w+\s+)?)?"
                         r"[A-Za-z_]\w*=[\"']?$", head) is not None

    def flags_written(self) -> bool:
        """Whether a new flag has a place among words of the command past the program's (flags, a
        model); a bare program name written in the file is no such place."""
        anchor = self.anchor()
        return anchor is not None and not any(t is anchor for t in self.argv[:self.skip])

    def _a_default(self, t: Token) -> bool:
        """Whether the word is written as the default of a `${VAR:-default}` expansion."""
        assert t.span is not None
        text = self.read(t.span.file)
        line = text[text.rfind("\n", 0, t.span.start) + 1:t.span.start]
        return text.startswith("}", t.span.end) and re.search(r"\$\{\w+:?[-=]$", line) is not None

    def quotes(self, text: str, file: str) -> tuple[str | None, str | None]:
        """The quoting of the last flag and the last value written in the file (text)."""
        flag_q: str | None = None
        val_q: str | None = None
        for t in self.argv[self.skip:]:
            if t.span is None or t.span.file != file or not self.exact(t):
                continue
            q = style.quote_of(text, t.span)
            if t.text.startswith("-"):
                flag_q = q
            else:
                val_q = q
        return flag_q, val_q

    # -- kinds of settings
    def flag(self, p: Placed, name: str) -> None:
        opt = self.table.by_name.get(name) if self.table is not None else None
        flags = opt.flags if opt is not None and opt.flags else ("--" + name.replace("_", "-"),)
        long = next((f for f in flags if f.startswith("--")), flags[0])
        occ = self.occ.get(name)
        is_bool = opt is not None and not opt.takes_value
        new = p.new
        p.shown = (long if new else f"no {long}") if is_bool or new is None else f"{long} {fmt(new)}"
        if new is None and not is_bool:  # the engine's default has no value to write (TGI's --kv-cache-dtype)
            self.drop(p, occ, [v for v in (opt.env if opt is not None else ()) if v in self.site.env])
            return
        if occ is not None:
            if is_bool:
                if bool(new) == (not occ.negated):
                    return
                if occ.negated:
                    self.replace(p, occ.flag, long)
                elif self.exact(occ.flag):
                    assert occ.flag.span is not None
                    text = self.read(occ.flag.span.file)
                    piece = style.remove_word(text, occ.flag.span)
                    if piece is None:
                        p.applicability = DISPLAY
                    else:
                        p.edits.append(Edit(self.span(occ.flag.span.file, piece[0], piece[1]), piece[2]))
                else:
                    p.applicability = DISPLAY
                return
            if occ.inline:
                flag_text, _, value = occ.flag.text.partition("=")
                at = Token(value, occ.flag.value_span) if occ.flag.value_span is not None else None
                if at is not None and self.exact(at):  # a chart's `--flag={{ .Values.x }}`: the values line
                    self.replace(p, at, fmt(new))
                elif self.exact(occ.flag):
                    self.replace(p, occ.flag, fmt(new), offset=len(flag_text) + 1)
                else:
                    p.applicability = DISPLAY
                return
            if occ.value is not None and self.exact(occ.value):
                self.replace(p, occ.value, fmt(new))
            else:
                p.applicability = DISPLAY
            return
        env = next((v for v in (opt.env if opt is not None else ()) if v in self.site.env), None)
        if env is not None:
            self.env(p, env)
            return
        if is_bool and not new:
            return
        if self.keyed and not self.args_only or self.prodstack:
            self.pending_keys.append((p, long, "" if is_bool else fmt(new)))
            return
        if opt is not None and opt.env and self._env_configured():
            # a server the environment configures (the image's own command, a unit's bare
            # `ExecStart=llama-server` beside its Environment= lines): the new setting joins them
            self.env(p, opt.env[0])
            return
        self.pending_words.append((p, [long] if is_bool else [long, fmt(new)]))

    def _env_configured(self) -> bool:
        """Whether a new setting goes beside the server's variables rather than onto its command:
        nothing of the command past the program is written where a word could be added (the image's own
        command, a bare program name), or
        the command is written only in another file (the ENTRYPOINT of the Dockerfile a compose
        service's image is built from) while the site's own file sets the engine's variables."""
        if not any(self.exact(t) for t in self.site.env.values()):
            return False
        if not self.flags_written():
            return True
        anchor = self.anchor()
        assert anchor is not None
        by_env = self.table.by_env if self.table is not None else {}
        return anchor.span is not None and anchor.span.file != self.site.file and any(
            t.span is not None and t.span.file == self.site.file and self.exact(t)
            for name, t in self.site.env.items() if name in by_env)

    def drop(self, p: Placed, occ: Occurrence | None, env: list[str]) -> None:
        """Remove a flag with its value, where the setting goes back to a default the flag has no
        value for; a variable that sets it is shown, not removed."""
        if env:
            p.applicability = DISPLAY
            p.shown = f"remove {env[0]}"
            return
        if occ is None:
            return
        toks = [occ.flag] if occ.inline or occ.value is None else [occ.flag, occ.value]
        if not all(self.exact(t) for t in toks) or len({t.span.file for t in toks if t.span}) != 1:
            p.applicability = DISPLAY
            return
        spans = [t.span for t in toks if t.span is not None]
        pieces = style.remove_words(self.read(spans[0].file), spans)
        if pieces is None:
            p.applicability = DISPLAY
            return
        p.edits.extend(Edit(self.span(spans[0].file, a, b), t) for a, b, t in pieces)

    def flush(self) -> None:
        self.flush_keys()
        if not self.pending_words:
            return
        empty = self.empty_values_list() if self.values_list_anchor() is None else None
        if empty is not None:  # `extraArgs: []` the template ranges over: the new flags are its items
            file, a, b = empty
            words = [w for _, ws in self.pending_words for w in ws]
            self.pending_words[0][0].edits.append(
                Edit(self.span(file, a, b), "[" + ", ".join(style.yaml_quote(w, '"') for w in words) + "]"))
            return
        anchor = self.anchor()
        piece = None
        if anchor is not None and anchor.span is not None:
            text = self.read(anchor.span.file)
            # with `--flag=value` items around, new flags follow that style one by one
            # a chart's values list: the style of the flags it holds
            inline = self.inline if anchor.span.file == self.site.file else self.inline_style(anchor.span.file)
            parts = []
            for _, ws in self.pending_words:
                parts.append(["=".join(ws)] if inline and len(ws) == 2 else ws)
            spans = [t.span for t in self.argv if t.span is not None and t.span.file == anchor.span.file
                     and t.span.start <= anchor.span.start and self.exact(t)]
            spans.sort(key=lambda sp: sp.start)
            prev = spans[-2] if len(spans) >= 2 and spans[-1] == anchor.span else None
            sep = self.site.workload.list_separator
            if sep:  # items of one list (gcloud's --args=a,b): more items, in its separator
                words = [w for ws in parts for w in ws]
                piece = (anchor.span.end, anchor.span.end, "".join(sep + w for w in words)) \
                    if all(style.PLAIN_SHELL.match(w) and sep not in w for w in words) else None
            else:
                piece = style.insert_words(text, anchor.span, parts, self.quotes(text, anchor.span.file),
                                           style.spans_lines(text, spans), prev)
        if piece is None:
            for p, _ in self.pending_words:
                p.applicability = DISPLAY
            return
        assert anchor is not None and anchor.span is not None
        first = self.pending_words[0][0]
        first.edits.append(Edit(self.span(anchor.span.file, piece[0], piece[1]), piece[2]))


def make_patch(space: Space, point: dict[str, Any], read: Reader | None = None) -> Patch:
    read = read or reader()
    pt = Patcher(space, read)
    placed: list[Placed] = []
    for name, old, new, unsafe in settings_changes(space, point):
        p = Placed(setting=name, old=old, new=new, applicability=UNSAFE if unsafe else SAFE)
        placed.append(p)
        how = pt.plugin.written_as(name, space.ev.site)
        if name == "model":
            pt.model(p)
        elif how is not None and how[0] == "parameter":
            pt.parameter(p, how[1])
        elif how is not None:
            p.new = new
            pt.env(p, how[1])
        elif name.isupper():
            pt.env(p, name)
        else:
            pt.flag(p, name)
    pt.flush()
    keep_to_own_files(space.ev.site.workload.render_own, placed)
    keep_list_positions(space.ev.site, placed)
    return Patch(site=space.ev.site, placed=placed)


__all__ = ["DISPLAY", "SAFE", "UNSAFE", "Patch", "Placed", "apply_edits", "by_file", "fmt", "make_patch", "reader"]
