"""One `servefit tune` invocation: find the servers, tune each, turn the answers into patches,
then show (`--diff`) and write (`--write`) them. Files with several servers get one patch each
per server, merged per file; a server whose patch is not applicable (unsafe without --unsafe,
or display-only) leaves its part of the file as it is."""

from __future__ import annotations

import argparse
import os
import shlex
from dataclasses import dataclass, field, replace
from typing import Any

from servefit.core import LaunchSite, Token, UsageError
from servefit.tune.objective import Needs
from servefit.tune.patch import (
    DISPLAY,
    SAFE,
    UNSAFE,
    Patch,
    apply_edits,
    by_file,
    make_patch,
    reader,
    settings_changes,
)
from servefit.tune.study import TuneRun

VIRTUAL = "<command line>"


@dataclass
class SiteTune:
    """The outcome of tuning one server: the search, the patch, whether it was applied or why it was held
    back, and a better unsafe choice when there is one."""

    site: LaunchSite
    run: TuneRun | None = None
    patch: Patch | None = None
    error: str | None = None
    applied: bool = False
    held_back: str = ""  # why the patch is not applied
    chosen: Any = None  # the candidate the patch writes (the best one, or the best safe one)
    unsafe_best: Any = None  # a better candidate that needs --unsafe, when one exists
    unsafe_command: str = ""  # the command that applies it
    beside: str = ""  # the servers that run beside it on the same GPU (llama-swap swap: false) and the room left


@dataclass
class FileChange:
    """A file's text before and after tune's patches, and whether it was written or why not."""

    path: str
    old: str
    new: str
    written: bool = False
    refused: str = ""


