"""The shapes `diagnose` passes between its stages: matched log lines (events), the state of
one engine run at the moment something failed, and the diagnosis itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ROOT_CAUSES = ("kv_cache_overflow", "batch_misconfiguration", "fragmentation", "model_too_large", "profiling_peak",
               "cuda_graph_capture", "not_oom", "killed", "recovered", "none")
# the stage that ran out of memory (catalog.py, wording.STAGE_TEXT); "" when the log does not say
STAGES = ("load", "profile", "compile", "sampler", "kv_alloc", "compute", "graphs", "prefill", "decode", "serving", "")

# How long after start-up / how much uptime makes the timing classes.
FIRST_BATCH_REQUESTS = 8  # an OOM within the first few requests after "startup complete"
FIRST_BATCH_SECONDS = 300.0
LONG_UPTIME_SECONDS = 3600.0  # "after hours of uptime"
MANY_REQUESTS = 1000
LONG_PROMPT_TOKENS = 32768  # a prompt this long is a "long request"


@dataclass
class Line:
    """A log line worth keeping as evidence (1-based line number, text without newline)."""

    number: int
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.number, "text": self.text}


@dataclass
class RunState:
    """What one engine run (from its last start marker) had done when a failure was seen.
    Small and bounded: a multi-GB log keeps only counters, extremes and a few lines."""

    start: Line | None = None
    start_time: tuple[str, float] | None = None
    loading: Line | None = None  # the last "Loading checkpoint shards: N%" line
    weights_loaded: Line | None = None
    kv_ready: Line | None = None
    serving: Line | None = None
    serving_time: tuple[str, float] | None = None
    phase: str = ""  # the start-up phase a pattern marks (`phase` in the logs tables): load | context | compute |
    # graphs | graphs_done | serving
    requests: int = 0  # requests seen since `serving` (or since start when no marker)
    request_counts: dict[str, int] = field(default_factory=dict)  # per request-line kind; requests = max
    first_request: Line | None = None
    max_prompt: int = 0
    max_prompt_line: Line | None = None
    recent_prompts: list[tuple[int, Line]] = field(default_factory=list)  # the last few, newest last
    max_running: int = 0
    max_running_line: Line | None = None
    kv_usage_first: float | None = None
    kv_usage_max: float | None = None
    info: dict[str, Any] = field(default_factory=dict)  # engine figures, last value wins
    info_lines: dict[str, Line] = field(default_factory=dict)  # figure -> line it came from
    settings: dict[str, Any] = field(default_factory=dict)  # engine settings the log printed
    settings_lines: dict[str, Line] = field(default_factory=dict)  # setting -> first line that printed it
    names: set[str] = field(default_factory=set)  # the settings' names as the log printed them (before aliases)
    gpu_name: str | None = None

    def copy(self) -> RunState:
        out = RunState(**{k: getattr(self, k) for k in self.__dataclass_fields__})
        out.info = dict(self.info)
        out.info_lines = dict(self.info_lines)
        out.settings = dict(self.settings)
        out.settings_lines = dict(self.settings_lines)
        out.names = set(self.names)
        out.request_counts = dict(self.request_counts)
        out.recent_prompts = list(self.recent_prompts)
        return out


@dataclass
class Event:
    """A failure line (an OOM or a refusal) with its figures and the run state at that moment."""

    line: Line
    pattern: str  # e.g. "vllm.kv_refusal", "torch.oom"
    engine: str | None
    rank: int  # specificity: a higher rank explains the failure better
    figures: dict[str, Any] = field(default_factory=dict)
    time: tuple[str, float] | None = None
    extra_lines: list[Line] = field(default_factory=list)  # wrapped continuation lines
    stage: str = ""  # from the traceback frames or the failure's lines: one of STAGES
    state: RunState = field(default_factory=RunState)
    repeats: int = 0
    recovered: Line | None = None  # the engine's line saying it retried another way and went on (no failure)
    recovered_how: str = "said it retried another way"  # what that line says the engine did instead
    # parser bookkeeping
    body: str | None = None  # the failure message, to spot the same message printed again
    stage_named: bool = False  # the stage comes from a line that names it (outranks guessed words)
    processes: dict[str, int] = field(default_factory=dict)  # pid -> bytes, from torch's per-process list
    k8s_started: tuple[str, float] | None = None  # `kubectl describe` Started / Finished times
    k8s_finished: tuple[str, float] | None = None


@dataclass
class Setting:
    """The config setting a fix changes, and where it is written (when known)."""

    name: str
    flag: str
    value: str | None = None
    file: str | None = None
    line: int | None = None
    col: int | None = None
    explicit: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "flag": self.flag, "value": self.value, "file": self.file,
                "line": self.line, "col": self.col, "explicit": self.explicit}


@dataclass
class Diagnosis:
    """What diagnose concluded from a log: the cause, the lines that show it, when and at which step memory
    ran out, and the setting to change."""

    root_cause: str = "none"
    engine: str | None = None
    evidence: list[Line] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    fix: list[str] = field(default_factory=list)
    timing: str = "unknown"  # load | startup | first_batch | long_request | after_uptime | serving | unknown
    timing_text: str = ""
    stage: str = ""  # the step that ran out of memory (STAGES): start-up profiling, graph capture, a decode step...
    stage_text: str = ""  # that step as the engine calls it
    summary: str = "no OOM signature found"
    signature: str | None = None  # the pattern that decided, e.g. "vllm.kv_refusal"
    confidence: str = "none"  # high | medium | low | none
    settings_in_log: dict[str, Any] = field(default_factory=dict)
    names_in_log: frozenset[str] = frozenset()  # the settings' names as the log printed them (a release's spelling)
    setting: Setting | None = None
    server: dict[str, Any] | None = None  # the server of --repo / --config-file the log was matched to
    tune: str | None = None
    source: str = "-"
    lines_read: int = 0
    oom_events: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "root_cause": self.root_cause,
            "engine": self.engine,
            "evidence": [e.as_dict() for e in self.evidence],
            "figures": dict(self.figures),
            "fix": list(self.fix),
            "timing": self.timing,
            "stage": self.stage,
            "summary": self.summary,
            "signature": self.signature,
            "confidence": self.confidence,
            "source": self.source,
            "lines_read": self.lines_read,
        }
        if self.settings_in_log:
            out["settings_in_log"] = dict(self.settings_in_log)
        if self.setting is not None:
            out["setting"] = self.setting.as_dict()
        if self.server is not None:
            out["server"] = dict(self.server)
        if self.tune:
            out["tune"] = self.tune
        if self.notes:
            out["notes"] = list(self.notes)
        return out
