"""No network unless asked: with sockets disabled, lint, estimate, explain, tune and diagnose
all still work (exit 0 or 1) from the catalogs shipped with servefit."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path

import pytest

from servefit.cli import main

ROOT = Path(__file__).resolve().parents[1]
LOG = ROOT / "tests" / "fixtures" / "logs" / "vllm_kv_refusal.log"


class NetworkUsed(AssertionError):
    pass


@pytest.fixture
def offline(monkeypatch):
    def refuse(*args, **kwargs):
        raise NetworkUsed(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


VLLM = ["--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "32768"]
COMMANDS = {
    "lint": ["lint", str(ROOT / "examples")],
    "lint-sarif": ["lint", str(ROOT / "examples"), "--format", "sarif"],
    "estimate": ["estimate", "--gpu", "L4", *VLLM],
    "estimate-json": ["estimate", "--gpu", "H100", "--format", "json", *VLLM],
    "explain": ["explain", "--gpu", "L4", "--sweep", "context", *VLLM],
    "tune": ["tune", "--gpu", "L4", "--min-context", "8k", *VLLM],
    "diagnose": ["diagnose", "--no-progress", str(LOG)],
    "models": ["models", str(ROOT / "examples")],
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_commands_work_with_sockets_disabled(name, offline, capsys, tmp_path, monkeypatch):
    args = COMMANDS[name]
    if importlib.util.find_spec(f"servefit.commands.{args[0]}") is None:
        pytest.skip(f"servefit {args[0]} is not in this build")
    monkeypatch.chdir(tmp_path)  # tune writes nothing without --write; keep the cwd clean anyway
    rc = main(args)
    out = capsys.readouterr()
    assert rc in (0, 1), out.err
    assert out.out.strip(), out.err
    assert "network access attempted" not in out.err


def test_the_guard_itself_trips(offline):
    with pytest.raises(NetworkUsed):
        socket.create_connection(("huggingface.co", 443))
