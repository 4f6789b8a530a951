"""Sweeps from the plan (issue 15 item 4): every explain sweep cell is the engine's own plan for
that many users at that context, in the engine's terms, so it equals `servefit estimate` run
with that cell's settings (verdict and KV figures), for every engine; and the issue's
reproductions (llama-server -c 131072 -np 8 on an L4, Ollama 4 x 2,048, TGI all-OOM)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from servefit import sweep
from servefit.cli import main
from servefit.pipeline import Target, evaluate, site_from_argv

ROOT = Path(__file__).resolve().parents[1]
LLAMA_GGUF = ["llama-server", "-hf", "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q4_K_M"]
ENGINES = {
    "vllm": (["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"], "L4"),
    "llamacpp": (LLAMA_GGUF + ["-c", "131072", "-np", "8"], "L4"),
    "ollama": (["ollama", "run", "llama3.1:8b"], "L4"),
    "tgi": (["text-generation-launcher", "--model-id", "mistralai/Mistral-7B-Instruct-v0.3"], "A10G"),
    "sglang": (["python3", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B-Instruct"], "H100"),
}


def estimate(argv: list[str], gpu: str) -> dict:
    buf = io.StringIO()
    with redirect_stdout(buf):
        main(["estimate", "--gpu", gpu, "--format", "json", "--", *argv])
    return json.loads(buf.getvalue())


def as_flags(engine: str, settings: dict[str, object]) -> tuple[list[str], dict[str, str]]:
    """A cell's settings written as the user would write them on that engine's command line."""
    flags: list[str] = []
    env: dict[str, str] = {}
    for k, v in settings.items():
        if k.isupper():
            env[k] = str(v)
        elif engine == "llamacpp" and k == "kv_unified":
            flags += ["--no-kv-unified"] if not v else ["--kv-unified"]
        elif engine == "llamacpp" and k == "ctx_size":
            flags += ["-c", str(v)]
        elif engine == "llamacpp" and k == "parallel":
            flags += ["-np", str(v)]
        else:
            flags += ["--" + k.replace("_", "-"), str(v)]
    return flags, env


def ollama_copy(tmp_path: Path, num_ctx: int, parallel: int) -> Path:
    """examples/ollama (compose + Modelfile) with this num_ctx and OLLAMA_NUM_PARALLEL."""
    d = tmp_path / f"ollama-{num_ctx}-{parallel}"
    d.mkdir()
    src = ROOT / "examples" / "ollama"
    (d / "Modelfile").write_text((src / "Modelfile").read_text().replace("num_ctx 131072", f"num_ctx {num_ctx}"))
    (d / "compose.yaml").write_text((src / "compose.yaml").read_text().replace(
        'OLLAMA_NUM_PARALLEL: "4"', f'OLLAMA_NUM_PARALLEL: "{parallel}"'))
    return d / "compose.yaml"


def estimate_file(path: Path, gpu: str) -> dict:
    buf = io.StringIO()
    with redirect_stdout(buf):
        main(["estimate", str(path), "--gpu", gpu, "--format", "json"])
    return json.loads(buf.getvalue())[0]


@pytest.mark.parametrize("engine", list(ENGINES))
def test_every_sweep_cell_equals_estimate_with_its_settings(engine: str, tmp_path: Path) -> None:
    argv, gpu = ENGINES[engine]
    if engine == "ollama":
        from servefit.sources.assemble import assemble

        ev = assemble([str(ROOT / "examples" / "ollama" / "compose.yaml")]).servers[0].evaluation
        ev = evaluate(ev.site, Target(gpu=gpu))
    else:
        ev = evaluate(site_from_argv(argv), Target(gpu=gpu))
    grid = sweep.grid(ev, upto=32768, batches=(1, 4, 16))
    assert grid and all(len(r) == 3 for r in grid)
    outcomes = set()
    for row in grid:
        for cell in row:
            settings, _ = sweep.cell_settings(ev, cell.context, cell.batch)
            if engine == "ollama":
                plan = estimate_file(ollama_copy(tmp_path, int(settings["num_ctx"]),
                                                 int(settings["OLLAMA_NUM_PARALLEL"])), gpu)
            else:
                plan = estimate(argv + as_flags(engine, settings)[0], gpu)
            started = plan["outcome"] == "started"
            if engine == "llamacpp":  # the layers --fit leaves on the CPU are not the server asked for
                started = started and plan["n_gpu_layers_offloaded"] >= plan["n_layers_total"]
            if engine == "ollama":
                started = started and plan["layers_offloaded"] >= plan["layers_model"]
            if engine in ("llamacpp", "ollama"):
                served = cell.batch if started else 0
            else:
                served = plan["max_concurrency"] if started else 0.0
                cap = {"vllm": "max_num_seqs", "sglang": "max_running_requests"}.get(engine)
                if cap and started and plan.get(cap):
                    served = min(served, plan[cap])
            assert cell.ok == (started and served >= cell.batch), (engine, cell, plan["outcome"])
            assert cell.users == pytest.approx(served, abs=0.01), (engine, cell)
            if engine in ("llamacpp", "ollama"):  # the cache the command asks for, as the engine allocates it
                assert cell.kv_bytes == plan["memory"]["kv_cache"]
            else:  # what the requests need of the pool the engine fills
                assert cell.kv_bytes == plan["kv_bytes_per_token"] * cell.context * cell.batch
            outcomes.add(cell.ok)
    assert outcomes == {True, False}  # each engine's grid crosses its OOM boundary


def test_llamacpp_context_is_split_over_slots_on_an_l4() -> None:
    """`llama-server -c 131072 -np 8` on an L4: 131,072 x 8 users was "OK" at 603 % and 16 users
    x 2,048 "OOM" at 40.5 %."""
    ev = evaluate(site_from_argv(LLAMA_GGUF + ["-c", "131072", "-np", "8"]), Target(gpu="L4"))
    ctx = {r.context: r for r in sweep.context_sweep(ev, 8)}
    assert not ctx[131072].ok and ctx[131072].outcome in ("offloaded", "oom_at_load")
    assert ctx[16384].ok and not ctx[32768].ok
    batch = {r.batch: r for r in sweep.batch_sweep(ev, 2048)}
    assert batch[16].ok and batch[16].util < 0.5
    assert all(r.util <= 1.0 for r in batch.values() if r.ok)


def test_ollama_four_users_at_2048_fit_an_l4(capsys: pytest.CaptureFixture[str]) -> None:
    """Ollama marked 4 users x 2,048 at 26.9 % as OOM."""
    main(["explain", str(ROOT / "examples" / "ollama" / "compose.yaml"), "--gpu", "L4", "--sweep", "batch",
          "--format", "json"])
    [plan] = json.loads(capsys.readouterr().out)
    rows = {r["batch"]: r for r in plan["sweep_batch"]}
    assert rows[4]["ok"] and rows[4]["users"] == 4 and rows[4]["util"] < 0.3


def test_tgi_sweep_agrees_with_tune(capsys: pytest.CaptureFixture[str]) -> None:
    """TGI marked every cell OOM though tune finds 8,192 x 4 users fits."""
    f = str(ROOT / "examples" / "k8s" / "tgi.yaml")
    main(["tune", f, "--format", "json"])
    best = json.loads(capsys.readouterr().out)["sites"][0]["best"]
    main(["explain", f, "--sweep", "context", "--batch", str(best["users"]), "--format", "json"])
    [plan] = json.loads(capsys.readouterr().out)
    rows = {r["context"]: r for r in plan["sweep_context"]}
    assert rows[best["context"]]["ok"] and int(rows[best["context"]]["users"]) >= best["users"]
    assert any(r["ok"] for r in rows.values()) and not all(r["ok"] for r in rows.values())


def test_html_explain_carries_the_text_tables_in_gib(capsys: pytest.CaptureFixture[str]) -> None:
    f = str(ROOT / "examples" / "k8s" / "tgi.yaml")
    main(["explain", f, "--sweep", "context,batch", "--format", "html"])
    html = capsys.readouterr().out
    for title in ("Context sweep at 8 users", "Batch sweep at 2,048 tokens per user", "Max users at each context"):
        assert title in html
    assert " GB" not in html and " GiB" in html
    main(["explain", f, "--sweep", "context,batch"])
    text = capsys.readouterr().out
    assert " GB" not in text.replace("GiB", "") and "Context sweep" in text
