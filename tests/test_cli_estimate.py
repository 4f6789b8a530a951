"""`servefit estimate` end to end: the JSON contract, the Done-when verdicts, and bad input as one
line with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def servefit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "servefit", *args], capture_output=True, text=True, timeout=60)


def test_llama8b_on_l4_is_refused_and_names_the_length_that_fits():
    out = servefit("estimate", "--gpu", "NVIDIA L4", "--format", "json", "--", "vllm", "serve",
                   "meta-llama/Llama-3.1-8B-Instruct")
    assert out.returncode == 1, out.stderr  # it will not start: exit 1, as lint would
    doc = json.loads(out.stdout)
    assert doc["outcome"] == "refused_max_model_len"
    assert doc["engine"] == "vllm" and doc["max_model_len"] == 131072
    assert 8192 < doc["fitting_max_model_len"] < 131072
    assert doc["gpu"]["name"] == "NVIDIA L4" and round(doc["gpu"]["memory_bytes"] / 2**30, 2) == 22.03
    assert doc["kv_bytes_per_token"] == 131072
    assert set(doc["memory"]) == {"budget", "weights", "activation_peak", "non_torch", "cuda_graphs", "kv_cache",
                                  "free_headroom"}
    assert any(f["code"] == "VLLM003" for f in doc["findings"])
    assert doc["model"]["params"] == 8030261248


def test_llama8b_on_l4_at_8k_starts():
    out = servefit("estimate", "--gpu", "NVIDIA L4", "--format", "json", "--", "vllm", "serve",
                   "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192")
    doc = json.loads(out.stdout)
    assert doc["outcome"] == "started"
    assert doc["kv_cache_tokens"] > 8192 and doc["max_concurrency"] > 1
    m = doc["memory"]
    assert m["weights"] + m["activation_peak"] + m["non_torch"] + m["cuda_graphs"] + m["kv_cache"] <= m["budget"]


def test_text_view_draws_the_stack():
    out = servefit("estimate", "--gpu", "L4", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                   "--max-model-len", "8192")
    assert out.returncode == 0
    for label in ("weights", "activation peak", "non-torch", "CUDA graphs", "KV cache", "free headroom"):
        assert f"  {label}" in out.stdout
    assert "verdict: starts" in out.stdout and "max concurrency at 8,192 tokens per request" in out.stdout
    assert "assumptions:" in out.stdout


@pytest.mark.parametrize("args, message", [
    (["--gpu", "L4", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "12q"],
     "invalid human int or auto value: '12q'"),
    (["--gpu", "L4", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory-utilization", "1.5"],
     "GPU memory utilization must be in (0, 1]. Got 1.5."),
    (["--gpu", "L4", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-lenn", "4096"],
     "did you mean --max-model-len?"),
    # SGLang's and TGI's parsers refuse as vLLM's does: no memory stack for a command that never starts
    (["--gpu", "L4", "--", "python3", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B-Instruct",
      "--context-lenght", "4096"], "SGLang: unrecognized argument: --context-lenght (did you mean --context-length?) [SGL001]"),
    (["--gpu", "L4", "--", "python3", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B-Instruct",
      "--mem-fraction-static", "lots"], "[SGL002]"),
    (["--gpu", "L4", "--", "text-generation-launcher", "--model-id", "meta-llama/Llama-3.1-8B-Instruct",
      "--max-total-tokenz", "4096"], "[TGI001]"),
    (["--gpu", "L4", "--", "text-generation-launcher", "--model-id", "meta-llama/Llama-3.1-8B-Instruct",
      "--max-total-tokens", "12q"], "[TGI002]"),
    (["--gpu", "Z99", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"], "unknown GPU 'Z99'"),
    (["--gpu", "L4", "--", "vllm", "serve", "foo/bar-13B"], "unknown model 'foo/bar-13B'; no catalogued model has a similar family and size"),
    (["--gpu", "L4", "--gpu-memory", "lots", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"],
     "not a memory size"),
    (["--gpu", "L4", "--", "nginx", "-g", "daemon off;"], "no serving engine recognised"),
    (["--gpu", "L4"], "nothing to estimate"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    out = servefit("estimate", *args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_gpu_memory_override_and_instance_type():
    out = servefit("estimate", "--gpu", "RTX 4090", "--gpu-memory", "48GiB", "--format", "json", "--", "vllm",
                   "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "32768")
    doc = json.loads(out.stdout)
    assert doc["gpu"]["memory_bytes"] == 48 * 2**30 and doc["outcome"] == "started"
    out = servefit("estimate", "--gpu", "g5.12xlarge", "--format", "json", "--", "vllm", "serve",
                   "meta-llama/Llama-3.1-8B-Instruct", "-tp", "4", "--max-model-len", "8192")
    doc = json.loads(out.stdout)
    assert doc["gpu"]["count"] == 4 and doc["parallel"]["tensor"] == 4 and doc["outcome"] == "started"


def test_estimate_path_imports_nothing_heavy():
    code = ("import sys; from servefit.cli import main; "
            "main(['estimate','--gpu','L4','--format','json','--','vllm','serve','meta-llama/Llama-3.1-8B-Instruct']);"
            "print(sorted(m for m in ('optuna','numpy','jsonschema','gguf','pydantic','huggingface_hub')"
            " if m in sys.modules), "
            "file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stderr.strip().splitlines()[-1] == "[]"
