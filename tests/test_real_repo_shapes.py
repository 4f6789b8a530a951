"""Found by running every command on real deployment files from public repositories (a third
round; tests/test_real_shapes.py holds the second). Each test writes a small file with the shape
that went wrong, never the fetched file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err
    return rc, out, err


# llama-swap on Windows with models under F:\...: the GGUF file name was taken with its whole
# Windows path (os.path.basename splits on / only), so the catalog was asked for the path
# 'F:\ai\...\Devstral-Small-2-24B-Instruct-2512' and answered "a local folder named after it;
# assumed the checkpoint's own fp8 weights", beside the GGUF's own "quant Q4_K_M" line.
WINDOWS_MODELS = r"""macros:
  "llamacpp-rocm": >
    C:\Users\Bob\apps\llamacpp-rocm\llama-server.exe
    --port ${PORT}

models:
  Devstral backslash:
    cmd: |
      ${llamacpp-rocm}
      -m F:\ai\unsloth\Devstral-Small-2-24B-Instruct-2512-GGUF\Devstral-Small-2-24B-Instruct-2512-UD-Q4_K_XL.gguf
      -c 16384
  Devstral slash:
    cmd: |
      ${llamacpp-rocm}
      -m F:/ai/unsloth/Devstral-Small-2-24B-Instruct-2512-GGUF/Devstral-Small-2-24B-Instruct-2512-UD-Q4_K_XL.gguf
      -c 16384
"""


def test_a_windows_model_path_is_named_by_its_file_as_a_posix_one(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "config.yaml"
    f.write_text(WINDOWS_MODELS)
    _, out, _ = _run(capsys, "estimate", str(f), "--gpu", "RX 7900 XTX", "--format", "json")
    back, slash = json.loads(out)
    gguf = "Devstral-Small-2-24B-Instruct-2512-UD-Q4_K_XL.gguf"
    assert back["assumptions"][0] == (f"GGUF '{gguf}' taken as mistralai/Devstral-Small-2-24B-Instruct-2512 "
                                      "(by its name, quant UD-Q4_K_XL, an Unsloth Dynamic mix sized as plain Q4_K_M; "
                                      "no file to read)")
    # the name's reading is said once (the engine's own "model ... taken as ... by its name" is not repeated)
    assert sum(" taken as mistralai/Devstral-Small-2-24B-Instruct-2512" in a for a in back["assumptions"]) == 1
    assert not any("local folder" in a or "fp8" in a or "\\" in a for a in back["assumptions"])
    assert back["assumptions"] == slash["assumptions"]
    assert back["memory"] == slash["memory"] and back["model"] == slash["model"]
    _, out, _ = _run(capsys, "models", str(f))
    assert "local folder" not in out and out.count(f"GGUF '{gguf}' taken as") == 2


def test_a_windows_gguf_in_a_modelfile_is_named_by_its_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "Modelfile"
    f.write_text("FROM F:\\models\\Qwen2.5-7B-Instruct-Q4_K_M.gguf\nPARAMETER num_ctx 8192\n")
    _, out, _ = _run(capsys, "estimate", str(f), "--gpu", "RTX4090", "--format", "json")
    [plan] = json.loads(out)
    assert plan["model"]["resolved"] == "Qwen/Qwen2.5-7B-Instruct"
    assert not any("\\" in a for a in plan["assumptions"])


# llama-swap `groups:` with `swap: false` (a real config kept gpt-oss-20b and a 1.5B coder model
# loaded together): every member was checked alone, on an idle GPU, and the sum never was.
SWAP_GROUP = """macros:
  "llamacpp": >
    /opt/llama/llama-server
    --port ${PORT}

