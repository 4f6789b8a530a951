"""Each engine's memory-budget, pool and concurrency knobs are in tune's space where the engine has them,
written in the file's own idiom, and never for a release that lacks the flag: SGLang's --max-total-tokens
(the KV pool's cap), TGI's --cuda-memory-fraction raised back towards its default, --max-concurrent-requests
and the legacy --max-input-length, Ollama's variables by release."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servefit.cli import main

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
MISTRAL = "mistralai/Mistral-7B-Instruct-v0.3"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    rc = main(list(argv))
    return rc, capsys.readouterr().out


def tuned(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    rc, out = run(capsys, "tune", "--format", "json", *argv)
    [site] = json.loads(out)["sites"]
    return site  # type: ignore[no-any-return]


def pool(capsys: pytest.CaptureFixture[str], *argv: str) -> int:
    """The KV pool estimate plans for a command (what SGLang profiles without a cap)."""
    _, out = run(capsys, "estimate", "--format", "json", *argv)
    return int(json.loads(out)["kv_cache_tokens"])


def codes(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> set[str]:
    _, out = run(capsys, "lint", str(path), "--format", "json", "--fail-on", "never", *extra)
    return {f["code"] for f in json.loads(out) if f["severity"] in ("error", "warning")}


def repo(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / ".git").mkdir(exist_ok=True)
    p = tmp_path / name
    p.write_text(text)
    return p


SGLANG_SH = f"""#!/bin/sh
# servefit: gpu=H100
python3 -m sglang.launch_server --model-path {LLAMA} \\
  --context-length 8192 \\
  --max-total-tokens 20000
"""


def test_sglang_pool_cap_is_raised_to_the_pool_the_memory_holds(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """--max-total-tokens 20000 held the pool to 2 requests of 8k on an H100 and tune never moved it. The
    cap is raised to exactly the pool the chosen fraction holds (estimate's figure for the same command
    without a cap), in place, and lint then has nothing to say about it (no SGL007 / SGL008)."""
    want = pool(capsys, "--gpu", "H100", "--", "python3", "-m", "sglang.launch_server", "--model-path", LLAMA,
                "--context-length", "8192", "--mem-fraction-static", "0.9")
    p = repo(tmp_path, "serve.sh", SGLANG_SH)
    site = tuned(capsys, str(p))
    assert site["changes"] == {"mem_fraction_static": 0.9, "max_total_tokens": want}
    assert site["current"]["users"] == 2 and site["best"]["users"] == want // 8192
    rc, _ = run(capsys, "tune", str(p), "--write")
    assert rc == 0
    assert p.read_text() == SGLANG_SH.replace("--max-total-tokens 20000\n",
                                              f"--max-total-tokens {want} \\\n  --mem-fraction-static 0.9\n")
    text = p.read_text()
    run(capsys, "tune", str(p), "--write")
    assert p.read_text() == text  # the second run changes nothing
    assert not codes(capsys, p) & {"SGL007", "SGL008", "SGL011"}


SGLANG_K8S = f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: sglang
spec:
  selector:
    matchLabels: {{app: sglang}}
  template:
    metadata:
      labels: {{app: sglang}}
    spec:
      nodeSelector:
        nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3
      containers:
        - name: sglang
          image: lmsysorg/sglang:v0.5.3-cu126
          command: ["python3", "-m", "sglang.launch_server"]
          args:
            - --model-path
            - {LLAMA}
            - --context-length
            - "8192"
            - --mem-fraction-static
            - "0.9"
            - --max-total-tokens
            - "2000000"
          resources:
            limits:
              nvidia.com/gpu: 1
"""


