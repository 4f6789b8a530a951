"""Found by running servefit as a new platform engineer on Kubernetes operators' and charts' deployment
files from public repositories (session 29, second trial): each case is a minimal file written for the
test, in the shape the repository had.

Repositories tried (owner/name@commit):
  kubernetes-sigs/lws@060ab4da17eea1f0865fcbd3236bb1075e2cea32
  mostlygeek/llama-swap@0bdb3720199f530b622a1934c0db89f32c94819c
  vllm-project/production-stack@a6c01db05f65f556235413ba8dbcfb0c01132fff
  rh-aiservices-bu/llm-on-openshift@2b63898660f1ac651003e73a8ffe2a06b3d611f7
  vllm-project/aibrix@e3e10f9e4aebe9aac5e7d992fb87d2648e01628b
  GoogleCloudPlatform/kubernetes-engine-samples@2b5036514162a489145c5e5570bc320efbcb37bf
  awslabs/data-on-eks@a546a1905d017a93a11fb44d17d08d286f7bfb44
  kaito-project/kaito@056b8280b1a8debf644bc6f4399e913a1f9c7e70
  NVIDIA/nim-deploy@3c6bcbd05f0c70612d2ed96112248e623035ed05
  sulibot/home-ops@34144891668675714f3e2086e0d212b7db7c7de0 (Flux HelmRelease of bjw-s app-template)
  pkstaz/pdf-comparator-ai@d0764aea33c7816aae33085fde86d2aee7f0a869 (Argo CD Application over its own chart)
  alpha-hack-program/doc-bot@3f0a9a76e5daa66694c336ed31f5d5fc075e8296
  williamrobotma/ollama-modelfiles@723bc929202564ee2cd8710a65b4efea22467d9f
  Lintasarta/sglang-helm@eb547ade3e948430174a9329536eaa0d915391f4
  ckodex-labs/ckodex-kserve-llm@403256e60817e4e14f0c9d93b507a9a9bbeba763 (config/samples, LLMInferenceService)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main

# vllm-project/production-stack's tutorials/assets/values-17-kv-aware.yaml runs LMCache's image
# `lmcache/vllm-openai` at tag `v0.3.9post2`: that is LMCache 0.3.9 (LMCache's docker/Dockerfile installs a
# vLLM release or nightly beside it), read as vLLM 0.3.9, so --host, --port and --enable-prefix-caching were
# VLLM001 errors and gpt-oss VLLM024 "cannot load".
LMCACHE_VALUES = """servingEngineSpec:
  modelSpec:
  - name: "gpt-oss-20b"
    repository: "lmcache/vllm-openai"
    tag: "v0.3.9post2"
    modelURL: "openai/gpt-oss-20b"
    requestGPU: 1
    vllmConfig:
      enablePrefixCaching: true
      maxModelLen: 8000
"""


def test_lmcache_image_tag_is_lmcache_release_not_vllm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "values-17-kv-aware.yaml"
    f.write_text(LMCACHE_VALUES)
    assert main(["lint", str(f), "--gpu", "H100"]) == 0
    assert capsys.readouterr().out == (
        f"{f}:3:1: SEC004 vLLM has no API key and listens on all interfaces (--host 0.0.0.0): anything on the pod "
        "network can use it\n0 errors, 0 warnings, 1 info in 1 file (1 server)\n")
    assert main(["estimate", str(f), "--gpu", "H100"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("vllm 0.33.0  ·  openai/gpt-oss-20b\n")
    assert ("the tag of lmcache/vllm-openai:v0.3.9post2 counts that build's own releases, not vLLM's: pass "
            "--engine-version") in out
    # vLLM's own image keeps its tag's version
    f.write_text(LMCACHE_VALUES.replace("lmcache/vllm-openai", "vllm/vllm-openai").replace("v0.3.9post2", "v0.10.0"))
    main(["estimate", str(f), "--gpu", "H100"])
    assert capsys.readouterr().out.startswith("vllm 0.10.0  ·  ")


# rh-aiservices-bu/llm-on-openshift's llm-servers/vllm/cpu/gitops/deployment.yaml runs its own CPU build of vLLM
# (`quay.io/rh-aiservices-bu/vllm-cpu-openai-ubi9`, built with VLLM_TARGET_DEVICE=cpu) in a pod with no GPU: with
# --gpu it was "starts" on one H100, a GPU the pod never asks for.
CPU_DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  template:
    spec:
      containers:
        - name: server
          image: 'quay.io/rh-aiservices-bu/vllm-cpu-openai-ubi9:0.3'
          args: ["--model", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "--max-model-len", "2048"]
          resources:
            limits:
              cpu: '2'
"""


