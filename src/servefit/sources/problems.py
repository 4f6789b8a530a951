"""Findings about the files themselves (not read, not rendered, a file they name is missing),
raised wherever the sources meet the problem; each code has its one registered function here."""

from __future__ import annotations

from typing import Any

from servefit.core import Finding, Token
from servefit.rules.catalog import finding
from servefit.rules.registry import rule


@rule("SF104")
def not_rendered(message: str, **where: Any) -> Finding:
    """A template (Helm chart, kustomization, `{{ }}` YAML) whose servers were not read."""
    return finding("SF104", message, **where)


@rule("SF108")
def not_read(message: str, **where: Any) -> Finding:
    """A file too large, too deep or unreadable: skipped, and said so."""
    return finding("SF108", message, **where)


@rule("SF113")
def missing_config_file(message: str, **where: Any) -> Finding:
    """An env_file / EnvironmentFile the configuration reads is not in the repository."""
    return finding("SF113", message, **where)


@rule("SF114")
def runtime_not_found(message: str, **where: Any) -> Finding:
    """A KServe InferenceService whose serving runtime is not in its file: the server is unknown."""
    return finding("SF114", message, **where)


@rule("SF107")
def literal_variable(message: str, **where: Any) -> Finding:
    """A `$VAR` the runtime passes to the engine as text: a Dockerfile exec form (no shell), a
    k8s command or args item (Kubernetes expands `$(VAR)` only)."""
    return finding("SF107", message, **where)


@rule("SF105")
def unreadable(message: str, **where: Any) -> Finding:
    """A file that mentions an engine and cannot be read: YAML that does not parse, a Dockerfile that
    `docker build` stops on (a JSON CMD written over lines with no `\\`)."""
    return finding("SF105", message, **where)


@rule("SF116")
def unread_server(message: str, **where: Any) -> Finding:
    """A values file runs an engine image, but the command it runs comes from templates servefit
    does not have (or a chart setting it cannot turn into one), or a container of an image that runs
    its engine only when a command starts it starts none: the server was not read."""
    return finding("SF116", message, **where)


def unknown_image(image: Token, service: str, var: str) -> Finding:
    """A compose service named after an engine (`ollama`, `vllm`) whose image is a variable the
    repository does not set (Harbor writes it in a generated .env): no server is read from it,
    and that is said, not skipped."""
    from servefit.sources.unset_vars import unresolved

    shown = var if var.startswith("$") else f"${{{var}}}"
    return unresolved(f"{shown} is not set in this repository: the image service '{service}' runs is not known, so "
                      "whether it is an inference server, and its settings, are not checked", image.span)
