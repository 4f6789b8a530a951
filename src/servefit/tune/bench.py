"""Measured mode: run the user's benchmark for each candidate the memory model accepts.

`--bench-cmd 'CMD {flags}'` is run through the shell once per trial with these placeholders:
`{flags}` the candidate's engine flags (every knob, e.g. `--max-model-len 32768
--kv-cache-dtype fp8 ...`), `{env}` its environment settings as `NAME=value` words, `{model}`
the model reference. The command prints one JSON object on a line of its stdout (the last
such line counts), e.g. `{"throughput": 1234.5, "p99_ttft_ms": 850}`; `--bench-metric` names
the value to optimise. Candidates the memory model rejects are never run (no GPU time spent);
a run that fails (non-zero exit, no JSON line, no such metric, time-out) marks the candidate
infeasible, which is how a hidden constraint such as an OOM at runtime is learnt.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import replace
from typing import Any

from servefit.tune.objective import Result
from servefit.tune.patch import fmt
from servefit.tune.space import WEIGHTS, Space


def words_for(space: Space, point: dict[str, Any]) -> tuple[list[str], list[str], str]:
    """(engine flags, NAME=value env words, model reference) of a candidate."""
    from servefit.engines import get
    from servefit.tune.occurrences import option_table

    table = option_table(space.ev.config.engine)
    plugin = get(space.ev.config.engine)
    flags: list[str] = []
    env: list[str] = []
    knobs = {k: v for k, v in point.items() if k != WEIGHTS}
    # every knob as the patch writes it (llama.cpp's context per slot is `--ctx-size` = context x slots), none
    # taken as already written: the template's {flags} carries them all
    cfg = replace(space.ev.config, explicit=set())
    for name, value in space.adapter.writes(knobs, point, space.current(), cfg).items():
        if value is None:  # the engine's default, which has no value of its own (TGI's --kv-cache-dtype)
            continue
        how = None if name.isupper() else plugin.written_as(name)
        if name.isupper() or (how is not None and how[0] == "env"):
            var = how[1] if how is not None else name
            env.append(f"{var}={('1' if value else '0') if isinstance(value, bool) else fmt(value)}")
            continue
        opt = table.by_name.get(name) if table is not None else None
        names = opt.flags if opt is not None and opt.flags else ("--" + name.replace("_", "-"),)
        flag = next((f for f in names if f.startswith("--")), names[0])
        if isinstance(value, bool) and (opt is None or not opt.takes_value):
            if value:
                flags.append(flag)
            continue
        flags += [flag, fmt(value)]
    model = str(space.ev.config.model_ref or "")
    variant = space.variants.get(point.get(WEIGHTS, "none"))
    if variant is not None and variant.changes_checkpoint:
        for k, v in variant.settings.items():
            flags += ["--" + k.replace("_", "-"), fmt(v)]
        model = variant.ref or model
    return flags, env, model


def command_for(template: str, space: Space, point: dict[str, Any]) -> str:
    flags, env, model = words_for(space, point)
    return (template.replace("{flags}", shlex.join(flags)).replace("{env}", shlex.join(env))
            .replace("{model}", shlex.quote(model)))


def last_json(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


class Bench:
    def __init__(self, template: str, space: Space, metric: str, goal: str = "max", timeout: float = 3600.0) -> None:
        self.template, self.space, self.metric, self.goal, self.timeout = template, space, metric, goal, timeout
        self.runs = 0

    def __call__(self, r: Result) -> Result:
        if not r.feasible:
            return replace(r, message=r.message or "rejected by the memory model; not benchmarked")
        cmd = command_for(self.template, self.space, r.point)
        self.runs += 1
        try:
            proc = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return self._failed(r, f"benchmark timed out after {self.timeout:.0f} s")
        data = last_json(proc.stdout)
        if proc.returncode != 0 or data is None:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
            return self._failed(r, f"benchmark exited {proc.returncode}: {tail[0][:200]}")
        value = data.get(self.metric)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return self._failed(r, f"benchmark printed no number for {self.metric!r}")
        metric = float(value) if self.goal == "max" else -float(value)
        return replace(r, metric=metric, message=f"{self.metric}={value}")

    @staticmethod
    def _failed(r: Result, why: str) -> Result:
        return replace(r, outcome="bench_failed", constraints=(1.0,) + tuple(r.constraints[1:]), message=why)
