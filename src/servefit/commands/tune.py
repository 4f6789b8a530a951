"""`servefit tune`: search context x KV dtype x quantization x concurrency over the engine's own
memory model (an optuna study), then patch the files the servers came from."""

from __future__ import annotations

import argparse
import json
import os
import sys

from servefit.commands.common import add_target_args, one_word_target, split_trailing
from servefit.core import UsageError

# tune's own options that users also write after `--` (never engine flags; --seed is one, so
# it is not taken from there)
TUNE_TRAILING = {"--min-context": 1, "--min-concurrency": 1, "--allow": -1, "--headroom": 1, "--objective": 1,
                 "--diff": 0, "--write": 0, "--unsafe": 0, "--trials": 1, "--storage": 1, "--study": 1,
                 "--sampler": 1, "--bench-cmd": 1, "--bench-metric": 1, "--bench-goal": 1, "--variant": 1}

EPILOG = """\
quality order (least loss first): no quantization > fp8 KV > fp8 weights > 8-bit > 4-bit.
--allow opens lossy choices: quant=fp8,awq,gptq,int8,int4,nvfp4,gguf,any  kv=fp8,q8_0,q4_0,any
eager (vLLM --enforce-eager)  offload (layers left on the CPU). Without --allow, tune keeps the
weights and an unquantized KV cache. Changes of checkpoint or quantization are unsafe edits,
written only with --unsafe.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="find the best context / KV dtype / quantization / concurrency and patch the files",
                       description="Search the engine's knobs with its own memory model (an optuna study; the\n"
                                   "exact optimum where the space is small) and write the answer back into the\n"
                                   "files as minimal edits.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_target_args(p)
    p.add_argument("--min-context", help="context every user must get (tokens: 32k = 32768)")
    p.add_argument("--min-concurrency", type=int, default=None, help="users at that context (default 1)")
    p.add_argument("--allow", nargs="+", action="extend", default=[], metavar="SPEC",
                   help="lossy choices tune may make: quant=fp8,awq kv=fp8 eager offload")
    p.add_argument("--headroom", help="GPU memory to leave free, e.g. 10%% (or 0.1)")
    p.add_argument("--objective", default="balanced",
                   help="balanced (default), context, concurrency, memory, or several joined by commas "
                        "(a multi-objective run prints its Pareto front)")
    p.add_argument("--diff", action="store_true", help="print the patch as a unified diff")
    p.add_argument("--write", action="store_true", help="apply the patch to the files (atomically)")
    p.add_argument("--unsafe", action="store_true", help="also apply unsafe edits (checkpoint / quantization)")
    p.add_argument("--variant", action="append", default=[], help="another checkpoint of the same model to consider")
    p.add_argument("--bench-cmd", help="measured mode: run 'CMD {flags}' per trial; it prints a JSON line of metrics")
    p.add_argument("--bench-metric", default="throughput", help="the metric to optimise in measured mode")
    p.add_argument("--bench-goal", choices=["max", "min"], default="max",
                   help="whether --bench-metric is better high (default) or low")
    p.add_argument("--bench-timeout", type=float, default=3600.0,
                   help="seconds one benchmark run may take before it counts as failed (default 3600)")
    p.add_argument("--storage", help="optuna storage: sqlite:///tune.db, any RDB URL, or a journal file (*.log)")
    p.add_argument("--study", help="study name (several workers on one storage share it)")
    p.add_argument("--trials", type=int,
                   help="with --bench-cmd: benchmark runs for this worker (candidates the memory model rejects "
                        "are free and never run; a --storage study resumes where it stopped); otherwise "
                        "sampled trials instead of the exhaustive search")
    p.add_argument("--seed", type=int, default=0, help="random seed of the sampled search (default 0)")
    p.add_argument("--sampler", default="auto", choices=["auto", "exhaustive", "bruteforce", "tpe", "nsga2"],
                   help="how candidates are picked: auto (every one where the space is small), or one method")
    p.set_defaults(run=run)


def default_args() -> argparse.Namespace:
    """tune's own options at their defaults, for the lint HTML report's suggestion (no other
    command builds tune's parser)."""
    return argparse.Namespace(min_context=None, min_concurrency=None, allow=[], headroom=None, objective="balanced",
                              diff=False, write=False, unsafe=False, variant=[], bench_cmd=None,
                              bench_metric="throughput", bench_goal="max", bench_timeout=3600.0, storage=None,
                              study=None, trials=None, seed=0, sampler="auto", format="text")


def pull_tune_options(words: list[str], args: argparse.Namespace) -> list[str]:
    """Take tune's own options out of a launch command given after `--`."""
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        key, eq, val = w.partition("=")
        n = TUNE_TRAILING.get(key)
        if n is None:
            out.append(w)
            i += 1
            continue
        dest = key[2:].replace("-", "_")
        if n == 0:
            setattr(args, dest, True)
            i += 1
        elif n == -1:
            vals = [val] if eq else []
            i += 1
            while not eq and i < len(words) and not words[i].startswith("-"):
                vals.append(words[i])
                i += 1
            args.allow = list(args.allow) + vals
        else:
            if not eq:
                if i + 1 >= len(words):
                    raise UsageError(f"{key} needs a value")
                val = words[i + 1]
                i += 1
            if key == "--variant":
                args.variant = list(args.variant) + [val]
            elif key == "--min-concurrency" or key == "--trials":
                setattr(args, dest, _int(key, val))
            else:
                setattr(args, dest, val)
            i += 1
    return out


def _int(key: str, val: str) -> int:
    try:
        return int(val)
    except ValueError:
        raise UsageError(f"{key}: not a number: {val!r}") from None


def needs_from(args: argparse.Namespace):  # -> Needs
    from servefit.tune.objective import OBJECTIVES, Needs
    from servefit.units import parse_tokens

    kv: set[str] = set()
    quant: set[str] = set()
    eager = offload = False
    for spec in args.allow:
        for part in str(spec).split():
            key, eq, vals = part.partition("=")
            key = key.strip().lower()
            items = {v.strip().lower() for v in vals.split(",") if v.strip()}
            if key in ("kv", "kv_cache_dtype", "kv-cache") and eq:
                kv |= items
            elif key in ("quant", "quantization", "weights") and eq:
                quant |= items
            elif key == "eager":
                eager = True
            elif key == "offload":
                offload = True
            elif key == "any":
                kv.add("any")
                quant.add("any")
            else:
                raise UsageError(f"--allow {part}: expected quant=..., kv=..., eager or offload")
    objective = tuple(o.strip().lower() for o in str(args.objective).split(",") if o.strip()) or ("balanced",)
    bad = [o for o in objective if o not in OBJECTIVES]
    if bad:
        raise UsageError(f"--objective {bad[0]!r}: choose from {', '.join(OBJECTIVES)}")
    headroom = None
    if args.headroom:
        h = str(args.headroom).strip()
        try:
            headroom = float(h[:-1]) / 100 if h.endswith("%") else float(h)
        except ValueError:
            raise UsageError(f"--headroom {h!r}: expected a percentage such as 10%") from None
        if headroom > 1:
            headroom /= 100
        if not 0 <= headroom < 1:
            raise UsageError(f"--headroom {h!r}: must be between 0% and 100%")
    min_conc = args.min_concurrency if args.min_concurrency is not None else 1
    if min_conc < 1:
        raise UsageError("--min-concurrency must be at least 1")
    return Needs(min_context=parse_tokens(str(args.min_context)) if args.min_context else None,
                 min_concurrency=min_conc, headroom=headroom, allow_kv=frozenset(kv),
                 allow_quant=frozenset(quant), allow_eager=eager, allow_offload=offload, objective=objective,
                 variants=tuple(args.variant))


def require_optuna() -> None:
    """tune's search is an optuna study; optuna is an extra so that lint installs stay light."""
    import importlib.util

    if importlib.util.find_spec("optuna") is None:
        raise UsageError("servefit tune needs optuna, which is not installed: pip install 'servefit[tune]'")


def run(args: argparse.Namespace) -> int:
    from servefit.tune.session import Session

    require_optuna()
    words = one_word_target(split_trailing(list(args.target), args), args)
    words = pull_tune_options(words, args)
    if not words:
        raise UsageError("nothing to tune: give a file, or `-- vllm serve MODEL ...`")
    if args.write and not any(os.path.exists(w) for w in words[:1]):
        raise UsageError("--write needs a file; with `-- COMMAND` tune prints the tuned command line")
    from servefit.sources.assemble import flags_from

    session = Session(args, needs_from(args), flags_from(args))
    session.run(words)
    if args.format == "json":
        json.dump(session.as_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(session.text())
    return session.exit_code()
