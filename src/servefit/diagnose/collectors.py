"""What log collectors put around an engine's own line, removed before any pattern is tried (the
timestamp is still read from the line as written, diagnose/timestamps.py):

  ANSI colour codes          a terminal, `docker compose up`
  Windows line ends          "\\r" left at the end
  docker json-file           {"log":"<line>\\n","stream":"stderr","time":"..."} (/var/lib/docker/containers/*.log);
                             other JSON wrappers keep the line under "msg" / "message" (pino-style app logs);
                             TGI's --json-output puts it under fields.message, with its target and level
  kubectl logs --prefix      "[pod/NAME/CONTAINER] "
  CRI (containerd, CRI-O)    "2024-05-01T10:00:00.123456789Z stderr F " (/var/log/pods/*)
  kubectl / docker -t        an RFC 3339 time and one space, only when an engine line follows (a TGI
                             line's own time is followed by its level, which stays)
  journald / syslog          "Jul 24 16:07:57 host ollama[1149]: " (an identifier with its [pid]; the
                             kernel's own lines keep "kernel:", which its patterns read)
  docker compose             the service column, "vllm-1  | "

Each is removed at most once, in the order a collector adds them.
"""

from __future__ import annotations

import json
import re

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_KUBECTL_PREFIX = re.compile(r"^\[pod/[^\]\s]+\] ")
_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)"
_CRI = re.compile(r"^" + _TIME + r" (?:stdout|stderr) [FP] ")
_COLLECTOR_TIME = re.compile(r"^" + _TIME + r" (?!\s*(?:TRACE|DEBUG|INFO|WARN|ERROR)\b)")
_SYSLOG = re.compile(r"^(?:(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} \d\d:\d\d:\d\d|" + _TIME
                     + r") \S+ [\w.@/-]+\[\d+\]: ")
_COMPOSE_PREFIX = re.compile(r"^[A-Za-z0-9][\w.-]*\s*\| ")


def _json_line(text: str) -> str | None:
    """The engine's line inside a JSON log record, or None when the line is not one."""
    try:
        rec = json.loads(text)
    except ValueError:
        return None
    if not isinstance(rec, dict):
        return None
    fields = rec.get("fields")
    if isinstance(fields, dict) and isinstance(fields.get("message"), str):  # tracing's JSON (TGI --json-output)
        head = " ".join(str(rec[k]) for k in ("timestamp", "level") if isinstance(rec.get(k), str))
        target = rec.get("target")
        return f"{head} {target}: {fields['message']}" if isinstance(target, str) else f"{head} {fields['message']}"
    for key in ("log", "msg", "message"):
        if isinstance(rec.get(key), str):
            return str(rec[key]).rstrip("\r\n")
    return None


def strip_colour(text: str) -> str:
    """The line without its ANSI colour codes (what a terminal showed)."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def unwrap(text: str) -> str:
    """An engine's log line as the engine printed it, without what the collector added."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = text.rstrip("\r")
    if text[:2] == '{"' and text.endswith("}"):
        inner = _json_line(text)
        if inner is not None:
            text = inner.rstrip("\r")
            if "\x1b" in text:
                text = _ANSI.sub("", text)
    if text[:5] == "[pod/":
        text = _KUBECTL_PREFIX.sub("", text, count=1)
    if "| " in text[:80]:
        text = _COMPOSE_PREFIX.sub("", text, count=1)
    if text[:1].isdigit():
        text = _CRI.sub("", text, count=1)
        text = _SYSLOG.sub("", text, count=1)
        text = _COLLECTOR_TIME.sub("", text, count=1)
        if "| " in text[:80]:
            text = _COMPOSE_PREFIX.sub("", text, count=1)
    elif text[:1].isupper() and "]: " in text[:120]:
        text = _SYSLOG.sub("", text, count=1)
    return text
