"""The share of a 1,000-file lint spent resolving model names, when the files name models the
catalog does not hold as such: fine-tunes, repacks, GGUFs, local folders and unknown models.

    python benchmarks/resolve_speed.py [--files 1000] [--src DIR] [--seed 0]

Generates the deployment tree of benchmarks/lint_speed.py, but every server names a different
real-world-shaped model (`acme/Hermes-3-Llama-3.1-8B-sft-v3`, `/models/Qwen2-7B-Instruct-v2`,
`InternLM2.5-20B-Chat-AWQ`, `model-17.gguf`, ...), runs `servefit lint DIR --gpu L4` in-process
and times the catalog's name lookup and its "nearest" suggestions (wrapped with perf_counter).
Prints the lint's wall time, the time in name resolution and its share. The target is < 10%.
`--src` picks the servefit source tree to measure (default: this checkout's src/).
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))

ORGS = ["acme", "NousResearch", "cognitivecomputations", "TheBloke", "unsloth", "bartowski", "RedHatAI", "my-team",
        "casperhansen", "lmstudio-community", "internal", "mlabonne", "teknium", "allenai", "ibm-granite"]
KNOWN = ["Llama-3.1-8B", "Llama-3.1-70B", "Meta-Llama-3-8B", "Llama-3.2-3B", "Llama-3.2-1B", "Qwen2.5-7B",
         "Qwen2.5-14B", "Qwen2.5-32B", "Qwen2.5-72B", "Qwen3-8B", "Qwen3-32B", "Qwen3-30B-A3B", "Mistral-7B",
         "Mixtral-8x7B", "gemma-2-9b", "gemma-3-27b", "Qwen2.5-Coder-7B", "Qwen2-7B", "QwQ-32B", "phi-4"]
UNKNOWN = ["Yi-1.5-34B", "InternLM2.5-20B", "Baichuan2-13B", "Falcon-H1-34B", "SmolLM3-3B", "OLMo-2-13B",
           "granite-3.1-8b", "gemma-3n-E4B", "Qwen2.5-VL-7B", "Llama-3.2-11B-Vision", "Phi-4-mini", "LFM2-1.2B",
           "Nemotron-H-8B", "MiniMax-Text-01", "aya-expanse-32b", "starcoder2-15b", "deepseek-coder-33b",
           "Hunyuan-7B", "ERNIE-4.5-21B-A3B", "Seed-OSS-36B", "EXAONE-3.5-7.8B", "gte-Qwen2-7B", "Zephyr-7B",
           "openchat-3.6-8b", "Skywork-13B", "c4ai-aya-23-8B", "jais-13b", "bloom-7b1", "mpt-30b", "dbrx"]
PREFIX = ["", "", "Hermes-3-", "dolphin-2.9-", "support-bot-", "OpenHermes-", "Tulu-3-", "sql-"]
SUFFIX = ["-Instruct", "-Chat", "-sft", "-dpo-v{k}", "-Instruct-AWQ", "-GPTQ-Int4", "-FP8-dynamic", "-bnb-4bit",
          "-it-v{k}", "-128k", "-abliterated", "-merged-{k}"]
GGUF_Q = ["Q4_K_M", "Q5_K_M", "Q8_0", "IQ4_XS", "UD-Q4_K_XL", "Q6_K", "BF16"]


def model_names(n: int, seed: int) -> list[str]:
    """n distinct names: about 40% derivatives of catalogued bases, 50% unknown models, 10% folders
    and files without a model name."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        k = rng.randrange(1000)
        r = rng.random()
        base = rng.choice(KNOWN) if r < 0.4 else rng.choice(UNKNOWN)
        name = rng.choice(PREFIX) + base + rng.choice(SUFFIX).format(k=k)
        shape = rng.random()
        if r > 0.9:
            ref = rng.choice([f"/models/model-{k}", f"/data/checkpoints/run-{k}/final", f"model-{k}.gguf"])
        elif shape < 0.15:
            ref = f"/models/{name}"
        else:
            ref = f"{rng.choice(ORGS)}/{name}"
        if ref not in seen:
            seen.add(ref)
            out.append(ref)
    return out


