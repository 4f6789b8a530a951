"""`source FILE` / `. FILE` in a shell script: which file of the repository bash would read, and its
text, so the Scanner (sources/shell.py) can run it in the same shell and know what it sets. The path
is taken from the script's folder (where such scripts are run from), `"$SCRIPT_DIR/common.sh"` and
`"$(dirname "$0")/env.sh"` included; a file outside the repository, too large, or already read (a
loop of `source`s) is not read."""

from __future__ import annotations

import os
import re

from servefit.sources.words import Word

# `$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)`, `$(dirname "$0")`, `$(dirname "$(realpath "$0")")`: the folder of
# the script itself, followed by a path in it
_SELF = r'"?(?:\$\{BASH_SOURCE(?:\[0\])?\}|\$BASH_SOURCE|\$0|\$\{0\}|\$\((?:realpath|readlink\s+-f)\s+"?(?:\$\{BASH_SOURCE(?:\[0\])?\}|\$0)"?\))"?'
SCRIPT_DIR = re.compile(rf'(\$\(\s*cd\s+"?\$\(dirname\s+{_SELF}\)"?\s*(?:&&|;)\s*pwd(?:\s+-P)?\s*\)|\$\(dirname\s+{_SELF}\))/')


def sourced_file(word: Word, script: str, sourced: frozenset[str]) -> tuple[str, str] | None:
    """(path, text) of the file `source WORD` in `script` reads; None when it is not a file of the
    repository servefit may read, or one of `sourced` (the files already read into this script)."""
    # imported here: sources/base.py imports sources/launch.py, which imports the splitter
    from servefit.sources.base import MAX_SIDE_FILE, _repo_of, _within

    if not word.text:
        return None
    text = word.text
    if word.unresolved:  # `source "$SCRIPT_DIR/common.sh"` with SCRIPT_DIR the script's own folder
        m = SCRIPT_DIR.match(text)
        if m is None or len(word.unresolved) != 1 or word.unresolved[0][0] != m.group(1):
            return None
        text = "." + text[m.end(1):]
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
