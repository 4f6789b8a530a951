"""The hook as users install it: a git repo in a temporary directory, this checkout as the hook
repository, the real `pre-commit` tool; the hook passes on a good config and fails with the
finding on a bad one. Skipped when pre-commit or git is not installed (the test extra installs
pre-commit)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOOD = """apiVersion: apps/v1
kind: Deployment
metadata: {name: llm}
spec:
  template:
    spec:
      nodeSelector: {cloud.google.com/gke-accelerator: nvidia-l4}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args: ["meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"]
          resources: {limits: {nvidia.com/gpu: 1}}
"""
BAD = GOOD.replace('"--max-model-len", "8192"', '"--max-model-len", "131072"')

pytestmark = pytest.mark.skipif(not shutil.which("pre-commit") or not shutil.which("git"),
                                reason="pre-commit and git are needed")


def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PRE_COMMIT_HOME=str(cwd.parent / "pc-home"), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    env.pop("PYTHONPATH", None)  # the hook runs from its own environment, built from this checkout
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=900)


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    """This checkout as a git repository pre-commit can install from (working tree as it is now)."""
    src = tmp_path_factory.mktemp("hook") / "servefit"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "*.egg-info", "__pycache__", ".venv", "build",
                                                             ".mypy_cache", ".ruff_cache", ".pytest_cache"))
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "hook"]):
        assert run(cmd, src).returncode == 0
    return src


def test_hook_passes_on_good_and_fails_on_bad(tmp_path, hook_repo):
    repo = tmp_path / "deploy"
    repo.mkdir()
    rev = run(["git", "rev-parse", "HEAD"], hook_repo).stdout.strip()
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hook_repo}\n    rev: {rev}\n    hooks:\n      - id: servefit\n")
    (repo / "vllm.yaml").write_text(GOOD)
    assert run(["git", "init", "-q"], repo).returncode == 0
    assert run(["git", "add", "-A"], repo).returncode == 0
    ok = run(["pre-commit", "run", "--all-files"], repo)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "servefit (serving configs)" in ok.stdout and "Passed" in ok.stdout
    (repo / "vllm.yaml").write_text(BAD)
    bad = run(["pre-commit", "run", "--all-files"], repo)
    assert bad.returncode == 1
    assert "Failed" in bad.stdout
    assert "vllm.yaml:11:" in bad.stdout and "VLLM003" in bad.stdout