def test_own_vllm_cpu_build_is_not_planned_on_a_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "deployment.yaml"
    f.write_text(CPU_DEPLOYMENT)
    for gpu in ([], ["--gpu", "H100"]):
        assert main(["lint", str(f), *gpu]) == 0
        out = capsys.readouterr().out
        assert (f"{f}:10:19: SF120 the image quay.io/rh-aiservices-bu/vllm-cpu-openai-ubi9:0.3 is a CPU build of vLLM "
                "(its name says so): the server runs on the CPU, and servefit plans GPU memory, so its memory is not "
                "checked\n") in out
        assert "SF110" not in out
    assert main(["estimate", str(f), "--gpu", "H100"]) == 2  # its one server is not estimated, said why
    assert "is a CPU build of vLLM (its name says so)" in capsys.readouterr().err
    # a name that only contains the letters is not a CPU build; vLLM's own CPU image keeps its words
    f.write_text(CPU_DEPLOYMENT.replace("vllm-cpu-openai-ubi9", "vllm-openai-ubi9").replace("cpu: '2'", "nvidia.com/gpu: 1"))
    main(["lint", str(f), "--gpu", "H100"])
    assert "SF120" not in capsys.readouterr().out
    f.write_text(CPU_DEPLOYMENT.replace("quay.io/rh-aiservices-bu/vllm-cpu-openai-ubi9:0.3", "vllm/vllm-openai-cpu:v0.11.0"))
    main(["lint", str(f)])
    assert "the image vllm/vllm-openai-cpu:v0.11.0 is vLLM's CPU build:" in capsys.readouterr().out


# vllm-project/production-stack's tutorials/assets/values-19-sleep-mode-aware.yaml gives vllmConfig only
# `extraArgs: ["--enable-sleep-mode"]`: tune found --max-num-seqs 512 and --max-num-batched-tokens 4096 and wrote
# neither ("make them by hand"), where a vllmConfig with any mapped key took `maxNumSeqs:` beside it and the other
# in extraArgs. With no key to write beside, both go in extraArgs, which the chart's template appends as they are.
SLEEP_VALUES = """servingEngineSpec:
  modelSpec:
  - name: "granite"
    repository: "vllm/vllm-openai"
    tag: "latest"
    modelURL: "ibm-granite/granite-3.0-3b-a800m-instruct"
    requestGPU: 1
    vllmConfig:
      extraArgs: ["--enable-sleep-mode"]
"""


