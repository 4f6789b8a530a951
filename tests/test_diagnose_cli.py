"""`servefit diagnose` from the command line: the JSON contract, exit codes, stdin and .gz
input, the config the fix points into (--config-file, --repo), and progress on large logs."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import sys
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.diagnose import reader

LOGS = Path(__file__).parent / "fixtures" / "logs"
MANIFEST = LOGS / "k8s_vllm_deployment.yaml"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["diagnose", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, str(LOGS / "vllm_kv_refusal.log"), "--format", "json")
    assert rc == 0
    doc = json.loads(out)
    assert {"root_cause", "engine", "evidence", "figures", "fix"} <= set(doc)
    assert doc["root_cause"] == "kv_cache_overflow" and doc["engine"] == "vllm"
    assert all(set(e) == {"line", "text"} and isinstance(e["line"], int) for e in doc["evidence"])
    assert doc["evidence"][-1]["line"] == 34 and "To serve at least one request" in doc["evidence"][-1]["text"]
    assert doc["figures"]["kv_cache_needed"] == 16 * 2**30
    assert isinstance(doc["fix"], list) and doc["fix"]
    assert doc["timing"] == "startup" and doc["signature"] == "vllm.kv_refusal"


def test_json_for_a_clean_log(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, str(LOGS / "vllm_clean.log"), "--format", "json")
    doc = json.loads(out)
    assert rc == 0
    assert (doc["root_cause"], doc["engine"], doc["evidence"], doc["fix"]) == ("none", "vllm", [], [])
    assert doc["summary"] == "no OOM signature found"


def test_several_logs_give_a_list(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, str(LOGS / "tgi_prefill.log"), str(LOGS / "sglang_mem_fraction.log"), "--format", "json")
    docs = json.loads(out)
    assert rc == 0 and [d["engine"] for d in docs] == ["tgi", "sglang"]


def test_text_report(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, str(LOGS / "vllm_fragmentation.log"))
    assert rc == 0
    assert "Memory fragmentation" in out and "after 9 h 09 min of uptime" in out
    assert "  32 | torch.cuda.OutOfMemoryError" in out
    assert "fragmentation_gap" in out and "8.36 GiB" in out
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in out
    rc, out, _ = run(capsys, str(LOGS / "llamacpp_clean.log"))
    assert rc == 0 and "No OOM signature found" in out


def test_token_counts_are_not_redacted_but_secrets_are(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("INFO 05-16 10:00:00 [utils.py:1] non-default args: {'max_num_seqs': 1024} "
                   "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123 max_num_batched_tokens=65536\n"
                   "RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests.\n")
    rc, out, _ = run(capsys, str(log), "--format", "json")
    text = json.dumps(json.loads(out)["evidence"])
    assert "hf_abc" not in text and "max_num_batched_tokens=65536" in text


@pytest.mark.parametrize("make", ["missing", "directory", "binary", "bad_gzip"])
def test_unreadable_input_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, make: str) -> None:
    path = tmp_path / "log"
    if make == "directory":
        path.mkdir()
    elif make == "binary":
        path.write_bytes(b"\x7fELF\x00\x00\x01binary")
    elif make == "bad_gzip":
        path.write_bytes(b"\x1f\x8bnot really gzip")
    rc, out, err = run(capsys, str(path))
    assert rc == 2 and out == ""
    assert err.startswith("servefit: error: ") and err.count("\n") == 1


def test_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    data = (LOGS / "tgi_prefill.log").read_bytes()
    for argv in (["-"], []):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        rc, out, _ = run(capsys, *argv, "--format", "json")
        doc = json.loads(out)
        assert rc == 0 and doc["root_cause"] == "profiling_peak" and doc["source"] == "<stdin>"


def test_gzip_log(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    gz = tmp_path / "server.log.gz"
    gz.write_bytes(gzip.compress((LOGS / "llamacpp_kv_oom.log").read_bytes()))
    rc, out, _ = run(capsys, str(gz), "--format", "json")
    assert rc == 0 and json.loads(out)["root_cause"] == "kv_cache_overflow"


def test_config_file_names_the_setting_and_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, str(LOGS / "vllm_kv_refusal.log"), "--config-file", str(MANIFEST), "--format", "json")
    doc = json.loads(out)
    assert rc == 0
    setting = doc["setting"]
    assert (setting["name"], setting["flag"], setting["value"]) == ("max_model_len", "--max-model-len", "131072")
    assert (setting["file"], setting["line"], setting["explicit"]) == (str(MANIFEST), 27, True)
    assert doc["fix"][0].startswith(f"{MANIFEST}:27: Lower --max-model-len (now 131072) to 32768")
    assert doc["tune"] == f"servefit tune {MANIFEST} --gpu nvidia-l4 --diff"
    assert doc["fix"][-1].endswith(doc["tune"])


def test_config_file_batch_and_unset_setting(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, str(LOGS / "vllm_first_batch.log"), "--config-file", str(MANIFEST), "--format", "json")
    doc = json.loads(out)
    assert (doc["setting"]["name"], doc["setting"]["line"]) == ("max_num_seqs", 29)
    _, out, _ = run(capsys, str(LOGS / "vllm_fragmentation.log"), "--config-file", str(MANIFEST), "--format", "json")
    doc = json.loads(out)
    assert doc["setting"]["name"] == "PYTORCH_CUDA_ALLOC_CONF" and doc["setting"]["explicit"] is False
    assert doc["fix"][0].startswith(f"{MANIFEST}:24: Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")


def test_long_request_tune_asks_for_the_context(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, str(LOGS / "vllm_long_request.log"), "--config-file", str(MANIFEST), "--format", "json")
    assert json.loads(out)["tune"] == f"servefit tune {MANIFEST} --gpu nvidia-l4 --min-context 118k --diff"


def test_repo_finds_the_server(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "k8s").mkdir()
    shutil.copy(MANIFEST, tmp_path / "k8s" / "vllm.yaml")
    (tmp_path / "README.md").write_text("vllm serve docs\n")
    rc, out, _ = run(capsys, str(LOGS / "vllm_kv_refusal.log"), "--repo", str(tmp_path), "--format", "json")
    doc = json.loads(out)
    assert rc == 0
    assert doc["setting"]["file"].endswith("k8s/vllm.yaml") and doc["setting"]["line"] == 27


def test_config_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, _, err = run(capsys, str(LOGS / "vllm_kv_refusal.log"), "--config-file", str(MANIFEST), "--repo", ".")
    assert rc == 2 and "not both" in err
    empty = tmp_path / "empty.yaml"
    empty.write_text("a: 1\n")
    rc, _, err = run(capsys, str(LOGS / "vllm_kv_refusal.log"), "--config-file", str(empty))
    assert rc == 2 and "no serving engine" in err


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def _big_log(tmp_path: Path) -> Path:
    path = tmp_path / "big.log"
    filler = "".join(f"(APIServer pid=1) INFO:     10.0.0.1:{i} - \"GET /health HTTP/1.1\" 200 OK\n"
                     for i in range(20000))
    path.write_text((LOGS / "vllm_kv_refusal.log").read_text() + filler)
    return path


def test_progress_on_a_terminal_for_large_logs(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = _big_log(tmp_path)
    monkeypatch.setattr(reader, "PROGRESS_MIN_BYTES", 1000)
    monkeypatch.setattr(reader, "PROGRESS_EVERY", 0.0)
    tty = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    assert main(["diagnose", str(path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["root_cause"] == "kv_cache_overflow"
    assert "servefit diagnose: " in tty.getvalue() and "GB (" in tty.getvalue()
    tty2 = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty2)
    main(["diagnose", str(path), "--no-progress"])
    assert tty2.getvalue() == ""


def test_no_progress_when_not_a_terminal_or_small(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, _, err = run(capsys, str(_big_log(tmp_path)))
    assert rc == 0 and err == ""  # capsys' stderr is not a TTY, and the file is far below 50 MB


def test_overlong_lines_are_cut_but_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "MAX_LINE", 64)
    path = tmp_path / "x.log"
    path.write_text("x" * 1000 + "\nRuntimeError: CUDA error: out of memory\n")
    from servefit.diagnose import diagnose_path

    d = diagnose_path(str(path), progress=False)
    assert d.lines_read == 2 and [e.number for e in d.evidence] == [2]
