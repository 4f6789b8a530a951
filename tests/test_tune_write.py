"""`tune --write`: atomic, refuses files changed since read, keeps mode and line endings, never
follows a symlink out of the repository, survives a SIGKILL mid-write; diffs mask credentials;
several workers share one SQLite study."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from servefit.tune.write import WriteRefused, atomic_write

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "tune"


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + e.get("PYTHONPATH", "")
    return e


def tune(*args: str, cwd: Path, extra: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "servefit", "tune", *args], cwd=cwd, env={**env(), **(extra or {})},
                          capture_output=True, text=True, timeout=timeout)


def repo(tmp_path: Path, *names: str) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    (r / ".git").mkdir()
    for n in names:
        shutil.copy2(FIXTURES / n, r / n)
    return r


def test_atomic_write_keeps_mode_and_bytes(tmp_path: Path) -> None:
    r = repo(tmp_path)
    f = r / "run.sh"
    f.write_bytes(b"a\r\nb\r\n")
    os.chmod(f, 0o750)
    atomic_write(str(f), "a\r\nc\r\n", "a\r\nb\r\n")
    assert f.read_bytes() == b"a\r\nc\r\n"
    assert stat.S_IMODE(f.stat().st_mode) == 0o750
    assert [p.name for p in r.iterdir() if p.name.endswith(".servefit-tmp")] == []


def test_refuses_a_file_changed_since_it_was_read(tmp_path: Path) -> None:
    r = repo(tmp_path)
    f = r / "x.yaml"
    f.write_text("new contents\n")
    with pytest.raises(WriteRefused, match="changed since"):
        atomic_write(str(f), "patched\n", "old contents\n")
    assert f.read_text() == "new contents\n"


def test_symlinks_inside_the_repo_are_written_through_outside_refused(tmp_path: Path) -> None:
    r = repo(tmp_path)
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text("x: 1\n")
    (r / "out.yaml").symlink_to(outside)
    with pytest.raises(WriteRefused, match="outside"):
        atomic_write(str(r / "out.yaml"), "x: 2\n", "x: 1\n", root=str(r))
    assert outside.read_text() == "x: 1\n"
    target = r / "real.yaml"
    target.write_text("x: 1\n")
    (r / "link.yaml").symlink_to(target)
    atomic_write(str(r / "link.yaml"), "x: 2\n", "x: 1\n", root=str(r))
    assert target.read_text() == "x: 2\n" and (r / "link.yaml").is_symlink()


def test_write_twice_is_a_no_op_and_keeps_mode(tmp_path: Path) -> None:
    r = repo(tmp_path, "serve.sh", "k8s-crlf.yaml")
    os.chmod(r / "serve.sh", 0o755)
    for name in ("serve.sh", "k8s-crlf.yaml"):
        first = tune(name, "--gpu", "L4", "--min-context", "32k", "--write", cwd=r)
        assert first.returncode == 0, first.stderr
        assert f"wrote {name}" in first.stdout
        once = (r / name).read_bytes()
        second = tune(name, "--gpu", "L4", "--min-context", "32k", "--write", cwd=r)
        assert second.returncode == 0, second.stderr
        assert "wrote" not in second.stdout and "already the best" in second.stdout
        assert (r / name).read_bytes() == once
    assert stat.S_IMODE((r / "serve.sh").stat().st_mode) == 0o755
    crlf = (r / "k8s-crlf.yaml").read_bytes()
    assert crlf.count(b"\n") == crlf.count(b"\r\n")


def test_killed_writer_leaves_the_old_file(tmp_path: Path) -> None:
    r = repo(tmp_path, "k8s-vllm-l4.yaml")
    target = r / "k8s-vllm-l4.yaml"
    before = target.read_bytes()
    proc = subprocess.Popen([sys.executable, "-m", "servefit", "tune", target.name, "--min-context", "32k",
                             "--write"], cwd=r, env={**env(), "SERVEFIT_TUNE_WRITE_PAUSE": "60"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    tmp: list[Path] = []
    while time.time() < deadline and not tmp:
        tmp = [p for p in r.iterdir() if p.name.endswith(".servefit-tmp")]
        time.sleep(0.05)
    assert tmp, "the writer never reached its temporary file"
    time.sleep(0.2)  # the temporary file is complete (fsync'd) before the pause
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert target.read_bytes() == before  # the old file, whole
    assert b"32768" in tmp[0].read_bytes()  # the new one was ready: the kill fell between the two steps


def test_diff_masks_credentials_but_the_file_keeps_them(tmp_path: Path) -> None:
    r = repo(tmp_path, "k8s-vllm-l4.yaml", "k8s-sh-c.yaml")
    for name, secret in (("k8s-vllm-l4.yaml", "hf_abcdefghijklmnopqrstuvwxyz0123"),
                         ("k8s-sh-c.yaml", "sk-supersecretvalue1234567890")):
        out = tune(name, "--min-context", "32k", "--diff", "--write", cwd=r)
        assert out.returncode == 0, out.stderr
        assert secret not in out.stdout and "--- a/" in out.stdout  # context narrowed, or masked
        assert secret in (r / name).read_text()
    out = tune("--gpu", "L4", "--min-context", "32k", "--format", "json", "--", "vllm", "serve",
               "meta-llama/Llama-3.1-8B-Instruct", "--api-key", "sk-abcdefghijklmnopqrstuvwxyz", cwd=r)
    assert out.returncode == 0, out.stderr
    assert "sk-abcdefghijklmnopqrstuvwxyz" not in out.stdout


def test_two_workers_share_one_sqlite_study(tmp_path: Path) -> None:
    r = repo(tmp_path, "k8s-vllm-l4.yaml")
    db = tmp_path / "study.db"
    args = ["k8s-vllm-l4.yaml", "--min-context", "32k", "--allow", "kv=fp8", "--storage", f"sqlite:///{db}",
            "--study", "shared", "--trials", "12", "--format", "json"]
    procs = [subprocess.Popen([sys.executable, "-m", "servefit", "tune", *args], cwd=r, env=env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    import optuna

    study = optuna.load_study(study_name="shared", storage=f"sqlite:///{db}")
    finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(study.trials) == len(finished) == 24
    assert (r / "k8s-vllm-l4.yaml").read_bytes() == (FIXTURES / "k8s-vllm-l4.yaml").read_bytes()  # no --write
