"""systemd units: `ExecStart=` (continuations, prefixes `-@:+!`, systemd quoting, `$VAR` and
`${VAR}` from `Environment=` and `EnvironmentFile=`), and drop-ins in `<unit>.d/*.conf` beside
the unit (an empty `ExecStart=` resets the list, as systemd does). `EnvironmentFile=` is read
when the repository holds the file (by its path, or by name beside the unit); its values
override `Environment=` as systemd's do. A drop-in whose unit is beside it is read with the unit
and yields nothing on its own.
"""

from __future__ import annotations

import glob
import os

from servefit.sources.base import FileCtx, give_names, read_text
from servefit.sources.envfile import load_env_file
from servefit.sources.launch import from_words
from servefit.sources.problems import missing_config_file
from servefit.sources.shell import Vars, split_words
from servefit.sources.text import LineIndex, Src, logical_lines, sub
from servefit.sources.words import NAME


def entries(src: Src) -> list[tuple[str, str, Src]]:
    """(section, key, value) for every assignment in a unit file."""
    out = []
    section = ""
    for ln in logical_lines(src, "\\"):
        t = ln.text.strip()
        if not t or t[0] in "#;":
            continue
        if t.startswith("["):
            section = t.strip("[] \t")
            continue
        key, eq, _ = ln.text.partition("=")
        if not eq:
            continue
        i = len(key) + 1
        while i < len(ln.text) and ln.text[i] in " \t":
            i += 1
        out.append((section, key.strip(), sub(ln, i)))
    return out


def scan(fc: FileCtx) -> None:
    d = os.path.dirname(fc.path)
    if d.endswith(".d") and os.path.isfile(d[:-2]):
        return  # read with its unit
    items = entries(fc.src)
    if d.endswith(".service.d"):  # a drop-in whose unit the repository does not hold (an installer wrote it)
        scan_unit(fc, items, os.path.basename(d[:-2]), drop_in=fc.src)
        return
    for conf in sorted(glob.glob(os.path.join(glob.escape(fc.path) + ".d", "*.conf"))):
        text = read_text(conf)
        if text is not None:
            items += entries(Src(text, LineIndex(text, conf)))
    scan_unit(fc, items, os.path.basename(fc.path))


def _packaged_exec(unit: str, at: Src) -> list[Src]:
    """The ExecStart= of a unit an engine's installer writes (the engine data's `packaged_units`: Ollama's
    ollama.service runs `ollama serve`), for a drop-in that only sets its environment: zero characters wide
    at the drop-in's `[Service]`, since the drop-in does not write it; [] for any other unit."""
    from servefit.sources.detect import engine_tables

    for _, table in engine_tables():
        for u in table.get("packaged_units") or ():
            if u["unit"] == unit:
                text = " ".join(u["exec_start"])
                return [Src(text, at.li, offs=[at.off(0)] * (len(text) + 1))]
    return []


def scan_unit(fc: FileCtx, items: list[tuple[str, str, Src]], unit: str, outer: Vars | None = None,
              drop_in: Src | None = None) -> None:
    """The servers of one unit's entries (`unit`: its file name). `outer`: the variables of a
    script that writes the unit from a heredoc, which the shell expands before systemd reads it.
    `drop_in`: the text of a drop-in read without its unit (`ollama.service.d/override.conf`): with no
    ExecStart= it runs the installed unit's command, where an engine's installer writes that unit."""
    env = outer.copy() if outer is not None else Vars()
    env.exported = set()
    files: list[Src] = []
    execs: list[Src] = []
    described = [val.text.strip() for section, key, val in items if section == "Unit" and key == "Description"][-1:]
    for section, key, val in items:
        if section != "Service":
            continue
        if key == "Environment":
            for w in split_words(val, None):  # "A=1" B=2: quotes may wrap the whole assignment
                name, eq, _ = w.text.partition("=")
                if eq and NAME.fullmatch(name) and w.pieces and len(w.pieces[0].text) > len(name):
                    env.set(name, w.after(len(name) + 1).token())
        elif key == "EnvironmentFile":
            files.append(val)
        elif key == "ExecStart":
            if not val.text.strip():
                execs = []
            else:
                execs.append(val)
    for f in files:
        ref = f.text.strip()
        optional = ref.startswith("-")
        path = fc.near(ref.lstrip("-"))
        vals = load_env_file(path) if path else None
        if vals is None:
            if not optional:
                fc.findings.append(missing_config_file(f"EnvironmentFile {ref} is not in the repository; the "
                                                    "variables it sets are unknown", span=f.span(0, len(f.text))))
            continue
        for k, v in vals.items():
            env.set(k, v)
    env.exported = set(env.values) - (set(outer.values) if outer is not None else set())
    packaged = not execs and drop_in is not None
    if packaged and drop_in is not None:
        execs = _packaged_exec(unit, drop_in)
    for val in execs:
        i = 0
        while i < len(val.text) and val.text[i] in "@-:+!|":
            i += 1
        words = split_words(sub(val, i), env)
        ctx = fc.ctx(exported_only=outer is not None)  # a script's variables expand the text, not the service's env
        launches = from_words(words, ctx, env)
        for launch in launches if packaged else ():
            launch.facts["notes"] = [f"a drop-in of {unit}, which the engine's installer writes: the server is its "
                                     f"ExecStart={val.text}, with this drop-in's environment"]
        first = len(fc.sites)
        fc.add(launches, f"systemd/{unit}", None, None, ctx.ollama_models)
        give_names(fc.sites[first:], [(desc, "its unit's Description") for desc in described] +
                   [(unit.rsplit(".", 1)[0], "its unit file's name")])
        for site in fc.sites[first:]:
            s0 = site.argv[0].span if site.argv else None
            if s0 is not None and s0.file != fc.path:  # ExecStart from a drop-in: the server is there
                site.workload.unit_file = fc.path
                site.file, site.line = s0.file, s0.line