def test_sglang_pool_cap_past_the_memory_is_lowered_to_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cap above what the memory holds is ignored by SGLang (SGL007, a lint warning): tune writes the pool
    itself, as a quoted list item like its neighbours, and the warning is gone."""
    p = repo(tmp_path, "sglang.yaml", SGLANG_K8S)
    assert "SGL007" in codes(capsys, p)
    want = pool(capsys, "--gpu", "H100", "--engine-version", "0.5.3", "--", "python3", "-m", "sglang.launch_server",
                "--model-path", LLAMA, "--context-length", "8192", "--mem-fraction-static", "0.9")
    site = tuned(capsys, str(p))
    assert site["changes"] == {"max_total_tokens": want}
    run(capsys, "tune", str(p), "--write")
    assert p.read_text() == SGLANG_K8S.replace('"2000000"', f'"{want}"')
    run(capsys, "tune", str(p), "--write")
    assert p.read_text() == SGLANG_K8S.replace('"2000000"', f'"{want}"')
    assert "SGL007" not in codes(capsys, p)


def test_sglang_without_a_cap_gets_none(capsys: pytest.CaptureFixture[str]) -> None:
    site = tuned(capsys, "--gpu", "H100", "--", "python3", "-m", "sglang.launch_server", "--model-path", LLAMA,
                 "--context-length", "8192")
    assert "max_total_tokens" not in site["search"]["dimensions"]
    assert "max_total_tokens" not in site["changes"]


TGI_COMPOSE = f"""# servefit: gpu=A10G
services:
  tgi:
    image: ghcr.io/huggingface/text-generation-inference:3.3.4
    command: --model-id {MISTRAL} --max-input-tokens 4096 --max-total-tokens 8192
    environment:
      CUDA_MEMORY_FRACTION: "0.7"
      MAX_CONCURRENT_REQUESTS: "2"
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
"""


def test_tgi_memory_fraction_is_raised_and_the_admission_limit_too(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """CUDA_MEMORY_FRACTION=0.7 runs out of memory loading Mistral-7B on an A10G, and tune only ever tried
    fractions up to the current one. Fractions up to TGI's default (1.0) are tried now; the router's
    MAX_CONCURRENT_REQUESTS=2 capped the users below what the KV cache holds. Both are written where the
    file sets them, as the environment's own quoted values."""
    p = repo(tmp_path, "compose.yaml", TGI_COMPOSE)
    site = tuned(capsys, str(p))
    assert site["current"]["outcome"] == "oom_at_load"
    assert site["search"]["dimensions"]["cuda_memory_fraction"] == [0.7, 0.8, 0.9, 1.0]
    assert site["changes"] == {"cuda_memory_fraction": 1.0, "max_concurrent_requests": 8}
    assert site["best"]["users"] == 4
    run(capsys, "tune", str(p), "--write")
    want = TGI_COMPOSE.replace('"0.7"', '"1.0"').replace('MAX_CONCURRENT_REQUESTS: "2"', 'MAX_CONCURRENT_REQUESTS: "8"')
    assert p.read_text() == want
    run(capsys, "tune", str(p), "--write")
    assert p.read_text() == want
    assert not {c for c in codes(capsys, p) if c.startswith("TGI")}


TGI_SH = f"""#!/bin/sh
# servefit: gpu=A10G
text-generation-launcher --model-id {MISTRAL} --max-input-length 8000 --max-total-tokens 8192 \\
  --max-batch-prefill-tokens 8192
"""


