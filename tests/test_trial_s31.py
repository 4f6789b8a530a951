"""Session 31's real-file trial: shapes from public deployment repositories (named with their commits) that
servefit read wrongly or silently, each reduced to the part that mattered.

- haskoe/beancount-ledger@fcd55a9 start-llm.sh (tests/test_sources_scripts.py: SF121)
- ooiyeefei/rafay-templates@35ba831 apps/openwebui/helm/ollama-values.yaml (tests/test_sources_walk.py: SF104)
- jesse-gonzalez/nai-llm-fleet-infra@c183e6d clusters/*/platform/kustomization.yaml (here)
- dagnaputra/nlp@41a5ccc docker-compose.yml (here: an engine image run with no model)
- compose files of llama.cpp's full and light images, shapes the code search returned without a repository
  (here: tools.sh's `--server`, the light image's llama-cli)
- BLOOM with --max-model-len (a leftover of session 30's trial; here)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

BASE = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.10.0
        args: ["--model", "Qwen/Qwen2.5-7B-Instruct"]
        resources:
          limits:
            nvidia.com/gpu: 1
"""
PATCH = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  template:
    spec:
      containers:
      - name: vllm
        args: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"]
"""


def test_a_component_listing_a_file_outside_its_folder_is_built_and_said_where(
        helm_on_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """nai-llm-fleet-infra's cluster kustomization uses a component (_profiles/kind-stacks/kserve) that lists
    ../../_base/*.yaml: kustomize's load restrictor refuses those in the component's folder, and the raw
    accumulation chain ("security; file ... is not in or below ...") was all servefit said. The component's
    line is named, and the build goes on without the restriction so its servers are checked with the patch."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "_base").mkdir()
    (tmp_path / "_base" / "vllm.yaml").write_text(BASE)
    comp = tmp_path / "_profiles" / "stack"
    comp.mkdir(parents=True)
    (comp / "kustomization.yaml").write_text("apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n\n"
                                             "resources:\n- ../../_base/vllm.yaml\npatches:\n- path: patch.yaml\n")
    (comp / "patch.yaml").write_text(PATCH)
    cluster = tmp_path / "clusters" / "dev"
    cluster.mkdir(parents=True)
    (cluster / "kustomization.yaml").write_text("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                                                "components:\n- ../../_profiles/stack\n")
    main(["lint", "clusters/dev", "--format", "json"])
    [note] = [f for f in json.loads(capsys.readouterr().out) if f["code"] == "SF104"]
    assert note["message"] == (
        "kustomize refuses ../../_base/vllm.yaml, a file outside the folder of ../../_profiles/stack/kustomization.yaml, "
        "which lists it, so `kubectl apply -k` fails here; make it a folder with its own kustomization.yaml, or build "
        "with --load-restrictor LoadRestrictionsNone (servefit built it that way to check its servers)")
    loc = note["location"]
    assert (loc["file"], loc["line"], loc["column"]) == ("_profiles/stack/kustomization.yaml", 5, 3)
    main(["lint", "clusters/dev", "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert site["settings"]["max_model_len"] == 8192


FULL_IMAGE = """services:
  llama:
    image: ghcr.io/ggml-org/llama.cpp:full-cuda{tag}
    command: {first} -m /models/qwen2.5-7b-instruct-q4_k_m.gguf -c 4096 -ngl 99
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
"""


@pytest.mark.parametrize("tag, first, served", [
    ("", "--server", True), ("-b6000", "-s", True),  # tools.sh: `--server` / `-s` exec ./llama-server "$@"
    ("", "--run", False), ("", "--bench", False),  # llama-cli, llama-bench: no server
])
def test_the_full_image_runs_its_tools_script_and_serves_with_server(tmp_path: Path, tag: str, first: str,
                                                                      served: bool) -> None:
    """A compose service of llama.cpp's full image (ENTRYPOINT /app/tools.sh) with `--server -m ...` runs
    llama-server with the rest; it was 0 servers and nothing said (the image's name does not say server)."""
    from servefit.sources import scan_file

    f = tmp_path / "compose.yaml"
    f.write_text(FULL_IMAGE.format(tag=tag, first=first))
    sites = scan_file(str(f)).sites
    if not served:
        assert sites == []
        return
    [site] = sites
    assert site.engine == "llamacpp"
    assert [t.text for t in site.argv] == ["/app/llama-server", "-m", "/models/qwen2.5-7b-instruct-q4_k_m.gguf",
                                           "-c", "4096", "-ngl", "99"]
    assert (site.argv[1].span.line, site.argv[1].span.col) == (4, 15 + len(first))
    assert site.engine_version == ("b6000" if tag else None)


def test_someone_elses_full_image_is_not_the_projects_tools_script(tmp_path: Path) -> None:
    from servefit.sources import scan_file

    f = tmp_path / "compose.yaml"
    f.write_text(FULL_IMAGE.format(tag="", first="--server").replace("ghcr.io/ggml-org/llama.cpp", "myorg/llama-tools"))
    assert scan_file(str(f)).sites == []


def test_a_config_naming_no_maximum_length_takes_max_model_len_as_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """BLOOM's config names no maximum length (ALiBi, no max_position_embeddings / n_positions / seq_length): vLLM
    takes --max-model-len as given and assumes 2048 only without it (config/model.py::_get_and_verify_max_len, 'If
    max_model_len is specified, we use it'). It was VLLM006 'greater than the derived max_model_len (2048)'. A
    config.json read from disk says the same; a model whose config names 2048 is still refused above it."""
    from servefit.models.catalog import lookup

    def codes(*args: str) -> list[str]:
        main(["lint", "--gpu", "a100-80gb", "--engine-version", "0.11.0", "--select", "VLLM", "--format", "json",
              *args])
        return [f["code"] for f in json.loads(capsys.readouterr().out)]

    bloom = lookup("bigscience/bloom-560m")
    assert bloom is not None and not bloom.max_length_in_config
    assert codes("--", "vllm", "serve", "bigscience/bloom-560m", "--max-model-len", "4096") == []
    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["BloomForCausalLM"], "model_type": "bloom", "n_layer": 24, "hidden_size": 1024,
        "n_head": 16, "vocab_size": 250880}))
    assert codes("--model-config", str(tmp_path / "config.json"), "--", "vllm", "serve", "/models/bloom",
                 "--max-model-len", "4096") == []
    assert codes("--", "vllm", "serve", "facebook/opt-125m", "--max-model-len", "4096") == ["VLLM006"]


@pytest.mark.parametrize("image, said", [
    ("vllm/vllm-openai:v0.9.2", "vLLM: no model given in the command: vLLM 0.9.2 would load its default, "
                                "facebook/opt-125m (pass --model REF to check the model you mean)"),
    ("vllm/vllm-openai:v0.10.0", "vLLM: no model given in the command: vLLM 0.10.0 would load its default, "
                                 "Qwen/Qwen3-0.6B (pass --model REF to check the model you mean)"),
    ("ghcr.io/huggingface/text-generation-inference:2.4.0",
     "Text Generation Inference: no model given in the command: Text Generation Inference 2.4.0 would load its "
     "default, bigscience/bloom-560m (pass --model REF to check the model you mean)"),
])
def test_an_engine_run_with_no_model_is_said_to_load_its_default(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], image: str, said: str) -> None:
    """dagnaputra/nlp@41a5ccc docker-compose.yml's llm-service: vllm/vllm-openai with no command. vLLM's parser
    defaults --model (facebook/opt-125m, Qwen/Qwen3-0.6B from 0.10.0: config/model.py ModelConfig.model) and TGI's
    launcher --model-id (bigscience/bloom-560m), so the container serves that model: said, with the release's own
    default, by lint and estimate alike."""
    f = tmp_path / "compose.yaml"
    f.write_text(f"services:\n  llm-service:\n    image: {image}\n    ports: [\"127.0.0.1:8001:8000\"]\n")
    main(["lint", str(f), "--gpu", "l4", "--format", "json", "--fail-on", "never"])
    assert [x["message"] for x in json.loads(capsys.readouterr().out) if x["code"] == "SF002"] == [said]
    assert main(["estimate", str(f), "--gpu", "l4"]) == 2
    assert capsys.readouterr().err.strip() == f"servefit: error: {said}"


def test_an_engine_without_a_default_model_says_only_that_none_is_given() -> None:
    from servefit.engines.option_data import flag_default

    assert flag_default("vllm", "--model", "0.6.3") == "facebook/opt-125m"
    assert flag_default("vllm", "--model", None) == "Qwen/Qwen3-0.6B"
    assert flag_default("sglang", "--model-path", "0.5.4") is None


LIGHT = """services:
  llamacpp:
    image: ghcr.io/ggml-org/llama.cpp:light-cuda
    environment:
      GGML_CUDA_NO_PINNED: "1"
      LLAMA_ARG_CTX_SIZE: "2048"
      LLAMA_ARG_N_GPU_LAYERS: "99"
    ports:
      - 11800:11800
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: all
              capabilities: [gpu]
"""


def test_the_light_image_runs_the_cli_and_serves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A compose service of llama.cpp's light image (its Dockerfile's light target: ENTRYPOINT ["/app/llama-cli"])
    with LLAMA_ARG_* set and a port published: it was read as a llama-server router (LCPP015); the container
    runs the command-line client, which serves nothing. Said once (SF116), no server planned; lint and estimate
    agree. A k8s container of the same image, and one with arguments, say the same."""
    f = tmp_path / "compose.yaml"
    f.write_text(LIGHT)
    said = ("ghcr.io/ggml-org/llama.cpp:light-cuda runs llama-cli, a command-line client, not a server: this container "
            "serves nothing (its arguments go to llama-cli); for a server use a server tag (server, server-cuda, "
            "server-rocm, server-vulkan)")
    main(["lint", str(f), "--gpu", "rtx4090", "--format", "json", "--fail-on", "never"])
    out = json.loads(capsys.readouterr().out)
    assert [(x["code"], x["location"]["line"], x["location"]["column"], x["message"]) for x in out] == [
        ("SF116", 3, 12, said)]
    assert main(["estimate", str(f), "--gpu", "rtx4090"]) == 2
    assert said in capsys.readouterr().err
    k8s = tmp_path / "deploy.yaml"
    k8s.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: llama\nspec:\n  template:\n    spec:\n"
                   "      containers:\n      - name: llama\n        image: ghcr.io/ggml-org/llama.cpp:light-cuda-b6000\n"
                   "        args: [\"-m\", \"/models/qwen2.5-7b-instruct-q4_k_m.gguf\", \"-p\", \"hi\"]\n"
                   "        resources:\n          limits:\n            nvidia.com/gpu: 1\n")
    main(["lint", str(k8s), "--gpu", "rtx4090", "--format", "json", "--fail-on", "never"])
    assert [x["code"] for x in json.loads(capsys.readouterr().out)] == ["SF116"]


@pytest.mark.parametrize("publish, codes", [("    network_mode: host\n", []), ("    ports: [\"30000:30000\"]\n", ["SF129"])])
def test_a_loopback_server_on_the_hosts_network_is_reachable_there(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   publish: str, codes: list[str]) -> None:
    """Sonsal/vllm_cluster@7661033 sglang/compose.yaml's shape with --host 127.0.0.1: under network_mode: host the
    container's loopback is the host's, so the server is reachable on the host (not published, not dead: no
    SF129); a published port in front of a loopback listener reaches nothing (SF129)."""
    f = tmp_path / "compose.yaml"
    f.write_text("services:\n  sglang:\n    image: lmsysorg/sglang:v0.5.4\n" + publish +
                 "    command: python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-3B-Instruct --host 127.0.0.1 "
                 "--port 30000\n")
    main(["lint", str(f), "--gpu", "l4", "--format", "json", "--fail-on", "never"])
    assert [x["code"] for x in json.loads(capsys.readouterr().out) if x["code"].startswith(("SF129", "SEC"))] == codes