models:
  GPT-OSS 20B:
    ttl: 900
    cmd: |
      ${llamacpp}
      -m /models/gpt-oss-20b-GGUF/gpt-oss-20b-MXFP4.gguf
      --jinja
  Qwen2.5-Coder-1.5B:
    cmd: |
      ${llamacpp}
      -m /models/Qwen2.5-Coder-1.5B-Instruct-GGUF/Qwen2.5-Coder-1.5B-Instruct-Q8_0.gguf
  Qwen2.5-Coder-7B:
    cmd: |
      ${llamacpp}
      -m /models/Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf
  whispercpp:
    cmd: |
      /opt/whisper/whisper-server
      --port ${PORT}
      -m /models/ggml-small.bin
    unlisted: true

groups:
  group1:
    swap: false
    members:
      - "GPT-OSS 20B"
      - "Qwen2.5-Coder-1.5B"
      - "whispercpp"
"""


def _lint(capsys: pytest.CaptureFixture[str], f: Path, gpu: str) -> list[dict]:
    _, out, _ = _run(capsys, "lint", str(f), "--gpu", gpu, "--format", "json", "--exit-zero")
    return [x for x in json.loads(out) if x["code"] == "SF117"]


def _held(capsys: pytest.CaptureFixture[str], f: Path, gpu: str) -> dict[str, float]:
    """GiB each server holds once started, as `estimate` plans it: all but the free headroom."""
    _, out, _ = _run(capsys, "estimate", str(f), "--gpu", gpu, "--format", "json")
    held = {}
    for p in json.loads(out):
        if "memory" in p and "budget" in p["memory"]:
            m = p["memory"]
            total = sum(v for k, v in m.items() if k != "budget")
            held[p["server"]["name"]] = (total - m["free_headroom"]) / 2**30
    return held


def test_a_swap_false_group_adds_up_its_members_on_the_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "config.yaml"
    f.write_text(SWAP_GROUP)
    [found] = _lint(capsys, f, "rtx-5070-ti")
    held = _held(capsys, f, "rtx-5070-ti")
    a, b = held["llama-swap/GPT-OSS 20B"], held["llama-swap/Qwen2.5-Coder-1.5B"]
    assert a + b > 15.47 > a > b > 1.0
    at, end = found["location"], found["end_location"]
    assert (found["severity"], at["line"], at["column"], end["column"]) == ("warning", 29, 3, 9)  # group1
    assert found["message"] == (
        "llama-swap group 'group1' has swap: false, so its members run at the same time on the NVIDIA GeForce RTX "
        f"5070 Ti: 'GPT-OSS 20B' {a:.2f} GiB, 'Qwen2.5-Coder-1.5B' {b:.2f} GiB; {a + b:.2f} GiB together, more than "
        "its 15.47 GiB; 'whispercpp' not counted (servefit does not size it): the member that starts last finds too "
        "little free memory and fails to load (a llama.cpp member with --fit shrinks its context or puts layers on "
        "the CPU instead)")
    # on a 24 GiB card the two fit together; the member servefit does not size is said to be left out
    [found] = _lint(capsys, f, "RX 7900 XTX")
    assert found["severity"] == "info" and found["message"].endswith(
        "GiB together of its 23.98 GiB; 'whispercpp' not counted (servefit does not size it), so the sum is not complete")


@pytest.mark.parametrize(("groups", "count"), [
    ("groups:\n  pair:\n    members: [a, b]\n", 0),  # swap defaults to true: one member at a time
    ("groups:\n  pair:\n    swap: true\n    members: [a, b]\n", 0),
    ("groups:\n  pair:\n    swap: false\n    members: [a]\n", 0),
    ("groups:\n  pair:\n    swap: false\n    members: [a, b]\n", 1),
    ("routing:\n  router:\n    settings:\n      groups:\n        pair:\n          swap: false\n          members: [a, b]\n", 1),
    ("routing:\n  router:\n    use: matrix\n    settings:\n      groups:\n        pair:\n          swap: false\n"
     "          members: [a, b]\n      matrix:\n        sets:\n          solo: a\n", 0),  # the matrix runs instead
])
def test_which_llama_swap_groups_run_their_members_together(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            groups: str, count: int) -> None:
    cmd = "llama-server --port ${PORT} -m /models/Qwen2.5-14B-Instruct-Q4_K_M.gguf -c 32768 -ngl 99"
    f = tmp_path / "config.yaml"
    f.write_text(f"models:\n  a:\n    cmd: {cmd}\n  b:\n    cmd: {cmd}\n{groups}")
    found = _lint(capsys, f, "L4")
    assert len(found) == count
    if found:  # -c and -ngl given: --fit has nothing to lower, so no word about it
        assert found[0]["message"].endswith("more than its 22.03 GiB: the member that starts last finds too little "
                                            "free memory and fails to load")


# A web UI whose image name contains "ollama" (Hollama, ghcr.io/fmaclen/hollama) was read as an
# Ollama server: SEC004 "Ollama has no authentication" and SF110 on a chat front end.
HOLLAMA = """services:
  hollama:
    image: ghcr.io/fmaclen/hollama:latest
    ports:
      - 4173:4173
  webui:
    image: ghcr.io/ollama-webui/ollama-webui:main
  ollama:
    image: ollama/ollama:0.12.3
    environment:
      OLLAMA_HOST: 127.0.0.1
