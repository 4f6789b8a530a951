"""What an engine run has done so far: start markers, start-up progress, the settings it
printed, requests and metrics. Kept in a RunState that failure events copy (Scanner's base)."""

from __future__ import annotations

import re

from servefit.diagnose import patterns as P
from servefit.diagnose.catalog import Catalog
from servefit.diagnose.model import Event, Line, RunState
from servefit.diagnose.timestamps import Clock

MAX_TEXT = 400  # evidence lines are clipped to this many characters
RECENT_PROMPTS = 12
_LOGFMT = re.compile(r'([\w.]+)=("(?:[^"\\]|\\.)*"|\S+)')
_BLOCK_KEY = re.compile(r"^\s+(\w+): ")
_HOST_BUF = re.compile(r"^(?:CPU|BLAS|Metal_Mapped)|_Host$|^CPU_")  # parse=sum_devices: not GPU memory


class Tracker:
    cat: Catalog
    clock: Clock
    n: int
    state: RunState
    events: list[Event]
    block: list[tuple[int, str]] | None
    block_start: Line | None
    _ts_text: str | None
    _ts_parsed_text: str | None
    _ts_value: tuple[str, float] | None
    _run_ts_text: str | None
    _text: str  # the line being read, as the engine printed it (what patterns read)
    _shown: str  # the same line as the log has it (collector prefixes kept): what the evidence quotes

    def _now(self) -> tuple[str, float] | None:
        """The time of the latest line that carried a timestamp (parsed only when asked)."""
        if self._ts_text is not self._ts_parsed_text:
            self._ts_parsed_text = self._ts_text
            ts = self.clock.parse(self._ts_text) if self._ts_text is not None else None
            if ts is not None:
                self._ts_value = ts
        return self._ts_value

    def _run_start_time(self) -> tuple[str, float] | None:
        s = self.state
        if s.start_time is None and self._run_ts_text is not None:
            s.start_time = self.clock.parse(self._run_ts_text)
        return s.start_time

    def _line(self, n: int, text: str) -> Line:
        if n == self.n and text is self._text:  # the line being read: quoted as the log has it (collectors.py)
            text = self._shown
        t = text.rstrip("\r\n")
        return Line(n, t if len(t) <= MAX_TEXT else t[:MAX_TEXT] + "…")

    def _progressed(self) -> bool:
        s = self.state
        return bool(s.weights_loaded or s.serving or s.requests or s.kv_ready or s.phase
                    or (self.events and self.events[-1].line.number >= (s.start.number if s.start else 0)))

    def _start(self, n: int, text: str, pat: P.Pattern, m: re.Match[str]) -> None:
        if self.state.start is not None and not self._progressed():
            return
        if self.state.start is not None or self._progressed():
            old = self.state
            self.state = RunState(start_time=self._now())
            self._run_ts_text = None
            if old.info.get("engine_version"):  # the release a server logged holds for the runs it starts
                self.state.info["engine_version"] = old.info["engine_version"]
            for key, line in old.settings_lines.items():  # settings printed just before the marker
                if n - line.number <= 5:
                    self._set(key, old.settings.get(key), line)
        self.state.start = self._line(n, text)
        gd = m.groupdict()
        version = gd.get("engine_version__s") or gd.get("engine_version2__s")
        if version and not self.state.info.get("engine_version"):
            self.state.info["engine_version"] = version.lstrip("v")  # the fixes depend on the release
        if pat.parse == "cmd_flags":
            self._cmd_flags(n, text)

    def _add(self, key: str, val: int, line: Line) -> None:
        """Sum per-device buffer lines printed together (CUDA0, CUDA1, ...)."""
        s = self.state
        prev = s.info_lines.get(key)
        if prev is not None and 0 < line.number - prev.number <= 3 and isinstance(s.info.get(key), int):
            val += s.info[key]
        s.info[key] = val
        s.info_lines[key] = line

    def _progress(self, n: int, text: str, pat: P.Pattern, m: re.Match[str]) -> None:
        s = self.state
        line = self._line(n, text)
        figs = P.figures_of(m)
        if pat.parse == "sum_devices":  # one line per device (CUDA0, CUDA1, ...): GPU buffers only
            if _HOST_BUF.search(str(figs.pop("buf", ""))):
                return
            for k, v in figs.items():
                self._add(k, v, line)
            figs = {}
        elif pat.parse == "layout":  # `msg="kv cache" device=CUDA0 size="1.0 GiB"`
            key = dict(pat.names).get(str(figs.get("what")))
            if (pat.skip and pat.skip in text) or key is None:
                return
            self._add(key, int(figs.get("size", 0)), line)
            figs = {}
        elif pat.parse == "logfmt":  # `key=value key="quoted value"`, the keys the pattern names
            for k, v in _LOGFMT.findall(text):
                if k in pat.keys:
                    v = v.strip('"[]')
                    figs.setdefault(k, P.size(v) if k.startswith("memory.") else P.value(v))
        if "gpu_name" in figs:
            s.gpu_name = s.gpu_name or str(figs.pop("gpu_name")) or None
        for k, v in figs.items():
            if v is not None:
                s.info[k] = v
                s.info_lines[k] = line
        kind = pat.kind
        if kind == "weights" and s.weights_loaded is None:
            s.weights_loaded = line
        elif kind == "kv" and s.kv_ready is None:
            s.kv_ready = line
        elif kind == "serving" and s.serving is None:
            s.serving, s.serving_time = line, self._now()
            self._run_start_time()
            s.requests, s.first_request, s.request_counts = 0, None, {}
            s.phase = "serving"
        if pat.phase and kind != "phase":
            self._phase(pat.phase, pat, m)

    def _phase(self, phase: str, pat: P.Pattern, m: re.Match[str]) -> None:
        s = self.state
        # graphs: a CUDA graph capture began (vLLM, SGLang) and has not printed its end (graphs_done)
        order = ("", "load", "context", "compute", "graphs", "graphs_done", "serving")
        if phase in order and order.index(phase) > order.index(s.phase if s.phase in order else ""):
            s.phase = phase
        key = m.groupdict().get("key__s")
        if key:  # `llama_context: n_ctx = 8192`: a setting printed as key = value
            self._set(key, P.value(m.group("value__s")), self._line(self.n, m.string))

    # -- settings, requests, metrics ------------------------------------------------------------
    def _config(self, n: int, text: str, pat: P.Pattern) -> None:
        s = self.state
        line: Line | None = None
        if pat.parse == "block" and text.rstrip().endswith("{"):  # a Rust struct pretty-printed over lines
            self.block, self.block_start = [], self._line(n, text)
            return
        if pat.parse == "env_map":  # Go's `map[KEY:value ...]`
            pairs = [(k, v, "") for k, v in P.ENV_MAP.findall(text)]
        else:
            pairs = P.KV_PAIRS.findall(text)
        aliases, known = self.cat.aliases, self.cat.settings
        for k, raw, some in pairs:
            key = aliases.get(k, k)
            if key not in known:
                continue
            if pat.parse == "keep_first" and key in s.settings:
                continue
            self._set(key, P.value(some if raw.startswith("Some(") else raw), line := line or self._line(n, text), k)

    def _set(self, key: str, val: object, line: Line, printed: str = "") -> None:
        # the name as printed, even with no value: a field the release prints (TGI's `Args { max_input_tokens: None }`)
        # is one its parser has
        self.state.names.add(printed.lstrip("-").replace("-", "_") or key)
        if val is None and self.state.settings.get(key) is not None:
            return  # an alias printed as None (TGI's max_input_length) does not hide the value
        self.state.settings[key] = val
        self.state.settings_lines.setdefault(key, line)

    def _block(self, n: int, text: str) -> None:
        assert self.block is not None and self.block_start is not None
        self.block.append((n, text))
        if not text.startswith("}") and len(self.block) <= 300:
            return
        key_lines = {}
        for ln, t in self.block:
            m = _BLOCK_KEY.match(t)
            if m:
                key_lines[self.cat.aliases.get(m.group(1), m.group(1))] = self._line(ln, t)
        for k, raw, some in P.KV_PAIRS.findall(" ".join(t.strip() for _, t in self.block)):
            key = self.cat.aliases.get(k, k)
            if key in self.cat.settings:
                val = P.value(some if raw.startswith("Some(") else raw)
                self._set(key, val, key_lines.get(key, self.block_start), k)
        self.block = self.block_start = None

    def _cmd_flags(self, n: int, text: str) -> None:
        line = self._line(n, text)
        for flag, v in P.CMD_FLAG.findall(text):
            key = self.cat.aliases.get(flag)
            if key:
                self._set(key, P.value(v.strip('"')), line, flag)

    def _request(self, n: int, text: str, found: list[tuple[P.Pattern, re.Match[str]]]) -> None:
        s = self.state
        tokens: int | None = None
        counted = False
        for pat, m in found:
            if pat.name != "json.request":
                s.request_counts[pat.name] = s.request_counts.get(pat.name, 0) + 1
            figs = P.figures_of(m)
            if isinstance(figs.get("prompt_tokens"), int):
                tokens = max(tokens or 0, figs["prompt_tokens"])
            if pat.parse == "token_ids" and "prompt_token_ids: [" in text:
                ids = text.split("prompt_token_ids: [", 1)[1].split("]", 1)[0]
                if ids.strip():
                    tokens = max(tokens or 0, ids.count(",") + 1)
            counted = counted or pat.name != "json.request"
        if counted:
            s.requests = max(s.request_counts.values())
            if s.first_request is None:
                s.first_request = self._line(n, text)
        if tokens is not None:
            self._prompt(tokens, self._line(n, text))

    def _prompt(self, tokens: int, line: Line) -> None:
        s = self.state
        if tokens > s.max_prompt:
            s.max_prompt, s.max_prompt_line = tokens, line
        s.recent_prompts.append((tokens, line))
        if len(s.recent_prompts) > RECENT_PROMPTS:
            del s.recent_prompts[0]

    def _metric(self, n: int, text: str, m: re.Match[str]) -> None:
        """A serving loop's statistics line: vLLM's stat loggers (V0 llm_engine.py::step -> log_stats, V1
        loggers.py in the API server's output loop) and SGLang's scheduler ("Decode batch") log only once the
        engine serves, so the first one says it was serving when no ready line was quoted."""
        s = self.state
        if s.serving is None:
            s.serving, s.serving_time = self._line(n, text), self._now()
            s.phase = "serving"
        figs = P.figures_of(m)
        running = int(figs.get("running", 0))
        usage = figs.get("kv_usage")
        if usage is None and "kv_usage_frac" in figs:
            usage = float(figs["kv_usage_frac"]) * 100
        if running > s.max_running:
            s.max_running, s.max_running_line = running, self._line(n, text)
        if usage is not None:
            if s.kv_usage_first is None:
                s.kv_usage_first = usage
            s.kv_usage_max = max(s.kv_usage_max or 0.0, usage)
            kv_tokens = s.info.get("kv_cache_tokens")
            if running >= 1 and isinstance(kv_tokens, int):
                per_request = int(usage / 100 * kv_tokens / running)
                line = self._line(n, text)
                s.info["tokens_per_request"] = per_request
                s.info_lines["tokens_per_request"] = line
                self._prompt(per_request, line)

    # -- end ------------------------------------------------------------------------------------
