"""A server built by kustomize whose kustomizations patch a list item by its position (a JSON 6902
patch, `patches:` or `patchesJson6902:`, with a path such as `/spec/template/spec/containers/0/args/5`):
a word tune inserted into that list in a base would move the item the patch means, and the overlay
would then replace or remove the wrong one, silently (kustomize applies JSON 6902 paths as written:
RFC 6902 §4, an array index names a position). Such an insertion is shown for the user to make, not
written; a value changed in place moves nothing and is written."""

from __future__ import annotations

import os
import re
from typing import Any

from servefit.core import LaunchSite
from servefit.tune.placed import DISPLAY, Placed

# the lists of a container tune adds to (its command's words, its environment), indexed by position
_INDEXED = re.compile(r"/(?:args|command|env)/\d+(?:/|$)")


def _ops(text: Any) -> list[dict]:
    import yaml

    try:
        ops = yaml.safe_load(text) if isinstance(text, str) else None
    except yaml.YAMLError:
        return []
    return [op for op in ops if isinstance(op, dict)] if isinstance(ops, list) else []


def positional_paths(site: LaunchSite) -> tuple[list[str], list[tuple[str, str]]]:
    """(the files the kustomization reads, each (kustomization, JSON patch path) that indexes a list of
    a container's words or environment by position); nothing for a server kustomize did not build."""
    import yaml

    from servefit.safe_io import load_yaml
    from servefit.sources import kustomize

    how = site.workload.rendered or ""
    if not how.startswith("kustomize build "):
        return [], []
    kfile = kustomize.kustomization_file(how.removeprefix("kustomize build "))
    if kfile is None:
        return [], []
    tree, _ = kustomize.kustomization_tree(kfile)
    found: list[tuple[str, str]] = []
    for k in (f for f in tree if os.path.basename(f) in kustomize.KUSTOMIZATIONS):
        try:
            doc = load_yaml(k)
        except (OSError, ValueError, yaml.YAMLError):
            continue
        if not isinstance(doc, dict):
            continue
        for entry in (e for key in ("patches", "patchesJson6902") for e in (doc.get(key) or []) if isinstance(e, dict)):
            text = entry.get("patch")
            if text is None and isinstance(entry.get("path"), str):
                try:
                    text = load_yaml(os.path.join(os.path.dirname(k), entry["path"]))
                except (OSError, ValueError, yaml.YAMLError):
                    continue
                text = yaml.safe_dump(text) if isinstance(text, list) else None
            found += [(k, str(op["path"])) for op in _ops(text) if _INDEXED.search(str(op.get("path") or ""))]
    return tree, found


def keep_list_positions(site: LaunchSite, placed: list[Placed]) -> None:
    """An insertion into a file of the kustomization where a JSON patch indexes a container's list by
    position: shown, with why, not written."""
    from servefit.sources.render import KUSTOMIZATIONS

    tree, paths = positional_paths(site)
    for p in placed:
        inserts = [e.span.file for e in p.edits if e.span.start == e.span.end] if p.applicability != DISPLAY else []
        into = next((f for f in inserts if os.path.basename(f) in KUSTOMIZATIONS and site.workload.rendered), None)
        if into is not None:  # the list's last item is a patch's value: its words are not the kustomization's keys
            p.applicability = DISPLAY
            p.shown += f" (not written: the last item of that list is a patch's value in {into}; add it there)"
            continue
        if not paths:
            continue
        files = {os.path.normpath(f) for f in tree}
        k, path = paths[0]
        if any(os.path.normpath(f) in files for f in inserts):
            p.applicability = DISPLAY
            p.shown += (f" (not written: the JSON patch in {k} indexes {path} by position, and "
                        "an item inserted into that list would move what it patches)")