def test_tgi_legacy_input_length_is_kept_below_the_total(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """TGI 1.4 has only --max-input-length (--max-input-tokens from 2.0.0): a lower total keeps the
    prompt limit below it under the name the file uses; tune wrote nothing for it before, so every
    shorter context was refused (max_input_length must be < max_total_tokens)."""
    p = repo(tmp_path, "serve.sh", TGI_SH)
    site = tuned(capsys, str(p), "--engine-version", "1.4.5", "--min-concurrency", "8")
    assert site["changes"] == {"max_total_tokens": 4096}
    run(capsys, "tune", str(p), "--engine-version", "1.4.5", "--min-concurrency", "8", "--write")
    assert p.read_text() == TGI_SH.replace("--max-input-length 8000 --max-total-tokens 8192",
                                           "--max-input-length 4095 --max-total-tokens 4096")
    assert "--max-input-tokens" not in p.read_text()


OLLAMA_COMPOSE = """# servefit: gpu=RTX4090 model=llama3.1:8b-instruct-q4_K_M
services:
  ollama:
    image: ollama/ollama:{version}
    environment:
      - OLLAMA_NUM_PARALLEL=1
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
"""


@pytest.mark.parametrize(("version", "context", "kv"), [("0.4.7", False, False), ("0.5.7", False, True),
                                                        ("0.5.13", True, True)])
def test_a_release_without_the_variable_never_gets_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      version: str, context: bool, kv: bool) -> None:
    """OLLAMA_CONTEXT_LENGTH is read from Ollama 0.5.13 and OLLAMA_KV_CACHE_TYPE from 0.5.0 (envconfig,
    data/engines/ollama_history.yaml): tune wrote OLLAMA_CONTEXT_LENGTH=32768 into a 0.5.7 server, which
    ignores it. A knob its release lacks stays as it is."""
    p = repo(tmp_path, "compose.yaml", OLLAMA_COMPOSE.format(version=version))
    site = tuned(capsys, str(p), "--allow", "kv=q8_0")
    dims = site["search"]["dimensions"]
    assert (len(dims["num_ctx"]) > 1) is context and (len(dims["OLLAMA_KV_CACHE_TYPE"]) > 1) is kv
    run(capsys, "tune", str(p), "--allow", "kv=q8_0", "--write")
    text = p.read_text()
    assert ("OLLAMA_CONTEXT_LENGTH=" in text) is context and "OLLAMA_NUM_PARALLEL=4" in text
    if not kv:
        assert "OLLAMA_KV_CACHE_TYPE" not in text


TGI_HEAD = "# servefit: gpu=L4\n"
QWEN = "Qwen/Qwen2.5-3B-Instruct"
TGI_KV = {  # file, text as written, text once tune has taken the fp8 cache off (and raised the context)
    "shell-middle": ("serve.sh", f"{TGI_HEAD}text-generation-launcher --model-id {QWEN} \\\n  --kv-cache-dtype fp8_e4m3fn \\\n"
                     "  --max-total-tokens 8192\n",
                     f"{TGI_HEAD}text-generation-launcher --model-id {QWEN} \\\n  --max-total-tokens 32768\n"),
    "shell-last": ("serve.sh", f"{TGI_HEAD}text-generation-launcher --model-id {QWEN} \\\n  --max-total-tokens 8192 \\\n"
                   "  --kv-cache-dtype fp8_e4m3fn\necho started\n",
                   f"{TGI_HEAD}text-generation-launcher --model-id {QWEN} \\\n  --max-total-tokens 32768\necho started\n"),
    "shell-one-line": ("serve.sh", f"{TGI_HEAD}text-generation-launcher --model-id {QWEN} --kv-cache-dtype fp8_e4m3fn "
                       "--max-total-tokens 8192\n",
                       f"{TGI_HEAD}text-generation-launcher --model-id {QWEN} --max-total-tokens 32768\n"),
    "dockerfile-first": ("Dockerfile", f"{TGI_HEAD}FROM ghcr.io/huggingface/text-generation-inference:3.3.4\n"
                         f'CMD ["--kv-cache-dtype", "fp8_e4m3fn", "--model-id", "{QWEN}", "--max-total-tokens", "8192"]\n',
                         f"{TGI_HEAD}FROM ghcr.io/huggingface/text-generation-inference:3.3.4\n"
                         f'CMD ["--model-id", "{QWEN}", "--max-total-tokens", "32768"]\n'),
    "dockerfile-middle": ("Dockerfile", f"{TGI_HEAD}FROM ghcr.io/huggingface/text-generation-inference:3.3.4\n"
                          f'CMD ["--model-id", "{QWEN}", "--kv-cache-dtype", "fp8_e4m3fn", "--max-total-tokens", "8192"]\n',
                          f"{TGI_HEAD}FROM ghcr.io/huggingface/text-generation-inference:3.3.4\n"
                          f'CMD ["--model-id", "{QWEN}", "--max-total-tokens", "32768"]\n'),
    "k8s-inline": ("tgi.yaml", f"""{TGI_HEAD}apiVersion: apps/v1
kind: Deployment
metadata: {{name: tgi}}
spec:
  template:
    spec:
      containers:
        - name: tgi
          image: ghcr.io/huggingface/text-generation-inference:3.3.4
          args:
            - --model-id
            - {QWEN}
            - --kv-cache-dtype=fp8_e4m3fn
            - --max-total-tokens
            - "8192"
          resources:
            limits:
              nvidia.com/gpu: 1
""", None),
    "k8s-pair": ("tgi.yaml", f"""{TGI_HEAD}apiVersion: apps/v1
kind: Deployment
metadata: {{name: tgi}}
spec:
  template:
    spec:
      containers:
        - name: tgi
          image: ghcr.io/huggingface/text-generation-inference:3.3.4
          args: ["--model-id", "{QWEN}",
                 "--kv-cache-dtype", "fp8_e4m3fn",
                 "--max-total-tokens", "8192"]
          resources:
            limits:
              nvidia.com/gpu: 1
""", None),
}
TGI_KV["k8s-inline"] = (TGI_KV["k8s-inline"][0], TGI_KV["k8s-inline"][1], TGI_KV["k8s-inline"][1].replace(
    "            - --kv-cache-dtype=fp8_e4m3fn\n", "").replace('"8192"', '"32768"'))