def test_prodstack_values_with_only_extra_args_take_the_tuned_flags_there(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    f = tmp_path / "values-19-sleep-mode-aware.yaml"
    f.write_text(SLEEP_VALUES)
    assert main(["tune", str(f), "--gpu", "H100", "--write"]) == 0
    out = capsys.readouterr().out
    assert "change  --max-num-seqs 512, --max-num-batched-tokens 4096 [safe]" in out and "by hand" not in out
    written = SLEEP_VALUES.replace('["--enable-sleep-mode"]', '["--enable-sleep-mode", "--max-num-seqs", "512", '
                                   '"--max-num-batched-tokens", "4096"]')
    assert f.read_text() == written
    assert main(["tune", str(f), "--gpu", "H100", "--write"]) == 0
    assert "change  none: the config is already the best one" in capsys.readouterr().out
    assert f.read_text() == written
    main(["lint", str(f), "--gpu", "H100", "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert (site["settings"]["max_num_seqs"], site["settings"]["max_num_batched_tokens"]) == (512, 4096)
    # a vllmConfig key still takes the chart's own key beside it
    f.write_text(SLEEP_VALUES.replace("      extraArgs", "      maxModelLen: 4096\n      extraArgs"))
    main(["tune", str(f), "--gpu", "H100", "--write"])
    capsys.readouterr()
    assert f.read_text().endswith('      maxModelLen: 4096\n      maxNumSeqs: 512\n'
                                  '      extraArgs: ["--enable-sleep-mode", "--max-num-batched-tokens", "4096"]\n')


# vllm-project/aibrix's samples/disaggregation/neuron/pool.yaml runs `sh -c "vllm serve ... --model <model-path>
# --served-model-name <model-name> --kv-transfer-config '{...}'"`: the placeholders were read as bash reads them
# (two redirections each, taking the next word), so the words shifted and the --kv-transfer-config JSON became
# the model: SF002 "unknown model '{"kv_connector":...}'". A `<placeholder>` is the one unknown word it stands for.
PLACEHOLDER_POD = """apiVersion: v1
kind: Pod
metadata:
  name: vllm
spec:
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.10.0
      command: ["sh", "-c"]
      args:
        - |
          vllm serve \\
            --model <model-path> \\
            --served-model-name <model-name> \\
            --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
      resources:
        limits:
          nvidia.com/gpu: 1
"""


def test_angle_bracket_placeholders_are_unknown_words_not_redirections(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    f = tmp_path / "pool.yaml"
    f.write_text(PLACEHOLDER_POD)
    assert main(["lint", str(f), "--gpu", "H100"]) == 0
    out = capsys.readouterr().out
    assert [ln for ln in out.splitlines() if "SF0" in ln] == [
        f"{f}:13:21: SF001 <model-path> is a placeholder to fill in: the value it gives vLLM is not known, so it is "
        "not checked",
        f"{f}:14:33: SF001 <model-name> is a placeholder to fill in: the value it gives vLLM is not known, so it is "
        "not checked"]
    main(["lint", str(f), "--gpu", "H100", "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert site["model_ref"]["written"] == "<model-path>"
    assert site["settings"]["kv_transfer_config"] == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    assert main(["estimate", str(f), "--gpu", "H100"]) == 2
    assert capsys.readouterr().err == "servefit: error: the model is a placeholder to fill in (<model-path>): pass --model REF\n"
    main(["models", str(f)])
    assert capsys.readouterr().out == (f"{f}:12  vllm  <model-path>  -> not resolved: the model is a placeholder to fill "
                                       "in (<model-path>): pass --model REF\n")
    # a list item and a real redirection
    f.write_text(PLACEHOLDER_POD.replace('command: ["sh", "-c"]\n      args:\n        - |\n', 'args: ["--model", "<m>"]\n'
                                         '      x:\n        - |\n'))
    main(["lint", str(f), "--gpu", "H100"])
    assert f"{f}:9:26: SF001 <m> is a placeholder to fill in" in capsys.readouterr().out
    s = tmp_path / "run.sh"
    s.write_text("vllm serve Qwen/Qwen3-8B --max-model-len 4096 <input.txt >log.txt\n")
    main(["lint", str(s), "--gpu", "H100", "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert (site["model"], site["settings"], site["unresolved"]) == ("Qwen/Qwen3-8B", {"max_model_len": 4096}, [])


# vllm-project/aibrix's samples/heterogeneous: a kustomization over two Deployments of the same model, one per GPU
# type, whose commands share most words (`vllm`, also a label; `serve`, `--trust-remote-code`). A word of the build was traced to
# the first resource file that held it, so both servers were listed at kustomization.yaml:1 (or both in the first
# Deployment's file) and the second one's findings were folded into the first's.
HETERO_DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: coder-{gpu}
  labels:
    model.aibrix.ai/engine: vllm
spec:
  template:
    spec:
      nodeSelector:
        nvidia.com/gpu.product: {product}
      containers:
      - name: llm-engine
        command:
        - vllm
        - serve
        - --model
        - /models/deepseek-coder-6.7b-instruct
        - --trust-remote-code
        - --max-model-len
        - "{length}"
        image: vllm/vllm-openai:v0.10.0
        resources:
          limits:
            nvidia.com/gpu: "1"
"""
HETERO_KUSTOMIZATION = """kind: Kustomization
resources:
- coder-l20-deployment.yaml
- coder-l4-deployment.yaml
patches:
- patch: |-
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: coder-l4
      labels:
        min_replicas: "1"
  target:
    kind: Deployment
    name: coder-l4
"""


def test_kustomize_build_traces_each_server_to_its_own_resource_file(
        helm_on_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    (tmp_path / "kustomization.yaml").write_text(HETERO_KUSTOMIZATION)
    (tmp_path / "coder-l20-deployment.yaml").write_text(
        HETERO_DEPLOYMENT.format(gpu="l20", product="NVIDIA-L20", length=15000))
    (tmp_path / "coder-l4-deployment.yaml").write_text(
        HETERO_DEPLOYMENT.format(gpu="l4", product="NVIDIA-L4", length=10240))
    main(["lint", str(tmp_path), "--list-sites", "--format", "json"])
    sites = json.loads(capsys.readouterr().out)
    got = [(Path(s["file"]).name, s["line"], s["settings"]["max_model_len"],
            Path(s["settings_raw"]["max_model_len"]["location"]["file"]).name,
            s["settings_raw"]["max_model_len"]["location"]["line"]) for s in sites]
    assert got == [("coder-l20-deployment.yaml", 16, 15000, "coder-l20-deployment.yaml", 21),
                   ("coder-l4-deployment.yaml", 16, 10240, "coder-l4-deployment.yaml", 21)]
    # each server's own finding, in its own file
    main(["lint", str(tmp_path)])
    out = capsys.readouterr().out
    assert [ln.split(": ", 1)[0] for ln in out.splitlines() if "SF004" in ln] == [
        f"{tmp_path / 'coder-l20-deployment.yaml'}:18:11", f"{tmp_path / 'coder-l4-deployment.yaml'}:18:11"]


# GoogleCloudPlatform/kubernetes-engine-samples' ai-ml/llm-serving-gemma/vllm/vllm-7b-kvcache/kustomization.yaml
# names `../vllm-7b.yaml` as a resource and patches its args (--kv-cache-dtype=fp8_e5m2, --max-model-len=1200):
# kustomize's load restrictor refuses a file outside the kustomization's folder, so the build failed with its raw
# "security; file ... is not in or below ..." and the overlay's settings were never checked.
BASE_DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-gemma-deployment
spec:
  template:
    spec:
      containers:
      - name: inference-server
        image: vllm/vllm-openai:v0.10.0
        args:
        - --model=$(MODEL_ID)
        - --tensor-parallel-size=1
        env:
        - name: MODEL_ID
          value: google/gemma-7b
        resources:
          limits:
            nvidia.com/gpu: 1
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-l4
"""
KV_PATCH = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-gemma-deployment
spec:
  template:
    spec:
      containers:
      - name: inference-server
        args:
        - --model=$(MODEL_ID)
        - --tensor-parallel-size=1
        - --kv-cache-dtype=fp8_e5m2
        - --max-model-len=1200
"""
KV_KUSTOMIZATION = """apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
 - ../vllm-7b.yaml
patches:
  - path: patch.yaml
    target:
      kind: Deployment
      name: vllm-gemma-deployment
"""


def test_an_overlay_of_a_file_outside_its_folder_is_built_and_said(
        helm_on_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.chdir(tmp_path)  # the repository: both files are its own
    (tmp_path / "vllm-7b.yaml").write_text(BASE_DEPLOYMENT)
    overlay = tmp_path / "vllm-7b-kvcache"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(KV_KUSTOMIZATION)
    (overlay / "patch.yaml").write_text(KV_PATCH)
    main(["lint", "vllm-7b-kvcache", "--format", "json"])
    [note] = [f for f in json.loads(capsys.readouterr().out) if f["code"] == "SF104"]
    assert note["message"] == (
        "kustomize refuses ../vllm-7b.yaml, a file outside this kustomization's folder, so `kubectl apply -k` fails "
        "here; make it a folder with its own kustomization.yaml, or build with --load-restrictor LoadRestrictionsNone "
        "(servefit built it that way to check its servers)")
    loc = note["location"]
    assert (loc["file"], loc["line"], loc["column"]) == ("vllm-7b-kvcache/kustomization.yaml", 4, 4)
    main(["lint", "vllm-7b-kvcache", "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert site["settings"] == {"kv_cache_dtype": "fp8_e5m2", "max_model_len": 1200, "tensor_parallel_size": 1}
    raw = site["settings_raw"]
    assert [(k, raw[k]["location"]["file"], raw[k]["location"]["line"], raw[k]["location"]["col"])
            for k in ("model", "max_model_len", "kv_cache_dtype")] == [
        ("model", "vllm-7b-kvcache/patch.yaml", 11, 19),  # the patch's args replace the base's: a word both write
        ("max_model_len", "vllm-7b-kvcache/patch.yaml", 14, 27), ("kv_cache_dtype", "vllm-7b-kvcache/patch.yaml", 13, 28)]
    # a build that fails for another reason says kustomize's own words, as before
    (overlay / "patch.yaml").unlink()
    main(["lint", "vllm-7b-kvcache", "--format", "json"])
    [note] = [f for f in json.loads(capsys.readouterr().out) if f["code"] == "SF104"]
    assert note["message"].startswith("kustomize could not build this: ")


# sulibot/home-ops' kubernetes/apps/tier-2-applications/ollama/app/helmrelease.yaml: a Flux HelmRelease of bjw-s'
# app-template whose controller is named `ollama` (`controllers.ollama.containers.app`, image docker.io/ollama/ollama,
# OLLAMA_* in env). `ollama` is also the top-level key of otwld's ollama chart, and the key was skipped at any depth,
# so the file was "0 servers" with nothing said.
APP_TEMPLATE_RELEASE = """apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: ollama
spec:
  chartRef:
    kind: OCIRepository
    name: ollama
  values:
    controllers:
      ollama:
        containers:
          app:
            image:
              repository: docker.io/ollama/ollama
              tag: 0.30.10
            env:
              OLLAMA_NUM_PARALLEL: 1
              OLLAMA_CONTEXT_LENGTH: 8192
              OLLAMA_KV_CACHE_TYPE: q8_0
"""


def test_app_template_controller_named_ollama_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    f = tmp_path / "helmrelease.yaml"
    f.write_text(APP_TEMPLATE_RELEASE)
    main(["lint", str(f), "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert (site["engine"], site["line"], site["engine_version"]) == ("ollama", 15, "0.30.10")
    assert site["settings"] == {"OLLAMA_CONTEXT_LENGTH": 8192, "OLLAMA_KV_CACHE_TYPE": "q8_0", "OLLAMA_NUM_PARALLEL": 1}
    assert site["settings_raw"]["OLLAMA_CONTEXT_LENGTH"]["location"]["line"] == 19
    # otwld's chart keeps its own top-level `ollama:` key, read by its plugin as before
    f.write_text("ollama:\n  gpu:\n    enabled: true\n  models:\n    pull:\n      - llama3.2:3b\n")
    main(["models", str(f)])
    assert "llama3.2:3b" in capsys.readouterr().out


# kaito-project/kaito's examples/inference: Workspaces (and InferenceSets) that serve a preset (`inference.preset.name`)
# with vLLM arguments in a ConfigMap (`max-model-len: 131072`, `tensor-parallel-size: 2`): KAITO's controller writes
# the pod, so servefit read nothing, and said nothing: "0 servers" over 49 files.
KAITO_WORKSPACE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: ds-inference-params
data:
  inference_config.yaml: |
    vllm:
      max-model-len: 131072
      tensor-parallel-size: 2
---
apiVersion: kaito.sh/v1beta1
kind: Workspace
metadata:
  name: workspace-deepseek-r1-distill-qwen-14b
resource:
  instanceType: "Standard_NC24ads_A100_v4"
inference:
  preset:
    name: "deepseek-r1-distill-qwen-14b"
  config: "ds-inference-params"
"""


def test_kaito_preset_workspace_is_said_not_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "kaito_workspace_custom_config.yaml"
    f.write_text(KAITO_WORKSPACE)
    assert main(["lint", str(f)]) == 0
    assert capsys.readouterr().out == (
        f"{f}:19:11: SF116 KAITO Workspace workspace-deepseek-r1-distill-qwen-14b serves preset "
        "deepseek-r1-distill-qwen-14b with vLLM, in a pod KAITO's controller writes from the preset, with the vLLM "
        "arguments of ConfigMap ds-inference-params: servefit does not read KAITO presets, so this server's settings "
        "were not checked\n0 errors, 1 warning, 0 info in 1 file (0 servers)\n")
    # a file that names no engine at all, with the transformers runtime picked by annotation
    f.write_text("apiVersion: kaito.sh/v1beta1\nkind: Workspace\nmetadata:\n  name: ws\n  annotations:\n"
                 "    kaito.sh/runtime: transformers\ninference:\n  preset:\n    name: phi-4-mini-instruct\n")
    main(["lint", str(f)])
    assert f"{f}:9:11: SF116 KAITO Workspace ws serves preset phi-4-mini-instruct with Hugging Face transformers," \
        in capsys.readouterr().out


# alpha-hack-program/doc-bot's gitops/kb-chat chart runs its chat UI from OpenShift's internal registry, where the
# path names the project: image-registry.openshift-image-registry.svc:5000/vllm-mistral-7b/kb-chat. The `vllm` of
# the namespace made it a vLLM server with no model ("no model given in the command").
def test_engine_word_in_a_registry_namespace_is_not_the_image(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from servefit.sources.detect import engine_of_image

    f = tmp_path / "kb-chat.yaml"
    f.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: kb-chat\nspec:\n  template:\n    spec:\n"
                 "      containers:\n        - name: kb-chat\n"
                 "          image: image-registry.openshift-image-registry.svc:5000/vllm-mistral-7b/kb-chat:latest\n")
    assert main(["lint", str(f)]) == 0
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (0 servers)\n"
    assert [engine_of_image(i) for i in ("x/vllm-mistral-7b/kb-chat:1", "x/sglang-demo/ui:1", "vllm/vllm-openai:v0.10.0",
                                         "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0", "lmsysorg/sglang:v0.5.0")] == [
        None, None, "vllm", "vllm", "sglang"]


# williamrobotma/ollama-modelfiles' benchmarks/llamacpp-parity/run.sh builds llama-server's command in an array
# from a matrix row it `read`s (`launch_cmd=("$llama_bin" -m "$gguf" ... -c "$ctx")`, then
# `launch_cmd+=("${flag_words[@]}")`): the unknown values lost their "unknown" mark in the array, so they were
# checked as written: LCPP002 "-c: invalid int value: '$ctx'" and LCPP001 "invalid argument: ${flag_words[@]}".
ARRAY_SCRIPT = """#!/bin/bash
llama_bin=llama-server
for row in "${matrix_rows[@]}"; do
    IFS=$'\\t' read -r label gguf ctx sampling_flags <<<"$row"
    launch_cmd=("$llama_bin" -m "$gguf" --port 8080 -c "$ctx")
    read -ra flag_words <<<"$sampling_flags"
    launch_cmd+=("${flag_words[@]}")
    launch_cmd+=(-fa on)
    "${launch_cmd[@]}" &
done
"""


def test_unknown_values_stay_unknown_through_a_bash_array(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    f = tmp_path / "run.sh"
    f.write_text(ARRAY_SCRIPT)
    assert main(["lint", str(f), "--gpu", "H100"]) == 0
    assert [ln.split(": ", 1)[1] for ln in capsys.readouterr().out.splitlines()[:-1]] == [
        "SF001 ${gguf} is not set in this repository: the value it gives llama.cpp is not known, so it is not checked",
        "SF001 ${ctx} is not set in this repository: the value it gives llama.cpp is not known, so it is not checked",
        "SF001 ${flag_words} is not set in this repository: the value it gives llama.cpp is not known, so it is not "
        "checked"]
    main(["lint", str(f), "--gpu", "H100", "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert (site["settings"]["port"], site["settings"]["flash_attn"]) == ("8080", "on")  # the known words as before


# Lintasarta/sglang-helm runs Llama-3.2-90B on 8 GPUs with no --tp (out of memory while loading); its template writes
# `{{- range .Values.extraArgs }}` after the command and values.yaml leaves `extraArgs: {}`. tune found
# `--tensor-parallel-size 8` and said "display-only": only an empty `[]` took the new flags.
SGL_TEMPLATE = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Values.app }}
spec:
  template:
    spec:
      containers:
      - name: {{ .Values.app }}
        image: {{ .Values.image }}
        command: ["python3", "-m", "sglang.launch_server"]
        args:
          - "--model-path"
          - "{{ .Values.modelName }}"
          - "--port"
          - "8000"
          {{- range .Values.extraArgs }}
          - {{ . | quote }}
          {{- end }}
        resources:
          limits:
            nvidia.com/gpu: "8"
"""
SGL_VALUES = """app: llama-32-90b-instruct
image: lmsysorg/sglang:v0.5.0-cu126
modelName: meta-llama/Llama-3.2-90B-Vision-Instruct
# extraArgs:
#   - "--tp"
#   - "8"
extraArgs: {}
"""


def test_chart_values_empty_mapping_the_template_ranges_over_takes_tuned_flags(
        helm_on_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.chdir(tmp_path)  # the repository tune writes in
    chart = tmp_path / "sglang-helm"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: sglang\nversion: 0.1.0\n")
    (chart / "templates" / "deployment.yaml").write_text(SGL_TEMPLATE)
    (chart / "values.yaml").write_text(SGL_VALUES)
    tpl = chart / "templates" / "deployment.yaml"
    assert main(["tune", str(tpl), "--gpu", "H100", "--write"]) == 0
    out = capsys.readouterr().out
    assert "--tensor-parallel-size 8 [safe]" in out and "display-only" not in out
    first = (chart / "values.yaml").read_text()
    assert first == SGL_VALUES.replace("extraArgs: {}", 'extraArgs: ["--tensor-parallel-size", "8"]')
    main(["tune", str(tpl), "--gpu", "H100", "--write"])
    assert "change  none: the config is already the best one" in capsys.readouterr().out
    assert (chart / "values.yaml").read_text() == first
    main(["lint", str(chart), "--gpu", "H100", "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert (site["settings"]["tp_size"], site["verdict"]) == (8, "started")
