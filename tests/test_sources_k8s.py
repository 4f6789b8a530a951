"""Kubernetes manifests: which containers are servers, argv/env with spans, hardware hints."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.sources import scan_file

FIX = Path(__file__).parent / "fixtures" / "sources" / "k8s"


def scan(name: str):
    return scan_file(str(FIX / name))


def argv(site) -> list[str]:
    return [t.text for t in site.argv]


def at(tok) -> tuple[int, int, str]:
    """(line, column, the characters the span covers in its file)."""
    s = tok.span
    with open(s.file, encoding="utf-8", newline="") as fh:
        return s.line, s.col, fh.read()[s.start:s.end]


def vllm_settings(site) -> dict:
    pytest.importorskip("servefit.engines.vllm")
    from servefit import engines

    cfg = engines.get("vllm").parse(site)
    return {k: cfg.settings[k] for k in cfg.explicit}


def test_a_file_with_three_servers_yields_three_sites():
    r = scan("three-servers.yaml")
    assert [s.name for s in r.sites] == ["Deployment/chat/vllm", "StatefulSet/embed/llama", "Pod/ollama/ollama"]
    assert [s.engine for s in r.sites] == ["vllm", "llamacpp", "ollama"]
    vllm, llama, ollama = r.sites
    assert argv(vllm) == ["vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "16384",
                          "--gpu-memory-utilization=0.85"]
    assert at(vllm.argv[4]) == (20, 16, "16384")
    assert vllm.line == 16 and vllm.engine_version == "0.11.0"
    assert vllm.gpu.count == 1 and vllm.gpu.name is None and vllm.workload.shm is False
    # the image's entrypoint is filled in, without a span
    assert argv(llama)[:3] == ["/app/llama-server", "-m", "/models/nomic-embed.gguf"] and llama.argv[0].span is None
    assert llama.engine_version == "b6700"
    assert argv(ollama) == ["/bin/ollama", "serve"]
    assert {k: t.text for k, t in ollama.env.items()} == {"OLLAMA_NUM_PARALLEL": "4", "OLLAMA_CONTEXT_LENGTH": "8192"}
    assert at(ollama.env["OLLAMA_NUM_PARALLEL"]) == (53, 19, "4")
    assert r.findings == []


def test_three_server_settings_through_the_vllm_plugin():
    site = scan("three-servers.yaml").sites[0]
    assert vllm_settings(site) == {"model": "Qwen/Qwen3-8B", "max_model_len": 16384, "gpu_memory_utilization": 0.85}


def test_env_expansion_and_configmap_values_in_the_same_file():
    [site] = scan("env-configmap.yaml").sites
    assert argv(site) == ["vllm", "serve", "--model=meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "32768",
                          "--kv-cache-dtype", "fp8", "--served-model-name", "meta-llama/Llama-3.1-8B-Instruct-chat",
                          "--chat-template-content-format", "$(not-a-var)"]
    assert at(site.argv[4]) == (6, 19, "32768")  # $(MAX_MODEL_LEN): the ConfigMap value
    assert at(site.argv[6]) == (7, 18, "fp8")
    assert at(site.argv[2]) == (33, 15, "--model=$(MODEL)")  # a mixed word: where it is written
    assert "HF_TOKEN" not in site.env  # secrets are not read
    assert site.gpu.name == "NVIDIA-H100-80GB-HBM3" and site.gpu.count == 1
    assert site.engine_version == "0.10.1"
    assert site.unresolved == []


def test_env_configmap_settings_through_the_vllm_plugin():
    s = vllm_settings(scan("env-configmap.yaml").sites[0])
    assert s["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert s["max_model_len"] == 32768 and s["kv_cache_dtype"] == "fp8"


def test_sh_c_block_scalar_with_affinity_and_shm():
    [site] = scan("sh-c.yaml").sites
    assert argv(site) == ["vllm", "serve", "Qwen/Qwen2.5-32B-Instruct", "--tensor-parallel-size", "2",
                          "--max-model-len", "8192"]
    assert at(site.argv[0]) == (23, 20, "vllm")
    assert at(site.argv[2]) == (28, 23, "Qwen/Qwen2.5-32B-Instruct")  # "$MODEL" -> the env value
    assert at(site.argv[6]) == (25, 44, "8192")  # the default of ${MAX_LEN:-8192}
    assert site.gpu.name == "NVIDIA-L40S" and "first of 2 allowed values" in site.gpu.source
    assert site.workload.shm is False


def test_leader_worker_set_counts_the_whole_group():
    [site] = scan("lws.yaml").sites  # the workers run `ray start`, not a server
    assert site.name == "LeaderWorkerSet/llama-405b/leader/vllm-leader"
    assert argv(site)[:3] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert argv(site)[-4:] == ["--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"]
    assert at(site.argv[-1]) == (20, 174, "2")
    assert site.gpu.name == "p5.48xlarge" and site.gpu.count == 16
    assert site.workload.shm is True


def test_kserve_inference_service_merges_its_runtime():
    [site] = scan("kserve.yaml").sites
    assert site.name == "InferenceService/mistral/kserve-container"
    assert argv(site) == ["python3", "-m", "vllm.entrypoints.openai.api_server", "--port", "8080", "--model",
                          "/mnt/models", "--max-model-len", "16384", "--dtype", "bfloat16"]
    assert at(site.argv[8]) == (26, 34, "16384")
    assert site.gpu.name == "nvidia-tesla-a100" and site.gpu.count == 1
    assert site.workload.storage_model == "mistralai/Mistral-7B-Instruct-v0.3"


def test_kubeai_model():
    [site] = scan("kubeai.yaml").sites
    assert argv(site) == ["vllm", "serve", "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "--max-model-len=16384",
                          "--max-num-batched-token=16384", "--gpu-memory-utilization=0.9"]
    assert at(site.argv[2]) == (7, 13, "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8")  # after hf://
    assert (site.gpu.name, site.gpu.count) == ("l4", 1)
    assert site.env["VLLM_ATTENTION_BACKEND"].text == "FLASHINFER"


def test_vllm_runtime_crd():
    [site] = scan("vllmruntime.yaml").sites
    assert argv(site) == ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--no-enable-chunked-prefill",
                          "--no-enable-prefix-caching", "--max-model-len", "4096", "--dtype", "bfloat16",
                          "--max-num-seqs", "32", "--tensor-parallel-size", "1", "--gpu_memory_utilization", "0.8",
                          "--disable-log-requests"]
    assert at(site.argv[5]) == (8, 5, "maxModelLen") and at(site.argv[6]) == (8, 18, "4096")
    assert site.gpu.count == 1 and site.engine_version == "0.10.0"


def test_flux_helm_release_values():
    [site] = scan("helmrelease.yaml").sites
    assert site.name == "HelmRelease/vllm-stack/modelSpec/qwen"
    assert argv(site)[:3] == ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"]
    assert argv(site)[-4:] == ["--max-model-len", "65536", "--tensor-parallel-size", "1"]
    assert at(site.argv[-3]) == (21, 26, "65536")
    assert site.workload.shm is True  # the chart mounts /dev/shm when tensorParallelSize is set


def test_llama_swap_embedded_in_a_configmap():
    [site] = scan("llamaswap-configmap.yaml").sites  # the llama-swap container itself is not a server
    assert site.engine == "llamacpp" and site.name == "ConfigMap/llama-swap/config.yaml/qwen-coder"
    assert argv(site) == ["/app/llama-server", "--port", "5800", "-m", "/models/Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf",
                          "-c", "16384", "-ngl", "99"]
    assert at(site.argv[6]) == (12, 14, "16384")


def test_crlf_and_quoted_scalars_keep_exact_spans():
    [site] = scan("crlf-quoted.yaml").sites
    assert site.engine == "tgi" and site.engine_version == "2.4.1"
    assert argv(site) == ["text-generation-launcher", "--model-id", "HuggingFaceH4/zephyr-7b-beta",
                          "--max-total-tokens", "4096"]
    assert at(site.argv[4]) == (11, 87, "4096")  # single-quoted, after CRLF lines
    assert site.argv[4].span.start == open(site.file, newline="").read().index("4096'")
    assert at(site.env["NUM_SHARD"]) == (13, 43, "2")
    assert site.gpu.count == 2 and site.workload.shm is False


def test_job_cronjob_daemonset_and_generic_pod_templates(tmp_path):
    body = ("      containers:\n        - name: s\n          image: vllm/vllm-openai:v0.11.0\n"
            "          args: [Qwen/Qwen3-4B]\n")
    docs = [
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n" + body,
        "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec:\n  jobTemplate:\n    spec:\n      template:\n"
        "        spec:\n" + body.replace("      ", "          ", 1).replace("\n        -", "\n            -")
        .replace("\n          image", "\n              image").replace("\n          args", "\n              args"),
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n" + body,
        "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: r}\nspec:\n  template:\n    spec:\n" + body,
        "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: Pod\n    metadata: {name: p}\n    spec:\n"
        "      containers: [{name: s, image: 'ollama/ollama'}]\n",
    ]
    p = tmp_path / "jobs.yaml"
    p.write_text("---\n".join(docs))
    r = scan_file(str(p))
    assert [s.name for s in r.sites] == ["Job/j/s", "CronJob/c/s", "DaemonSet/d/s", "Rollout/r/s", "Pod/p/s"]
    assert all(argv(s)[:3] == ["vllm", "serve", "Qwen/Qwen3-4B"] for s in r.sites[:4])
    assert r.findings == []


ISVC = """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: qwen
spec:
  predictor:
    model:
      modelFormat: {name: huggingface}
      storageUri: hf://Qwen/Qwen2.5-7B-Instruct
