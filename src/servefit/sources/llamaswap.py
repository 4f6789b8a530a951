"""llama-swap configs (also embedded in a k8s ConfigMap): one server per `models.<name>.cmd`.

llama-swap drops comment lines and joins continuations before splitting `cmd` like a shell,
so a commented line inside a continuation does not end the command here. `${macro}` expands
from `macros:`; `${PORT}` (llama-swap assigns it counting from `startPort`, 5800 by default) and
`${MODEL_ID}` (the model's name) are filled in the way llama-swap fills them; a model's own
`macros:` override the global ones for its `cmd`.
`cmd` may also be `docker run ... IMAGE args`. Per-model `env: ["K=V"]` is the process env.
A group with `swap: false` keeps all its members running at once (Workload.together: the
linter adds up their memory, linter/together.py).
A `cmd` that starts with a Windows path (`C:\\llama\\llama-server.exe`) is split as llama-swap
splits it on Windows (sources/winsplit.py).
"""

from __future__ import annotations

import re

from yaml.nodes import Node, ScalarNode

from servefit.budget import charge
from servefit.core import LaunchSite, Together
from servefit.sources.base import FileCtx, give_names
from servefit.sources.launch import from_words
from servefit.sources.shell import Vars, Word, expand_word, split_words
from servefit.sources.text import Src, logical_lines
from servefit.sources.winsplit import is_windows_command, split_windows
from servefit.sources.yamlpos import Y, YamlProblem, compose_all

START_PORT = "5800"  # llama-swap's default startPort: ${PORT} counts up from it
# llama-swap answers 429 past a model's `concurrencyLimit` (any value > 0), 10 requests when
# unset or 0 (config.example.yaml, models.<id>.concurrencyLimit): more slots than that never fill
DEFAULT_CONCURRENCY = 10
MACRO = re.compile(r"\$\{([A-Za-z0-9_-]+)\}")


def substitute(src: Src, table: dict[str, Src | str]) -> Src:
    """Replace `${name}` textually, as llama-swap does before splitting. A macro used as whole
    words keeps the offsets of its definition (a finding on `-ngl 99` inside a macro points
    there); one glued to other text (`${models}/x.gguf`) maps to where it is used."""
    text: list[str] = []
    offs: list[int] = []
    pos = 0
    t = src.text
    for m in MACRO.finditer(t):
        rep = table.get(m.group(1))
        if rep is None:
            continue
        text.append(t[pos:m.start()])
        offs.extend(src.off(k) for k in range(pos, m.start()))
        whole = (m.start() == 0 or t[m.start() - 1].isspace()) and (m.end() == len(t) or t[m.end()].isspace())
        if isinstance(rep, Src) and whole:
            charge(len(rep.text))
            text.append(rep.text)
            offs.extend(rep.off(k) for k in range(len(rep.text)))
        else:
            val = rep.text if isinstance(rep, Src) else rep
            charge(len(val))
            text.append(val)
            offs.extend([src.off(m.start())] * len(val))
        pos = m.end()
    if not offs and pos == 0:
        return src
    text.append(t[pos:])
    offs.extend(src.off(k) for k in range(pos, len(t)))
    offs.append(src.end_off(len(t)))
    return Src("".join(text), src.li, offs=offs)