"""


def test_a_web_ui_named_after_ollama_is_not_an_ollama_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "compose.hollama.yml"
    f.write_text(HOLLAMA)
    _, out, _ = _run(capsys, "lint", str(f), "--list-sites", "--format", "json")
    assert [(s["name"], s["engine"]) for s in json.loads(out)] == [("compose/ollama", "ollama")]
    _, out, _ = _run(capsys, "lint", str(f), "--format", "json", "--exit-zero")
    assert not [x for x in json.loads(out) if x["location"]["line"] < 8]


def test_tune_keeps_a_swap_false_group_within_the_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("optuna")
    f = tmp_path / "config.yaml"
    f.write_text(SWAP_GROUP)
    gpu = 15.47 * 2**30
    _, out, _ = _run(capsys, "tune", str(f), "--gpu", "rtx-5070-ti", "--format", "json")
    sites = {s["site"]: s for s in json.loads(out)["sites"]}
    gpt, coder, alone = (sites[f"llama-swap/{m}"] for m in ("GPT-OSS 20B", "Qwen2.5-Coder-1.5B", "Qwen2.5-Coder-7B"))
    assert alone["beside"] is None  # not in the group: tuned for the whole GPU
    coder_now = coder["current"]["memory_bytes"]
    from servefit.hardware.catalog import lookup

    room = (lookup("rtx-5070-ti").memory_bytes - coder_now) / 2**30  # the exact total, as tune/session.py takes it
    assert gpt["beside"] == (f"llama-swap group 'group1' has swap: false, so its members run at the same time: beside 'Qwen2.5-Coder-1.5B' "
                             f"{coder_now / 2**30:.2f} GiB, this server has {room:.2f} GiB of the 15.47 GiB; as "
                             f"written it holds {gpt['current']['memory_bytes'] / 2**30:.2f} GiB, more than that")
    # the best candidate alone is larger than the room left; the one chosen fits beside the coder model
    assert gpt["best"]["memory_bytes"] + coder_now <= gpu < gpt["current"]["memory_bytes"] + coder_now
    assert gpt["best"]["context"] >= 4096 and gpt["changes"]
    # the member tuned later sees the first one as tuned
    assert coder["beside"].startswith(f"llama-swap group 'group1' has swap: false, so its members run at the same time: beside 'GPT-OSS 20B' "
                                      f"{gpt['best']['memory_bytes'] / 2**30:.2f} GiB")
    assert coder["best"]["memory_bytes"] + gpt["best"]["memory_bytes"] <= gpu
    # written, the file is still YAML, lint no longer warns, and a second run changes nothing
    _run(capsys, "tune", str(f), "--gpu", "rtx-5070-ti", "--write")
    yaml = pytest.importorskip("yaml")
    assert set(yaml.safe_load(f.read_text())["models"]) == {"GPT-OSS 20B", "Qwen2.5-Coder-1.5B", "Qwen2.5-Coder-7B",
                                                             "whispercpp"}
    assert [x["severity"] for x in _lint(capsys, f, "rtx-5070-ti")] == ["info"]
    once = f.read_text()
    _run(capsys, "tune", str(f), "--gpu", "rtx-5070-ti", "--write")
    assert f.read_text() == once


# A Modelfile without num_ctx for a 32k model on a 24 GiB card: Ollama's VRAM default (32768) is
# the model's whole length, yet OLLM008 warned "longer prompts are truncated" while tune found
# nothing to change. Harbor's tars.Modelfile (UI-TARS 7B, a Qwen2-VL) has that shape.
@pytest.mark.parametrize(("model", "severity", "message"), [
    ("qwen2.5:7b", "info", "num_ctx not set: VRAM-based default for 24 GiB gives 32768 tokens, the model's whole "
     "length on this GPU; the default follows the Ollama release and the GPU's memory, so set it to serve this "
     "length wherever the model runs"),
    ("llama3.1:8b", "warning", "num_ctx not set: VRAM-based default for 24 GiB gives 32768 tokens (the model "
     "supports 131072); longer prompts are truncated"),
])
def test_ollama_default_context_is_a_warning_only_when_it_cuts_the_model(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, severity: str, message: str) -> None:
    f = tmp_path / "Modelfile"
    f.write_text(f"FROM {model}\n")
    _, out, _ = _run(capsys, "lint", str(f), "--gpu", "RTX4090", "--format", "json", "--exit-zero")
    [found] = [x for x in json.loads(out) if x["code"] == "OLLM008"]
    assert (found["severity"], found["location"]["line"], found["location"]["column"]) == (severity, 1, 6)
    assert found["message"] == f"{message} [GPU: RTX4090 ×1 from --gpu]"


# OME (sgl-project/ome) runtimes: a ClusterServingRuntime keeps its one container as
# `spec.engineConfig.runner` (a multi-node one as `engineConfig.leader.runner`, with
# `worker.size` more pods). servefit read the kind as KServe's (`spec.containers`), found none
# and said nothing: "0 servers" in a folder of 200 runtimes.
OME_RUNTIMES = """apiVersion: ome.io/v1beta1
kind: ClusterServingRuntime
metadata:
  name: srt-qwen2-5-32b-instruct
