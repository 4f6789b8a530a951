"""How long an analytic `servefit tune` takes (the issue asks for under 3 s).

    PYTHONPATH=src python benchmarks/tune_speed.py [--repeat 5]

Times the done-when command end to end (a fresh interpreter: imports, optuna included) and the
search alone in-process, for the L4 manifest and for larger spaces (quantized variants, 4 GPUs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "tests" / "fixtures" / "tune" / "k8s-vllm-l4.yaml"
CASES = [
    ("L4, done-when", ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"], "L4", 1,
     dict(min_context=32768)),
    ("L4, kv fp8 + fp8/awq weights", ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"], "L4", 1,
     dict(min_context=32768, allow_kv=frozenset({"fp8"}), allow_quant=frozenset({"fp8", "awq"}))),
    ("4xH100 70B, headroom 10%", ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "-tp", "4"], "H100", 4,
     dict(min_context=32768, allow_kv=frozenset({"fp8"}), headroom=0.1, allow_eager=True)),
]


def end_to_end(repeat: int) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "servefit", "tune", str(MANIFEST), "--gpu", "L4", "--min-context", "32k", "--diff"]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return times


def in_process(repeat: int) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from servefit.pipeline import Target, evaluate, site_from_argv
    from servefit.tune import study
    from servefit.tune.objective import Needs
    from servefit.tune.space import build_space

    for label, argv, gpu, n, kw in CASES:
        ev = evaluate(site_from_argv(argv), Target(gpu=gpu, gpus=n))
        needs = replace(Needs(**kw), target_context=int(ev.plan.max_model_len or 0))
        space = build_space(ev, needs)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            run = study.run(space, needs, progress=False)
            times.append(time.perf_counter() - t0)
        b = run.best
        print(f"  {label:32s} {space.size():6,d} candidates  search {statistics.median(times):6.3f} s  "
              f"-> {b.context:,} x {b.users} users" if b else "")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    t = end_to_end(a.repeat)
    print(f"servefit tune {MANIFEST.relative_to(ROOT)} --gpu L4 --min-context 32k --diff: "
          f"median {statistics.median(t):.2f} s, max {max(t):.2f} s (fresh interpreter, {a.repeat} runs)")
    in_process(a.repeat)


if __name__ == "__main__":
    main()
