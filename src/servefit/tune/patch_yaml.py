"""Where tune's edits go in YAML: a value reached through an alias (`*len`) is edited at the
alias, never the anchor other settings share; settings kept as keys (production-stack
`vllmConfig`, a vLLM `--config` file) get new keys in the file's own spelling, the rest
`extraArgs` items. A mixin of tune/patch.py's Patcher."""

from __future__ import annotations

import re
from typing import Any

from servefit.core import Edit, Span, Token
from servefit.tune import style, yaml_keys
from servefit.tune.placed import DISPLAY, Placed

DQ_ = '"'
ANCHOR_BEFORE = re.compile(r"&([A-Za-z0-9_.-]+)[ \t]+$")
_RANGE = re.compile(r"\{\{-?\s*range\s+\.Values((?:\.[A-Za-z_][\w-]*)+)\s*-?\}\}")
_YAML_KEY = re.compile(r"\n[ \t]*(?:- )?[A-Za-z_][\w.-]*:(?:[ \t]|$)", re.M)



class YamlPlacement:
    """The YAML side of the Patcher (see the module docstring)."""

    read: Any  # tune.patch.Reader
    argv: list[Token]
    site: Any  # core.LaunchSite
    alias_quote: dict[int, str]
    shared: set[int]
    keyed: list[tuple[Token, str, Token | None]]
    prodstack: bool
    pending_keys: list[tuple[Placed, str, str]]
    pending_words: list[tuple[Placed, list[str]]]

    def readable(self, path: str) -> bool:
        raise NotImplementedError

    def exact(self, tok: Token | None) -> bool:
        raise NotImplementedError

    def span(self, file: str, start: int, end: int) -> Span:
        raise NotImplementedError

    def anchor(self) -> Token | None:
        raise NotImplementedError

    def _anchor_name(self, tok: Token) -> tuple[str, str] | None:
        """(file text, anchor name) when tok's span is the value of a YAML anchor (`&len 8192`)."""
        if tok.span is None or not self.readable(tok.span.file):
            return None
        text = self.read(tok.span.file)
        q = style.quote_of(text, tok.span)
        m = ANCHOR_BEFORE.search(text, max(0, tok.span.start - len(q) - 200), tok.span.start - len(q))
        return (text, m.group(1)) if m is not None else None

    def _through_alias(self, i: int, tok: Token) -> Token:
        """A value that reaches this server through a YAML alias (`*len`) is edited at that alias,
        never at the anchor, which other settings may share. The alias is the one written between
        this word's neighbours; when it cannot be told apart, the token is left alone and marked
        shared (a change to it is shown, not written)."""
        found = self._anchor_name(tok)
        if found is None:
            return tok
        text, name = found
        uses = [m for m in re.finditer(r"\*" + re.escape(name) + r"(?![\w.-])", text)]
        if not uses:
            return tok
        assert tok.span is not None
        prev = next((t for t in reversed(self.argv[:i]) if t.span is not None and t.span.file == tok.span.file
                     and self.exact(t) and self._anchor_name(t) is None), None)
        after = next((t for t in self.argv[i + 1:] if t.span is not None and t.span.file == tok.span.file
                      and self.exact(t) and self._anchor_name(t) is None), None)
        lo = prev.span.end if prev is not None and prev.span is not None else 0
        hi = after.span.start if after is not None and after.span is not None else len(text)
        if prev is not None and after is None:
            hi = style.line_bounds(text, lo)[2] if lo < len(text) else len(text)
            hi = max(hi, yaml_keys.entry_end(text, prev.span)) if prev.span is not None else hi
        mine = [m for m in uses if lo <= m.start() and m.end() <= hi]
        if len(mine) != 1:
            self.shared.add(id(tok))
            return tok
        m = mine[0]
        self.alias_quote[m.start()] = style.quote_of(text, tok.span)
        return Token("*" + name, self.span(tok.span.file, m.start(), m.end()))

    def values_list_anchor(self) -> Token | None:
        """A server rendered from a Helm chart: the last item of a list in its own values files
        (`extraArgs: [--max-model-len, "8192"]` or `- --max-model-len=8192` that the template
        writes with toYaml), where new flags go as more items; None when the render's own files
        hold no such list (the template's words are every render's: tune/placed.py)."""
        import os

        own = {os.path.normpath(f) for f in self.site.workload.render_own}
        if not own:
            return None
        items = [t for t in self.argv if t.span is not None and os.path.normpath(t.span.file) in own
                 and self.exact(t) and not self.keyed_value(t) and self._list_item(t)]
        if not items:
            return None
        file = items[-1].span.file  # type: ignore[union-attr]
        return max((t for t in items if t.span is not None and t.span.file == file),
                   key=lambda t: t.span.end if t.span else 0)

    def empty_values_list(self) -> tuple[str, int, int] | None:
        """A server rendered from a Helm chart whose template writes its command's last words with
        `{{- range .Values.a.b }}` over a list that the render's own values file leaves empty
        (`extraArgs: []` or `{}`, neuralmagic/helm-charts' nm-vllm): (that file, the span of `[]`), where
        new flags go as the list's items; None otherwise."""
        import os

        from servefit.sources.render_values import ValuesFile

        own = [os.path.normpath(f) for f in self.site.workload.render_own]
        tpl = [t.span for t in self.argv if t.span is not None and self.exact(t)
               and os.path.basename(os.path.dirname(t.span.file)) == "templates"]
        if not own or not tpl or len({sp.file for sp in tpl}) != 1:
            return None
        text = self.read(tpl[0].file)
        last = max(sp.end for sp in tpl)
        # a range over a values list after the command's last literal word, in the same list (no YAML
        # key between them: `image:` would be past the command)
        m = _RANGE.search(text, last)
        if m is None or _YAML_KEY.search(text, last, m.start()) is not None:
            return None
        from yaml.nodes import MappingNode, SequenceNode

        path = m.group(1).lstrip(".").split(".")
        for f in own:
            node = ValuesFile(f).get(path)
            # `[]`, or `{}` (Lintasarta/sglang-helm: `extraArgs: {}`): `range` over either writes nothing, and over
            # the list written in its place writes each item
            if isinstance(node, (SequenceNode, MappingNode)) and not node.value and node.flow_style and \
                    self.read(f)[node.start_mark.index:node.end_mark.index].replace(" ", "") in ("[]", "{}"):
                return f, node.start_mark.index, node.end_mark.index
        return None

    def _list_item(self, tok: Token) -> bool:
        assert tok.span is not None
        text = self.read(tok.span.file)
        return style.block_item(text, tok.span) is not None or style.in_flow(text, tok.span)

    def _keyed(self) -> list[tuple[Token, str, Token | None]]:
        """Flags the sources read from YAML keys (production-stack `vllmConfig`, a vLLM
        `--config` file): (flag token on the key, the key as written, the value token)."""
        out: list[tuple[Token, str, Token | None]] = []
        argv = self.argv
        for i, t in enumerate(argv):
            if t.span is None or not t.text.startswith("-") or self.exact(t) or not self.readable(t.span.file):
                continue
            key = yaml_keys.yaml_key_at(self.read(t.span.file), t.span)
            if key is None:
                continue
            val = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].text.startswith("--") else None
            out.append((t, key, val))
        return out

    def keyed_value(self, tok: Token) -> bool:
        """Whether tok is the value of a YAML key (a scalar of its own, not a word of a command)."""
        return any(v is tok for _, _, v in self.keyed)

    def _after_last_key(self, tok: Token) -> bool:
        idx = {id(t): i for i, t in enumerate(self.argv)}
        last = max((idx[id(f)] for f, _, v in self.keyed), default=-1)
        last = max([last] + [idx[id(v)] for _, _, v in self.keyed if v is not None])
        return idx.get(id(tok), -1) > last and idx.get(id(tok), -1) > 2

    def flush_keys(self) -> None:
        """New settings of a values or config file go in as keys where the file keeps them:
        production-stack's `vllmConfig` keys (numbers stay numbers), other flags as `extraArgs`
        items; a vLLM `--config` file gets `max-num-seqs: 64` in its own key spelling."""
        from servefit.engines.vllm.charts import PRODSTACK_FLAGS

        if not self.pending_keys:
            return
        known = {flag.lstrip("-").replace("_", "-"): key for key, flag in PRODSTACK_FLAGS}
        sibs = [(f, k) for f, k, _ in self.keyed if f.span is not None and (not self.prodstack or k in known.values())]
        sibs.sort(key=lambda fk: fk[0].span.start if fk[0].span else 0)
        sib = sibs[-1][0] if sibs else None
        extra_args: list[list[str]] = []
        extra_owner: list[Placed] = []
        for p, long, value in self.pending_keys:
            if self.prodstack:
                # with no vllmConfig key to write beside, the flag goes in extraArgs, which the chart's
                # template appends as they are (deployment-vllm-multi.yaml: `range .extraArgs`)
                key = known.get(long[2:]) if sib is not None else None
                if key is None:
                    extra_args.append([long] if not value else [long, value])
                    extra_owner.append(p)
                    continue
            elif sib is not None and sib.span is not None:
                written = yaml_keys.yaml_key_at(self.read(sib.span.file), sib.span) or ""
                key = long[2:].replace("-", "_") if "_" in written else long[2:]
            else:
                key = None
            if sib is None or sib.span is None or key is None:
                p.applicability = DISPLAY
                continue
            s, e, t = yaml_keys.key_entry(self.read(sib.span.file), sib.span, key, value or "true")
            p.edits.append(Edit(self.span(sib.span.file, s, e), t))
        if not extra_args:
            return
        # items of an existing extraArgs list, else a new extraArgs key in vllmConfig
        self.pending_words = list(zip(extra_owner, extra_args, strict=True))
        if self.anchor() is not None:
            return
        self.pending_words = []
        if sib is None or sib.span is None:
            for p in extra_owner:
                p.applicability = DISPLAY
            return
        items = [f"- {style.yaml_quote(w, DQ_)}" for g in extra_args for w in g]
        s, e, t = yaml_keys.key_block(self.read(sib.span.file), sib.span, "extraArgs", items)
        extra_owner[0].edits.append(Edit(self.span(sib.span.file, s, e), t))