spec:
  modelSizeRange: {min: 30B, max: 34B}
  engineConfig:
    runner:
      name: ome-container
      image: docker.io/lmsysorg/sglang:v0.5.5.post3-cu129-amd64
      command:
        - python3
        - -m
        - sglang.launch_server
        - --host
        - "0.0.0.0"
        - --model-path
        - $(MODEL_PATH)
        - --tp-size
        - "4"
      resources:
        limits:
          nvidia.com/gpu: 4
  routerConfig:
    runner:
      name: router
      image: docker.io/lmsysorg/sgl-model-gateway:v0.2.3
      args: ["--port", "8080"]
---
apiVersion: ome.io/v1beta1
kind: ClusterServingRuntime
metadata:
  name: srt-deepseek-rdma
spec:
  engineConfig:
    leader:
      runner:
        name: ome-container
        image: docker.io/lmsysorg/sglang:v0.5.5.post3-cu129-amd64
        command: ["python3", "-m", "sglang.launch_server", "--model-path", "deepseek-ai/DeepSeek-V3",
                  "--tp-size", "16", "--host", "127.0.0.1"]
        resources:
          limits:
            nvidia.com/gpu: 8
    worker:
      size: 1
      runner:
        name: ome-container
        image: docker.io/lmsysorg/sglang:v0.5.5.post3-cu129-amd64
        resources:
          limits:
            nvidia.com/gpu: 8
---
apiVersion: ome.io/v1beta1
kind: ClusterServingRuntime
metadata:
  name: vllm-llama-3-2-11b-vision-instruct
spec:
  engineConfig:
    runner:
      name: ome-container
      image: docker.io/vllm/vllm-openai:v0.9.0.1
      args: ["--model", "meta-llama/Llama-3.2-11B-Vision-Instruct", "--limit-mm-per-prompt", "image=1",
             "--host", "127.0.0.1"]