def generate(root: str, n: int, seed: int) -> int:
    """The lint_speed tree with one distinct model per server; returns the number of servers."""
    sys.path.insert(0, HERE)
    import lint_speed as ls

    names = iter(model_names(n, seed))
    ggufs = iter(f"{m.split('/')[-1]}-{GGUF_Q[i % len(GGUF_Q)]}.gguf" for i, m in enumerate(model_names(n, seed + 1)))
    i = servers = 0
    while i < n:
        for share, path, tpl in ls.KINDS:
            for _ in range(share):
                if i >= n:
                    return servers
                full = os.path.join(root, path.format(i=i))
                os.makedirs(os.path.dirname(full), exist_ok=True)
                serving = "{model}" in tpl or "{gguf}" in tpl
                servers += serving
                with open(full, "w") as fh:
                    fh.write(tpl.format(i=i, model=next(names) if serving else "", gguf=next(ggufs),
                                        len=4096 * (1 + i % 8)))
                i += 1
    return servers


def inner(root: str) -> None:
    """Run the lint in this process with the name lookups timed; print one result line."""
    from servefit import cli
    from servefit.models import catalog

    spent = [0.0, 0, 0, 0.0, 0.0]

    def timed(fn, slot):  # type: ignore[no-untyped-def]
        def wrapper(*a, **kw):  # type: ignore[no-untyped-def]
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                dt = time.perf_counter() - t0
                spent[0] += dt
                spent[slot] += 1
                spent[slot + 2] += dt
        return wrapper

    catalog.lookup = timed(catalog.lookup, 1)  # type: ignore[assignment]
    catalog.nearest = timed(catalog.nearest, 2)  # type: ignore[assignment]
    t0 = time.perf_counter()
    with redirect_stdout(io.StringIO()) as out:
        try:
            cli.main(["lint", root, "--gpu", "L4", "--exit-zero"])
        except SystemExit:
            pass
    total = time.perf_counter() - t0
    summary = out.getvalue().strip().splitlines()[-1] if out.getvalue().strip() else ""
    print(f"RESULT {total:.3f} {spent[0]:.3f} {spent[1]} {spent[2]} {spent[3]:.3f} {spent[4]:.3f} {summary}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--src", default=os.path.join(os.path.dirname(HERE), "src"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--inner", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        inner(args.inner)
        return 0
    root = tempfile.mkdtemp(prefix="servefit-resolve-")
    try:
        servers = generate(root, args.files, args.seed)
        env = dict(os.environ, PYTHONPATH=os.path.abspath(args.src))
        best = None
        shares: list[float] = []
        for _ in range(args.repeat):
            proc = subprocess.run([sys.executable, __file__, "--inner", root], env=env, capture_output=True, text=True)
            line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                print(proc.stderr.strip()[-2000:], file=sys.stderr)
                return 1
            parts = line.split(" ", 7)
            run = (float(parts[1]), float(parts[2]), int(parts[3]), int(parts[4]), float(parts[5]), float(parts[6]),
                   parts[7] if len(parts) > 7 else "")
            shares.append(100 * run[1] / run[0])
            best = run if best is None or run[0] < best[0] else best
        assert best is not None
        total, spent, lookups, nearest, t_lookup, t_nearest, summary = best
        print(f"{args.files} files, {servers} servers, each naming a different model (src: {args.src})")
        print(f"lint {total:.2f} s; name resolution {spent:.2f} s = {100 * spent / total:.1f}% "
              f"({lookups} lookups {t_lookup:.2f} s, {nearest} nearest-name searches {t_nearest:.2f} s); "
              f"best of {args.repeat}, in-process; the share across the {args.repeat} runs: "
              f"{min(shares):.1f}-{max(shares):.1f}%")
        print(f"lint says: {summary}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
