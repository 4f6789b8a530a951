"""Writing a patched file safely: refuse a file that changed since servefit read it, refuse a
symlink that resolves outside the repository, keep the file's mode and its line endings (the
text was read and is written with newline=""), and replace it atomically: a temporary file in
the same directory, fsync, os.replace. A writer killed at any moment leaves the old file or the
new one, never a mix (tests kill it between the two steps through SERVEFIT_TUNE_WRITE_PAUSE)."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import time

from servefit.core import Edit


class WriteRefused(Exception):
    """The file is not written; the message says why."""


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def repo_root(path: str) -> str:
    """The nearest directory above `path` (as written, links not followed) holding .git, else
    the current directory."""
    d = os.path.dirname(os.path.abspath(path))
    while True:
        if os.path.exists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return os.getcwd()
        d = parent


def _inside(child: str, root: str) -> bool:
    child, root = os.path.realpath(child), os.path.realpath(root)
    return child == root or child.startswith(root.rstrip(os.sep) + os.sep)


def atomic_write(path: str, new_text: str, read_text: str, root: str | None = None) -> None:
    """Replace `path` with `new_text` if it still holds `read_text`."""
    root = root or repo_root(path)
    real = os.path.realpath(path)
    if os.path.islink(path) or real != os.path.abspath(path):
        if not _inside(real, root):
            raise WriteRefused(f"{path} is a link to {real}, outside {root}; not written")
    try:
        with open(real, "rb") as fh:
            now = fh.read()
    except OSError as exc:
        raise WriteRefused(f"{path}: cannot read it again ({exc.strerror})") from None
    if hashlib.sha256(now).hexdigest() != digest(read_text):
        raise WriteRefused(f"{path} changed since servefit read it; not written (run tune again)")
    st = os.stat(real)
    directory = os.path.dirname(real) or "."
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(real) + ".", suffix=".servefit-tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(new_text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        try:
            os.chown(tmp, st.st_uid, st.st_gid)
        except (PermissionError, AttributeError, OSError):
            pass
        pause = os.environ.get("SERVEFIT_TUNE_WRITE_PAUSE")
        if pause:  # test hook: a window between the temporary file and the rename
            time.sleep(float(pause))
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def apply_edits(text: str, edits: list[Edit]) -> str:
    """Apply edits on one file's text (offsets into `text`); overlapping edits are refused."""
    ordered = sorted(enumerate(edits), key=lambda ie: (ie[1].span.start, ie[1].span.end, ie[0]))
    out: list[str] = []
    pos = 0
    for _, e in ordered:
        if e.span.start < pos:
            raise ValueError(f"overlapping edits at {e.span.file}:{e.span.line}")
        out.append(text[pos:e.span.start])
        out.append(e.text)
        pos = e.span.end
    out.append(text[pos:])
    return "".join(out)


def by_file(edits: list[Edit]) -> dict[str, list[Edit]]:
    out: dict[str, list[Edit]] = {}
    for e in edits:
        out.setdefault(e.span.file, []).append(e)
    return out
