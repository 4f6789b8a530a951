"""Accuracy of servefit's predictions against numbers engines logged in public start-up logs.

    python benchmarks/accuracy/run.py [--engine vllm] [--split heldout] [--verbose] [--json]

Each case in cases/*.yaml records the command, GPU, version and the figures the engine logged
(source URL and the verbatim lines beside them). The runner puts the command through the same
pipeline `servefit estimate` uses and prints, per engine and per split, outcome accuracy and the
median / p90 relative error of each figure.

Splits: every case carries `split: calibration | heldout`. Cases collected before issue 16 were
used to fit servefit's formulas and constants, so they are all `calibration`. Cases added since
(`added: issue-16`) were assigned by a rule fixed before any of them was run (SPLIT_RULE below):
held out iff the first hex digit of sha256(id) is 0-9 (10 of 16 values), except that a case whose
figures were already in this repository before issue 16 (`seen_before: where`, e.g. quoted in a
calibration case's notes or the research notes) is calibration. No formula or constant may be
fitted to a held-out case; `split_by_rule` lets a test check every new case follows the rule.
Cases with `exclude: reason` stay in the data and are listed (and counted) as excluded; cases the
pipeline cannot evaluate are listed with the reason too. Nothing is dropped silently.

`logged_rank: worker` on a case says its quoted memory figures are a non-driver tensor-parallel
worker's (a "(VllmWorkerProcess ...)" line); they are compared with that rank's prediction (WORKER).
`model_config: configs/NAME.json` on a case gives the checkpoint's config.json as it stood when the logged run
loaded it, where the repository has changed since (written from cited facts; the case's notes say which).
`image: repo:tag` on a case names the container image its source shows; it is passed to the pipeline as a
compose file's image would be (optional packages such as triton_kernels come with the vllm/vllm-openai image).
`installed: [requirement, ...]` on a case lists the pip requirements the source's own install step names
(`pip install vllm ... flashinfer-python`), passed as a Dockerfile's `RUN pip install` would be (LaunchSite.packages).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[1] / "src"))

from servefit.core import UsageError  # noqa: E402
from servefit.pipeline import Target, evaluate, site_from_argv  # noqa: E402
from servefit.units import parse_size  # noqa: E402

GiB = 2**30
CORE = {  # expected key -> how to read it off the plan
    "weights_gib": lambda p: p.memory.weights / GiB,
    # vLLM logs the memory available for KV ("Available KV cache memory", negative when short)
    "kv_cache_gib": lambda p: (p.detail.resolved("available_kv_cache_bytes") or p.memory.kv_cache) / GiB,
    # as vLLM logs it ("X GiB for peak activation"): from 0.26.1 the torch peak plus the CUDA-graph estimate
    "activation_peak_gib": lambda p: (p.detail.resolved("logged_activation_bytes") or p.memory.activation_peak) / GiB,
    # as vLLM logs it ("Graph capturing finished ..., took X GiB"; the pool's "actual" from 0.20)
    "cuda_graph_gib": lambda p: _logged_graphs(p) / GiB,
    "non_torch_gib": lambda p: p.memory.non_torch / GiB,
    # vLLM >= 0.2x prints weights and non-torch memory as one "consumed memory" figure
    # (with what the profiling run keeps, which the plan counts in the activation peak: engines/vllm/detail.py)
    "consumed_gib": lambda p: (p.detail.resolved("logged_consumed_bytes") or p.memory.weights + p.memory.non_torch) / GiB,
    "kv_tokens": lambda p: p.kv_cache_tokens,
    "max_concurrency": lambda p: p.max_concurrency,
    "fitting_max_model_len": lambda p: p.fitting_max_model_len,
}


# A case whose quoted figures come from a tensor-parallel worker other than the driver says
# `logged_rank: worker`; on V0 those figures differ from the driver's (engines/vllm/detail.py: only the
# driver runs the dummy sampler), so they are compared with that rank's prediction. The token count
# is the minimum over the ranks, the same whichever rank logs it.
WORKER = {
    "activation_peak_gib": lambda p: p.detail.resolved("worker_activation_bytes"),
    "kv_cache_gib": lambda p: p.detail.resolved("worker_available_kv_cache_bytes"),
}
LOGGED_RANKS = ("driver", "worker")


def read_figure(case: dict[str, Any], key: str, plan) -> Any:
    """The plan's figure for an expected key, as the rank the case quotes logs it."""
    if case.get("logged_rank") == "worker" and key in WORKER:
        got = WORKER[key](plan)
        return None if got is None else got / GiB  # None: the plan has no such rank (named as not predicted)
    return CORE[key](plan) if key in CORE else plan.detail.as_dict().get(key)


