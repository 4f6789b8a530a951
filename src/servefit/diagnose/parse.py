"""Log lines -> failure events, one line at a time.

The scanner keeps only bounded state whatever the size of the log: the current engine run
(start-up progress, request counters, the last engine figures), the failure events with a
copy of that run state, and the function names of the last traceback. A line is searched
by a pattern's regex only when it contains one of the pattern's literal needles.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from servefit.diagnose import patterns as P
from servefit.diagnose.catalog import WORDS, catalog
from servefit.diagnose.collectors import unwrap
from servefit.diagnose.model import Event, Line, RunState
from servefit.diagnose.timestamps import Clock, duration
from servefit.diagnose.track import Tracker

CONTINUATION = 8  # a torch OOM message may wrap over this many following lines
MAX_EVENTS = 200
SUPPORT_WINDOW = 40
_FRAME = re.compile(r'File "[^"]+", line \d+, in (\w+)')
_TS_HINT = re.compile(r"\d\d:\d\d:\d\d|^\[\s*\d+\.\d+\]|^\d+\.\d\d\.\d{3}\.\d{3} ")
HINT_LINES = 5000  # engine hints are looked for in the first lines and in every matched line
TRACEBACK_SPAN = 400  # an exception line this close after "Traceback" ends that traceback
_EXCEPTION_PATTERN = P.Pattern("python.exception", None, "error", (), P.EXCEPTION)


@dataclass
class ScanResult:
    """What one pass over a log found: the failure events, the engines its lines point to, and the state of
    the last engine run."""

    events: list[Event] = field(default_factory=list)
    engines: list[str] = field(default_factory=list)  # hinted engines, in hint order
    lines: int = 0
    oom_events: int = 0
    last_state: RunState = field(default_factory=RunState)
    errors: list[Event] = field(default_factory=list)  # failures that are not OOMs


class Scanner(Tracker):
    """Feed it lines; `result()` gives the failure events."""

    def __init__(self) -> None:
        self.cat = catalog()
        self.clock = Clock()
        self._ts_text: str | None = None  # the latest line with a timestamp, parsed lazily
        self._ts_parsed_text: str | None = None
        self._ts_value: tuple[str, float] | None = None
        self._run_ts_text: str | None = None  # the first line with a timestamp in this run
        self.state = RunState()
        self.events: list[Event] = []
        self.errors: list[Event] = []  # failures that are not OOMs
        self.dropped = 0
        self.hints: set[str] = set()
        self.n = 0
        self._text = self._shown = ""
        self.frames: deque[str] = deque(maxlen=64)
        self.traceback_line = 0
        self.traceback_open = False
        self.frame_line = 0  # the last traceback frame (logs that print frames without the header)
        self.stage_pending: Event | None = None  # a torch OOM whose traceback may follow it
        self.stage_said: tuple[int, str] | None = None  # (line, stage) a support line named before any failure
        self.open_event: Event | None = None
        self.open_until = 0
        self.last_by_family: dict[str, Event] = {}
        self.block: list[tuple[int, str]] | None = None  # TGI prints `Args {` pretty-printed over many lines
        self.block_start: Line | None = None

    # -- per line -------------------------------------------------------------------------------
    def feed(self, raw: str) -> None:
        self.n += 1
        n = self.n
        if _TS_HINT.search(raw, 0, 100):  # the collector's time, when the engine printed none
            self._ts_text = raw
            if self._run_ts_text is None:
                self._run_ts_text = raw
        text = unwrap(raw)
        self._text, self._shown = text, raw
        if "Traceback (most recent call last)" in text:
            self.frames.clear()
            self.traceback_line = n
            self.traceback_open = True
        elif 'File "' in text:
            m = _FRAME.search(text)
            if m:
                self.frames.append(m.group(1))
                self.frame_line = n
                pending = self.stage_pending
                if pending is not None and n - pending.line.number <= TRACEBACK_SPAN:
                    pending.stage = self._frame_stage(pending)  # the traceback printed after the OOM message
                    if pending.stage:
                        self.stage_pending = None
        if self.block is not None:
            self._block(n, text)
        if self.open_event is not None:
            if n <= self.open_until:
                self._continue(self.open_event, n, text)
            else:
                self.open_event = None
        matched: list[tuple[P.Pattern, re.Match[str]]] = []
        cat = self.cat
        for word in cat.keywords.intersection(text.encode("utf-8", "replace").translate(WORDS).split()):
            for needle, pats in cat.keyword_needles[word]:
                if needle in text:
                    for pat in pats:
                        m = pat.regex.search(text)
                        if m:
                            matched.append((pat, m))
        if n <= HINT_LINES or (matched and matched[0][0].kind == "fatal"):
            self._hint(text)
        if matched:
            self._handle(n, text, matched)
        if ("Error" in text or "Exception" in text) and not any(p.kind == "fatal" for p, _ in matched):
            if self.traceback_open:
                self._exception(n, text, matched)
            else:
                self._loose_exception(n, text)

    def _hint(self, text: str) -> None:
        hints = self.cat.hints
        if len(self.hints) < len(hints):
            for eng, needles in hints:
                if eng not in self.hints and any(nd in text for nd in needles):
                    self.hints.add(eng)

    def _handle(self, n: int, text: str, matched: list[tuple[P.Pattern, re.Match[str]]]) -> None:
        if len(matched) == 1:  # the common case: one request or metric line
            pat, m = matched[0]
            if pat.kind == "request":
                self._request(n, text, matched)
            elif pat.kind == "fatal":
                self._fatal(n, text, matched)
            elif pat.kind == "error":
                self._error(n, text, pat, m)
            else:
                self._one(n, text, pat, m)
            return
        unique: dict[str, tuple[P.Pattern, re.Match[str]]] = {}
        for pm in matched:  # a pattern listed under two needles matches twice
            unique.setdefault(pm[0].name, pm)
        matched = list(unique.values())
        fatal = [(p, m) for p, m in matched if p.kind == "fatal"]
        if fatal:
            self._fatal(n, text, fatal)
        else:  # an error line that is also an OOM line is the OOM
            for pat, m in matched:
                if pat.kind == "error":
                    self._error(n, text, pat, m)
                    break
        requests = [(p, m) for p, m in matched if p.kind == "request"]
        if requests:
            self._request(n, text, requests)
        matched.sort(key=lambda pm: pm[0].kind != "start")
        for pat, m in matched:
            if pat.kind not in ("fatal", "request", "error"):
                self._one(n, text, pat, m)

    def _one(self, n: int, text: str, pat: P.Pattern, m: re.Match[str]) -> None:
        kind = pat.kind
        if kind == "metric":
            self._metric(n, text, m)
        elif kind == "support":
            self._support(n, text, pat, m)
        elif kind == "recovered":
            self._recovered(n, text, pat)
        elif kind == "start":
            self._start(n, text, pat, m)
        elif kind == "config":
            self._config(n, text, pat)
        elif kind == "loading":
            if m.groupdict().get("pct__n") == "100":
                self.state.weights_loaded = self.state.weights_loaded or self._line(n, text)
            else:
                self.state.loading = self._line(n, text)
                self._interrupted_load(n)
        elif kind == "phase":
            self._phase(pat.phase, pat, m)
        else:
            self._progress(n, text, pat, m)

    def _interrupted_load(self, n: int) -> None:
        """A checkpoint-shard bar under 100% printed just after a torch OOM that no frame placed: the
        bar is tqdm's, drawn once more when the exception closes it (vLLM model_loader/weight_utils.py::
        safetensors_weights_iterator, transformers' "Loading checkpoint shards"), so the OOM stopped the
        weights loading mid-way."""
        pending = self.stage_pending
        if pending is not None and n - pending.line.number <= SUPPORT_WINDOW and pending.state.weights_loaded is None:
            pending.stage = "load"
            self.stage_pending = None

    # -- failures -------------------------------------------------------------------------------
    def _fatal(self, n: int, text: str, fatal: list[tuple[P.Pattern, re.Match[str]]]) -> None:
        fatal.sort(key=lambda pm: -pm[0].rank)
        pat = fatal[0][0]
        figs: dict[str, Any] = {}
        for _, m in fatal:
            for k, v in P.figures_of(m).items():
                figs.setdefault(k, v)
        family = pat.family
        line = self._line(n, text)
        body = text[fatal[0][1].start():].strip().rstrip("\"')]} ")
        for ev in reversed(self.events[-8:]):
            if ev.pattern == pat.name and n - ev.line.number < 400 and ev.body == body and ev.recovered is None:
                ev.repeats += 1  # the same message again (vLLM and TGI print tracebacks twice)
                return
        prev = self.last_by_family.get(family)
        window = self.cat.merge_window.get(family)
        if prev is not None and window and n - prev.line.number <= window:
            self._merge(prev, line, figs, [p for p, _ in fatal], text)
            return
        if len(self.events) >= MAX_EVENTS:
            self.dropped += 1
            return
        self._run_start_time()
        ev = Event(line=line, pattern=pat.name, engine=pat.engine, rank=pat.rank, figures=figs, time=self._now(),
                   state=self.state.copy(), body=body)
        if family == "torch":
            self._continue(ev, n, text)
            self.open_event, self.open_until = ev, n + CONTINUATION
            if max(self.traceback_line, self.frame_line) and n - max(self.traceback_line, self.frame_line) < TRACEBACK_SPAN:
                ev.stage = self._frame_stage(ev)
            ev.stage = ev.stage or self._stage_of([], text)
            said = self.stage_said  # "Exception in worker ... while processing method load_model.", then the OOM
            if not ev.stage and said is not None and n - said[0] < TRACEBACK_SPAN:
                ev.stage = said[1]
            self.stage_pending = None if ev.stage else ev
        else:
            ev.stage = self._stage_of([pat], text)
            ev.stage_named = bool(pat.stage)
        self.events.append(ev)
        self.last_by_family[family] = ev

    def _merge(self, ev: Event, line: Line, figs: dict[str, Any], pats: list[P.Pattern], text: str) -> None:
        ev.extra_lines.append(line)
        for k, v in figs.items():
            ev.figures.setdefault(k, v)
        ev.rank = max(ev.rank, pats[0].rank)
        named = next((p.stage for p in pats if p.stage), "")
        if named and not ev.stage_named:  # a line that names its stage outranks words guessed from
            ev.stage, ev.stage_named = named, True
        elif not ev.stage:
            ev.stage = self._stage_of(pats, text)

    def _frame_stage(self, ev: Event) -> str:
        """The most specific stage the last traceback's frames name (a graph capture runs forward
        passes, a profiling run too); the innermost frame that names it is kept as the `failed_in`
        figure (the engine function that ran out, which the fixes may need: vLLM profiles its graphs
        before sizing the KV cache, and captures them after)."""
        frames = self.cat.frames
        stages = {frames[f] for f in self.frames if f in frames}
        stage = next((st for st in P.STAGE_ORDER if st in stages), "")
        if stage:
            ev.figures["failed_in"] = next(f for f in reversed(self.frames) if frames.get(f) == stage)
        return stage

    def _stage_of(self, pats: list[P.Pattern], text: str) -> str:
        for pat in pats:
            if pat.stage:
                return pat.stage
        for needle, stage in self.cat.stage_text:
            if needle in text:
                return stage
        return ""

    def _exception(self, n: int, text: str, matched: list[tuple[P.Pattern, re.Match[str]]]) -> None:
        """The exception line that ends an open traceback: an error unless the line is an OOM."""
        if n - self.traceback_line > TRACEBACK_SPAN:
            self.traceback_open = False
            return
        m = P.EXCEPTION.search(text)
        if m is None:
            return
        self.traceback_open = False
        if not any(p.kind == "fatal" for p, _ in matched):
            self._error(n, text, _EXCEPTION_PATTERN, m)

    def _loose_exception(self, n: int, text: str) -> None:
        """An exception line with no "Traceback" header before it: the last frame was just printed (an
        excerpt, or a worker's traceback cut by its prefix), the line starts with it (Python prints the
        exception last, at the start of the line), or an ERROR log line says it
        ("ERROR 10-16 registry.py:264] ImportError: ..."). Once the server is serving, such a line is one
        request's error (a prompt too long, a bad parameter) that the server answered and went on from."""
        m = P.EXCEPTION.search(text)
        if m is None or self.state.serving is not None:
            return
        before = text[:m.start()].rstrip()
        after_frame = self.frame_line and n - self.frame_line <= 3
        if after_frame or not before or before.endswith("|") or ("ERROR" in before and before.endswith(("]", ":"))):
            self._error(n, text, _EXCEPTION_PATTERN, m)

    def _error(self, n: int, text: str, pat: P.Pattern, m: re.Match[str]) -> None:
        """A failure that is not an out-of-memory one (a missing file, an unknown architecture, an
        engine crash): kept apart, it only matters when the log has no OOM."""
        line = self._line(n, text)
        if len(self.errors) < MAX_EVENTS:
            self.errors.append(Event(line=line, pattern=pat.name, engine=pat.engine, rank=0,
                                     figures=P.figures_of(m), time=self._now(), state=self.state.copy()))

    def _continue(self, ev: Event, n: int, text: str) -> None:
        found = False
        for rx in P.TORCH_FIGURES:
            m = rx.search(text)
            if m:
                for k, v in P.figures_of(m).items():
                    if k not in ev.figures:
                        ev.figures[k] = v
                        found = True
        procs = P.TORCH_PROCESS.findall(text)
        if procs:
            seen = ev.processes
            for pid, sz in procs:
                seen[pid] = P.size(sz) or 0
            ev.figures["gpu_processes"] = len(seen)
            ev.figures["process_in_use"] = sum(seen.values())
            found = True
        if found and n != ev.line.number:
            ev.extra_lines.append(self._line(n, text))

    def _support(self, n: int, text: str, pat: P.Pattern, m: re.Match[str]) -> None:
        target = self.events[-1] if self.events else None
        last = max([target.line.number] + [x.number for x in target.extra_lines]) if target is not None else 0
        if target is None or n - last > max(SUPPORT_WINDOW, self.cat.merge_window.get(pat.family, 0)):
            stage = self._stage_of([pat], text)  # a line that names the step a failure below will belong to
            if stage:
                self.stage_said = (n, stage)
            return
        figs = P.figures_of(m)
        if pat.name in ("k8s.started", "k8s.finished"):
            if target.pattern != "k8s.oomkilled":
                return
            ts = self.clock.parse(m.group(1))
            if ts is None:
                return
            if pat.name == "k8s.started":
                target.k8s_started = ts
            else:
                target.k8s_finished = ts
            figs = {}
            up = duration(target.k8s_started, target.k8s_finished)
            if up is not None:
                target.figures["uptime_seconds"] = int(up)
        if figs and all(k in target.figures for k in figs):
            return  # nothing new (kubectl describe lists memory under Limits and Requests)
        if n != target.line.number and all(x.number != n for x in target.extra_lines):
            target.extra_lines.append(self._line(n, text))
        for k, v in figs.items():
            target.figures.setdefault(k, v)
        stage = self._stage_of([pat], text)
        if stage and not target.stage:
            target.stage = stage

    def _recovered(self, n: int, text: str, pat: P.Pattern) -> None:
        """The engine says it retried the allocation that just failed in another way (llama.cpp:
        without pipeline parallelism) and went on: that failure stopped nothing. A failure after
        this line is a new one, not more lines of the old."""
        prev = self.last_by_family.get(pat.family)
        window = max(SUPPORT_WINDOW, self.cat.merge_window.get(pat.family, 0))
        if prev is None or prev.recovered is not None or n - prev.line.number > window:
            return
        if pat.recovers and prev.pattern not in pat.recovers:  # it undoes only the failures it names
            return
        prev.recovered = self._line(n, text)
        prev.recovered_how = pat.means or prev.recovered_how
        del self.last_by_family[pat.family]
        for key in pat.clears:  # what the retry runs without
            self.state.info.pop(key, None)
            self.state.info_lines.pop(key, None)

    # -- start-up progress ----------------------------------------------------------------------
    def result(self) -> ScanResult:
        engines = [eng for eng, _ in self.cat.hints if eng in self.hints]
        return ScanResult(events=self.events, engines=engines, lines=self.n,
                          oom_events=len(self.events) + self.dropped, last_state=self.state, errors=self.errors)