"""


def test_ome_runtimes_are_read_from_their_runner(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "runtimes.yaml"
    f.write_text(OME_RUNTIMES)
    _, out, _ = _run(capsys, "lint", str(f), "--list-sites", "--format", "json")
    sites = json.loads(out)
    assert [(s["name"], s["engine"], s["line"]) for s in sites] == [  # the router (a gateway) is no server
        ("ClusterServingRuntime/srt-qwen2-5-32b-instruct/engine/ome-container", "sglang", 12),
        ("ClusterServingRuntime/srt-deepseek-rdma/leader/ome-container", "sglang", 40),
        ("ClusterServingRuntime/vllm-llama-3-2-11b-vision-instruct/engine/ome-container", "vllm", 63)]
    assert [s["gpu"]["count"] for s in sites[:2]] == [4, 16]  # the leader's 8 and one worker's 8
    assert sites[1]["target"]["count"]["source"] == \
        "count from nvidia.com/gpu limit + 1 worker pod(s) × 8 (leader-worker size 2)"
    _, out, _ = _run(capsys, "lint", str(f), "--gpu", "H100", "--format", "json", "--exit-zero")
    found = [(x["code"], x["location"]["line"]) for x in json.loads(out)]
    assert ("SF001", 18) in found  # $(MODEL_PATH): OME fills it in; said, not guessed
    assert not any(code == "VLLM002" for code, _ in found)  # image=1 is read by vLLM 0.9


@pytest.mark.parametrize(("version", "bad"), [("v0.9.0.1", False), ("v0.10.0", True)])
def test_limit_mm_per_prompt_took_key_value_before_vllm_0_10(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            version: str, bad: bool) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(f"services:\n  vllm:\n    image: vllm/vllm-openai:{version}\n    command: --model "
                 "Qwen/Qwen2.5-VL-7B-Instruct --limit-mm-per-prompt image=2,video=0 --max-model-len 8192\n")
    _, out, _ = _run(capsys, "lint", str(f), "--gpu", "H100", "--format", "json", "--exit-zero")
    found = [x for x in json.loads(out) if x["code"] == "VLLM002"]
    assert [(x["location"]["line"], x["location"]["column"], x["message"]) for x in found] == (
        [(4, 72, "argument --limit-mm-per-prompt: invalid json value: 'image=2,video=0' [GPU: H100 ×1 from --gpu; "
              "'H100' taken as the H100 SXM5 80 GB (NVIDIA H100 80GB HBM3); use h100-pcie or h100-nvl for the "
              "others]")] if bad else [])


# KServe's LLMInferenceService (kserve/kserve docs/samples/llmisvc): the main container usually has
# no command (the LLMInferenceServiceConfig's `vllm serve /mnt/models` runs), sometimes no image
# either. One with a vLLM image was read as `vllm serve` without a model (SF002 "no model given in
# the command"); one with llm-d's image, or none, or no template, was skipped without a word.
LLMISVC = """apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata:
  name: opt-cpu
spec:
  model:
    uri: hf://facebook/opt-125m
    name: facebook/opt-125m
  template:
    containers:
      - name: main
        image: docker.io/vllm/vllm-openai-cpu:v0.23.0
---
apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata:
  name: qwen-offload
spec:
  model:
    uri: hf://Qwen/Qwen2.5-7B-Instruct
  template:
    containers:
      - name: main
        resources:
          limits:
            nvidia.com/gpu: "1"
---
apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata:
  name: bare
spec:
  model:
    uri: pvc://models/gpt-oss-20b
---
apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata:
  name: own-command
spec:
  model:
    uri: hf://Qwen/Qwen2.5-7B-Instruct
  template:
    containers:
      - name: main
        image: vllm/vllm-openai:v0.23.0
        command: ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192", "--host", "127.0.0.1"]
