"""`source FILE` / `. FILE` in a shell script: which file of the repository bash would read, and its
text, so the Scanner (sources/shell.py) can run it in the same shell and know what it sets. The path
is taken from the script's folder (where such scripts are run from), `"$SCRIPT_DIR/common.sh"`,
`"$(dirname "$0")/env.sh"` and `"$REPO_ROOT/scripts/env.sh"` with REPO_ROOT `$(cd "$SCRIPT_DIR/.." && pwd)` included; a file outside the repository, too large, or already read (a
loop of `source`s) is not read."""

from __future__ import annotations

import os
import re

from servefit.sources.words import Vars, Word

# `$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)`, `$(dirname "$0")`, `$(dirname "$(realpath "$0")")`: the folder of
# the script itself, followed by a path in it
_SELF = r'"?(?:\$\{BASH_SOURCE(?:\[0\])?\}|\$BASH_SOURCE|\$0|\$\{0\}|\$\((?:realpath|readlink\s+-f)\s+"?(?:\$\{BASH_SOURCE(?:\[0\])?\}|\$0)"?\))"?'
SCRIPT_DIR = re.compile(rf'(\$\(\s*cd\s+"?\$\(dirname\s+{_SELF}\)"?\s*(?:&&|;)\s*pwd(?:\s+-P)?\s*\)|\$\(dirname\s+{_SELF}\))/')
# `$(cd "$SCRIPT_DIR/.." && pwd)/`: a folder relative to one a variable holds (servefit keeps a command
# substitution as written, so the variable inside is looked up here)
CD_UNDER = re.compile(r'(\$\(\s*cd\s+"?\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?(/[^"\s)]*)?"?\s*(?:&&|;)\s*pwd(?:\s+-P)?\s*\))/')


def _script_relative(text: str, env: Vars | None) -> str | None:
    """The folder `text` starts with as a path relative to the script's folder ("." + the rest), when it
    starts with the script's folder or a `cd` under a variable holding it; None otherwise."""
    m = SCRIPT_DIR.match(text)
    if m is not None:
        return "." + text[m.end(1):]
    m = CD_UNDER.match(text)
    held = env.get(m.group(2)) if m is not None and env is not None else None
    if m is None or held is None or _script_relative(held.text + "/", None) != "./":
        return None
    return "." + (m.group(3) or "") + text[m.end(1):]


def sourced_file(word: Word, script: str, sourced: frozenset[str], env: Vars | None = None) -> tuple[str, str] | None:
    """(path, text) of the file `source WORD` in `script` reads; None when it is not a file of the
    repository servefit may read, or one of `sourced` (the files already read into this script).
    `env`: the variables set where it is sourced (`$(cd "$SCRIPT_DIR/.." && pwd)` looks SCRIPT_DIR up)."""
    # imported here: sources/base.py imports sources/launch.py, which imports the splitter
    from servefit.sources.base import MAX_SIDE_FILE, _repo_of, _within

    if not word.text:
        return None
    text = word.text
    if word.unresolved:  # `source "$SCRIPT_DIR/common.sh"` with SCRIPT_DIR the script's own folder
        rel = _script_relative(text, env)
        if rel is None or len(word.unresolved) != 1 or not text.startswith(word.unresolved[0][0] + "/"):
            return None
        text = rel
    here = os.path.dirname(script) or "."
    path = os.path.normpath(os.path.join(here, os.path.expanduser(text)))
    try:
        if path in sourced or not _within(path, _repo_of(here)) or not os.path.isfile(path) \
                or os.path.getsize(path) > MAX_SIDE_FILE:
            return None
        with open(path, encoding="utf-8", errors="replace", newline="") as fh:
            return path, fh.read()
    except OSError:
        return None