def _logged_graphs(p) -> float:
    logged = p.detail.resolved("logged_cuda_graph_bytes") if p.detail is not None else None
    return p.memory.cuda_graphs if logged is None else logged


IGNORED = {"total_gpu_gib", "needed_kv_gib"}  # context, not predictions
SPLITS = ("calibration", "heldout")
SPLIT_RULE = ("held out iff sha256(id) starts with a hex digit 0-9 and the case's figures were not in the "
              "repository before (cases added: issue-16)")


def split_by_rule(case_id: str, seen_before: str | None = None) -> str:
    """The split SPLIT_RULE assigns a newly added case (fixed before any new case was evaluated)."""
    if seen_before:
        return "calibration"
    return "heldout" if hashlib.sha256(case_id.encode()).hexdigest()[0] in "0123456789" else "calibration"


def all_cases(engine: str | None = None) -> list[dict[str, Any]]:
    """Every case in the data, excluded ones included (each with its `_file`)."""
    cases = []
    for path in sorted((HERE / "cases").glob("*.yaml")):
        for case in yaml.safe_load(path.read_text()) or []:
            if engine is None or case.get("engine") == engine:
                case["_file"] = path.name
                cases.append(case)
    return cases


def load_cases(engine: str | None = None, split: str | None = None, located: bool = False) -> list[dict[str, Any]]:
    """Cases without an `exclude` reason, optionally of one split. `located=True` (what the printed
    figures use) also leaves out cases marked `unlocated` (a source a reader cannot open); regression
    tests may still run those."""
    return [c for c in all_cases(engine)
            if not c.get("exclude") and not (located and c.get("unlocated"))
            and (split is None or c.get("split") == split)]


def excluded_cases(engine: str | None = None) -> list[dict[str, Any]]:
    """Cases kept in the data but not counted in the printed figures, each with its reason."""
    return [c for c in all_cases(engine) if c.get("exclude") or c.get("unlocated")]


def expected_value(key: str, want: Any) -> float:
    """A figure as recorded: a number, or a string with the unit the engine printed ("560.0 MiB"),
    converted to the unit the key names (_gib / _mib)."""
    if isinstance(want, str):
        size = parse_size(want)
        return size / (GiB if key.endswith("_gib") else 2**20 if key.endswith("_mib") else 1)
    return float(want)


def predict(case: dict[str, Any]):
    """The plan servefit predicts for one case."""
    argv = shlex.split(case["command"])
    site = site_from_argv(argv, {k: str(v) for k, v in (case.get("env") or {}).items()})
    site.engine = case.get("engine")
    site.image = case.get("image")  # the container image the source names (it decides optional packages)
    site.packages = [str(p) for p in case.get("installed") or []]  # pip requirements the source's install names
    if case.get("parameters"):
        site.inputs.request_options = {k: str(v) for k, v in case["parameters"].items()}
    target = Target(gpu=case["gpu"], gpus=case.get("gpu_count") or 1, engine_version=str(case["version"]) if case.get("version") else None,
                    model=case.get("model_override"),
                    # a config.json (configs/) for a checkpoint as it stood at the run, where the repository changed since
                    model_config=str(HERE / case["model_config"]) if case.get("model_config") else None,
                    gpu_memory=parse_size(case["gpu_memory"]) if case.get("gpu_memory") else None)
    return evaluate(site, target).plan


def compare(case: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"id": case["id"], "engine": case["engine"], "split": case.get("split"),
                           "errors": {}, "outcome_ok": None}
    if case.get("logged_rank", "driver") not in LOGGED_RANKS:
        row["failure"] = f"ValueError: logged_rank {case['logged_rank']!r}: expected one of {', '.join(LOGGED_RANKS)}"
        return row
    try:
        plan = predict(case)
    except (UsageError, KeyError, ValueError) as exc:
        row["failure"] = f"{type(exc).__name__}: {exc}"
        return row
    for key, want in (case.get("expected") or {}).items():
        if key in IGNORED or want is None:
            continue
        if key == "outcome":
            row["outcome_ok"] = plan.outcome == want
            row["outcome"] = (want, plan.outcome)
            continue
        got = read_figure(case, key, plan)
        if got is None:
            row.setdefault("unpredicted", []).append(key)  # the plan has no such figure: named, not dropped
            continue
        want = expected_value(key, want)
        row["errors"][key] = (float(got) - want) / want if want else float(got)
        row.setdefault("pairs", {})[key] = (want, round(float(got), 3))
    return row


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))
    return s[k]


