"""Share of real deployment files' model references that servefit sizes offline.

    python benchmarks/models/run.py [--engine vllm]
        [--half calibration|heldout|fresh|calibration3|fresh2|calibration4|fresh3|calibration5|fresh4|all]
        [-v] [--json]

Each reference in calibration.yaml / heldout.yaml (gathered from public deployment files, see
README.md; heldout.yaml was held out until 2026-11-28 and is printed as "calibration-2" since) and
in heldout_2026-11-28.yaml (a fresh held-out set gathered later from repositories neither file
has, reported on its own as "fresh"), and in the second batch gathered the same day from repositories
none of those files has (split by sha256(source): calibration3.yaml, "calibration-3", open for study;
heldout_2026-11-28b.yaml, "fresh-2", held out), and in the third batch gathered the same day from
repositories none of those files has (split the same way: calibration4.yaml, "calibration-4", open for
study; heldout_2026-11-28c.yaml, "fresh-3", held out), and in the fourth batch gathered the same day from
repositories none of those files has (split the same way: calibration5.yaml, "calibration-5", open for
study; heldout_2026-11-28d.yaml, "fresh-4", held out) is put on the command line of its engine
(`vllm serve REF`, `llama-server -m REF` or `-hf REF`, `ollama run REF`,
`text-generation-launcher --model-id REF`, `python -m sglang.launch_server --model-path REF`) and
resolved the way `servefit lint` and `estimate` resolve a server's model (pipeline.evaluate: the
engine's parse, then the engine's own resolver for GGUF files and Ollama tags, else
models.resolve_model), with sockets disabled, an empty Hugging Face cache and an empty working
directory, so nothing but servefit's own data can answer. Each reference ends as one of:

  catalog     the catalog knows the checkpoint (repo id, alias, or an Ollama tag the tag table maps)
  derivative  sized as a catalogued base its name points to; servefit printed the assumption
  lock        read from a committed model lock
  unknown     not sized (SF002): the reason is the one-line error servefit printed

A reference whose model resolves but whose engine servefit cannot plan for that model (TGI with
DeepSeek-V4's compressed attention, an architecture the engine's memory model does not cover) is
counted as unknown too: the engine's plan is tried on eight H100s, and a plan servefit refuses to
make is not a sized server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[1] / "src"))

from servefit.core import UsageError  # noqa: E402
from servefit.pipeline import Target, engine_for, resolve_site_model, site_from_argv  # noqa: E402

# the 2026-11-25 set, split by the parity of sha256(source); "heldout" was measured once more on main at
# the merge of the first catalog round (2026-11-28) and is a second calibration part since
HALVES = ("calibration", "heldout")
FRESH = "fresh"  # held out as a whole, gathered 2026-11-28 after the resolver changes began
# the second batch of 2026-11-28 (repositories in none of the files above), split by the first hex digit of
# sha256(source): even -> calibration3 (open for study), odd -> fresh2 (held out)
CALIBRATION3 = "calibration3"
FRESH2 = "fresh2"
# the third batch of 2026-11-28 (repositories in none of the files above), split the same way
CALIBRATION4 = "calibration4"
FRESH3 = "fresh3"
# the fourth batch of 2026-11-28 (repositories in none of the files above), split the same way
CALIBRATION5 = "calibration5"
FRESH4 = "fresh4"
PARTS = {"calibration": "calibration.yaml", "heldout": "heldout.yaml", FRESH: "heldout_2026-11-28.yaml",
         CALIBRATION3: "calibration3.yaml", FRESH2: "heldout_2026-11-28b.yaml",
         CALIBRATION4: "calibration4.yaml", FRESH3: "heldout_2026-11-28c.yaml",
         CALIBRATION5: "calibration5.yaml", FRESH4: "heldout_2026-11-28d.yaml"}
HELD_OUT = (FRESH, FRESH2, FRESH3, FRESH4)
TITLES = {"heldout": "calibration-2 (was held out until 2026-11-28)",
          "heldout-unseen-repos": "calibration-2-unseen-repos (repositories not in calibration)",
          FRESH: "fresh (held-out, gathered 2026-11-28)",
          "fresh-unseen-repos": "fresh-unseen-repos (held-out, gathered 2026-11-28, repositories in neither calibration part)",
          CALIBRATION3: "calibration-3",
          FRESH2: "fresh-2 (held out, gathered 2026-11-28, second batch)",
          "fresh2-unseen-repos": "fresh-2-unseen-repos (held out, gathered 2026-11-28, second batch, "
                                 "repositories in no calibration part)",
          CALIBRATION4: "calibration-4",
          FRESH3: "fresh-3 (held out, gathered 2026-11-28, third batch)",
          "fresh3-unseen-repos": "fresh-3-unseen-repos (held out, gathered 2026-11-28, third batch, "
                                 "repositories in no calibration part)",
          CALIBRATION5: "calibration-5",
          FRESH4: "fresh-4 (held out, gathered 2026-11-28, fourth batch)",
          "fresh4-unseen-repos": "fresh-4-unseen-repos (held out, gathered 2026-11-28, fourth batch, "
                                 "repositories in no calibration part)"}
ENGINES = ("vllm", "llamacpp", "ollama", "tgi", "sglang")
SIZED = ("catalog", "derivative", "lock")


def _is_local(ref: str) -> bool:
    """A path llama-server would open with -m (anything else is a Hub repo for -hf)."""
    return (ref.lower().endswith(".gguf") or ref.startswith(("/", ".", "~", "$")) or "\\" in ref
            or (len(ref) > 1 and ref[1] == ":") or "/" not in ref)


def command(engine: str, ref: str) -> list[str]:
    """The engine's command line that serves `ref`."""
    if engine == "vllm":
        return ["vllm", "serve", ref]
    if engine == "llamacpp":
        return ["llama-server", "-m" if _is_local(ref) else "-hf", ref]
    if engine == "ollama":
        return ["ollama", "run", ref]
    if engine == "tgi":
        return ["text-generation-launcher", "--model-id", ref]
    if engine == "sglang":
        return ["python3", "-m", "sglang.launch_server", "--model-path", ref]
    raise ValueError(f"unknown engine {engine!r}")


