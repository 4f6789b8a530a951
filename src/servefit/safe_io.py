"""Opening input files so that nothing in a repository can hang or exhaust servefit.

Every reader (sources, side files such as env files and systemd drop-ins, model directories:
config.json and *.safetensors, GGUF files, baselines, servefit's own config) opens through
`open_regular`: the file is opened with O_NONBLOCK (opening a FIFO with no writer would
otherwise block forever) and refused unless fstat says it is a regular file, so a FIFO, a
device or a socket is refused wherever it is reached, not only when named on the command line.
Reads are capped: `read_bytes` never returns more than its limit.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

MAX_SIDE_FILE = 1 << 20  # env files, drop-ins, config.json: far above any real one


class NotRegularFile(OSError):
    """The path is a FIFO, a device, a socket or a directory: never read."""

    def __str__(self) -> str:
        return str(self.strerror)


class TooLarge(OSError):
    """The file is larger than servefit reads for that purpose."""

    def __str__(self) -> str:
        return str(self.strerror)


def kind_of(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def open_fd(path: str) -> int:
    """A read-only descriptor on a regular file, else NotRegularFile (an OSError)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        st = os.stat(path)  # refuse without opening when we can tell already (a device)
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(errno.EINVAL, f"{kind_of(st.st_mode)}, not a regular file", path)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between stat and open
            raise NotRegularFile(errno.EINVAL, f"{kind_of(st.st_mode)}, not a regular file", path)
        if flags & getattr(os, "O_NONBLOCK", 0):
            try:
                import fcntl

                fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
            except (ImportError, OSError):
                pass
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: str) -> BinaryIO:
    """A binary file object on a regular file (see open_fd)."""
    return os.fdopen(open_fd(path), "rb")


def read_bytes(path: str, limit: int) -> bytes:
    """At most `limit` bytes of a regular file; TooLarge when it holds more."""
    with open_regular(path) as fh:
        raw = fh.read(limit + 1)
    if len(raw) > limit:
        raise TooLarge(errno.EFBIG, f"over the {_size(limit)} servefit reads", path)
    return raw


def read_text(path: str, limit: int = MAX_SIDE_FILE) -> str:
    """A regular file's text (UTF-8, bad bytes replaced, line ends kept), at most `limit` bytes."""
    return read_bytes(path, limit).decode("utf-8", errors="replace")


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def load_yaml(path: str, limit: int = MAX_SIDE_FILE) -> object:
    """A small YAML file (Chart.yaml, kustomization.yaml) as Python data, read as a regular file
    and composed with servefit's bounds first (alias bombs, deep nesting: ValueError)."""
    import yaml

    from servefit.sources.text import whole
    from servefit.sources.yamlpos import YamlProblem, compose_all

    text = read_text(path, limit)
    try:
        compose_all(whole(text, path))
        return yaml.safe_load(text)
    except (YamlProblem, RecursionError) as exc:
        raise ValueError(f"{path}: {exc}") from None
