"""`servefit tune` end to end: the issue's done-when check, the seed exercise, output formats,
usage errors, measured mode, and the fast path staying free of optuna."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.pipeline import Target, evaluate
from servefit.sources import scan_file

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "tune"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["tune", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def copy(tmp_path: Path, name: str) -> Path:
    (tmp_path / ".git").mkdir(exist_ok=True)
    dst = tmp_path / name
    shutil.copy2(FIXTURES / name, dst)
    return dst


def test_done_when_a_failing_manifest_passes_with_the_most_users(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`servefit tune FILE --gpu L4 --min-context 32k --diff` prints a diff; applied, the vLLM
    Deployment that was refused starts with 32K context for the most users tune found."""
    p = copy(tmp_path, "k8s-vllm-l4.yaml")
    before = evaluate(scan_file(str(p)).sites[0], Target(gpu="L4")).plan
    assert before.outcome != "started"
    t0 = time.perf_counter()
    rc, out, _ = run_cli(capsys, str(p), "--gpu", "L4", "--min-context", "32k", "--diff")
    elapsed = time.perf_counter() - t0
    assert rc == 0
    assert "--- a/" in out and '-            - "131072"' in out and '+            - "32768"' in out
    assert elapsed < 10  # the issue asks for < 3 s; benchmarks/tune_speed.py measures it
    rc, out, _ = run_cli(capsys, str(p), "--gpu", "L4", "--min-context", "32k", "--write", "--format", "json")
    assert rc == 0
    best = json.loads(out)["sites"][0]["best"]
    after = evaluate(scan_file(str(p)).sites[0], Target(gpu="L4")).plan
    assert after.outcome == "started" and after.max_model_len >= 32768
    assert min(int(after.max_concurrency), after.detail.max_num_seqs) == best["users"] >= 1
    # linting the output reports no error
    assert main(["lint", str(p), "--gpu", "L4"]) == 0
    capsys.readouterr()


def test_seed_001_exercise_2_users_at_128k_on_an_h200(capsys: pytest.CaptureFixture[str]) -> None:
    """Seed 001, exercise 2: Llama-3 8B at 128K context on an H200, fp16 vs 8-bit KV cache.
    Llama-3 8B's own limit is 8,192 tokens, so the 128K question is asked of Llama-3.1-8B (the
    same architecture with a 128K rope). The seed's arithmetic: 128 KiB of KV per token, 16 GiB
    per 128K user; vLLM's budget on the H200 (139.8 GiB x 0.92) minus the weights and its
    activation terms leaves room for 7 such users in bf16 and 14 with an fp8 cache."""
    rc, out, _ = run_cli(capsys, "--gpu", "H200", "--min-context", "128k", "--allow", "kv=fp8",
                         "--objective", "concurrency", "--format", "json", "--", "vllm", "serve", LLAMA)
    assert rc == 0
    site = json.loads(out)["sites"][0]
    levels = {r["kv_cache_dtype"].split()[0]: r["users"] for r in site["by_quality"]}
    assert site["best"]["context"] == 131072 and site["best"]["kv_cache_dtype"] == "fp8"
    assert levels == {"auto": 7, "fp8": 14}
    assert "--kv-cache-dtype fp8" in json.loads(out)["command"]


def test_command_mode_prints_the_tuned_command(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "--", "vllm", "serve", LLAMA, "--max-model-len", "131072", "--gpu", "L4",
                         "--min-context", "32k")
    assert rc == 0
    line = out.split("tuned command:\n", 1)[1].strip().splitlines()[0]
    assert line.startswith(f"vllm serve {LLAMA} --max-model-len 32768")


def test_text_report_shows_the_pareto_front(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "--gpu", "H200", "--min-context", "32k", "--allow", "kv=fp8", "--",
                         "vllm", "serve", LLAMA)
    assert rc == 0
    assert "Pareto front" in out
    header = next(ln for ln in out.splitlines() if ln.split()[:2] == ["context", "users"])
    assert header.split() == ["context", "users", "KV", "dtype", "quantization", "headroom"]