@dataclass
class Outcome:
    ref: str
    engine: str
    source: str = ""
    kind: str = ""
    expected: str | None = None
    status: str = "unknown"  # catalog | derivative | lock | unknown
    model: str | None = None  # the catalog entry / model it was sized as
    resolved_from: str | None = None
    assumptions: list[str] = field(default_factory=list)  # what the model's resolution assumed
    notes: list[str] = field(default_factory=list)  # what the engine's parse said about the model
    reason: str | None = None  # why not sized


class _Offline(OSError):
    pass


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """No sockets, an empty Hugging Face cache, an empty working directory."""
    keys = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "XDG_CACHE_HOME")
    saved_env = {k: os.environ.get(k) for k in keys}
    saved = (socket.socket, socket.create_connection, socket.getaddrinfo)
    cwd = os.getcwd()

    def refuse(*_a: Any, **_k: Any) -> Any:
        raise _Offline("network disabled by the models benchmark")

    with tempfile.TemporaryDirectory(prefix="servefit-models-bench-") as tmp:
        try:
            for k in keys:
                os.environ.pop(k, None)
            os.environ["HF_HOME"] = os.path.join(tmp, "hf")
            os.environ["HF_HUB_OFFLINE"] = "1"
            socket.socket = refuse  # type: ignore[misc,assignment]
            socket.create_connection = refuse  # type: ignore[assignment]
            socket.getaddrinfo = refuse  # type: ignore[assignment]
            work = os.path.join(tmp, "work")
            os.makedirs(work)
            os.chdir(work)
            yield
        finally:
            os.chdir(cwd)
            socket.socket, socket.create_connection, socket.getaddrinfo = saved  # type: ignore[misc]
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


# the name a snippet is scanned under when its source's own file name gives no kind servefit reads
KIND_FILES = {"compose": "docker-compose.yml", "systemd": "server.service", "llama-swap": "llama-swap.yaml",
              "k8s": "manifest.yaml", "helm-values": "values.yaml", "skypilot": "task.yaml"}


def snippet_name(source: str, kind: str, text: str) -> str:
    """The file name `command` is scanned under: the source file's own name (a unit's name is evidence
    servefit reads, and the name decides how a file is read), else one for the entry's kind."""
    from servefit.sources import file_kind

    name = source.split("#", 1)[0].rsplit("/", 1)[-1]
    if name and file_kind(name, text[:128]) is not None:
        return name
    return KIND_FILES.get(kind, "command.sh")


