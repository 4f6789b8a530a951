"""A server whose model path names nothing (`/data`, `model.gguf`) is sized from the name the
same file gives that server (Workload.names, models/evidence.deployment_names): a llama-swap
`models:` key or alias, a compose service or container_name, a k8s label that names a model, the
object's name, a Helm values `modelName` or the key it sits under, a production-stack modelSpec
name, a unit's Description, `ollama create NAME`. Only a name that carries a catalogued family and
a size (or is a catalogued checkpoint's name) counts, and the assumption names where it is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.models import catalog
from servefit.models.evidence import deployment_names
from servefit.sources.assemble import assemble
from servefit.sources.target import Flags


def servers(tmp_path: Path, files: dict[str, str]):
    paths = []
    for name, text in files.items():
        f = tmp_path / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
        paths.append(str(f))
    return assemble(paths, Flags(gpu="H100")).servers


def one(tmp_path: Path, name: str, text: str):
    (srv,) = servers(tmp_path, {name: text})
    return srv


def sized(srv) -> tuple[str, str]:
    assert srv.evaluation is not None, srv.error
    m = srv.evaluation.model
    return m.name, m.assumptions[0]


def test_llama_swap_key_and_alias(tmp_path):
    by_name = {s.site.name: s for s in servers(tmp_path, {"llama-swap.yaml": """models:
  "llama-3.1-8b-instruct":
    cmd: llama-server --port ${PORT} -m /models/model.gguf
  "coder":
    aliases: [qwen2.5-coder-7b-instruct]
    cmd: llama-server --port ${PORT} -m /models/coder.gguf
  "llm":
    cmd: llama-server --port ${PORT} -m /models/other.gguf
"""})}
    assert sized(by_name["llama-swap/llama-3.1-8b-instruct"]) == (
        "meta-llama/Llama-3.1-8B-Instruct",
        "'/models/model.gguf' names no model; sized as llama-3.1-8b-instruct: its llama-swap `models:` key is "
        "'llama-3.1-8b-instruct' (pass --model or `# servefit: model=` to say otherwise)")
    name, why = sized(by_name["llama-swap/coder"])
    assert name == "Qwen/Qwen2.5-Coder-7B-Instruct" or name == "Qwen/Qwen2.5-7B-Instruct"
    assert "its llama-swap alias is 'qwen2.5-coder-7b-instruct'" in why
    generic = by_name["llama-swap/llm"]
    assert generic.evaluation is None and "cannot tell which model this GGUF is" in generic.error
    assert generic.site.workload.names == [("llm", "its llama-swap `models:` key")]


def test_compose_service_and_container_name(tmp_path):
    srv = one(tmp_path, "docker-compose.yml", """services:
  qwen2.5-7b-instruct:
    image: vllm/vllm-openai:v0.8.5
    command: --model /models/model --max-model-len 8192
""")
    assert sized(srv) == ("Qwen/Qwen2.5-7B-Instruct",
                          "'/models/model' names no model; sized as qwen2.5-7b-instruct: its compose service name is "
                          "'qwen2.5-7b-instruct' (pass --model or `# servefit: model=` to say otherwise)")
    srv = one(tmp_path, "compose.yaml", """services:
  inference:
    container_name: mistral-7b-instruct
    image: ghcr.io/huggingface/text-generation-inference:2.4.0
    command: --model-id /data
""")
    name, why = sized(srv)
    assert name.startswith("mistralai/Mistral-7B") and "its compose container_name is 'mistral-7b-instruct'" in why


def test_k8s_model_label_before_the_object_name(tmp_path):
    srv = one(tmp_path, "dep.yaml", """apiVersion: apps/v1
kind: Deployment
metadata:
  name: llama-3-8b
  labels:
    ai.gke.io/model: gemma-2-9b-it
spec:
  template:
    spec:
      containers:
      - name: server
        image: vllm/vllm-openai:latest
        args: ["--model", "/data"]
        resources: {limits: {nvidia.com/gpu: 1}}
""")
    assert srv.site.workload.names[:2] == [("gemma-2-9b-it", "its label ai.gke.io/model"),
                                           ("llama-3-8b", "the Deployment's name")]
    assert sized(srv)[0] == "google/gemma-2-9b-it"
    assert "its label ai.gke.io/model is 'gemma-2-9b-it'" in sized(srv)[1]


def test_k8s_object_name_and_app_label(tmp_path):
    srv = one(tmp_path, "isvc.yaml", """apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: vllm-server
spec:
  template:
    metadata:
      labels:
        app.kubernetes.io/name: qwen3-8b
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:latest
        args: ["--model", "/mnt/models"]
        resources: {limits: {nvidia.com/gpu: 1}}
""")
    name, why = sized(srv)
    assert name == "Qwen/Qwen3-8B" and "its label app.kubernetes.io/name is 'qwen3-8b'" in why


def test_helm_values_model_name_and_key(tmp_path):
    srv = one(tmp_path, "values.yaml", """servers:
  phi-3-mini-4k-instruct:
    image: vllm/vllm-openai:v0.6.0
    args: ["--model", "/models/current"]
""")
    name, why = sized(srv)
    assert name == "microsoft/Phi-3-mini-4k-instruct" and "the values key it is defined under is" in why
    srv = one(tmp_path, "other/values.yaml", """engine:
  modelName: llama-3.2-3b-instruct
  image: vllm/vllm-openai:v0.6.0
  args: ["--model", "/models/current"]
