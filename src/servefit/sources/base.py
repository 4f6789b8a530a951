"""What every wrapper shares: the file being read, its findings, files beside it, and turning
launches into named LaunchSites ."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from servefit.core import Finding, GpuHint, LaunchSite, Token
from servefit.sources.detect import models_on_request
from servefit.sources.launch import Ctx, Facts, Launch
from servefit.sources.site import to_site
from servefit.sources.text import LineIndex, Src

MAX_SIDE_FILE = 1 << 20
MODELFILE_WORD = re.compile(r"(?:^|/)(?:Modelfile[\w.-]*|[\w.-]+\.modelfile)$", re.I)


@dataclass
class FileCtx:
    """One file being scanned: its text and line index, and the servers and findings its wrapper collects."""

    path: str
    text: str
    li: LineIndex
    findings: list[Finding] = field(default_factory=list)
    sites: list[LaunchSite] = field(default_factory=list)
    ctxs: list[Ctx] = field(default_factory=list)

    @classmethod
    def of(cls, path: str, text: str) -> FileCtx:
        li = LineIndex(text, path)
        return cls(path, text, li)

    @property
    def src(self) -> Src:
        """The text to parse; a UTF-8 byte-order mark is left out (parsers would count it or choke
        on it) while offsets still point into the file as read."""
        if self.text.startswith("\ufeff"):
            return Src(self.text[1:], self.li, base=1)
        return Src(self.text, self.li)

    def ctx(self, exported_only: bool = False) -> Ctx:
        c = Ctx(self.path, self.li, self.findings, exported_only)
        self._last_ctx = c
        self.ctxs.append(c)
        return c

    def ctx_for(self, path: str, li: LineIndex | None) -> Ctx:
        """A context for words written in another file read with this one (a compose base under
        its overlay): lines and findings point there."""
        c = Ctx(path, li or self.li, self.findings)
        self._last_ctx = c
        self.ctxs.append(c)
        return c

    def finish(self) -> None:
        """`ollama create -f` / `ollama pull` in one container (an init job) of a file tell
        which model files and models the servers of the same file that load models on request use."""
        refs = [r for c in self.ctxs for r in c.modelfile_refs]
        models = [m for c in self.ctxs for m in c.ollama_models]
        created = list(dict.fromkeys(n for c in self.ctxs for n in c.created if not n.startswith("-")))
        for site in self.sites:
            if not models_on_request(site.engine):
                continue
            if len(created) == 1:  # one model built from a model file: its name is the file's evidence
                give_names([site], [(created[0], CREATED_NAME)])
            if refs and not site.inputs.file_refs:
                site.inputs.file_refs = list(dict.fromkeys(refs))
            if models and not site.inputs.pulled:
                site.inputs.pulled = first_of_each(models)

    def near(self, ref: str, up: int = 3) -> str | None:
        """A file a config refers to (`.env`, `EnvironmentFile=/etc/default/vllm`, `--config
        /cfg/x.yaml`), looked up beside this file and in its parents, by path then by name, but
        only inside the repository (the nearest directory holding .git, else the current
        directory when the file is in it, else the file's own directory): a file outside it is
        neither read nor, by tune, written, and a missing absolute path is never taken to be a
        same-named file above the repository."""
        if not ref or "$" in ref:
            return None
        base = os.path.dirname(self.path) or "."
        root = _repo_of(base)
        rel = ref.lstrip("/")
        cands = [os.path.join(base, ref) if not os.path.isabs(ref) else ref]
        d = base
        for _ in range(up + 1):
            cands.append(os.path.join(d, rel))
            cands.append(os.path.join(d, os.path.basename(ref)))
            parent = os.path.dirname(d)
            if parent == d or not parent or not _within(parent, root):
                break
            d = parent
        for c in cands:
            try:
                if _within(c, root) and os.path.isfile(c) and os.path.getsize(c) <= MAX_SIDE_FILE:
                    return c
            except OSError:
                continue
        return None

    def add(self, launches: list[Launch], name: str, gpu: GpuHint | None = None,
            facts: Facts | None = None, ollama_models: list[Token] | None = None) -> None:
        """Append one site per launch (a second server under the same name gets `#2`)."""
        for k, launch in enumerate(launches):
            site = to_site(launch, self.path, name if k == 0 else f"{name}#{k + 1}", gpu, facts)
            refs = modelfile_refs(site.argv, site.env)
            ctx = getattr(self, "_last_ctx", None)
            on_request = models_on_request(site.engine)
            if on_request and ctx is not None and ctx.modelfile_refs:
                refs = list(dict.fromkeys(refs + ctx.modelfile_refs))
            if refs:
                site.inputs.file_refs = refs
            if ollama_models and on_request:
                site.inputs.pulled = first_of_each(ollama_models)
                if ctx is not None:  # a model pulled by a variable: SF001 says it is not known, not a silent skip
                    site.unresolved_spans.extend(v for v in ctx.pulled_vars if v not in site.unresolved_spans)
            self.sites.append(site)


CREATED_NAME = "the name `ollama create` gives it"  # a Workload.names source: the model built from a Modelfile


def give_names(sites: list[LaunchSite], names: Sequence[tuple[str | None, str]]) -> None:
    """Record the names the file gives these servers (Workload.names: a llama-swap key, a compose
    service, a k8s object's name...), each once, in the order given."""
    for site in sites:
        have = {n for n, _ in site.workload.names}
        for name, where in names:
            n = (name or "").strip()
            if n and n not in have:
                have.add(n)
                site.workload.names.append((n, where))


def first_of_each(models: list[Token]) -> list[Token]:
    """The models in order, the first token of each name."""
    seen: dict[str, Token] = {}
    for t in models:
        seen.setdefault(t.text, t)
    return list(seen.values())


def _within(path: str, root: str) -> bool:
    p, r = os.path.realpath(path), os.path.realpath(root)
    return p == r or p.startswith(r.rstrip(os.sep) + os.sep)


def _repo_of(directory: str) -> str:
    d = os.path.abspath(directory)
    while True:
        if os.path.exists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    cwd = os.getcwd()
    return cwd if _within(directory, cwd) else os.path.abspath(directory)


def modelfile_refs(argv: list[Token], env: dict[str, Token]) -> list[str]:
    out = []
    for t in list(argv) + list(env.values()):
        for part in t.text.split():
            if MODELFILE_WORD.search(part):
                out.append(part)
    return list(dict.fromkeys(out))


def read_text(path: str, limit: int = MAX_SIDE_FILE) -> str | None:
    """A side file's text (env file, drop-in, engine config), or None: only regular files are
    opened (a FIFO or device reached through a repository never blocks), at most `limit` bytes."""
    from servefit import safe_io

    try:
        return safe_io.read_text(path, limit)
    except OSError:
        return None