TGI_KV["k8s-pair"] = (TGI_KV["k8s-pair"][0], TGI_KV["k8s-pair"][1], TGI_KV["k8s-pair"][1].replace(
    '\n                 "--kv-cache-dtype", "fp8_e4m3fn",', "").replace('"8192"', '"32768"'))


@pytest.mark.parametrize("case", sorted(TGI_KV))
def test_tgi_kv_cache_back_to_the_model_dtype_removes_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               case: str) -> None:
    """TGI's --kv-cache-dtype has no value for the model's own dtype (fp8_e4m3fn / fp8_e5m2 only): tune
    wrote `--kv-cache-dtype None`, which TGI refuses. The flag and its value are removed now, in the
    file's own syntax (a shell line, the last line of a command, an exec-form list, a YAML list item)."""
    name, text, want = TGI_KV[case]
    p = repo(tmp_path, name, text)
    site = tuned(capsys, str(p), "--objective", "context")
    assert site["changes"] == {"max_total_tokens": 32768, "kv_cache_dtype": None}
    assert site["fix"]["message"] == "tune: --max-total-tokens 32768, no --kv-cache-dtype"
    run(capsys, "tune", str(p), "--objective", "context", "--write")
    assert p.read_text() == want
    run(capsys, "tune", str(p), "--objective", "context", "--write")
    assert p.read_text() == want
    assert not {c for c in codes(capsys, p) if c.startswith("TGI")}


def test_tgi_kv_cache_set_by_a_variable_is_shown_not_removed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = TGI_COMPOSE.replace('MAX_CONCURRENT_REQUESTS: "2"', "KV_CACHE_DTYPE: fp8_e4m3fn").replace(
        '"0.7"', '"1.0"').replace("A10G", "L4").replace(MISTRAL, QWEN)
    p = repo(tmp_path, "compose.yaml", text)
    site = tuned(capsys, str(p), "--objective", "context")
    assert site["changes"]["kv_cache_dtype"] is None
    assert "remove KV_CACHE_DTYPE" in site["fix"]["by_hand"]
    run(capsys, "tune", str(p), "--objective", "context", "--write")
    assert p.read_text() == text


def test_measured_mode_runs_the_flags_the_patch_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """--bench-cmd got each dimension as a flag of its own name: `--context 8192 --parallel 8` for
    llama.cpp, which has no --context (the cells are `--ctx-size` = context x slots, as tune writes them)."""
    monkeypatch.chdir(tmp_path)  # measured mode keeps its study in ./servefit-tune.db
    log = tmp_path / "flags.txt"
    bench = f'echo {{flags}} > {log}; echo \'{{"m": 1}}\''
    run(capsys, "tune", "--gpu", "L4", "--trials", "1", "--bench-metric", "m", "--bench-cmd", bench, "--",
        "llama-server", "-hf", "bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M", "-c", "8192")
    words = log.read_text().split()
    assert "--context" not in words
    slots, cells = int(words[words.index("--parallel") + 1]), int(words[words.index("--ctx-size") + 1])
    assert slots >= 1 and cells % slots == 0 and cells // slots >= 8192