def _site(engine_name: str, ref: str, command_line: str | None, kind: str = "", source: str = "") -> Any:
    """The server: from `command_line` (a snippet of the entry's file: its command, and the names the
    file gives that server, scanned the way servefit scans that file, so mounts, downloads, flags
    and names beside the model are seen) when the entry has one, else the engine's bare command
    line for `ref`."""
    if command_line:
        from servefit.sources import scan_file

        text = command_line if command_line.endswith("\n") else command_line + "\n"
        here = tempfile.mkdtemp(dir=os.getcwd())  # alone: no other entry's file beside it (offline() removes it)
        path = os.path.join(here, snippet_name(source, kind, text))
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        sites = [s for s in scan_file(path).sites if s.engine == engine_name]
        if sites:  # else a server servefit does not recognise: the bare command below
            return sites[0]
    site = site_from_argv(command(engine_name, ref))
    site.engine = engine_name
    return site


def _resolve(engine_name: str, ref: str, notes: list[str] | None = None, command_line: str | None = None,
             kind: str = "", source: str = "") -> Any:
    """The ModelSpec pipeline.evaluate would size the server with (its model step, without the
    GPU and the plan: a GPU is not what this measures). The engine's own notes about the model
    (an Ollama tag's mapping, a GGUF name) go to `notes`."""
    site = _site(engine_name, ref, command_line, kind, source)
    context = _lock_context()
    target = Target(models=context) if context is not None else Target()  # type: ignore[call-arg]
    engine = engine_for(site)
    cfg = engine.parse(site, None)
    if not cfg.model_ref:
        raise UsageError(f"{engine.title}: no model given in the command")
    try:
        spec = resolve_site_model(engine, site, cfg, target)
        _plannable(engine, cfg, spec)
        return spec
    finally:
        if notes is not None:  # the engine-version guess is not about the model
            notes.extend(a for a in cfg.assumptions if "no version given" not in a and "runs the newest release" not in a)


def _plannable(engine: Any, cfg: Any, spec: Any) -> None:
    """Raise the engine's UsageError where servefit resolves the model but cannot plan the server
    (the line estimate prints); a plan that predicts a refusal or an OOM is still a sized server."""
    from servefit.hardware.catalog import lookup

    gpu = lookup("H100")
    if gpu is not None:
        engine.plan(cfg, spec, gpu, 8)


def _lock_context() -> Any:
    """The model lock and model mapping lint applies to a file here (benchmarks/models/servefit.lock
    or one further up), where this servefit reads locks; None where it does not."""
    if "models" not in getattr(Target, "__dataclass_fields__", {}):
        return None
    try:
        from servefit.models.lock import context_for  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    return context_for(str(HERE), online=False)


def classify(entry: dict[str, Any]) -> Outcome:
    """Resolve one reference (call inside `offline()`)."""
    out = Outcome(ref=str(entry["ref"]), engine=str(entry["engine"]), source=str(entry.get("source", "")),
                  kind=str(entry.get("kind", "")), expected=entry.get("expected"))
    try:
        spec = _resolve(out.engine, out.ref, out.notes, entry.get("command"), out.kind, out.source)
    except (UsageError, KeyError, ValueError, OSError) as exc:
        out.reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return out
    out.model = spec.name
    out.resolved_from = spec.resolved_from
    out.assumptions = list(spec.assumptions)
    if spec.resolved_from == "lock":
        out.status = "lock"
    elif spec.resolved_from == "derivative" or (spec.resolved_from == "catalog" and spec.assumptions):
        out.status = "derivative"  # sized as a base found by name (older code marks it "catalog")
    elif spec.resolved_from == "catalog":
        out.status = "catalog"
    else:  # a config.json or GGUF on disk: cannot happen in the empty sandbox, so say it loudly
        out.status = "unknown"
        out.reason = f"resolved from {spec.resolved_from!r}, which the offline sandbox should not offer"
    return out


def load(half: str, engine: str | None = None) -> list[dict[str, Any]]:
    rows = yaml.safe_load((HERE / PARTS[half]).read_text(encoding="utf-8")) or []
    return [r for r in rows if engine is None or r.get("engine") == engine]


def run(entries: list[dict[str, Any]]) -> list[Outcome]:
    with offline():
        return [classify(e) for e in entries]