"""


def test_an_llm_inference_service_says_what_it_cannot_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "llmisvc.yaml"
    f.write_text(LLMISVC)
    _, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--format", "json", "--exit-zero")
    found = json.loads(out)
    tail = ("with the image and command of its LLMInferenceServiceConfig (KServe's default: `vllm serve /mnt/models`), "
            "which are not in this file, so this server's settings were not checked: lint the config with it, or "
            "write the container's image and command in the file")
    assert [(x["code"], x["location"]["line"], x["location"]["column"], x["message"]) for x in found
            if x["code"] in ("SF116", "SF002")] == [
        ("SF116", 12, 16, "LLMInferenceService opt-cpu: docker.io/vllm/vllm-openai-cpu:v0.23.0 runs the model "
                          f"(spec.model.uri hf://facebook/opt-125m) {tail}"),
        ("SF116", 23, 15, f"LLMInferenceService qwen-offload: its main container runs the model (spec.model.uri "
                          f"hf://Qwen/Qwen2.5-7B-Instruct) {tail}"),
        ("SF116", 34, 10, f"LLMInferenceService bare: KServe runs the model (spec.model.uri pvc://models/gpt-oss-20b) "
                          f"{tail}")]
    _, out, _ = _run(capsys, "lint", str(f), "--list-sites", "--format", "json")
    assert [(s["name"], s["engine"], s["model"]) for s in json.loads(out)] == [
        ("LLMInferenceService/own-command/template/main", "vllm", "Qwen/Qwen2.5-7B-Instruct")]
    # a file with no engine word in it is still read
    f.write_text(LLMISVC.split("---")[1])
    _, out, _ = _run(capsys, "lint", str(f), "--format", "json", "--exit-zero")
    assert [x["code"] for x in json.loads(out)] == ["SF116"]


# A systemd unit whose -m is ${MODEL_PATH} (chrisspen/llama.cpp-daemon): estimate --model REPO:Q8_0
# resolved the model "quant Q8_0" and then sized it "GGUF quantization unknown: Q4_K_M assumed" (the
# quant was read from the command's -m only); tune showed "weights none".
UNIT = """[Service]
EnvironmentFile=/etc/systemd/system/llama-server.env
ExecStart=/bin/bash -c 'exec /opt/llama.cpp/build/bin/llama-server -m "${MODEL_PATH}" --host 127.0.0.1 --ctx-size 8192'
"""


@pytest.mark.parametrize("quant", ["Q8_0", "Q4_K_M"])
def test_model_override_sizes_the_quant_it_names(tmp_path: Path, capsys: pytest.CaptureFixture[str], quant: str) -> None:
    f = tmp_path / "llama-server.service"
    f.write_text(UNIT)
    ref = f"bartowski/Qwen2.5-7B-Instruct-GGUF:{quant}"
    _, out, _ = _run(capsys, "estimate", str(f), "--gpu", "RTX4090", "--model", ref, "--format", "json")
    [plan] = json.loads(out)
    sized = [a for a in plan["assumptions"] if "llama-quantize makes" in a or "quantization unknown" in a]
    assert len(sized) == 1 and sized[0].startswith(f"weights sized as llama-quantize makes {quant} (")
    assert sum(" taken as Qwen/Qwen2.5-7B-Instruct" in a for a in plan["assumptions"]) == 1
    _, cmd, _ = _run(capsys, "estimate", "--gpu", "RTX4090", "--format", "json", "--",
                     "llama-server", "-m", f"/m/Qwen2.5-7B-Instruct-{quant}.gguf", "--ctx-size", "8192")
    assert json.loads(cmd)["memory"]["weights"] == plan["memory"]["weights"]  # as if -m named that file
    pytest.importorskip("optuna")
    _, out, _ = _run(capsys, "tune", str(f), "--gpu", "RTX4090", "--model", ref, "--format", "json")
    assert json.loads(out)["sites"][0]["current"]["quantization"] == quant


# llama-swap `cmd: |` whose first line is a macro (`${llamacpp}`) and whose only written line is
# `-m ...`: tune appended its flags to the -m line, while the same file's longer commands got one
# flag per line.
MACRO_CMD = """macros:
  "llamacpp": >
    /opt/llama/llama-server
    --port ${PORT}

