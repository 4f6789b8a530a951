"""--gpu and --gpu-memory across the commands: a misspelled GPU is exit 2 with the nearest
names in lint as in estimate; --gpu-memory sizes a card the catalog does not list."""

from __future__ import annotations

import json

import pytest

from servefit.cli import main

CMD = ["--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"]


@pytest.fixture
def script(tmp_path):
    f = tmp_path / "serve.sh"
    f.write_text("#!/bin/sh\nvllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192\n", encoding="utf-8")
    return str(f)


def test_lint_misspelled_gpu_is_exit_2_with_did_you_mean(capsys, script):
    assert main(["lint", script, "--gpu", "L4x"]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err == ("servefit: error: --gpu: unknown GPU 'L4x'; did you mean: l4, l40, l40s? (servefit gpus lists "
                       "them; --gpu-memory SIZE sets the memory of an unlisted card)\n")


def test_estimate_misspelled_gpu_is_the_same_line(capsys):
    assert main(["estimate", "--gpu", "L4x", *CMD]) == 2
    assert "unknown GPU 'L4x'; did you mean: l4, l40, l40s?" in capsys.readouterr().err


def test_lint_config_default_gpu_misspelled(capsys, script, tmp_path):
    cfg = tmp_path / "servefit.toml"
    cfg.write_text('gpu = "H100 SMX"\n', encoding="utf-8")
    assert main(["lint", script, "--config", str(cfg)]) == 2
    assert capsys.readouterr().err.startswith("servefit: error: config gpu: unknown GPU 'H100 SMX'; did you mean: ")


def test_estimate_sizes_an_unlisted_card(capsys):
    assert main(["estimate", "--gpu", "My Card", "--gpu-memory", "48GiB", "--format", "json", *CMD]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["gpu"]["name"] == "My Card" and plan["gpu"]["memory_bytes"] == 48 * 2**30
    assert "'My Card' is not in the catalog" in plan["gpu"]["source"]


def test_lint_sizes_an_unlisted_card(capsys, script):
    assert main(["lint", script, "--gpu", "My Card", "--gpu-memory", "48GiB", "--format", "json"]) == 0
    codes = {f["code"] for f in json.loads(capsys.readouterr().out)}
    assert "SF003" not in codes and "SF110" not in codes
    # the same card at 12 GiB cannot hold the 14.2 GiB of weights: lint evaluated it
    assert main(["lint", script, "--gpu", "My Card", "--gpu-memory", "12GiB", "--format", "json"]) == 1
    errors = [f for f in json.loads(capsys.readouterr().out) if f["severity"] == "error"]
    assert errors and "My Card" in json.dumps(errors)


def test_explain_sizes_an_unlisted_card(capsys):
    # 12 GiB cannot hold the 7B's 14.2 GiB of weights: explained, and exit 1 as lint would
    assert main(["explain", "--gpu", "My Card", "--gpu-memory", "12GiB", *CMD]) == 1
    assert "1 × My Card (12.00 GiB" in capsys.readouterr().out


def test_unlisted_without_memory_is_still_unknown(capsys):
    assert main(["explain", "--gpu", "My Card", *CMD]) == 2
    assert "unknown GPU 'My Card'" in capsys.readouterr().err


def test_tune_sizes_an_unlisted_card(capsys):
    assert main(["tune", "--gpu", "My Card", "--gpu-memory", "48GiB", *CMD]) == 0
    out = capsys.readouterr().out
    assert "on 1 x My Card (48.00 GiB)" in out