@dataclass
class Session:
    """One `servefit tune` run: the servers tuned, the file changes, and the target flags and needs that apply
    to all of them."""

    args: argparse.Namespace
    needs: Needs
    target: Any  # sources.target.Flags: the command line's GPU / model / version flags
    tunes: list[SiteTune] = field(default_factory=list)
    files: list[FileChange] = field(default_factory=list)
    command: str | None = None  # the tuned command line (`-- COMMAND` mode)
    preloaded: dict[str, str] = field(default_factory=dict)
    named: list[str] = field(default_factory=list)  # the files the user named: writable wherever they are
    held: dict[str, int] = field(default_factory=dict)  # bytes each server holds on its GPU: now, or as tuned
    written: dict[str, int] = field(default_factory=dict)  # bytes each server holds as written
    shares: dict[str, Any] = field(default_factory=dict)  # tune.split.Share of servers that split a GPU
    no_split: dict[str, str] = field(default_factory=dict)  # why a shared GPU is not split, by Together name

    def run(self, words: list[str]) -> None:
        """Tune every server the shared assembly finds in the files (or the command after `--`),
        so tune sees the same servers, links, configuration and target as lint and estimate."""
        from servefit.sources.assemble import assemble_named, assemble_sites
        from servefit.sources.detect import find_engine

        # files and directories, as estimate takes them; a file named like a program in the current
        # directory (`docker`, `python`) is still a command when the words after it are not paths
        if all(os.path.exists(w) for w in words) and find_engine(words) is None:
            self.read = reader()
            self.named = list(words)
            asm = assemble_named(words, self.target)
            asm.warn_ignored_directives()
            for srv in asm.servers:
                p = srv.plan
                if p is not None and p.outcome == "started":
                    self.held[srv.site.name] = p.memory.total - p.memory.free_headroom
            self.written = dict(self.held)
            self.split(asm.servers)
            for srv in asm.servers:  # together, as lint and estimate do
                self.tunes.append(self.tune_server(srv))
            self.unsplit(asm.servers)
        else:
            text, site = command_site(words)
            self.preloaded[VIRTUAL] = text
            self.read = reader(self.preloaded)
            self.tunes.append(self.tune_server(assemble_sites([site], self.target).servers[0]))
        self.finish()

    def tune_server(self, srv: Any) -> SiteTune:
        """Tune one assembled server (sources.server_build.Server) from its plan."""
        from servefit.tune import study
        from servefit.tune.space import build_space

        site = srv.site
        out = SiteTune(site=site)
        try:
            ev = srv.evaluation
            if ev is None:
                raise UsageError(srv.error or "this server could not be planned")
            from servefit.commands.estimate import input_error

            bad = input_error(ev)  # the engine refuses the command itself: no memory setting changes that
            if bad:
                raise UsageError(f"{bad}: the engine refuses this command; fix it first, then tune")
            room = self.room(srv, out)
            # beside servers that run at once on its GPU, the share of the GPU's memory left to it: the memory
            # fraction (vLLM's gpu_memory_utilization, TGI's cuda_memory_fraction ...) that leaves them room
            share = room / ev.gpu.memory_bytes if room is not None and ev.gpu.memory_bytes else None
            if site.name in self.shares:  # the GPU split between servers whose fractions add past it
                share = self.shares[site.name].fraction
            elif share is not None:
                share = kept_fraction(ev, share)
            needs = replace(self.needs, target_context=int(ev.plan.max_model_len or 0), share=share)
            space = build_space(ev, needs)
        except UsageError as exc:
            from servefit.redact import mask_values, redact_text, site_secret_values

            # the engine's words may quote a credential the command holds
            out.error = mask_values(redact_text(str(exc)), site_secret_values([site]))
            return out
        a = self.args
        bench = None
        if a.bench_cmd:
            from servefit.tune.bench import Bench

            bench = Bench(a.bench_cmd, space, a.bench_metric, a.bench_goal, a.bench_timeout)
        storage = a.storage or ("sqlite:///servefit-tune.db" if bench is not None else None)
        name = a.study
        if name and len(self.tunes) > 0:
            name = f"{name}/{site.name}"
        out.run = study.run(space, needs, strategy=a.sampler, trials=a.trials, storage=storage, study_name=name,
                            seed=a.seed, bench=bench)
        b = out.run.best
        if room is not None and b is not None and b.feasible and b.used > room:
            # a llama-swap group with swap: false runs its members at once: the best candidate that
            # fits in what the others hold
            from servefit.tune.objective import best as pick

            b = pick([r for r in out.run.results if r.feasible and r.used <= room],
                     out.run.needs.objective, needs.min_context or needs.target_context)
        out.chosen = b
        if b is not None and b.feasible and b.changes and not a.unsafe and unsafe_point(space, b.point):
            # --allow opened a lossy change of checkpoint or quantization, which is written only
            # with --unsafe: apply the best candidate that stays within safe edits instead
            from servefit.tune.objective import best as pick

            safe = [r for r in out.run.results if r.feasible and not unsafe_point(space, r.point)
                    and (room is None or r.used <= room)]
            objective = out.run.needs.objective if bench is None else ("measured",) + tuple(out.run.needs.objective)
            sb = pick(safe, objective, needs.min_context or needs.target_context)
            out.unsafe_best = b
            out.unsafe_command = unsafe_command(self.args)
            if sb is not None and sb.changes:
                out.chosen = b = sb
        if b is not None and b.feasible and (b.changes or settings_changes(space, b.point)):
            # a setting the adapter writes at the file's own point (vLLM's --max-model-len, VLLM018)
            out.patch = make_patch(space, b.point, self.read)
        if b is not None and b.feasible and room is not None:
            self.held[site.name] = b.used
        return out

    def split(self, servers: list[Any]) -> None:
        """Servers that run at once on one GPU whose memory, as written, adds past it: the share of the GPU
        each is tuned to (tune.split), which the others are counted at until they are tuned."""
        from servefit.tune.split import split

        groups: dict[tuple[str, str], list[Any]] = {}
        for srv in servers:
            t = srv.site.workload.together
            if t is not None:
                groups.setdefault((srv.site.file, t.name), []).append(srv)
        for members in groups.values():
            shares, why = split(members, self.needs)
            if why:
                self.no_split[members[0].site.workload.together.name] = why
            self.shares.update(shares)
            self.held.update({m: sh.share for m, sh in shares.items()})

    def unsplit(self, servers: list[Any]) -> None:
        """A split holds only when every server of it takes its share: where one cannot (nothing meets its needs
        in it, or its change cannot be written), its servers are tuned again beside the others as written."""
        by_name = {t.site.name: i for i, t in enumerate(self.tunes)}
        void: dict[str, str] = {}
        for srv in servers:
            why = self.takes_share(self.tunes[by_name[srv.site.name]]) if srv.site.name in self.shares else ""
            if why:
                void.setdefault(srv.site.workload.together.name, f"'{srv.site.name.split('/', 1)[-1]}' {why}")
        again = [srv for srv in servers if srv.site.workload.together is not None
                 and srv.site.workload.together.name in void and srv.site.name in self.shares]
        for srv in again:
            del self.shares[srv.site.name]
            self.held[srv.site.name] = self.written[srv.site.name]
        self.no_split.update(void)
        for srv in again:
            self.tunes[by_name[srv.site.name]] = self.tune_server(srv)

    def takes_share(self, t: SiteTune) -> str:
        """Why the file, once written, does not give the server its share ("" when it does: a feasible answer,
        written or already so)."""
        b = t.chosen
        if t.error or b is None or not b.feasible:
            return "has nothing that meets the needs in its share"
        if t.patch is None or t.patch.applicability == SAFE:
            return ""
        if t.patch.applicability == UNSAFE:
            return "" if self.args.unsafe else "takes its share only with --unsafe"
        return "cannot take its share: its change cannot be placed in the file"

    def room(self, srv: Any, out: SiteTune) -> int | None:
        """The bytes this server may hold when the servers it runs beside (a llama-swap group with
        swap: false, compose services on the same device_ids) hold theirs: as tuned for those tuned before it, as written for the others."""
        t = srv.site.workload.together
        ev = srv.evaluation
        if t is None or ev is None:
            return None
        others = [(m, self.held[m]) for m in t.members if m != srv.site.name and m in self.held]
        if not others:
            return None
        room = ev.gpu.memory_bytes - sum(h for _, h in others)
        held = ", ".join(f"'{m.split('/', 1)[-1]}' {h / 2**30:.2f} GiB" for m, h in others)
        now = self.written.get(srv.site.name)
        over = (f"; as written it holds {now / 2**30:.2f} GiB, more than that" if now is not None and now > room
                else "")
        sh = self.shares.get(srv.site.name)
        if t.name in self.no_split:
            over += f"; the GPU is not split: {self.no_split[t.name]}"
        if sh is not None:
            over += (f"; their memory adds past the GPU, so it is split: this server needs {sh.need / 2**30:.2f} GiB "
                     f"(all but its KV cache, and the KV cache of {max(self.needs.min_concurrency, 1)} request(s) "
                     f"of its context), the rest is shared in proportion to need: {sh.share / 2**30:.2f} GiB, "
                     f"fraction {sh.fraction:.2f}{sh.note}")
        out.beside = (f"{t.name} {t.how}: beside {held}, this server has "
                      f"{max(room, 0) / 2**30:.2f} GiB of the {ev.gpu.memory_bytes / 2**30:.2f} GiB{over}")
        return room

    def finish(self) -> None:
        edits: dict[str, list[Any]] = {}
        for t in self.tunes:
            if t.patch is None:
                continue
            app = t.patch.applicability
            if app == DISPLAY:
                t.held_back = "some changes cannot be placed in the file: make them by hand (shown below)"
                continue
            if app == UNSAFE and not self.args.unsafe:
                t.held_back = "only candidates that change the checkpoint or its quantization (unsafe) beat " \
                    "the current config; apply this one with: " + (t.unsafe_command or "--unsafe")
                continue
            t.applied = True
            for path, es in by_file(t.patch.edits).items():
                edits.setdefault(path, []).extend(es)
        for path, es in edits.items():
            old = self.read(path)
            try:
                new = apply_edits(old, es)
            except ValueError as exc:
                self.files.append(FileChange(path, old, old, refused=str(exc)))
                continue
            self.files.append(FileChange(path, old, new))
        if VIRTUAL in self.preloaded:
            fc = next((f for f in self.files if f.path == VIRTUAL), None)
            self.command = fc.new if fc is not None else self.preloaded[VIRTUAL]
            self.files = [f for f in self.files if f.path != VIRTUAL]
        if self.args.write:
            self.write()

    def write(self) -> None:
        """All files or none; when a write fails part-way, each file says whether it was written."""
        from servefit.tune.write import repo_root, write_all

        todo = [fc for fc in self.files if not fc.refused and fc.new != fc.old]
        if not todo:
            return
        named = tuple(p for p in self.named if not os.path.isdir(p))
        # a named directory is a root of its own: what it holds may be written, wherever it is
        roots = tuple(dict.fromkeys([repo_root(p) for p in named]
                                    + [os.path.abspath(p) for p in self.named if os.path.isdir(p)])) or None
        written, refused = write_all([(fc.path, fc.new, fc.old) for fc in todo], roots, named)
        for fc in todo:
            fc.written = fc.path in written
            fc.refused = refused.get(fc.path, "")

    def diffs(self) -> str:
        from servefit.redact import site_secret_values
        from servefit.tune.diff import unified

        secrets = site_secret_values([t.site for t in self.tunes])
        return "".join(unified(f.path, f.old, f.new, secrets) for f in self.files)

    def exit_code(self) -> int:
        if any(t.error for t in self.tunes) and not any(t.run for t in self.tunes):
            return 2
        if any(f.written for f in self.files) and any(f.refused for f in self.files):
            return 2  # part of the change is written: the output lists which files
        if any(f.refused for f in self.files):
            return 1
        if any(t.run is None or t.run.best is None or not t.run.best.feasible for t in self.tunes):
            return 1
        if any(t.held_back for t in self.tunes):  # a better config exists and nothing applied it
            return 1
        return 0

    def text(self) -> str:
        from servefit.report.tune import render_session

        return render_session(self)

    def as_json(self) -> Any:
        from servefit.report.tune import session_dict

        return session_dict(self)