"""


@pytest.mark.parametrize(("text", "where", "says"), [
    (ISVC + "      runtime: vllm-runtime\n", (10, 16, "vllm-runtime"),
     "InferenceService qwen: runtime 'vllm-runtime' is not in this file (a ServingRuntime or "
     "ClusterServingRuntime defined elsewhere)"),
    # a format that names an engine, no runtime: KServe's pick is not known here (huggingface is its
    # built-in runtime: tests/test_kserve_hf.py)
    (ISVC.replace("huggingface", "vllm"), (8, 27, "vllm"), "InferenceService qwen: no runtime is named: KServe picks "
     "one of the cluster's runtimes for model format 'vllm'"),
])
def test_inference_service_without_its_runtime_says_so(tmp_path, text, where, says):
    """It was skipped without a word: a server that may not fit its GPU read as a pass."""
    f = tmp_path / "isvc.yaml"
    f.write_text(text)
    r = scan_file(str(f))
    assert r.sites == []
    [found] = r.findings
    assert found.code == "SF114" and found.message.startswith(says)
    s = found.span
    assert (s.line, s.col, text[s.start:s.end]) == where


def test_estimate_on_it_is_one_line_with_the_reason(tmp_path, capsys):
    from servefit.cli import main

    f = tmp_path / "isvc.yaml"
    f.write_text(ISVC + "      runtime: vllm-runtime\n")
    assert main(["estimate", str(f), "--gpu", "L4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"servefit: error: {f}: no serving engine found in this file (InferenceService qwen: "
                          "runtime 'vllm-runtime' is not in this file") and err.endswith("[SF114])\n")


def test_inference_service_of_another_kind_of_model_is_not_ours(tmp_path):
    f = tmp_path / "isvc.yaml"
    f.write_text(ISVC.replace("{name: huggingface}", "{name: sklearn}").replace("hf://Qwen/Qwen2.5-7B-Instruct",
                                                                                "gs://models/iris"))
    assert scan_file(str(f)).findings == []


RUNTIME = """apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata:
  name: kserve-vllm