""")
    name, why = sized(srv)
    assert name == "meta-llama/Llama-3.2-3B-Instruct" and "its values key modelName is 'llama-3.2-3b-instruct'" in why


def test_systemd_description(tmp_path):
    srv = one(tmp_path, "llm.service", """[Unit]
Description=llama.cpp server for Mistral 7B Instruct
[Service]
ExecStart=/usr/bin/llama-server -m /srv/model.gguf -c 4096
""")
    name, why = sized(srv)
    assert name.startswith("mistralai/Mistral-7B")
    assert "its unit's Description is 'llama.cpp server for Mistral 7B Instruct'" in why


def test_ollama_create_name(tmp_path):
    (srv,) = servers(tmp_path, {"setup.sh": "ollama serve &\nollama create qwen2.5-7b-tuned -f ./Modelfile\n",
                                "Modelfile": "FROM ./model.gguf\nPARAMETER num_ctx 8192\n"})
    name, why = sized(srv)
    assert name == "Qwen/Qwen2.5-7B"
    assert why.startswith("'./model.gguf' names no model; sized as qwen2.5-7b-tuned: the name `ollama create` gives it "
                          "is 'qwen2.5-7b-tuned'")


@pytest.mark.parametrize("generic", ["llm", "inference", "vllm-server", "model", "qwen", "llama", "llm-8b",
                                     "api-7b", "text-generation-inference", "mixtral", "qwen3.9-27b"])
def test_generic_names_never_resolve(tmp_path, generic):
    assert not catalog.names_a_model(generic)
    srv = one(tmp_path, "docker-compose.yml", f"""services:
  {generic}:
    image: vllm/vllm-openai:v0.8.5
    command: --model /models/model
""")
    assert srv.evaluation is None and srv.error.startswith("unknown model '/models/model'")


def test_a_derivation_without_a_size_is_not_evidence():
    # the catalog reads these names as DeepSeek-R1 / Mistral-Nemo by name, but a deployment's
    # label is weaker evidence than a path: without a size word it counts only as an exact name
    assert catalog.lookup("mistral-nemo") is not None and catalog.lookup("my-deepseek-r1") is not None
    assert not catalog.names_a_model("mistral-nemo") and not catalog.names_a_model("my-deepseek-r1")


@pytest.mark.parametrize("name", ["qwen2.5-7b", "llama3-8b", "Qwen/Qwen2.5-7B-Instruct", "deepseek-r1",
                                  "tgi-mistral-7b-instruct"])
def test_names_that_resolve(name):
    assert catalog.names_a_model(name)


def test_a_path_that_names_a_family_is_not_replaced(tmp_path):
    srv = one(tmp_path, "docker-compose.yml", """services:
  llama-3.1-8b:
    image: ghcr.io/ggml-org/llama.cpp:server-cuda
    command: -m /var/lib/mixtral.gguf
""")
    # the file names its family, so the service's name does not replace it: sized as the Mixtral that
    # `ollama pull mixtral` downloads (models/gguf_names.py), and said so
    assert srv.evaluation is not None and srv.evaluation.model.name == "mistralai/Mixtral-8x7B-Instruct-v0.1"
    assert any("`ollama pull mixtral` downloads (8x7b)" in a for a in srv.evaluation.model.assumptions)


def test_the_command_outranks_the_deployment_name(tmp_path):
    srv = one(tmp_path, "docker-compose.yml", """services:
  llama-3.1-8b:
    image: vllm/vllm-openai:v0.8.5
    command: --model /models/m --served-model-name Qwen/Qwen3-8B
""")
    assert sized(srv)[0] == "Qwen/Qwen3-8B"


def test_deployment_names_need_a_site_with_names():
    class Bare:
        argv: list = []

    assert deployment_names(Bare(), "/data") == []


def test_k8s_object_name(tmp_path):
    srv = one(tmp_path, "isvc.yaml", """apiVersion: apps/v1
kind: Deployment
metadata:
  name: mistral-7b-instruct
spec:
  template:
    spec:
      containers:
      - name: server
        image: ghcr.io/huggingface/text-generation-inference:2.4.0
        args: ["--model-id", "/data"]
        resources: {limits: {nvidia.com/gpu: 1}}
""")
    name, why = sized(srv)
    assert name.startswith("mistralai/Mistral-7B") and "the Deployment's name is 'mistral-7b-instruct'" in why


def test_production_stack_model_spec_name(tmp_path):
    srv = one(tmp_path, "values.yaml", """servingEngineSpec:
  modelSpec:
  - name: "llama-3.1-8b-instruct"
    repository: "vllm/vllm-openai"
    tag: "v0.8.5"
    modelURL: "/data/weights"
    replicaCount: 1
    requestGPU: 1
""")
    name, why = sized(srv)
    assert name == "meta-llama/Llama-3.1-8B-Instruct"
    assert "its production-stack modelSpec name is 'llama-3.1-8b-instruct'" in why


def test_systemd_unit_file_name(tmp_path):
    srv = one(tmp_path, "qwen2.5-7b-instruct.service", """[Unit]
Description=LLM server
[Service]
ExecStart=/usr/bin/llama-server -m /srv/model.gguf
""")
    name, why = sized(srv)
    assert name == "Qwen/Qwen2.5-7B-Instruct" and "its unit file's name is 'qwen2.5-7b-instruct'" in why