def test_unsafe_changes_need_unsafe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = copy(tmp_path, "k8s-vllm-l4.yaml")
    original = p.read_text()
    args = [str(p), "--min-context", "64k", "--min-concurrency", "2", "--allow", "kv=fp8", "quant=fp8"]
    rc, out, _ = run_cli(capsys, *args, "--write")
    assert "[unsafe]" in out and "only candidates that change the checkpoint or its quantization" in out
    assert f"apply this one with: servefit tune {p} " in out and "--write --unsafe" in out
    assert rc == 1  # a better config exists and nothing was written
    assert p.read_text() == original
    rc, out, _ = run_cli(capsys, *args, "--write", "--unsafe")
    assert rc == 0 and "wrote" in out
    assert '- "--quantization"' in p.read_text()


def test_no_feasible_config_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "--gpu", "L4", "--min-context", "128k", "--min-concurrency", "8", "--",
                         "vllm", "serve", LLAMA)
    assert rc == 1 and "nothing meets the needs" in out


@pytest.mark.parametrize("args", [["--allow", "bogus"], ["--objective", "speed"], ["--headroom", "x%"],
                                  ["--min-context", "lots"]])
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    rc, _, err = run_cli(capsys, "--gpu", "L4", *args, "--", "vllm", "serve", LLAMA)
    assert rc == 2 and "servefit: error:" in err


def test_write_needs_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(capsys, "--gpu", "L4", "--write", "--", "vllm", "serve", LLAMA)
    assert rc == 2 and "--write needs a file" in err


def test_headroom_is_a_constraint(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "--gpu", "H100", "--min-context", "32k", "--headroom", "15%", "--format", "json",
                         "--", "vllm", "serve", LLAMA)
    assert rc == 0
    best = json.loads(out)["sites"][0]["best"]
    assert best["headroom"] >= 0.15 and best["settings"]["gpu_memory_utilization"] <= 0.85


