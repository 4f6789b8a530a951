"""SF120: a server built or set to run without a CUDA / ROCm GPU (llama.cpp's CPU image, vLLM's CPU
and TPU images, TGI's -intel-cpu tags, --device cpu) is listed and its GPU memory not planned, the
same reason in every command; a warning where the file gives it GPUs or -ngl it ignores. (The
`docker run --gpus all ghcr.io/ggml-org/llama.cpp:server ... --n-gpu-layers 20` slip is common in
public scripts.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

LLAMA = """services:
  llama:
    image: ghcr.io/ggml-org/llama.cpp:{tag}
    command: -m /models/qwen2.5-7b-instruct-q4_k_m.gguf -c 8192{ngl} --host 127.0.0.1
{gpu}"""
RESERVE = """    deploy:
      resources:
        reservations:
          devices:
          - driver: nvidia
            count: 1
            capabilities: [gpu]
"""
CPU_BUILD = ("the image ghcr.io/ggml-org/llama.cpp:{tag} is llama.cpp's CPU build: the server runs on the CPU, "
             "and servefit plans GPU memory, so its memory is not checked")


def _lint(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str,
          *extra: str) -> list[tuple[int, int, str, str]]:
    f = tmp_path / name
    f.write_text(text)
    main(["lint", str(f), "--gpu", "L4", "--format", "json", "--fail-on", "never", *extra])
    return [(x["location"]["line"], x["location"]["column"], x["severity"], x["message"])
            for x in json.loads(capsys.readouterr().out) if x["code"] == "SF120"]


def test_cpu_image_with_a_gpu_and_ngl_is_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got = _lint(tmp_path, capsys, "compose.yaml", LLAMA.format(tag="server", ngl=" -ngl 99", gpu=RESERVE))
    assert got == [(3, 12, "warning", CPU_BUILD.format(tag="server") + (
        "; --n-gpu-layers 99 is ignored and the file gives it 1 GPU (compose deploy.resources.reservations.devices count), "
        "which it does not use: for a GPU use the server-cuda tag (server-rocm, server-vulkan for other GPUs)"))]


@pytest.mark.parametrize("tag", ["server", "server-b4500", "full"])
def test_cpu_image_alone_is_said_not_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str], tag: str) -> None:
    assert _lint(tmp_path, capsys, "compose.yaml", LLAMA.format(tag=tag, ngl=" -ngl 0", gpu="")) == [
        (3, 12, "info", CPU_BUILD.format(tag=tag))]


def test_the_light_image_is_no_server_at_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The light images run llama-cli (ENTRYPOINT /app/llama-cli), on the CPU or a GPU: no server, said once."""
    f = tmp_path / "compose.yaml"
    f.write_text(LLAMA.format(tag="light-b6000", ngl=" -ngl 0", gpu=""))
    main(["lint", str(f), "--gpu", "L4", "--format", "json", "--fail-on", "never"])
    assert [(x["code"], x["location"]["line"]) for x in json.loads(capsys.readouterr().out)] == [("SF116", 3)]


@pytest.mark.parametrize("tag", ["server-cuda", "server-cuda-b6000", "server-vulkan", "server-rocm"])
def test_gpu_builds_are_planned(tmp_path: Path, capsys: pytest.CaptureFixture[str], tag: str) -> None:
    assert _lint(tmp_path, capsys, "compose.yaml", LLAMA.format(tag=tag, ngl=" -ngl 99", gpu=RESERVE)) == []


TGI = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: tgi
spec:
  template:
    spec:
      containers:
      - name: tgi
        image: ghcr.io/huggingface/text-generation-inference:{tag}
        args: ["--model-id", "Qwen/Qwen2.5-7B-Instruct", "--hostname", "127.0.0.1"]
        resources:
          limits:
            nvidia.com/gpu: 1
