"""Where a server's port is published beyond its container or its cluster: compose `ports` and
`network_mode: host`, `docker run -p / -P / --network host`, a k8s Service of type LoadBalancer
or NodePort selecting the pod, `hostNetwork` / `hostPort`, a Knative Service, SkyPilot
`resources.ports` and a SkyServe `service`. Each wrapper appends an `Exposure` to
site.workload.exposures; linter/exposure.py decides whether the server behind it has auth.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from servefit.core import LaunchSite, Span

LOOPBACK = re.compile(r"^(?:127\.\d+\.\d+\.\d+|::1|\[::1\]|localhost)$", re.I)


@dataclass(frozen=True)
class Exposure:
    """One way a file publishes a server's port beyond its container or cluster, as the user wrote it; the
    exposure rules check whether the server behind it asks for an API key."""

    how: str  # what publishes it, as the user wrote it: 'compose ports "8000:8000"'
    span: Span | None
    ports: tuple[int, ...] = ()  # the container ports it forwards to; () when unknown or all
    host_network: bool = False  # the container shares the host's interfaces: its loopback is the host's


def add(site: LaunchSite, exp: Exposure) -> None:
    site.workload.exposures.append(exp)


def _port(text: str) -> int | None:
    first = text.split("-", 1)[0].strip()
    return int(first) if first.isdigit() else None


def publish_spec(spec: str) -> tuple[str, int | None] | None:
    """`[[HOST_IP:]HOST_PORT:]CONTAINER_PORT[/PROTO]` (docker and compose short syntax) ->
    (host address, container port); None when it is published on loopback only."""
    spec = spec.strip().split("/", 1)[0]
    ip = ""
    if spec.startswith("["):
        end = spec.find("]")
        ip, spec = spec[1:end] if end > 0 else "", spec[end + 2:] if end > 0 else ""
        parts = spec.split(":")
    else:
        parts = spec.split(":")
        if len(parts) >= 3:
            ip, parts = ":".join(parts[:-2]), parts[-2:]
    if ip and LOOPBACK.match(ip):
        return None
    return ip or "0.0.0.0", _port(parts[-1]) if parts else None


def published(how: str, spec: str, span: Span | None, value: str | None = None) -> Exposure | None:
    """`spec` as written; `value`, when given, the same after the wrapper's interpolation
    (compose `"${PORT:-8000}:8000"`), which is what is read."""
    hit = publish_spec(spec if value is None else value)
    if hit is None:
        return None
    ip, port = hit
    where = "all interfaces" if ip in ("0.0.0.0", "::", "") else ip
    return Exposure(f'{how} "{spec}" (published on {where})', span, (port,) if port else ())


def port_list(text: str) -> tuple[int, ...]:
    """`8000`, `8000-8010`, `[8000, 8001]` as written in SkyPilot / Services."""
    out = []
    for part in re.split(r"[\s,\[\]]+", text):
        p = _port(part)
        if p:
            out.append(p)
    return tuple(out)
