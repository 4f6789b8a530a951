"""Building kustomizations with the user's own `kustomize` (or `kubectl kustomize`), so lint reads
what `kubectl apply -k` sends rather than the bases without their patches.

A kustomization (kustomization.yaml) that no other one among the files uses as a resource is
built; its output replaces the servers read from the files it uses, and each value points at
the one file line among them (its own patches first, then its resources) that holds that text,
else at the kustomization (render_map.py). One that pulls a remote resource is not built (that
would go to the network).
"""

from __future__ import annotations

import os
import re
from typing import Any

from servefit.core import Span
from servefit.sources.problems import not_rendered
from servefit.sources.rendered import TIMEOUT_S, Rendered, adopt, at_top

KUSTOMIZATIONS = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|git@|github\.com/|gitlab\.com/|bitbucket\.org/)|\?ref=", re.I)


def kustomize_cmd() -> list[str] | None:
    import shutil
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    kubectl = shutil.which("kubectl")
    return [kubectl, "kustomize"] if kubectl else None


def kustomization_file(d: str) -> str | None:
    return next((os.path.join(d, n) for n in KUSTOMIZATIONS if os.path.isfile(os.path.join(d, n))), None)


def _uses(kfile: str) -> tuple[list[str], list[str], bool]:
    """(its own patch files, the resources it uses (directories and files), pulls a remote one)."""
    import yaml

    d = os.path.dirname(kfile)
    from servefit.safe_io import load_yaml

    try:
        doc = load_yaml(kfile) or {}
    except (OSError, ValueError, yaml.YAMLError):
        return [], [], False
    if not isinstance(doc, dict):
        return [], [], False
    refs = [str(r) for key in ("resources", "bases", "components") for r in doc.get(key) or [] if isinstance(r, str)]
    remote = any(_REMOTE.search(r) for r in refs)
    patches = [str(p) for p in doc.get("patchesStrategicMerge") or [] if isinstance(p, str)]
    patches += [str(p["path"]) for key in ("patches", "patchesJson6902") for p in doc.get(key) or []
                if isinstance(p, dict) and isinstance(p.get("path"), str)]
    local = [os.path.normpath(os.path.join(d, r)) for r in refs if not _REMOTE.search(r)]
    return [os.path.normpath(os.path.join(d, p)) for p in patches], local, remote


def kustomization_tree(kfile: str, depth: int = 0) -> tuple[list[str], bool]:
    """Every file a kustomization reads, its own first; and whether any of them is remote."""
    own, refs, remote = _uses(kfile)
    files = [kfile, *own]
    for r in refs:
        if os.path.isdir(r):
            sub = kustomization_file(r)
            if sub is not None and depth < 20:
                more, rem = kustomization_tree(sub, depth + 1)
                files += more
                remote = remote or rem
        elif os.path.isfile(r):
            files.append(r)
    return list(dict.fromkeys(files)), remote