def kept_fraction(ev: Any, share: float) -> float:
    """Beside servers that fit with it on its GPU, a memory fraction the file sets is not raised into the room
    they leave (what a split left over: a second tune writes nothing), only lowered where the room is less."""
    from servefit.tune.split import fraction_name

    name = fraction_name(ev.config.engine)
    if not name or name not in ev.config.explicit or ev.config.settings.get(name) is None:
        return share
    return min(share, float(ev.config.settings[name]))


def unsafe_point(space: Any, point: dict[str, Any]) -> bool:
    """Whether a candidate changes the checkpoint or its quantization (an unsafe edit)."""
    from servefit.tune.space import WEIGHTS

    var = space.variants.get(point.get(WEIGHTS, "none"))
    return var is not None and bool(var.changes_checkpoint) and point.get(WEIGHTS) != space.current().get(WEIGHTS)


def unsafe_command(args: argparse.Namespace) -> str:
    """The user's own tune command with --unsafe (and --write) added."""
    argv = list(getattr(args, "argv", None) or [])
    if not argv:
        return "servefit tune ... --unsafe --write"
    extra = [w for w in ("--unsafe", "--write") if w not in argv]
    if "--" in argv:
        i = argv.index("--")
        argv = argv[:i] + [w for w in extra if w != "--write"] + argv[i:]
    else:
        argv = argv + extra
    from servefit.redact import redact_text

    return redact_text("servefit " + shlex.join(argv))


def command_site(words: list[str]) -> tuple[str, LaunchSite]:
    """A command typed after `--` as a one-line text with a span for every word, so the same
    patcher that edits files rewrites it."""
    from servefit.sources.text import LineIndex

    parts: list[str] = []
    spans: list[tuple[int, int] | None] = []
    pos = 0
    for w in words:
        q = shlex.quote(w)
        if parts:
            pos += 1
        if q == w:
            spans.append((pos, pos + len(w)))
        elif q == f"'{w}'":
            spans.append((pos + 1, pos + 1 + len(w)))
        else:
            spans.append(None)
        parts.append(q)
        pos += len(q)
    text = " ".join(parts)
    li = LineIndex(text, VIRTUAL)
    toks = [Token(w, li.span(*s) if s else None) for w, s in zip(words, spans, strict=True)]
    return text, LaunchSite(file=VIRTUAL, line=1, argv=toks, name="command line")


__all__ = ["SAFE", "Session", "SiteTune", "command_site"]