def _repo(source: str) -> str:
    return source.split("github.com/", 1)[-1].split("/blob/", 1)[0].lower()


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    """Per engine and overall: n, counts by status, share sized offline."""
    out: dict[str, Any] = {}
    for engine in (*ENGINES, "all"):
        rs = [o for o in outcomes if engine == "all" or o.engine == engine]
        if not rs:
            continue
        counts = {s: sum(1 for o in rs if o.status == s) for s in (*SIZED, "unknown")}
        sized = sum(counts[s] for s in SIZED)
        out[engine] = {"n": len(rs), **counts, "sized": sized, "share": sized / len(rs)}
    return out


def _line(name: str, s: dict[str, Any]) -> str:
    return (f"  {name:<9} {s['sized']:>3}/{s['n']:<3} sized offline {s['share'] * 100:5.1f}%   "
            f"(catalog {s['catalog']}, derivative {s['derivative']}, lock {s['lock']}, unknown {s['unknown']})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--engine", choices=ENGINES)
    ap.add_argument("--half", choices=(*PARTS, "all"), default="all",
                    help="one part only: calibration, heldout (calibration-2, held out until 2026-11-28), "
                         "fresh (held out, gathered 2026-11-28), calibration3 (calibration-3, the second "
                         "batch's study half), fresh2 (fresh-2, the second batch's held-out half), "
                         "calibration4 (calibration-4, the third batch's study half), fresh3 (fresh-3, the "
                         "third batch's held-out half), calibration5 (calibration-5, the fourth batch's study "
                         "half), fresh4 (fresh-4, the fourth batch's held-out half); default all, each reported "
                         "separately")
    ap.add_argument("--verbose", "-v", action="store_true", help="every reference and what it resolved to")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    halves = list(PARTS) if args.half == "all" else [args.half]
    results = {h: run(load(h, args.engine)) for h in halves}
    report: dict[str, Any] = {}
    seen = {_repo(str(e.get("source", ""))) for e in load("calibration")}
    studied = seen | {_repo(str(e.get("source", ""))) for e in load("heldout")}  # both calibration parts
    studied3 = studied | {_repo(str(e.get("source", ""))) for e in load(CALIBRATION3)}
    studied4 = studied3 | {_repo(str(e.get("source", ""))) for e in load(CALIBRATION4)}
    known_by = {"heldout": seen, FRESH: studied,  # fresh-2: a repository can have lines in calibration-3 too
                FRESH2: studied3,  # fresh-3: likewise in calibration-4, fresh-4 in calibration-5
                FRESH3: studied4,
                FRESH4: studied4 | {_repo(str(e.get("source", ""))) for e in load(CALIBRATION5)}}
    for half, rows in results.items():
        report[half] = summarize(rows)
        if half in known_by:  # lines from repositories no calibration part before it saw
            report[f"{half}-unseen-repos"] = summarize([o for o in rows if _repo(o.source) not in known_by[half]])
    if args.json:
        json.dump({"summary": report, "rows": {h: [asdict(o) for o in r] for h, r in results.items()}},
                  sys.stdout, indent=2)
        print()
        return 0
    if args.verbose:
        for half, rows in results.items():
            print(f"{half}:" + {"heldout": "  (calibration-2: held out until 2026-11-28, open for study since)",
                                 FRESH: "  (held out, gathered 2026-11-28: read, never tune on)",
                                 FRESH2: "  (held out, gathered 2026-11-28, second batch: read, never tune on)",
                                 FRESH3: "  (held out, gathered 2026-11-28, third batch: read, never tune on)",
                                 FRESH4: "  (held out, gathered 2026-11-28, fourth batch: read, never tune on)"}
                                .get(half, ""))
            for o in rows:
                what = f"-> {o.model}" if o.model else f"NOT SIZED: {o.reason}"
                print(f"  [{o.status:<10}] {o.engine:<8} {o.ref}  {what}")
                for a in o.assumptions:
                    print(f"      assumed: {a}")
                for n in o.notes:
                    if n not in o.assumptions:
                        print(f"      engine: {n}")
                if o.expected and o.model and o.expected.lower() != o.model.lower():
                    print(f"      note: the file says this is {o.expected}")
                print(f"      {o.source}")
            print()
    for half, summary in report.items():
        print(f"{TITLES.get(half, half)}:")
        for name, s in summary.items():
            print(_line(name, s))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