def kustomizations(files: list[str], out: Rendered, enabled: bool = True) -> None:
    """Build each kustomization no other one uses; its output's servers replace its files'."""
    kfiles = [f for f in files if os.path.basename(f) in KUSTOMIZATIONS]
    if not kfiles:
        return
    from servefit.sources import render_map, scan_file

    used = {os.path.normpath(r) for k in kfiles for r in _uses(k)[1]}
    tops = [k for k in kfiles if os.path.normpath(os.path.dirname(k) or ".") not in used]
    cmd = kustomize_cmd() if enabled else None
    for k in tops:
        d = os.path.dirname(k) or "."
        tree, remote = kustomization_tree(k)
        anchor = at_top(k)
        if cmd is None or remote:
            why = ("rendering is off (--no-render)" if not enabled else "it uses a remote resource (building it "
                   "would go to the network)" if remote else "neither kustomize nor kubectl is on PATH")
            if any(_mentions_engine(f) for f in tree):
                out.findings.append(not_rendered(f"this kustomization was not built: {why}; its files were "
                                                     "read as they are, without its patches", span=anchor))
            continue
        import subprocess

        try:
            proc = subprocess.run([*cmd, d], capture_output=True, text=True, timeout=TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
        except (subprocess.TimeoutExpired, OSError) as exc:
            out.findings.append(not_rendered(f"kustomize could not build this: {exc}", span=anchor))
            continue
        outside = _outside(k, tree, proc) if proc.returncode != 0 else []
        if outside:
            # a resource file outside the kustomization's folder: kustomize's load restrictor refuses it
            # (kustomize api/loader: "security; file ... is not in or below ..."); the files are the repository's
            # own, so the build goes on without the restriction, and the refusal is said
            proc = subprocess.run([*cmd, "--load-restrictor=LoadRestrictionsNone", d], capture_output=True, text=True,
                                  timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
            if proc.returncode == 0:
                lister = outside[0][0]
                names = [name for kf, name in outside if kf == lister]
                what = "a file" if len(names) == 1 else "files"
                where = "this kustomization's folder" if lister == k else \
                    f"the folder of {os.path.relpath(lister, d)}, which lists {'it' if len(names) == 1 else 'them'}"
                out.findings.append(not_rendered(
                    f"kustomize refuses {', '.join(names)}, {what} outside {where}, so `kubectl "
                    "apply -k` fails here; make it a folder with its own kustomization.yaml, or build with "
                    "--load-restrictor LoadRestrictionsNone (servefit built it that way to check its servers)",
                    span=_written_at(lister, outside[0][1]) or anchor))
        if proc.returncode != 0:
            err = next((ln.strip() for ln in proc.stderr.splitlines() if ln.strip()), "no message")
            out.findings.append(not_rendered(f"kustomize could not build this: {_build_error(err, d)}", span=anchor))
            continue
        out.values_files.update(os.path.normpath(f) for f in tree)
        virtual = os.path.join(d, ".rendered-kustomize.yaml")
        result = scan_file(virtual, proc.stdout)
        sources = [f for f in tree if f.endswith((".yaml", ".yml")) and os.path.basename(f) not in KUSTOMIZATIONS]
        mapper = render_map.Mapper(d, proc.stdout, sources, virtual,
                                   fallback=(k, "built by kustomize; not traced to one line of its files"), scoped=True)
        label = os.path.relpath(d) if not os.path.isabs(d) else d
        adopt(out, result, mapper, label, f"kustomize build {label}")


# kustomize's error for a file a kustomization lists that is not there: its whole accumulation chain with absolute
# paths, the one fact at its end (api/internal/target/kusttarget.go accumulateResources; the loader's lstat)
_MISSING = re.compile(r"lstat (\S+?): no such file or directory")


def _build_error(err: str, d: str) -> str:
    """kustomize's error, as the reader needs it: a listed file that is not there is named, relative to the
    kustomization being built, with the kustomization that lists it; anything else as kustomize says it."""
    m = _MISSING.search(err)
    if m is None:
        return err.removeprefix("Error: ")
    missing = m.group(1)
    folder = os.path.dirname(missing)
    kfile = next((os.path.join(folder, n) for n in KUSTOMIZATIONS if os.path.isfile(os.path.join(folder, n))),
                 os.path.join(folder, "kustomization.yaml"))
    lists = os.path.relpath(kfile, os.path.abspath(d))
    return (f"{lists} lists {os.path.basename(missing)}, which is not in the repository (kustomize stops there: "
            "`kubectl apply -k` fails the same way)")


def _outside(kfile: str, tree: list[str], proc: Any) -> list[tuple[str, str]]:
    """The resource files the load restrictor refused, each as (the kustomization or component that lists it,
    the name it is listed by): outside that kustomization's folder, inside the repository; empty when the build
    failed for another reason. Nested ones count: kustomize applies the restriction to every folder it builds."""
    from servefit.sources.base import _repo_of, _within

    if "is not in or below" not in proc.stderr:
        return []
    root = _repo_of(os.path.dirname(kfile) or ".")
    if not all(_within(os.path.abspath(f), root) for f in tree):
        return []
    out = []
    for k in (f for f in tree if os.path.basename(f) in KUSTOMIZATIONS):
        d = os.path.dirname(k) or "."
        here = os.path.abspath(d)
        out += [(k, os.path.relpath(f, d)) for f in _uses(k)[1]
                if os.path.isfile(f) and not os.path.abspath(f).startswith(here + os.sep)]
    return out


def _mentions_engine(path: str) -> bool:
    from servefit.safe_io import open_regular
    from servefit.sources import _mentions_engine as mentions

    try:
        with open_regular(path) as fh:
            return mentions(fh.read(1 << 20).decode("utf-8", errors="replace"))
    except OSError:
        return False



def _written_at(path: str, text: str) -> Span | None:
    """Where text is first written in the file (a kustomization's resource entry)."""
    from servefit.safe_io import read_text
    from servefit.sources.text import LineIndex

    try:
        body = read_text(path, 1 << 20)
    except (OSError, ValueError):
        return None
    at = body.find(text)
    return LineIndex(body, path).span(at, at + len(text)) if at >= 0 else None