@pytest.mark.parametrize(("engine", "version", "gpu", "offered"), [
    ("tgi", "1.4.5", "L4", False),  # no --quantize fp8 before 2.0.0
    ("tgi", "2.1.1", "L4", True),  # torch._scaled_mm: FP8 tensor cores (8.9)
    ("tgi", "2.1.1", "A100", False),
    ("tgi", "3.3.4", "A100", True),  # Marlin's W8A16 on 8.x from 2.2.0
    ("tgi", "3.3.4", "T4", False),
    ("sglang", "0.5.23", "H100", True),
    ("sglang", "0.5.23", "A100", False),
])
def test_online_fp8_where_the_release_runs_it_on_the_gpu(capsys: pytest.CaptureFixture[str], engine: str, version: str,
                                                         gpu: str, offered: bool) -> None:
    cmd = (["text-generation-launcher", "--model-id", LLAMA] if engine == "tgi"
           else ["python3", "-m", "sglang.launch_server", "--model-path", LLAMA])
    site = tuned(capsys, "--gpu", gpu, "--engine-version", version, "--allow", "quant=fp8", "--", *cmd)
    assert ("fp8" in site["search"]["dimensions"]["weights"]) is offered


TGI_K8S_FP8 = f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: tgi}}
spec:
  template:
    spec:
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-l4
      containers:
        - name: tgi
          image: ghcr.io/huggingface/text-generation-inference:3.3.4
          args:
            - --model-id
            - {LLAMA}
            - --max-total-tokens
            - "8192"
          resources:
            limits:
              nvidia.com/gpu: 1
"""


def test_tgi_online_fp8_is_an_unsafe_change_written_as_a_list_item(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Llama-3.1-8B at 32k on an L4: 16 GB of weights leave no room for one request, `--quantize fp8`
    two. It changes the weights, so it is written only with --unsafe."""
    p = repo(tmp_path, "tgi.yaml", TGI_K8S_FP8)
    args = (str(p), "--allow", "quant=fp8", "--min-context", "32k")
    site = tuned(capsys, *args, "--unsafe")
    assert site["changes"] == {"max_total_tokens": 32768, "weights": "fp8"}
    assert site["best"]["users"] == 2 and site["fix"]["applicability"] == "unsafe"
    run(capsys, "tune", *args, "--write")
    assert p.read_text() == TGI_K8S_FP8  # nothing safe meets 32k
    run(capsys, "tune", *args, "--unsafe", "--write")
    want = TGI_K8S_FP8.replace('"8192"\n', '"32768"\n            - --quantize\n            - "fp8"\n')
    assert p.read_text() == want
    run(capsys, "tune", *args, "--unsafe", "--write")
    assert p.read_text() == want
    assert not {c for c in codes(capsys, p) if c.startswith("TGI")}


def test_vllm_context_left_to_the_model_is_written_when_tune_writes(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """examples/k8s/vllm-llama-8b.yaml leaves max-model-len to Llama-3.1's 131,072 tokens, which do not fit
    an L4 (VLLM003). With fp8 weights and KV the server starts at that length, and lint then warned
    VLLM018 (max-model-len not set) about the file tune wrote: tune writes the length it planned."""
    src = Path(__file__).resolve().parents[1] / "examples" / "k8s" / "vllm-llama-8b.yaml"
    p = repo(tmp_path, "vllm.yaml", src.read_text())
    before = codes(capsys, p)
    args = (str(p), "--unsafe", "--allow", "quant=fp8", "kv=fp8")
    site = tuned(capsys, *args)
    assert site["changes"] == {"kv_cache_dtype": "fp8", "weights": "fp8"} and site["best"]["context"] == 131072
    run(capsys, "tune", *args, "--write")
    added = '            - --kv-cache-dtype\n            - "fp8"\n            - --max-model-len\n            - "131072"\n' \
            '            - --quantization\n            - "fp8"\n'
    assert p.read_text() == src.read_text().replace('            - "64"\n', '            - "64"\n' + added)
    assert codes(capsys, p) - before == set()
