"""Timestamps as engines, containers and the kernel write them, turned into seconds.

Only differences matter (uptime, time since start-up), so every clock is a plain float:
wall-clock formats share one timeline ("wall"); `dmesg` seconds since boot ("boot") and
llama.cpp's elapsed-time prefix ("rel") are their own. A difference is only taken between
two times on the same clock.

Formats (searched in the first 96 characters, so docker/k8s/compose prefixes are fine):
  ISO 8601 / RFC 3339   2026-05-16T10:00:00.123456789Z, 2026-05-16 10:00:00,123 (python logging),
                        time=2026-05-16T10:00:00.000Z (Ollama), [2026-05-16 10:00:00 TP0] (SGLang)
  vLLM                  INFO 05-16 10:00:00 [api_server.py:1] (no year)
  Ollama GIN            [GIN] 2026/05/16 - 10:00:00 | 200 | ...
  journald / syslog     May 16 10:00:00 host kernel: ... (no year)
  dmesg -T              [Sat May 16 10:00:00 2026] ...
  kubectl describe      Started: Sat, 16 May 2026 10:00:00 +0000
  dmesg                 [123456.789012] ... (seconds since boot)
  llama.cpp             0.01.234.567 I ... (minutes.seconds.ms.us since start)
"""

from __future__ import annotations

import re
from datetime import date

MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
_MON = "(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DOW = "(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"

_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?\s?(Z|[+-]\d\d:?\d\d)?")
_VLLM = re.compile(r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?")
_GIN = re.compile(r"(\d{4})/(\d\d)/(\d\d) - (\d\d):(\d\d):(\d\d)")
_DMESG_T = re.compile(_DOW + r" " + _MON + r" +(\d{1,2}) (\d\d):(\d\d):(\d\d) (\d{4})")
_RFC2822 = re.compile(_DOW + r", (\d{1,2}) " + _MON + r" (\d{4}) (\d\d):(\d\d):(\d\d)(?: ([+-]\d{4}))?")
_SYSLOG = re.compile(r"^" + _MON + r" +(\d{1,2}) (\d\d):(\d\d):(\d\d)")
_DMESG = re.compile(r"^\[\s*(\d+\.\d+)\]")
_LLAMA = re.compile(r"^(\d+)\.(\d\d)\.(\d{3})\.(\d{3}) [IWEDT] ")

WALL, BOOT, REL = "wall", "boot", "rel"


def _epoch(y: int, mo: int, d: int, h: int, mi: int, s: int) -> float | None:
    try:
        return float(date(y, mo, d).toordinal() * 86400 + h * 3600 + mi * 60 + s)
    except ValueError:
        return None


def _offset(tz: str | None) -> int:
    if not tz or tz == "Z":
        return 0
    sign = -1 if tz[0] == "-" else 1
    digits = tz[1:].replace(":", "")
    return sign * (int(digits[:2]) * 3600 + int(digits[2:4]) * 60)


class Clock:
    """Parses the timestamp of a line; remembers the year for formats that omit it."""

    def __init__(self) -> None:
        self.year = 2024  # a leap year, so 02-29 parses; replaced by the first full date seen
        self._last_month = 0

    def _yearless(self, mo: int) -> int:
        if self._last_month and mo < self._last_month - 6:  # Dec -> Jan
            self.year += 1
        self._last_month = mo
        return self.year

    def parse(self, line: str) -> tuple[str, float] | None:
        head = line[:96]
        m = _ISO.search(head)
        if m:
            y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
            t = _epoch(y, mo, d, h, mi, s)
            if t is not None:
                self.year, self._last_month = y, mo
                frac = m.group(7)
                return WALL, t + (int(frac) / 10 ** len(frac) if frac else 0.0) - _offset(m.group(8))
        m = _VLLM.search(head)
        if m:
            mo, d, h, mi, s = (int(g) for g in m.groups()[:5])
            t = _epoch(self._yearless(mo), mo, d, h, mi, s)
            if t is not None:
                return WALL, t
        m = _GIN.search(head)
        if m:
            y, mo, d, h, mi, s = (int(g) for g in m.groups())
            t = _epoch(y, mo, d, h, mi, s)
            if t is not None:
                self.year, self._last_month = y, mo
                return WALL, t
        if head[:1] == "[":
            m = _DMESG.match(head)
            if m:
                return BOOT, float(m.group(1))
            m = _DMESG_T.search(head)
            if m:
                t = _epoch(int(m.group(6)), MONTHS[m.group(1)], int(m.group(2)), int(m.group(3)),
                           int(m.group(4)), int(m.group(5)))
                if t is not None:
                    return WALL, t
        m = _SYSLOG.match(head)
        if m:
            mo = MONTHS[m.group(1)]
            t = _epoch(self._yearless(mo), mo, int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)))
            if t is not None:
                return WALL, t
        m = _RFC2822.search(head)
        if m:
            t = _epoch(int(m.group(3)), MONTHS[m.group(2)], int(m.group(1)), int(m.group(4)), int(m.group(5)),
                       int(m.group(6)))
            if t is not None:
                return WALL, t - _offset(m.group(7))
        m = _LLAMA.match(head)
        if m:
            mins, secs, ms, us = (int(g) for g in m.groups())
            return REL, mins * 60 + secs + ms / 1e3 + us / 1e6
        return None


def duration(a: tuple[str, float] | None, b: tuple[str, float] | None) -> float | None:
    """Seconds from a to b when both are on the same clock."""
    if a is None or b is None or a[0] != b[0]:
        return None
    return b[1] - a[1]


def human(seconds: float) -> str:
    s = int(round(seconds))
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    h, rem = divmod(s, 3600)
    if h < 48:
        return f"{h} h {rem // 60:02d} min"
    return f"{h // 24} d {h % 24} h"
