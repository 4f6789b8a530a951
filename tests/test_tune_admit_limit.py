"""A proxy in front of the server bounds the slots tune offers: llama-swap answers 429 past a
model's `concurrencyLimit` (10 when unset), so slots beyond it would only hold memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main
from servefit.pipeline import Target, evaluate
from servefit.sources import scan_file
from servefit.tune.objective import Needs
from servefit.tune.space import build_space

SWAP = """models:
  small:
    cmd: >
      llama-server --port ${{PORT}}
      -m /models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf
      -c 8192
      -np 1
{limit}"""


def slots(tmp_path: Path, limit: str) -> tuple[int | None, tuple[int, ...]]:
    p = tmp_path / "config.yaml"
    p.write_text(SWAP.format(limit=limit))
    site = scan_file(str(p)).sites[0]
    space = build_space(evaluate(site, Target(gpu="L4")), Needs())
    dim = next(d for d in space.dims if d.name == "parallel")
    return site.workload.admit_limit, tuple(dim.values)


@pytest.mark.parametrize(("limit", "cap", "values"), [
    ("    concurrencyLimit: 4\n", 4, (1, 2, 4)),  # the catalog's 8 is cut
    ("", 10, (1, 2, 4, 8)),  # llama-swap's own default
    ("    concurrencyLimit: 0\n", 10, (1, 2, 4, 8)),  # 0 means the default
    ("    concurrencyLimit: 3\n", 3, (1, 2, 3)),  # the limit itself is offered where it cuts
])
def test_llama_swap_concurrency_limit_bounds_the_slots(tmp_path: Path, limit: str, cap: int,
                                                        values: tuple[int, ...]) -> None:
    assert slots(tmp_path, limit) == (cap, values)


def test_a_plain_script_keeps_every_slot_count(tmp_path: Path) -> None:
    p = tmp_path / "run.sh"
    p.write_text("llama-server -m /models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf -c 8192 -np 1\n")
    site = scan_file(str(p)).sites[0]
    space = build_space(evaluate(site, Target(gpu="L4")), Needs())
    assert site.workload.admit_limit is None
    assert next(d for d in space.dims if d.name == "parallel").values == (1, 2, 4, 8)


def test_vllm_behind_llama_swap_is_offered_no_more_sequences_than_the_default_limit(tmp_path: Path) -> None:
    p = tmp_path / "config.yaml"
    p.write_text("models:\n  big:\n    cmd: |\n      vllm serve meta-llama/Llama-3.1-8B-Instruct --port ${PORT}\n"
                 "      --max-num-seqs 256\n")
    site = scan_file(str(p)).sites[0]
    space = build_space(evaluate(site, Target(gpu="L4")), Needs())
    # the catalog offers 8 ... 1024; llama-swap lets 10 through: 8, the limit, and the current 256
    assert next(d for d in space.dims if d.name == "max_num_seqs").values == (8, 10, 256)


def test_tune_write_stays_under_the_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "config.yaml"
    p.write_text(SWAP.format(limit="    concurrencyLimit: 4\n"))
    assert main(["tune", str(p), "--gpu", "L4", "--write"]) == 0
    assert p.read_text() == SWAP.format(limit="    concurrencyLimit: 4\n").replace(
        "-c 8192\n      -np 1\n", "-c 131072\n      -np 4\n")
    assert main(["tune", str(p), "--gpu", "L4", "--write"]) == 0  # a second run changes nothing
    assert p.read_text().count("-np 4\n") == 1


def test_new_flags_in_a_llama_swap_cmd_go_one_per_line_after_a_port_macro(tmp_path: Path) -> None:
    """`cmd: |` with `--port ${PORT}` on the first line and one setting per line after it: the
    added flags follow on lines of their own (the macro between the words is no written word)."""
    p = tmp_path / "config.yaml"
    head = "models:\n  llama8b:\n    cmd: |\n      vllm serve meta-llama/Llama-3.1-8B-Instruct --port ${PORT}\n"
    p.write_text(head + "      --gpu-memory-utilization 0.9\n    ttl: 60\n")
    assert main(["tune", str(p), "--gpu", "L4", "--write"]) == 0
    assert p.read_text() == head + ("      --gpu-memory-utilization 0.9\n      --max-model-len 32768\n"
                                    "      --max-num-seqs 10\n    ttl: 60\n")