models:
  coder:
    cmd: |
      ${llamacpp}
      -m /models/Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf
  inline:
    cmd: ${llamacpp} -m /models/Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf
"""


def test_tune_writes_one_flag_per_line_below_a_macro_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("optuna")
    yaml = pytest.importorskip("yaml")
    f = tmp_path / "config.yaml"
    f.write_text(MACRO_CMD)
    _run(capsys, "tune", str(f), "--gpu", "L4", "--write")
    new = f.read_text()
    lines = new.splitlines()
    at = lines.index("      -m /models/Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf")
    added = lines[at + 1:lines.index("  inline:")]
    assert len(added) >= 2 and all(ln.startswith("      --") and ln.count(" --") == 1 for ln in added)
    inline = lines[-1]  # a one-line command stays on one line
    assert inline.startswith("    cmd: ${llamacpp} -m /models/Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf --")
    cmds = yaml.safe_load(new)["models"]
    assert cmds["coder"]["cmd"].split()[1:] == cmds["inline"]["cmd"].split()[1:]  # the same flags, both ways
    _run(capsys, "tune", str(f), "--gpu", "L4", "--write")
    assert f.read_text() == new


# Harbor (av/harbor) writes every image as a variable its CLI sets in a generated .env
# (`image: ${HARBOR_OLLAMA_IMAGE}:${HARBOR_OLLAMA_VERSION}`): those services were skipped without a
# word, while the one whose command named the engine got SF001s.
HARBOR = """services:
  ollama:
    image: ${HARBOR_OLLAMA_IMAGE}:${HARBOR_OLLAMA_VERSION}
    env_file:
      - ./.env
  ollama-init:
    image: ${HARBOR_OLLAMA_IMAGE}:${HARBOR_OLLAMA_VERSION}
    entrypoint: /init_entrypoint.sh
  webui:
    image: ${HARBOR_WEBUI_IMAGE}
  llamacpp:
    image: ${HARBOR_LLAMACPP_IMAGE_CPU}
    command: >
      ${HARBOR_LLAMACPP_MODEL_SPECIFIER}
      --port 8080