"""


def test_tgi_intel_cpu_tag_given_a_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got = _lint(tmp_path, capsys, "tgi.yaml", TGI.format(tag="3.3.4-intel-cpu"))
    assert got == [(10, 16, "warning", (
        "the image ghcr.io/huggingface/text-generation-inference:3.3.4-intel-cpu is TGI's Intel CPU build: the "
        "server runs on the CPU, and servefit plans GPU memory, so its memory is not checked; the file gives it "
        "1 GPU (nvidia.com/gpu limit), which it does not use: for a GPU use a tag without -intel-cpu "
        "(the CUDA build)"))]
    assert _lint(tmp_path, capsys, "tgi.yaml", TGI.format(tag="3.3.4-gaudi"))[0][3].startswith(
        "the image ghcr.io/huggingface/text-generation-inference:3.3.4-gaudi is TGI's Gaudi build: the server runs "
        "on Intel Gaudi accelerators")
    assert _lint(tmp_path, capsys, "tgi.yaml", TGI.format(tag="3.3.4")) == []


def test_device_setting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sh = "python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --device {d} --host 127.0.0.1\n"
    assert _lint(tmp_path, capsys, "serve.sh", sh.format(d="cpu")) == [(1, 80, "info", (
        "--device cpu: the server runs on the CPU, and servefit plans GPU memory, so its memory is not checked"))]
    assert _lint(tmp_path, capsys, "serve.sh", sh.format(d="npu"))[0][3].startswith(
        "--device npu: the server runs on Ascend NPUs")
    assert _lint(tmp_path, capsys, "serve.sh", sh.format(d="cuda")) == []
    vllm = "vllm serve Qwen/Qwen2.5-7B-Instruct --device {d} --host 127.0.0.1\n"
    assert _lint(tmp_path, capsys, "serve.sh", vllm.format(d="tpu"), "--engine-version", "0.9.1") == [
        (1, 46, "info", "--device tpu: the server runs on Google TPUs, and servefit plans GPU memory, so its memory "
                        "is not checked")]
    assert _lint(tmp_path, capsys, "serve.sh", vllm.format(d="cuda"), "--engine-version", "0.9.1") == []


VLLM_CPU = """services:
  vllm:
    image: public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.9.1
    command: --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768 --host 127.0.0.1
    environment:
      VLLM_CPU_KVCACHE_SPACE: "40"
  gpu:
    image: vllm/vllm-openai:v0.9.1
    command: --model Qwen/Qwen2.5-0.5B-Instruct --max-model-len 4096 --host 127.0.0.1
"""
NOT_CHECKED = ("the image public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.9.1 is vLLM's CPU build: the server "
               "runs on the CPU, and servefit plans GPU memory, so its memory is not checked")


def test_every_command_agrees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """lint says it once; estimate and explain leave the server out with the same reason; tune lists it
    with that reason and tunes the GPU server beside it."""
    f = tmp_path / "compose.yaml"
    f.write_text(VLLM_CPU)
    main(["lint", str(f), "--gpu", "L4", "--format", "json", "--fail-on", "never"])
    lint = json.loads(capsys.readouterr().out)
    assert [(x["code"], x["message"]) for x in lint if x["code"].startswith(("SF1", "VLLM"))] == [
        ("SF120", NOT_CHECKED)]
    for cmd in ("estimate", "explain"):
        assert main([cmd, str(f), "--gpu", "L4", "--format", "json"]) == 1
        out = capsys.readouterr()
        assert [s["server"]["name"] for s in json.loads(out.out)] == ["compose/gpu"]
        assert out.err == f"servefit: {f}:4 (compose/vllm) not estimated: {NOT_CHECKED}\n"
    assert main(["tune", str(f), "--gpu", "L4", "--format", "json"]) in (0, 1)
    res = json.loads(capsys.readouterr().out)
    assert [(s["site"], s.get("error")) for s in res["sites"]] == [("compose/vllm", NOT_CHECKED), ("compose/gpu", None)]


OLLAMA = """services:
  ollama:
    image: ollama/ollama:{v}
    environment:
      OLLAMA_LLM_LIBRARY: {lib}
"""


@pytest.mark.parametrize(("v", "lib", "codes"), [
    ("0.5.7", "cpu_avx2", ["SF120"]),  # the CPU runner (llm/server.go, a cpu* demandLib)
    ("0.5.8", "cpu_avx2", ["OLLM015"]),  # only lib/ollama's GPU libraries: ignored
    ("0.12.5", "cpu", ["OLLM015"]),
    ("0.12.6", "cpu", ["SF120"]),  # discovery skips every GPU library it does not name
    ("0.13.0", "cuda_v12", []),  # a GPU library: the GPU
])
def test_ollama_llm_library_by_release(tmp_path: Path, capsys: pytest.CaptureFixture[str], v: str, lib: str,
                                       codes: list[str]) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text("# servefit: model=qwen2.5:7b\n" + OLLAMA.format(v=v, lib=lib))
    main(["lint", str(f), "--gpu", "L4", "--format", "json", "--fail-on", "never"])
    got = [(x["code"], x["location"]["line"], x["location"]["column"], x["message"])
           for x in json.loads(capsys.readouterr().out) if x["code"] in ("SF120", "OLLM015")]
    assert [g[0] for g in got] == codes
    if codes == ["SF120"]:
        assert got[0][1:] == (6, 27, f"OLLAMA_LLM_LIBRARY={lib}: the server runs on the CPU, and servefit plans GPU "
                                     "memory, so its memory is not checked")
    elif codes:
        assert got[0][1:] == (6, 27, f"OLLAMA_LLM_LIBRARY={lib} is ignored by Ollama {v}: from 0.5.8 to 0.12.5 it "
                                     "only picks one of the GPU libraries Ollama ships (cuda_v12, rocm ...), and it "
                                     "names none, so models still load on the GPU; to keep them on the CPU set "
                                     "num_gpu 0, or CUDA_VISIBLE_DEVICES=-1 [GPU: L4 ×1 from --gpu]")
        assert main(["estimate", str(f), "--gpu", "L4"]) == 0  # planned on the GPU, as Ollama loads it
        assert "budget" in capsys.readouterr().out


HIDE = """services:
  ollama:
    image: ollama/ollama:0.13.0
    environment:
      CUDA_VISIBLE_DEVICES: "{value}"
  vllm:
    image: vllm/vllm-openai:v0.11.0
    command: --model Qwen/Qwen2.5-7B-Instruct --host 127.0.0.1
    environment:
      - CUDA_VISIBLE_DEVICES={value}
  passed:
    image: vllm/vllm-openai:v0.11.0
    command: --model Qwen/Qwen2.5-7B-Instruct --host 127.0.0.1
    environment:
      - CUDA_VISIBLE_DEVICES
  cpu:
    image: vllm/vllm-openai-cpu:v0.11.0
    command: --model Qwen/Qwen2.5-7B-Instruct --host 127.0.0.1
    environment:
      - CUDA_VISIBLE_DEVICES={value}