spec:
  supportedModelFormats:
    - name: huggingface
  containers:
    - name: kserve-container
      image: vllm/vllm-openai:v0.11.0
      args: [--model, /mnt/models, --port, "8080"]
      resources:
        limits:
          nvidia.com/gpu: "1"
"""
KSERVE_MOUNT = ("the model is the one KServe downloads to /mnt/models from the storageUri of an InferenceService that "
                "uses this runtime, and no InferenceService in this file does, so its memory was not checked: add "
                "`# servefit: model=ORG/NAME` beside the server, or put the InferenceService in this file")


def test_a_kserve_runtime_alone_says_where_its_model_comes_from(tmp_path, capsys):
    """It was "unknown model '/mnt/models'; no catalogued model has a similar family and size" (kserve/kserve's
    charts): the path is KServe's mount, not a model name."""
    from servefit.cli import main

    f = tmp_path / "runtime.yaml"
    f.write_text(RUNTIME)
    assert main(["lint", str(f), "--gpu", "H100", "--format", "json"]) == 0
    found = {x["code"]: x for x in __import__("json").loads(capsys.readouterr().out)}
    assert found["SF002"]["message"] == KSERVE_MOUNT and found["SF002"]["location"]["line"] == 11
    assert main(["estimate", str(f), "--gpu", "H100"]) == 2
    assert capsys.readouterr().err == f"servefit: error: {KSERVE_MOUNT}\n"
    f.write_text(RUNTIME.replace("      image:", "      # servefit: model=Qwen/Qwen2.5-7B-Instruct\n      image:"))
    assert main(["estimate", str(f), "--gpu", "H100"]) == 0
    other = tmp_path / "other.yaml"  # another operator's runtime keeps the plain message
    other.write_text(RUNTIME.replace("serving.kserve.io/v1alpha1", "example.com/v1"))
    main(["lint", str(other), "--gpu", "H100", "--format", "json"])
    out = capsys.readouterr().out
    assert "KServe downloads" not in out
