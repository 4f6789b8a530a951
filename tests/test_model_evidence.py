"""A server whose model is a path without a model name is sized from what the same file says
about that path (models/evidence.py via pipeline.resolve_site_model): a bind mount's host
folder, an `hf download --local-dir` in the same script, --served-model-name / --tokenizer /
--alias; never from nothing, always with an assumption that names the evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.core import Token, Workload
from servefit.models.evidence import candidates, is_unnamed_path
from servefit.sources.assemble import assemble
from servefit.sources.target import Flags


def server(tmp_path: Path, name: str, text: str):
    f = tmp_path / name
    f.write_text(text)
    (srv,) = assemble([str(f)], Flags(gpu="H100")).servers
    return srv


def test_docker_mount_names_the_folder(tmp_path):
    srv = server(tmp_path, "start.sh", "docker run --gpus all -v $PWD/models/Qwen2-7B-Instruct-GPTQ-Int4:/data \\\n"
                 "  ghcr.io/huggingface/text-generation-inference:2.4.0 --model-id /data --quantize gptq\n")
    m = srv.evaluation.model
    assert (m.name, m.resolved_from, m.quantization["quant_method"]) == ("Qwen/Qwen2-7B-Instruct", "derivative", "gptq")
    assert m.assumptions[0] == ("'/data' names no model; sized as /models/Qwen2-7B-Instruct-GPTQ-Int4: the file mounts "
                                "$PWD/models/Qwen2-7B-Instruct-GPTQ-Int4 at /data (pass --model or `# servefit: model=` "
                                "to say otherwise)")
    assert [f.code for f in srv.findings if f.code in ("SF002", "SF004")] == ["SF004"]


def test_mount_of_a_parent_folder_keeps_the_rest_of_the_path(tmp_path):
    srv = server(tmp_path, "run.sh", "docker run -v /srv/llm:/models vllm/vllm-openai:v0.8.5 "
                 "--model /models/unnamed\n")
    assert srv.evaluation is None and srv.error.startswith("unknown model '/models/unnamed'")
    got = candidates(srv.site, "vllm", "/models/sub/x")
    assert got == [("/srv/llm/sub/x", "the file mounts /srv/llm at /models")]


def test_hf_download_to_the_model_path(tmp_path):
    srv = server(tmp_path, "serve.sh", "huggingface-cli download Qwen/Qwen2.5-7B-Instruct \\\n"
                 "    --local-dir /data/model\nvllm serve /data/model --max-model-len 8192\n")
    m = srv.evaluation.model
    assert (m.name, m.resolved_from) == ("Qwen/Qwen2.5-7B-Instruct", "derivative")
    assert m.assumptions == ["'/data/model' names no model; sized as Qwen/Qwen2.5-7B-Instruct: `huggingface-cli "
                             "download Qwen/Qwen2.5-7B-Instruct --local-dir /data/model` in the same file downloads "
                             "it to /data/model (pass --model or `# servefit: model=` to say otherwise)"]


def test_hf_download_elsewhere_is_not_evidence(tmp_path):
    srv = server(tmp_path, "serve.sh", "hf download Qwen/Qwen2.5-7B-Instruct --local-dir /data/other\n"
                 "vllm serve /data/model\n")
    assert srv.evaluation is None and "unknown model '/data/model'" in srv.error


def test_served_model_name_and_tokenizer(tmp_path):
    srv = server(tmp_path, "a.sh", "vllm serve /mnt/ckpt --served-model-name meta-llama/Llama-3.1-8B-Instruct\n")
    assert srv.evaluation.model.name == "meta-llama/Llama-3.1-8B-Instruct"
    assert "the same command's --served-model-name meta-llama/Llama-3.1-8B-Instruct" in srv.evaluation.model.assumptions[0]
    srv = server(tmp_path, "b.sh", "python -m sglang.launch_server --model-path /ckpt --tokenizer-path Qwen/Qwen3-8B\n")
    assert srv.evaluation.model.name == "Qwen/Qwen3-8B"


def test_placeholder_names_stay_unknown(tmp_path):
    srv = server(tmp_path, "a.sh", "vllm serve /var/mdl/YOUR-MODEL-PATH --served-model-name YOUR-MODEL-NAME\n")
    assert srv.evaluation is None and srv.error.startswith("unknown model '/var/mdl/YOUR-MODEL-PATH'")
    assert [f.code for f in srv.findings if f.code == "SF002"] == ["SF002"]


def test_llama_server_alias(tmp_path):
    srv = server(tmp_path, "a.sh", "llama-server -m /models/model.gguf --alias qwen2.5-7b-instruct -c 4096\n")
    m = srv.evaluation.model
    assert m.name == "Qwen/Qwen2.5-7B-Instruct"
    assert m.assumptions[0].startswith("'/models/model.gguf' names no model; sized as qwen2.5-7b-instruct: "
                                       "the same command's --alias qwen2.5-7b-instruct")


def test_a_named_model_is_not_replaced_and_the_directive_wins(tmp_path):
    srv = server(tmp_path, "a.sh", "vllm serve Qwen/Qwen3-8B --served-model-name meta-llama/Llama-3.1-8B-Instruct\n")
    assert (srv.evaluation.model.name, srv.evaluation.model.assumptions) == ("Qwen/Qwen3-8B", [])
    srv = server(tmp_path, "b.sh", "# servefit: model=Qwen/Qwen3-8B\ndocker run -v /x/Qwen2-7B-Instruct:/data "
                 "ghcr.io/huggingface/text-generation-inference:2.4.0 --model-id /data\n")
    assert srv.evaluation.model.name == "Qwen/Qwen3-8B"
    assert not any("names no model" in a for a in srv.evaluation.model.assumptions)


def test_candidates_order_and_what_is_not_evidence():
    class Site:
        file = "/nonexistent/x.sh"
        workload = Workload(path_map={"/data": "/host/Mistral-7B-Instruct-v0.2", "/": "/host"})
        argv = [Token(t) for t in ("vllm", "serve", "/data", "--served-model-name", "a/b,c", "--tokenizer", "$TOK")]

    assert candidates(Site(), "vllm", "/data") == [
        ("/host/Mistral-7B-Instruct-v0.2", "the file mounts /host/Mistral-7B-Instruct-v0.2 at /data"),
        ("a/b", "the same command's --served-model-name a/b")]
    assert candidates(Site(), "tgi", "/data")[1:] == []  # --served-model-name is not a TGI flag
    assert candidates(Site(), "vllm", "Qwen/Qwen3-8B") == []  # a Hub id is its own evidence


@pytest.mark.parametrize("ref,unnamed", [("/data", True), ("./m", True), ("~/m", True), ("$M/x", True),
                                         (r"C:\m\x.gguf", True), ("x.gguf", True), ("a/b/c", True),
                                         ("Qwen/Qwen3-8B", False), ("llama3:8b", False), ("", False)])
def test_is_unnamed_path(ref, unnamed):
    assert is_unnamed_path(ref) is unnamed


def test_compose_bind_mount(tmp_path):
    srv = server(tmp_path, "docker-compose.yml", """services:
  llm:
    image: vllm/vllm-openai:v0.8.5
    volumes:
      - ./weights/Mistral-7B-Instruct-v0.2:/model:ro
    command: --model /model --max-model-len 8192
""")
    m = srv.evaluation.model
    assert m.name == "mistralai/Mistral-7B-Instruct-v0.2"
    assert m.assumptions[0].startswith("'/model' names no model; sized as ./weights/Mistral-7B-Instruct-v0.2: "
                                       "the file mounts ./weights/Mistral-7B-Instruct-v0.2 at /model")
