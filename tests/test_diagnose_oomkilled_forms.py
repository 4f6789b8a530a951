"""OOMKilled is a Kubernetes / Docker status, read where they report it; a document's prose about
it ("Risk of OOMKilled if the model is too large", from a Helm chart's README given to diagnose)
was taken as the event: "Model too large for the host memory" with the README's `memory: 24Gi`
example as the container's limit."""

from __future__ import annotations

import pytest

from servefit.diagnose import diagnose_lines


def _signature(text: str) -> str | None:
    return diagnose_lines(text.splitlines(keepends=True)).signature


@pytest.mark.parametrize("text", [
    "Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n",
    "NAME                    READY   STATUS      RESTARTS   AGE\nvllm-6d8f7b9c4-kq2zt    0/1     OOMKilled   3          12m\n",
    '{"lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}\n',
    "        reason: OOMKilled\n",
    '            "OOMKilled": true,\n',
    "State: Terminated (OOMKilled)\n",
])
def test_kubernetes_and_docker_forms(text: str) -> None:
    assert _signature(text) == "k8s.oomkilled"


@pytest.mark.parametrize("text", [
    "- Risk of OOMKilled if the model is too large for available memory\n",
    "To prevent OOMKilled errors and ensure proper scheduling, set memory limits based on your model:\n",
    "# Recommended for production to prevent OOMKilled\n",
    '            "OOMKilled": false,\n',
])
def test_prose_and_a_false_flag_are_no_event(text: str) -> None:
    assert _signature(text) != "k8s.oomkilled"