"""


def test_an_engine_service_with_an_unset_image_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "compose.yml"
    f.write_text(HARBOR)
    _, out, _ = _run(capsys, "lint", str(f), "--format", "json", "--exit-zero")
    assert [(x["code"], x["severity"], x["location"]["line"], x["location"]["column"], x["message"])
            for x in json.loads(out) if x["code"] == "SF001"] == [
        ("SF001", "info", 3, 12, "${HARBOR_OLLAMA_IMAGE} is not set in this repository: the image service 'ollama' "
                                 "runs is not known, so whether it is an inference server, and its settings, are "
                                 "not checked"),
        ("SF001", "info", 12, 12, "${HARBOR_LLAMACPP_IMAGE_CPU} is not set in this repository: the image service "
                                  "'llamacpp' runs is not known, so whether it is an inference server, and its "
                                  "settings, are not checked")]


# marieai/marie-ai's SGLang scripts pass --quantization fp8 for a bf16 checkpoint: estimate sized fp8 weights
# while tune showed the current config as "weights none" (and ranked it as full precision).
# The width is the engine's own: TGI's bitsandbytes is 8-bit, its -nf4 4-bit; SGLang's in-flight bitsandbytes 4-bit.
@pytest.mark.parametrize("cmd,label,level", [
    ("python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --quantization fp8 --context-length 8192",
     "online fp8", "fp8"),
    ("vllm serve Qwen/Qwen2.5-7B-Instruct --quantization fp8 --max-model-len 8192", "online fp8", "fp8"),
    ("text-generation-launcher --model-id Qwen/Qwen2.5-7B-Instruct --quantize eetq", "online eetq", "8-bit"),
    ("text-generation-launcher --model-id Qwen/Qwen2.5-7B-Instruct --quantize bitsandbytes", "online bitsandbytes",
     "8-bit"),
    ("text-generation-launcher --model-id Qwen/Qwen2.5-7B-Instruct --quantize bitsandbytes-nf4",
     "online bitsandbytes-nf4", "4-bit"),
    ("python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --quantization bitsandbytes "
     "--context-length 8192", "online bitsandbytes", "4-bit"),
    ("vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192", "none", "none"),
])
def test_tune_names_the_quantization_the_command_applies(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         cmd: str, label: str, level: str) -> None:
    from servefit.tune.objective import WEIGHT_LEVEL_NAMES

    pytest.importorskip("optuna")
    f = tmp_path / "serve.sh"
    f.write_text(cmd + "\n")
    _, out, _ = _run(capsys, "tune", str(f), "--gpu", "H100", "--format", "json")
    cur = json.loads(out)["sites"][0]["current"]
    assert (cur["quantization"], WEIGHT_LEVEL_NAMES[cur["quality"][0]]) == (label, level)


# A refused SGLang command (context over the model's own): tune said "now ...: rejected_config" and gave the
# engine's last load line ("Load weight end. ...") as the reason the nearest candidate fails.
def test_tune_says_why_a_refused_config_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("optuna")
    f = tmp_path / "serve.sh"
    f.write_text("python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --context-length 400000\n")
    _, out, _ = _run(capsys, "tune", str(f), "--gpu", "H100", "--engine-version", "0.5.0", "--min-context", "400000")
    lines = out.splitlines()
    assert lines[1].endswith("headroom 10.8%: refuses the configuration") and lines[1].startswith("  now     context 400,000")
    assert "refuses the configuration (ValueError: User-specified context_length (400000) is greater than the " \
           "derived context_length (32768)." in lines[3]
    assert "rejected_config" not in out and "Load weight" not in out


# HouXianzhoua/llm-inference-platform: two TGI services in one compose file both reserve device_ids ['0']; each
# was judged alone ("starts") though the one that starts second finds the first holding 90% of the GPU.
SHARED = """services:
  a:
    image: vllm/vllm-openai:v0.10.0
    command: --model Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --gpu-memory-utilization {util}
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              device_ids: ['0']
              capabilities: [gpu]
  b:
    image: vllm/vllm-openai:v0.10.0
    command: --model Qwen/Qwen2.5-1.5B-Instruct --max-model-len 8192 --gpu-memory-utilization {util}
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              device_ids: ['{other}']
              capabilities: [gpu]
"""


@pytest.mark.parametrize(("util", "other", "count"), [("0.9", "0", 1), ("0.4", "0", 0), ("0.9", "1", 0)])
def test_compose_services_on_the_same_device_ids_add_up(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        util: str, other: str, count: int) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(SHARED.format(util=util, other=other))
    found = _lint(capsys, f, "L40S")
    assert len(found) == count
    if count:
        at = found[0]["location"]
        assert (found[0]["severity"], at["line"], at["column"]) == ("warning", 10, 27)  # a's device_ids
        assert found[0]["message"].startswith(
            "compose services 'a' and 'b' reserve the same GPU (device_ids '0'), so they run at the same time on the "
            "NVIDIA L40S: 'a' ")
        assert found[0]["message"].endswith("the member that starts last finds too little free memory and fails to load")


def test_tgi_services_sharing_a_gpu_say_how_tgi_takes_what_is_left(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "compose.yaml"
    text = SHARED.format(util="0.9", other="0").replace("vllm/vllm-openai:v0.10.0", "ghcr.io/huggingface/"
                                                        "text-generation-inference:3.1.1")
    f.write_text(text.replace("--model Qwen", "--model-id Qwen").replace(" --max-model-len 8192 --gpu-memory-utilization 0.9",
                                                                       ""))
    [found] = _lint(capsys, f, "L4")
    assert found["message"].endswith("the member that starts last finds too little free memory and fails to load "
                                     "(a TGI member whose weights still load sizes its KV cache from what is left at "
                                     "warmup)")
