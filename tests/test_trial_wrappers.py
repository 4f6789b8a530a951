"""Found by running servefit on public deployment repositories (session 22): each case is a
minimal file written for the test."""

from __future__ import annotations

from servefit.cli import main

WRAPPER = """#!/bin/bash
PORT="${1}"
UTIL=$(awk -v f="${FREE_KB:-0}" 'BEGIN {
  printf "%.2f", f / 2 }')
docker run --rm --gpus all vllm/vllm-openai:v0.11.0 \\
  bash -c "
    exec vllm serve Qwen/Qwen3-8B --port '${PORT}' \\
      --gpu-memory-utilization '${UTIL}' --max-model-len 8192
  "
"""


def _lint(capsys, *args: str) -> tuple[int, str]:
    rc = main(["lint", *args])
    return rc, capsys.readouterr().out


def test_bash_c_payload_takes_the_outer_shells_unknown_values(tmp_path, capsys):
    """`bash -c "... '${PORT}' ..."`: the outer shell expands PORT (a script argument) and UTIL (a
    command substitution) before the inner one runs; they were read as the literal `${1}` and the
    awk text, split at its quotes (VLLM002 invalid int, VLLM001 unrecognized '{')."""
    f = tmp_path / "launch.sh"
    f.write_text(WRAPPER)
    rc, out = _lint(capsys, str(f), "--gpu", "H100")
    lines = [ln.split(": ", 1)[1] for ln in out.splitlines() if ": SF001 " in ln or ": VLLM" in ln]
    assert lines == [
        "SF001 $1: argument 1 the script is called with is not known: the value it gives vLLM is not checked",
        "SF001 $(awk -v f=\"${FREE_KB:-0}\" 'BEGIN {…) is computed when the server starts: the value it "
        "gives vLLM is not known here"]
    assert rc == 0 and f"{f}:2:7: SF001" in out and f"{f}:3:6: SF001" in out


def test_slurm_batch_scripts_are_read(tmp_path, capsys):
    f = tmp_path / "serve.sbatch"
    f.write_text("#!/bin/bash\n#SBATCH --gres=gpu:1\npython -m sglang.launch_server --model-path Qwen/Qwen3-8B "
                 "--context-length 8192 --bogus\n")
    rc, out = _lint(capsys, str(tmp_path), "--gpu", "H100")
    assert rc == 1 and f"{f}:3:81: SGL001 unrecognized argument: --bogus" in out
    assert out.rstrip().endswith("(1 server)")


def test_a_hybrid_int4fp8_checkpoint_is_sized_as_int4():
    from servefit.models.quant_names import scheme

    assert scheme(["hybrid", "int4fp8"], "", None, None) == (
        {"quant_method": "compressed-tensors", "bits": 4, "group_size": 128}, "INT4 weights (W4A16), group 128")


def test_estimate_of_several_servers_skips_the_one_with_bad_input(tmp_path, capsys):
    """estimate stopped the whole file at one server's invalid flag (exit 2, nothing estimated)
    while explain and tune went on: the bad server is now named on stderr and the rest estimated. (`-ngl x9`:
    std::stoi finds no number; `-ngl 9,9` is 9 to llama.cpp.)"""
    f = tmp_path / "config.yaml"
    f.write_text('models:\n  "ok":\n    cmd: llama-server --port ${PORT} -m /m/Qwen3-8B-Q4_K_M.gguf -c 4096\n'
                 '  "broken":\n    cmd: llama-server --port ${PORT} -m /m/Qwen3-8B-Q4_K_M.gguf -c 4096 -ngl x9\n')
    rc = main(["estimate", str(f), "--gpu", "RTX 4090"])
    got = capsys.readouterr()
    assert rc == 1 and got.out.startswith("llamacpp ") and got.out.count("verdict: ") == 1
    assert got.err == (f"servefit: {f}:5 (llama-swap/broken) not estimated: {f}:5:78: llama.cpp: argument -ngl: "
                       "invalid value 'x9' (a number, auto or all) [LCPP002]\n")
    # alone, the same server is still one line and exit 2
    f.write_text('models:\n  "broken":\n    cmd: llama-server -m /m/Qwen3-8B-Q4_K_M.gguf -ngl x9\n')
    assert main(["estimate", str(f), "--gpu", "RTX 4090"]) == 2
    assert capsys.readouterr().err.startswith("servefit: error: ")
