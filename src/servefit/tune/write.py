"""Writing a patched file safely, only where the user allows it.

A file is written only when it is a regular file inside the repository being tuned (the nearest
directory holding .git above a file the user named) or is itself a file the user named; a link
is followed only to a target inside it; a file nobody may write (no write bit, e.g. 0444) or
that the user cannot write is refused, never replaced; a file that changed since servefit read
it is refused. The file's mode and line endings are kept (the text was read and is written with
newline="").

Replacement: a temporary file `.NAME.PID.RANDOM.servefit-tmp` in the same directory, fsync, then
os.replace, so a writer killed at any moment leaves the old file or the new one, never a mix
(tests kill it between the two steps through SERVEFIT_TUNE_WRITE_PAUSE). A file with hard
links is written through its own inode instead (the new text is staged in the temporary file
first, then copied in with one write and a truncate), so every link sees the new text. SIGTERM,
SIGHUP and SIGINT during a write remove the temporary file before servefit exits; one left by a
writer killed with SIGKILL (its PID no longer runs) is removed by the next write to that file.
`write_all` checks every file before writing any, and says exactly which were written."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import signal
import stat
import tempfile
import time
from collections.abc import Iterator

from servefit.core import Edit

TMP_SUFFIX = ".servefit-tmp"


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


def check(path: str, read_text: str, root: str | tuple[str, ...] | None = None, named: tuple[str, ...] = ()) -> str:
    """The real path to write `path` through, or WriteRefused saying why it must not be.
    `root`: the repository (or repositories) being tuned; `named`: files the user named."""
    roots = (root,) if isinstance(root, str) else tuple(root or ()) or (repo_root(path),)
    real = os.path.realpath(path)
    user_named = any(os.path.realpath(n) == real for n in named)
    if not user_named and not any(_inside(os.path.abspath(path), r) for r in roots):
        raise WriteRefused(f"{path} is outside the repository ({roots[0]}); not written")
    if os.path.islink(path) or real != os.path.abspath(path):
        if not user_named and not any(_inside(real, r) for r in roots):
            raise WriteRefused(f"{path} is a link to {real}, outside {roots[0]}; not written")
    try:
        st = os.stat(real)
    except OSError as exc:
        raise WriteRefused(f"{path}: cannot read it again ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise WriteRefused(f"{path} is not a regular file; not written")
    if not st.st_mode & 0o222 or not os.access(real, os.W_OK):
        raise WriteRefused(f"{path} is read-only ({stat.filemode(st.st_mode)}); not written")
    if not os.access(os.path.dirname(real) or ".", os.W_OK | os.X_OK):
        raise WriteRefused(f"{path}: its directory is not writable; not written")
    from servefit import safe_io

    try:
        now = safe_io.read_bytes(real, max(1 << 20, 4 * len(read_text.encode("utf-8"))))
    except OSError as exc:
        raise WriteRefused(f"{path}: cannot read it again ({exc.strerror or exc})") from None
    if hashlib.sha256(now).hexdigest() != digest(read_text):
        raise WriteRefused(f"{path} changed since servefit read it; not written (run tune again)")
    return real


class _Signalled(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _catch_signals() -> Iterator[None]:
    """SIGTERM / SIGHUP / SIGINT become an exception (so `finally` removes the temporary file),
    then the process ends as the signal asked once the write is cleaned up."""
    def handler(signum: int, frame: object) -> None:
        raise _Signalled(signum)

    saved: dict[int, object] = {}
    for name in ("SIGTERM", "SIGHUP", "SIGINT"):
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        try:
            saved[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread
            pass
    try:
        yield
    except _Signalled as exc:
        for sig, old in saved.items():
            signal.signal(sig, old)  # type: ignore[arg-type]
        saved.clear()
        os.kill(os.getpid(), exc.signum)  # end as the signal asked (its default or the caller's handler)
        raise SystemExit(128 + exc.signum) from None
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)  # type: ignore[arg-type]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def remove_stale(real: str) -> list[str]:
    """Remove temporary files a killed writer left beside `real` (their PID no longer runs)."""
    gone = []
    d, base = os.path.split(real)
    for tmp in glob.glob(os.path.join(glob.escape(d or "."), "." + glob.escape(base) + ".*" + TMP_SUFFIX)):
        pid_part = os.path.basename(tmp)[len(base) + 2:].split(".", 1)[0]
        if not pid_part.isdigit() or int(pid_part) == os.getpid() or _alive(int(pid_part)):
            continue
        try:
            if stat.S_ISREG(os.lstat(tmp).st_mode):
                os.unlink(tmp)
                gone.append(tmp)
        except OSError:
            pass
    return gone


def atomic_write(path: str, new_text: str, read_text: str, root: str | tuple[str, ...] | None = None,
                 named: tuple[str, ...] = ()) -> None:
    """Replace `path` with `new_text` if it still holds `read_text` and may be written (see check)."""
    real = check(path, read_text, root, named)
    remove_stale(real)
    st = os.stat(real)
    directory = os.path.dirname(real) or "."
    data = new_text.encode("utf-8")
    with _catch_signals():
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(real)}.{os.getpid()}.",
                                   suffix=TMP_SUFFIX)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
            with contextlib.suppress(PermissionError, AttributeError, OSError):
                os.chown(tmp, st.st_uid, st.st_gid)
            pause = os.environ.get("SERVEFIT_TUNE_WRITE_PAUSE")
            if pause:  # test hook: a window between the temporary file and the rename
                time.sleep(float(pause))
            if st.st_nlink > 1:
                _write_in_place(real, data)  # keep the hard links: the same inode gets the new text
                os.unlink(tmp)
            else:
                os.replace(tmp, real)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    with contextlib.suppress(OSError):
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _write_in_place(real: str, data: bytes) -> None:
    fd = os.open(real, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        view = memoryview(data)
        pos = 0
        while pos < len(data):
            pos += os.pwrite(fd, view[pos:], pos)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(changes: list[tuple[str, str, str]], root: str | tuple[str, ...] | None = None,
              named: tuple[str, ...] = ()) -> tuple[list[str], dict[str, str]]:
    """Write several files: every one is checked first and none is written when one is refused.
    Returns (paths written, {path: why not}); a failure after the first write leaves the ones
    written listed, so the caller can say exactly which."""
    refused: dict[str, str] = {}
    for path, _new, old in changes:
        try:
            check(path, old, root, named)
        except WriteRefused as exc:
            refused[path] = str(exc)
    if refused:
        for path, _, _ in changes:
            refused.setdefault(path, f"{path}: held back, because another file of this change was refused")
        return [], refused
    written: list[str] = []
    for i, (path, new, old) in enumerate(changes):
        try:
            atomic_write(path, new, old, root, named)
            written.append(path)
        except (WriteRefused, OSError) as exc:
            refused[path] = str(exc) if isinstance(exc, WriteRefused) else f"{path}: {exc.strerror or exc}"
            for later, _, _ in changes[i + 1:]:
                refused[later] = f"{later}: held back, because writing {path} failed"
            break
    return written, refused


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