def scan(y: Y, root: Node, fc: FileCtx, label: str = "llama-swap") -> None:
    start = y.str(y.get(root, "startPort")) or START_PORT
    macro_nodes = [(k, v) for k, _, v in y.items(y.get(root, "macros")) if isinstance(v, ScalarNode)]
    per_model = any("${MODEL_ID}" in y.scalar_src(v).text for _, v in macro_nodes)
    shared: dict[str, Src | str] | None = None
    sites: dict[str, list[LaunchSite]] = {}
    for mname, _, m in y.items(y.get(root, "models")):
        cmd = y.get(m, "cmd")
        if not isinstance(cmd, ScalarNode):
            continue
        # ${PORT} is assigned by llama-swap (only its value is a guess, and no setting servefit
        # checks depends on it); ${MODEL_ID} is the model's name. The macro table is built once
        # (a macro using ${MODEL_ID} makes it per model): models x macros stays linear.
        own = {k: v for k, _, v in y.items(y.get(m, "macros")) if isinstance(v, ScalarNode)}
        table: dict[str, Src | str]
        if own:
            # a model's own macros replace the global ones of the same name in place, and the rest
            # follow (internal/config/macros.go, mergeModelMacros): a global macro declared after
            # an overridden one expands with the model's value
            table = {"PORT": start, "MODEL_ID": mname}
            for k, v in [(k, own.pop(k, v)) for k, v in macro_nodes] + list(own.items()):
                table[k] = substitute(y.scalar_src(v), table)
        else:
            if shared is None or per_model:
                table = {"PORT": start, "MODEL_ID": mname}
                for k, v in macro_nodes:
                    table[k] = substitute(y.scalar_src(v), table)
                shared = table
            table = dict(shared, MODEL_ID=mname)
        words: list[Word] = []
        full = substitute(y.scalar_src(cmd), table)
        windows = is_windows_command(full.text.lstrip("\n"))  # llama-swap on Windows splits the Windows way
        for line in logical_lines(full, "\\"):
            if not line.text.lstrip().startswith("#"):
                words += split_windows(line) if windows else split_words(line, None)
        env = Vars()
        for item in y.seq(y.get(m, "env")):
            if isinstance(item, ScalarNode):
                w = expand_word(substitute(y.scalar_src(item), table), None)
                name, eq, _ = w.text.partition("=")
                if eq:
                    val = w.after(len(name) + 1)
                    env.set(name, val.token(), val.unresolved)
        env.exported = set(env.values)
        ctx = fc.ctx()
        launches = from_words(words, ctx, env)
        first = y.scalar_src(cmd)
        for launch in launches:  # the model's cmd, even when it starts with a macro
            launch.line = first.li.pos(first.off(len(first.text) - len(first.text.lstrip())))[0]
        before = len(fc.sites)
        fc.add(launches, f"{label}/{mname}", None, None,
               ctx.ollama_models)
        limit = _concurrency_limit(y.str(y.get(m, "concurrencyLimit")))
        for site in fc.sites[before:]:
            site.workload.admit_limit = limit
        give_names(fc.sites[before:], [(mname, "its llama-swap `models:` key")] +
                   [(y.str(a), "its llama-swap alias") for a in y.seq(y.get(m, "aliases"))])
        sites[mname] = fc.sites[before:]
    _together(y, root, label, sites)


# go-yaml reads these as false into a bool field (GroupConfig.Swap)
_FALSE = {"false", "no", "off", "n"}


def _groups(y: Y, root: Node) -> Node | None:
    """The groups llama-swap runs with (internal/config/load.go, LoadConfigFromReader): the legacy
    top-level `groups:`, else `routing.router.settings.groups` while routing.router.use is `group`
    or unset (`matrix` runs its sets instead)."""
    top = y.get(root, "groups")
    if top is not None:
        return top
    use = (y.str(y.get(root, "routing", "router", "use")) or "group").strip()
    return y.get(root, "routing", "router", "settings", "groups") if use == "group" else None


def _together(y: Y, root: Node, label: str, sites: dict[str, list[LaunchSite]]) -> None:
    """Mark the members of each `swap: false` group (GroupConfig.Swap, default true): llama-swap
    starts each on request and unloads none of them for another member, so they all run at once."""
    for gname, gkey, g in y.items(_groups(y, root)):
        swap = y.str(y.get(g, "swap"))
        if swap is None or swap.strip().lower() not in _FALSE:
            continue
        members = [m for m in (y.str(n) for n in y.seq(y.get(g, "members"))) if m]
        if len(members) < 2:
            continue
        together = Together(f"llama-swap group '{gname}'", tuple(f"{label}/{m}" for m in members), y.span(gkey))
        for m in members:
            for site in sites.get(m, ()):
                site.workload.together = together


def _concurrency_limit(text: str | None) -> int:
    """The requests llama-swap lets through to one model at once."""
    try:
        n = int(str(text).strip())
    except ValueError:
        return DEFAULT_CONCURRENCY
    return n if n > 0 else DEFAULT_CONCURRENCY


def scan_embedded(src: Src, fc: FileCtx, label: str) -> None:
    try:
        docs = compose_all(src)
    except YamlProblem:
        return
    y = Y(src)
    for doc in docs:
        scan(y, doc, fc, label)