def test_measured_mode_runs_the_benchmark_only_for_accepted_candidates(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "runs.log"
    bench = tmp_path / "bench.py"
    bench.write_text(
        "import json, sys\n"
        f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        "a = sys.argv[1:]\n"
        "seqs = int(a[a.index('--max-num-seqs') + 1])\n"
        "fp8 = a[a.index('--kv-cache-dtype') + 1] == 'fp8'\n"
        "print('warming up')\n"
        "print(json.dumps({'throughput': seqs * (2 if fp8 else 1)}))\n")
    rc, out, _ = run_cli(capsys, "--gpu", "L4", "--min-context", "32k", "--allow", "kv=fp8", "--trials", "12",
                         "--storage", f"sqlite:///{tmp_path / 'm.db'}", "--bench-cmd",
                         f"{sys.executable} {bench} {{flags}}", "--format", "json", "--", "vllm", "serve", LLAMA)
    assert rc == 0
    site = json.loads(out)["sites"][0]
    runs = log.read_text().splitlines()
    assert 0 < len(runs) <= 12
    assert all("--max-model-len" in r for r in runs)
    assert site["best"]["metric"] == max(
        int(r.split("--max-num-seqs ")[1].split()[0]) * (2 if "--kv-cache-dtype fp8" in r else 1) for r in runs)
    import optuna

    trials = optuna.load_study(study_name=site["search"]["study"], storage=f"sqlite:///{tmp_path / 'm.db'}").trials
    assert {t.state.name for t in trials} == {"COMPLETE"}  # none waiting in a queue two workers could both take
    assert not [t.number for t in trials if "fixed_params" in t.system_attrs]
    assert len(runs) == len({r for r in runs})  # each candidate benchmarked once


def test_lint_and_estimate_never_import_optuna(tmp_path: Path) -> None:
    p = copy(tmp_path, "k8s-vllm-l4.yaml")
    code = ("import sys\nfrom servefit.cli import main\n"
            f"main(['lint', {str(p)!r}])\nmain(['estimate', '--gpu', 'L4', '--', 'vllm', 'serve', {LLAMA!r}])\n"
            "assert 'optuna' not in sys.modules, 'optuna imported'\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_allow_applies_the_best_safe_candidate_and_names_the_unsafe_one(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's reproduction: `--allow kv=fp8 quant=fp8 --write` picked an unsafe candidate,
    wrote nothing and exited 0. Now the best candidate within safe edits is written and the
    better unsafe one is named with the command that applies it."""
    p = copy(tmp_path, "k8s-vllm-l4.yaml")
    original = p.read_text()
    args = [str(p), "--gpu", "L4", "--min-context", "32k", "--allow", "kv=fp8", "quant=fp8"]
    rc, out, _ = run_cli(capsys, *args, "--write", "--format", "json")
    assert rc == 0
    site = json.loads(out)["sites"][0]
    assert site["best"]["quantization"] == "none" and site["best"]["kv_cache_dtype"] == "fp8"
    assert site["unsafe_better"]["quantization"].startswith("online fp8")
    assert site["unsafe_better"]["users"] > site["best"]["users"]
    assert site["unsafe_better"]["command"].endswith("--write --format json --unsafe")
    assert site["fix"]["applied"] is True and site["fix"]["applicability"] == "safe"
    new = p.read_text()
    assert new != original and "--quantization" not in new and '- "--kv-cache-dtype"\n            - "fp8"' in new
    rc, out, _ = run_cli(capsys, *args)
    assert "unsafe  better, but it changes the checkpoint or its quantization" not in out
    assert "only candidates that change the checkpoint or its quantization (unsafe) beat the current config" in out
    assert rc == 1  # now only the unsafe candidate beats what was written


def test_unsafe_better_line_when_a_safe_candidate_is_applied(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    p = copy(tmp_path, "k8s-vllm-l4.yaml")
    rc, out, _ = run_cli(capsys, str(p), "--gpu", "L4", "--min-context", "32k", "--allow", "kv=fp8", "quant=fp8")
    assert rc == 0
    assert "  unsafe  better, but it changes the checkpoint or its quantization: context 32,768 x 5 users" in out


def _counting_bench(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "runs.log"
    bench = tmp_path / "bench.py"
    bench.write_text(
        "import json, sys\n"
        f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        "a = sys.argv[1:]\n"
        "ctx = int(a[a.index('--max-model-len') + 1])\n"
        "seqs = int(a[a.index('--max-num-seqs') + 1]) if '--max-num-seqs' in a else 256\n"
        "print(json.dumps({'throughput': seqs + ctx / 1024}))\n")
    return bench, log


def test_trials_count_benchmark_runs_and_rejected_candidates_are_free(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's reproduction: `--trials 6` on Llama-3.1-8B / L4 benchmarked one candidate (the
    memory model's rejections used up the trials) and reported that nothing met the needs."""
    bench, log = _counting_bench(tmp_path)
    db = f"sqlite:///{tmp_path / 'm.db'}"
    args = ["--gpu", "L4", "--trials", "6", "--storage", db, "--bench-cmd", f"{sys.executable} {bench} {{flags}}",
            "--format", "json", "--", "vllm", "serve", LLAMA]
    rc, out, err = run_cli(capsys, *args)
    assert rc == 0 and err == ""  # no progress bar when stderr is not a terminal
    site = json.loads(out)["sites"][0]
    runs = log.read_text().splitlines()
    assert len(runs) == 6 == site["search"]["benchmark_runs"]
    assert site["search"]["rejected_by_memory_model"] > 0 and site["best"]["feasible"]
    assert site["best"]["metric"] == max(float(r.split("--max-model-len ")[1].split()[0]) / 1024 +
                                         (int(r.split("--max-num-seqs ")[1].split()[0]) if "--max-num-seqs" in r
                                          else 256) for r in runs)
    rejected = site["search"]["rejected_by_memory_model"]
    # resumed from --storage: the next 6 are new candidates, none benchmarked twice
    rc, out, _ = run_cli(capsys, *args)
    site = json.loads(out)["sites"][0]
    runs = log.read_text().splitlines()
    assert len(runs) == 12 and len(set(runs)) == 12
    assert site["search"]["benchmark_runs"] == 6 and site["search"]["resumed_from_storage"] == 6
    # a budget larger than the space: every candidate the memory model accepts, once
    rc, out, _ = run_cli(capsys, *args[:2], "--trials", "1000", *args[4:])
    site = json.loads(out)["sites"][0]
    runs = log.read_text().splitlines()
    assert len(runs) == len(set(runs)) == site["search"]["space_size"] - rejected


def test_progress_bar_on_a_terminal_shows_trials_best_and_time_per_run(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    bench, _ = _counting_bench(tmp_path)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    rc, out, err = run_cli(capsys, "--gpu", "L4", "--trials", "3", "--storage", f"sqlite:///{tmp_path / 'p.db'}",
                           "--bench-cmd", f"{sys.executable} {bench} {{flags}}", "--", "vllm", "serve", LLAMA)
    assert rc == 0
    assert "tune: benchmark 3/3  best " in err and " s/run" in err
    assert "measured, 3 benchmark runs" in out and "rejected by the memory model (not run)" in out
