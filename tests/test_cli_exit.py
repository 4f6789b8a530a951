"""`python -m servefit` / the console script end through cli.entry: exit handlers run, every
byte of output arrives, and the exit status is main()'s, though the interpreter is not torn down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
K8S = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-{i}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args: ["meta-llama/Llama-3.1-70B-Instruct", "--max-model-len", "131072"]
          resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""


def _run(args: list[str], cache: Path, **kw) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, XDG_CACHE_HOME=str(cache))
    env.pop("SERVEFIT_NO_CACHE", None)
    env.pop("PYTHONUNBUFFERED", None)  # output is buffered, as on a user's machine
    return subprocess.run([sys.executable, "-m", "servefit", *args], env=env, capture_output=True, text=True, **kw)


def test_the_status_is_mains_and_all_output_arrives(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    for i in range(60):  # ~30 KB of findings: more than one buffer's worth
        (repo / f"vllm-{i}.yaml").write_text(K8S.format(i=i))
    out = _run(["lint", str(repo), "--gpu", "L4"], tmp_path / "cache")
    lines = out.stdout.splitlines()
    assert out.returncode == 1 and out.stderr == ""
    assert lines[-1] == "60 errors, 0 warnings, 60 info in 60 files (60 servers)"
    assert sum(line.startswith(str(repo)) for line in lines) == 120
    assert _run(["lint", str(repo), "--gpu", "L4", "--exit-zero"], tmp_path / "cache").returncode == 0
    report = tmp_path / "out" / "report.json"
    report.parent.mkdir()
    done = _run(["lint", str(repo), "--gpu", "L4", "--format", "json", "-o", str(report)], tmp_path / "cache")
    assert done.returncode == 1 and len(json.loads(report.read_text())) == 120


def test_exit_handlers_run_and_a_short_report_is_flushed(tmp_path):
    (tmp_path / "a.yaml").write_text(K8S.format(i=0))
    out = _run(["lint", str(tmp_path / "a.yaml"), "--gpu", "L4"], tmp_path / "cache")
    # a short report stays in the output buffer until the exit flushes it
    assert out.stdout.endswith("\n1 error, 0 warnings, 1 info in 1 file (1 server)\n") and out.returncode == 1
    # written by an atexit handler (servefit/codecache.py) on the first run
    assert [p.name for p in (tmp_path / "cache" / "servefit").glob("compiled-*.marshal")]


def test_usage_errors_and_version_exit_as_before(tmp_path):
    bad = _run(["lint", str(tmp_path / "missing.yaml")], tmp_path / "cache")
    assert bad.returncode == 2 and bad.stderr.startswith("servefit: error: ") and bad.stdout == ""
    version = _run(["--version"], tmp_path / "cache")
    assert version.returncode == 0 and version.stdout.startswith("servefit ")


def test_a_closed_pipe_ends_quietly(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    for i in range(300):
        (repo / f"vllm-{i}.yaml").write_text(K8S.format(i=i))
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    proc = subprocess.Popen([sys.executable, "-m", "servefit", "lint", str(repo), "--gpu", "L4"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait() in (0, 1) and "Traceback" not in err and "Exception ignored" not in err


def test_the_cycle_collector_stays_on_for_the_long_commands(tmp_path, monkeypatch):
    """lint runs without the cycle collector (start-up objects live to the end); tune's search
    and diagnose's log reading can run long, so they keep it."""
    import gc

    from servefit import cli

    seen: dict[str, bool] = {}
    monkeypatch.setattr(cli, "main", lambda: seen.setdefault(sys.argv[1], gc.isenabled()) and 0 or 0)
    import atexit

    monkeypatch.setattr(os, "_exit", lambda code: None)
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: None)  # pytest's own handlers stay for its exit
    monkeypatch.setenv("SERVEFIT_NO_CACHE", "1")
    try:
        for command in ("lint", "tune", "diagnose", "estimate"):
            gc.enable()
            monkeypatch.setattr(sys, "argv", ["servefit", command])
            cli.entry()
    finally:
        gc.enable()
    assert seen == {"lint": False, "tune": True, "diagnose": True, "estimate": False}