def summarize(rows: list[dict[str, Any]], split: str | None = None) -> dict[str, Any]:
    """Per engine: case count, failures (named), outcome accuracy, per-figure median / p90 error."""
    out: dict[str, Any] = {}
    if split is not None:
        rows = [r for r in rows if r.get("split") == split]
    for engine in sorted({r["engine"] for r in rows}):
        rs = [r for r in rows if r["engine"] == engine]
        oc = [r["outcome_ok"] for r in rs if r["outcome_ok"] is not None]
        metrics: dict[str, Any] = {}
        keys = sorted({k for r in rs for k in r["errors"]})
        for k in keys:
            errs = [abs(r["errors"][k]) for r in rs if k in r["errors"]]
            metrics[k] = {"n": len(errs), "median": statistics.median(errs), "p90": pct(errs, 0.9)}
        out[engine] = {"cases": len(rs), "failures": sum(1 for r in rs if "failure" in r),
                       "not_evaluable": {r["id"]: r["failure"] for r in rs if "failure" in r},
                       "outcome_accuracy": (sum(oc) / len(oc)) if oc else None, "outcome_n": len(oc),
                       "metrics": metrics}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1] if __doc__ else None)
    ap.add_argument("--engine")
    ap.add_argument("--split", choices=SPLITS, help="only this half (default: both, printed separately)")
    ap.add_argument("--verbose", "-v", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--drop-version", action="store_true",
                    help="run every case as if its log named no version (servefit then dates it by its flags)")
    args = ap.parse_args(argv)
    cases = load_cases(args.engine, args.split, located=True)
    rows = [compare({k: v for k, v in c.items() if k != "version"} if args.drop_version else c) for c in cases]
    splits = [args.split] if args.split else list(SPLITS)
    summary = {sp: summarize(rows, sp) for sp in splits}
    excluded = {c["id"]: c.get("exclude") or f"no openable source ({c['unlocated']})"
                for c in excluded_cases(args.engine)}
    if args.json:
        json.dump({"summary": summary, "excluded": excluded, "rows": rows}, sys.stdout, indent=2, default=str)
        print()
        return 0
    if args.verbose:
        for r in rows:
            tag = f"[{(r.get('split') or '?')[:5]}]"
            if "failure" in r:
                print(f"  {tag} {r['id']:<44} NOT EVALUABLE {r['failure']}")
                continue
            bits = [f"{k} {w}->{g} ({r['errors'][k] * 100:+.1f}%)" for k, (w, g) in r.get("pairs", {}).items()]
            oc = r.get("outcome")
            if oc:
                bits.insert(0, f"outcome {oc[0]}{'' if oc[0] == oc[1] else ' GOT ' + oc[1]}")
            print(f"  {tag} {r['id']:<44} " + "; ".join(bits))
        print()
    for sp in splits:
        print(f"== {sp} ==")
        for engine, s in summary[sp].items():
            acc = s["outcome_accuracy"]
            print(f"{engine}: {s['cases']} cases ({s['failures']} not evaluable); outcome "
                  + (f"{acc * 100:.0f}% of {s['outcome_n']}" if acc is not None else "n/a"))
            for k, m in s["metrics"].items():
                print(f"  {k:<24} n={m['n']:<3} median {m['median'] * 100:5.1f}%   p90 {m['p90'] * 100:5.1f}%")
            for cid, why in s["not_evaluable"].items():
                print(f"  not evaluable: {cid}: {why.split(';')[0]}")
            for r in (r for r in rows if r["engine"] == engine and r.get("split") == sp and r.get("unpredicted")):
                print(f"  not predicted: {r['id']}: {', '.join(r['unpredicted'])}")
        print()
    if excluded:
        print(f"excluded ({len(excluded)}, kept in the data with the reason, not counted):")
        for cid, why in excluded.items():
            print(f"  {cid}: {' '.join(str(why).split())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
