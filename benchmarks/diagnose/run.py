"""How often `servefit diagnose` names the right outcome, stage, cause and fix on public logs it was
not written against.

    python benchmarks/diagnose/run.py [--split calibration|heldout] [-v] [--json]

cases.yaml holds short excerpts of public OOM / failed-start / clean-start logs (vLLM, llama.cpp, Ollama,
TGI, SGLang) with the verdict a maintainer would give, written down before servefit was run on them.
Each case is scored on five questions: outcome (an OOM, another failure, no failure, a failure the
engine recovered from), timing (load / start-up / serving), stage, root cause and whether a fix line
names the fix that works. A case passes when every question its expectation asks is right.

Splits, fixed before any case was run (SPLIT_RULE): held out iff the first hex digit of sha256(id)
is 0-9, as benchmarks/accuracy/run.py does; a case already in this repository (`seen_before`) is listed and
not scored. No change to diagnose may be decided on a held-out case:
`-v` prints per-case verdicts for the calibration half only; the held-out half prints totals.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[1] / "src"))

from servefit.diagnose import diagnose_lines  # noqa: E402

SPLIT_RULE = "heldout iff sha256(id)[0] in 0-9"
QUESTIONS = ("outcome", "timing", "stage", "root", "fix")
SERVING = ("first_batch", "long_request", "after_uptime", "serving")


def split_of(case_id: str) -> str:
    return "heldout" if hashlib.sha256(case_id.encode()).hexdigest()[0] in "0123456789" else "calibration"


def load(path: Path = HERE / "cases.yaml") -> list[dict[str, Any]]:
    cases = yaml.safe_load(path.read_text())["cases"]
    for c in cases:
        c["split"] = split_of(c["id"])
    return cases


def outcome_of(root: str) -> str:
    return {"not_oom": "not_oom", "killed": "killed", "recovered": "recovered", "none": "no_failure"}.get(root, "oom")


def verdict(case: dict[str, Any]) -> dict[str, Any]:
    """What diagnose said about the case's log, in the benchmark's terms."""
    d = diagnose_lines(case["log"].splitlines())
    timing = "serving" if d.timing in SERVING else d.timing
    return {"outcome": outcome_of(d.root_cause), "timing": timing, "stage": d.stage, "root": d.root_cause,
            "fix": d.fix, "confidence": d.confidence, "signature": d.signature}


def _listed(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [v]


def score(case: dict[str, Any], got: dict[str, Any]) -> dict[str, bool]:
    """Each question the case's expectation asks -> right or wrong."""
    exp = case["expect"]
    marks: dict[str, bool] = {"outcome": got["outcome"] in _listed(exp["outcome"])}
    if "timing" in exp:
        marks["timing"] = got["timing"] in exp["timing"]
    if "stage" in exp and exp["stage"] != "":
        marks["stage"] = got["stage"] in _listed(exp["stage"])
    if "root" in exp:
        marks["root"] = got["root"] in exp["root"]
    if "fix" in exp:
        text = " | ".join(got["fix"]).lower()
        marks["fix"] = any(str(f).lower() in text for f in exp["fix"])
    return marks


def run(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for c in cases:
        got = verdict(c)
        marks = score(c, got)
        rows.append({"id": c["id"], "split": c["split"], "engine": c["engine"], "url": c["url"],
                     "expect": c["expect"], "got": got, "marks": marks, "pass": all(marks.values())})
    return rows


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"cases": len(rows), "pass": sum(r["pass"] for r in rows)}
    for q in QUESTIONS:
        asked = [r["marks"][q] for r in rows if q in r["marks"]]
        out[q] = f"{sum(asked)}/{len(asked)}"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", choices=("calibration", "heldout"))
    ap.add_argument("-v", "--verbose", action="store_true", help="per-case verdicts (calibration half only)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    cases = load()
    seen = [c for c in cases if c.get("seen_before")]
    cases = [c for c in cases if not c.get("seen_before")]
    if args.split:
        cases = [c for c in cases if c["split"] == args.split]
    rows = run(cases)
    splits = [s for s in ("calibration", "heldout") if any(r["split"] == s for r in rows)]
    summary = {s: totals([r for r in rows if r["split"] == s]) for s in splits}
    if args.json:
        shown = [r for r in rows if r["split"] == "calibration"] if args.verbose else []
        print(json.dumps({"split_rule": SPLIT_RULE, "totals": summary, "cases": shown}, indent=2, default=str))
        return 0
    print(f"servefit diagnose on public logs ({SPLIT_RULE})")
    for c in seen:
        print(f"  not scored: {c['id']} (seen before: {c['seen_before']})")
    for s in splits:
        t = summary[s]
        print(f"  {s:<11} {t['pass']}/{t['cases']} cases right   " +
              "  ".join(f"{q} {t[q]}" for q in QUESTIONS))
    if args.verbose:
        for r in rows:
            if r["split"] != "calibration":
                continue
            g = r["got"]
            wrong = [q for q, ok in r["marks"].items() if not ok]
            mark = "ok  " if r["pass"] else "MISS"
            print(f"{mark} {r['id']:<40} {g['outcome']}/{g['timing']}/{g['stage'] or '-'}/{g['root']}"
                  + (f"   wrong: {', '.join(wrong)}" if wrong else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