"""


@pytest.mark.parametrize("value", ["", "-1"])
def test_gpus_hidden_on_purpose(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    """Ollama runs on the CPU; vLLM finds no GPU (a warning), unless its image is the CPU build; a variable
    passed from the host (`- CUDA_VISIBLE_DEVICES`) hides nothing."""
    shown = value or '""'
    got = _lint(tmp_path, capsys, "compose.yaml", "# servefit: model=qwen2.5:7b\n" + HIDE.format(value=value))
    assert got == [
        (6, 30, "info", f"CUDA_VISIBLE_DEVICES={shown} hides every GPU: the server runs on the CPU, and servefit "
                        "plans GPU memory, so its memory is not checked"),
        (11, 30, "warning", f"CUDA_VISIBLE_DEVICES={shown} hides every GPU: vLLM sees no GPU (it needs one unless "
                            "it is a CPU build), so its memory is not checked"),
        (18, 12, "info", "the image vllm/vllm-openai-cpu:v0.11.0 is vLLM's CPU build: the server runs on the CPU, "
                         "and servefit plans GPU memory, so its memory is not checked")]


CPU_VLLM = """services:
  vllm:
    image: public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:{v}
    command: --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 65536 --host 127.0.0.1{extra}
{env}"""


@pytest.mark.parametrize(("v", "extra", "env", "said"), [
    # Llama 3.1 8B: 32 layers x K and V x 8 heads x 128 x 2 bytes = 131,072 B a token; 65,536 tokens = 8 GiB
    ("v0.9.2", "", "", "the 4.00 GiB of vLLM 0.9.2's default (VLLM_CPU_KVCACHE_SPACE unset)"),
    ("v0.20.0", "", "    environment:\n      VLLM_CPU_KVCACHE_SPACE: \"4\"\n",
     "the 4.00 GiB that VLLM_CPU_KVCACHE_SPACE=4 gives"),
    ("v0.20.0", "", "    environment:\n      VLLM_CPU_KVCACHE_SPACE: \"8\"\n", None),  # fits exactly
    ("v0.13.0", "", "", None),  # half a NUMA node's memory by default: not known
    ("v0.10.0", " --kv-cache-dtype fp8", "", None),  # fp8_e5m2 up to 0.11: 4 GiB hold 65,536 tokens
    ("v0.12.0", " --kv-cache-dtype fp8", "", "the 4.00 GiB of vLLM 0.12.0's default (VLLM_CPU_KVCACHE_SPACE unset)"),
])
def test_the_cpu_build_refuses_a_length_its_kv_space_cannot_hold(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 v: str, extra: str, env: str, said: str | None) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(CPU_VLLM.format(v=v, extra=extra, env=env))
    main(["lint", str(f), "--format", "json", "--fail-on", "never"])
    got = [(x["location"]["line"], x["location"]["column"], x["message"])
           for x in json.loads(capsys.readouterr().out) if x["code"] == "VLLM026"]
    if said is None:
        assert got == []
        return
    msg = (f"max-model-len 65,536 needs 8.00 GiB of KV cache on the CPU, more than {said}: vLLM refuses to start; "
           "the largest that fits is 32,768 (or set VLLM_CPU_KVCACHE_SPACE to 8 or more)")
    assert got == [(4, 71, msg)]
    assert main(["estimate", str(f)]) == 2  # every command says it
    assert capsys.readouterr().err.endswith(f"; {msg}\n")
