"""Found by running servefit as a new user on public deployment repositories (session 27): each
case is a minimal file written for the test, in the shape the repository had."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

# LQR471814/x.vllm-distributed's Makefile starts vLLM through uv (`uv run vllm serve ...`): the
# file was read as "0 servers", nothing said.
UV_MAKEFILE = """vllm:
\tuv run vllm serve Qwen/Qwen3-0.6B \\
\t\t--gpu-memory-utilization 0.8 \\
\t\t--max-model-len 30000 \\
\t\t--host 127.0.0.1
"""


def _sites(capsys: pytest.CaptureFixture[str], *paths: str) -> list[dict]:
    main(["lint", *paths, "--gpu", "L4", "--list-sites", "--format", "json"])
    return json.loads(capsys.readouterr().out)


def test_a_server_started_through_an_environment_runner_is_found(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "Makefile").write_text(UV_MAKEFILE)
    (tmp_path / "conda.sh").write_text("conda run -n llm --no-capture-output vllm serve Qwen/Qwen3-8B "
                                       "--max-model-len 8192 --host 127.0.0.1\n")
    (tmp_path / "poetry.sh").write_text("poetry run python -m sglang.launch_server --model-path Qwen/Qwen3-8B "
                                        "--context-length 8192\n")
    (tmp_path / "uvwith.sh").write_text("uv run --with vllm --python 3.12 vllm serve Qwen/Qwen3-8B --max-model-len 4096 "
                                        "--host 127.0.0.1\n")
    # installing the engine is not running it
    (tmp_path / "setup.sh").write_text("uv pip install vllm\nconda install -c conda-forge vllm\n")
    got = [(Path(s["file"]).name, s["line"], s["engine"], s["model"], s["settings"].get("max_model_len"),
            s["settings"].get("context_length")) for s in _sites(capsys, str(tmp_path))]
    assert got == [
        ("Makefile", 2, "vllm", "Qwen/Qwen3-0.6B", 30000, None),
        ("conda.sh", 1, "vllm", "Qwen/Qwen3-8B", 8192, None),
        ("poetry.sh", 1, "sglang", "Qwen/Qwen3-8B", None, 8192),
        ("uvwith.sh", 1, "vllm", "Qwen/Qwen3-8B", 4096, None),
    ]


def test_tune_writes_a_server_started_through_uv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "Makefile"
    f.write_text(UV_MAKEFILE)
    main(["estimate", str(f), "--gpu", "L4"])
    assert capsys.readouterr().out.startswith("vllm 0.33.0  ·  Qwen/Qwen3-0.6B\n")
    main(["tune", str(f), "--gpu", "L4", "--write"])
    capsys.readouterr()
    first = f.read_text()
    assert first != UV_MAKEFILE and first.startswith("vllm:\n\tuv run vllm serve Qwen/Qwen3-0.6B \\\n")
    main(["tune", str(f), "--gpu", "L4", "--write"])
    capsys.readouterr()
    assert f.read_text() == first


# The same Makefile passes keys of vLLM's structured-outputs config one by one
# (`--structured-outputs-config.backend xgrammar`): every `--X-config` flag that vLLM fills from a
# config dataclass takes JSON and so dotted keys (vllm/engine/arg_utils.py _compute_kwargs:
# parse_dataclass; FlexibleArgumentParser.parse_args merges the dotted words), but servefit typed
# them as plain strings and called the dotted words unrecognized (VLLM001, "refuses the configuration").
def test_dotted_keys_of_vllms_config_flags_are_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "Makefile"
    f.write_text(UV_MAKEFILE.replace(
        "\t\t--gpu-memory-utilization 0.8 \\\n",
        "\t\t--structured-outputs-config.disable_any_whitespace True \\\n"
        "\t\t--structured-outputs-config.backend xgrammar \\\n"
        "\t\t--kv-transfer-config '{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"}' \\\n"
        "\t\t--gpu-memory-utilization 0.8 \\\n"))
    for version in ("0.13.0", None):
        extra = ["--engine-version", version] if version else []
        [site] = _sites(capsys, str(f), *extra)
        assert site["verdict"] == "started", version
        # `True` is no JSON: vLLM keeps the word, and its config's validation reads it as true
        assert site["settings"]["structured_outputs_config"] == {"disable_any_whitespace": "True", "backend": "xgrammar"}
        assert site["settings"]["kv_transfer_config"] == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
    f.write_text(UV_MAKEFILE.replace("--gpu-memory-utilization 0.8", "--kv-transfer-config {kv_role:kv_both}"))
    main(["lint", str(f), "--gpu", "L4", "--format", "json"])
    assert [(d["code"], d["message"]) for d in json.loads(capsys.readouterr().out) if d["code"].startswith("VLLM00")] \
        == [("VLLM002", "argument --kv-transfer-config: invalid json value: '{kv_role:kv_both}' [GPU: L4 ×1 from --gpu]")]


def test_the_attention_backend_in_attention_config_is_read() -> None:
    """vLLM's attention config names the backend (`-ac.backend FLASHINFER`, or JSON); servefit's
    FlashInfer decision reads attention_config as a dict, which the string type never gave it."""
    from servefit.core import Token
    from servefit.engines.argv import parse_argv
    from servefit.engines.options import load_table
    from servefit.engines.vllm.attn_backend import chosen_backend

    table = load_table("vllm")
    for words in (["-ac.backend", "FLASHINFER"], ["--attention-config", '{"backend": "FLASHINFER"}'],
                  ["--attention-config.backend=FLASHINFER"]):
        p = parse_argv(table, [Token(w) for w in words], "0.14.0")
        assert p.findings == [], words
        assert chosen_backend(p.values, None) == "FLASHINFER", words


# jshin49/llama-recipes runs TGI with `--model-id $model` set from a script argument: estimate,
# explain and tune take `--model` for that (README: "a command-line flag (--gpu, --gpus,
# --gpu-memory, --model, --engine-version) > ..., one rule for every command"), but lint refused it
# ("unrecognized arguments: --model", exit 2), so the commands could not be asked about the same server.
TGI_SCRIPT = """token=$1
model=$2
docker run --gpus '"device=0,1,2,3"' --shm-size 1g -p 127.0.0.1:3002:80 \\
    ghcr.io/huggingface/text-generation-inference:3.0.1 \\
    --model-id $model \\
    --num-shard 4 \\
    --max-input-length 3072 \\
    --max-total-tokens 4096 \\
    --max-concurrent-requests 10
"""


def test_lint_takes_the_model_flag_as_the_other_commands_do(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "run_70b.sh"
    f.write_text(TGI_SCRIPT)
    model = ["--model", "meta-llama/Llama-2-70b-chat-hf", "--gpu", "A100"]
    main(["estimate", str(f), *model, "--format", "json"])
    [est] = json.loads(capsys.readouterr().out)  # a file: a list of servers
    assert main(["lint", str(f), *model, "--list-sites", "--format", "json"]) == 0
    [site] = json.loads(capsys.readouterr().out)
    assert site["target"]["model"] == {"value": "meta-llama/Llama-2-70b-chat-hf", "source": "--model", "location": None}
    assert site["verdict"] == est["outcome"] == "started"
    main(["lint", str(f), *model, "--format", "json"])
    # the model is --model's, not "--model-id is $2, which is not set here: planned with the engine's default"
    assert not [a for a in est["assumptions"] if "$2" in a]
    # the server's own findings are estimate's; SEC004 is the file's. No SF001 "$2 ... is not known, so it is
    # not checked": --model gives it, and the server is checked with it
    assert [d["code"] for d in json.loads(capsys.readouterr().out)] == ["SEC004", "TGI021"]
    assert [d["code"] for d in est["findings"]] == ["TGI021"]
    # without it, the model is a variable whose value is not known, in lint as in estimate
    main(["lint", str(f), "--gpu", "A100", "--format", "json"])
    assert [d["code"] for d in json.loads(capsys.readouterr().out)] == ["SF001", "SEC004", "TGI021"]
    main(["lint", str(f), "--gpu", "A100", "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert site["verdict"] is None and site["not_planned"] == "the model is a variable ($2): its value is not known here " \
        "(pass --model REF)"


# Hiroaki-Masuzawa/llm_vlm_memo and jshin49/llama-recipes run `vllm/vllm-openai:latest` and
# `ghcr.io/huggingface/text-generation-inference:latest`. README: the engine's own image by a tag
# that moves with its releases runs the newest release, "so that counts as a version given"; and
# no SF005 dates the flags there. But estimate and explain still warned "WARNING: ... assumed (no
# version given ... pin the image tag)" and lint --list-sites showed the version as "-".
@pytest.mark.parametrize("image, title, version", [
    ("vllm/vllm-openai:latest", "vLLM", "0.33.0"),
    ("ghcr.io/huggingface/text-generation-inference:latest", "TGI", "3.3.7"),
])
def test_a_moving_image_tag_is_said_to_give_the_newest_release(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               image: str, title: str, version: str) -> None:
    f = tmp_path / "run.sh"
    args = "--model Qwen/Qwen2.5-3B-Instruct" if title == "vLLM" else "--model-id Qwen/Qwen2.5-3B-Instruct"
    f.write_text(f"docker run --rm --gpus all -p 127.0.0.1:8000:8000 {image} {args}\n")
    main(["estimate", str(f), "--gpu", "L4", "--format", "json"])
    [plan] = json.loads(capsys.readouterr().out)
    assert plan["engine_version"] == version
    said = (f"{title} {version} assumed: the image tag latest runs the newest release, the newest servefit "
            "models (pass --engine-version to check another)")
    assert plan["assumptions"][0] == said
    assert not any("no version given" in a for a in plan["assumptions"])
    main(["lint", str(f), "--gpu", "L4", "--list-sites"])
    assert f" {version} (image tag latest: the newest release) " in capsys.readouterr().out


# xiz2002/Practice_NestedCompose builds its Ollama image in two stages: the first runs `ollama
# create NAME -f ./models/.../Modelfile`, the last copies /root/.ollama from it and runs `ollama
# serve`. Only the last stage's RUN commands were read, so the server was "not checked: none is
# named here" and the Modelfile was checked on its own, as a second server without the image's GPU
# or version.
TWO_STAGES = """FROM ollama/ollama:0.6.0 AS base_stage
COPY ./models ./models
RUN ollama serve & sleep 5 && ollama create qwen3-q4:4b -f ./models/Qwen3-4B/Modelfile

FROM ollama/ollama:0.6.0 AS run_stage
COPY --from=base_stage /root/.ollama /root/.ollama
ENTRYPOINT ["ollama", "serve"]
"""


def test_models_a_build_stage_creates_are_the_servers_that_copy_them(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "models" / "Qwen3-4B").mkdir(parents=True)
    (tmp_path / "models" / "Qwen3-4B" / "Modelfile").write_text("FROM hf.co/Qwen/Qwen3-4B-GGUF:Q4_K_M\n"
                                                                "PARAMETER num_ctx 8192\n")
    f = tmp_path / "Dockerfile"
    f.write_text(TWO_STAGES)
    sites = _sites(capsys, str(tmp_path))
    assert [(Path(s["file"]).name, s["line"], s["model"], s["engine_version"], s["verdict"]) for s in sites] == [
        ("Dockerfile", 7, "hf.co/Qwen/Qwen3-4B-GGUF:Q4_K_M", "0.6.0", "started")]
    main(["estimate", str(f), "--gpu", "L4", "--format", "json"])
    [plan] = json.loads(capsys.readouterr().out)
    assert (plan["model"]["resolved"], plan["outcome"]) == ("Qwen/Qwen3-4B", "started")
    # a copy of another stage's files that are not Ollama's models links nothing
    f.write_text(TWO_STAGES.replace("/root/.ollama /root/.ollama", "/usr/bin/ollama /usr/bin/ollama"))
    assert [s["file"] for s in _sites(capsys, str(tmp_path))] == [str(f), str(tmp_path / "models/Qwen3-4B/Modelfile")]


def test_a_created_models_missing_modelfile_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The repository ignores its Modelfiles (`models/*/*` in .gitignore): the server's model is the
    one `ollama create` builds from a file that is not there, which was said as "this file names none"."""
    f = tmp_path / "Dockerfile"
    f.write_text(TWO_STAGES)
    main(["lint", str(f), "--gpu", "L4", "--format", "json"])
    [sf115] = [d for d in json.loads(capsys.readouterr().out) if d["code"] == "SF115"]
    assert sf115["message"] == (
        "`ollama create qwen3-q4:4b` builds the model it serves from ./models/Qwen3-4B/Modelfile, which is not in "
        "the repository, so its memory was not checked: add `# servefit: model=REF` above it for the model it serves")
    assert (sf115["location"]["line"], sf115["location"]["column"]) == (7, 14)
    assert main(["estimate", str(f), "--gpu", "L4"]) == 2
    assert capsys.readouterr().err == (
        "servefit: error: `ollama create qwen3-q4:4b` builds the model it serves from ./models/Qwen3-4B/Modelfile, "
        "which is not in the repository: add `# servefit: model=REF` above the server (or pass --model REF)\n")


# djismgaming/docs-llama-swap serves gpt-oss-20b and Qwen3-Coder-30B-A3B GGUFs on llama-server with
# --fit (the default) and no -c. tune counted a plan whose --fit moves the experts of some layers to
# the CPU as a full GPU plan: it wrote `--ctx-size 524288 --parallel 4` for gpt-oss (the experts of 3
# layers on the CPU), and lint on the written file warned LCPP009, which it had not before.
SWAP = """models:
  gpt-oss:
    cmd: |
      llama-server --port ${PORT}
      -m /models/gpt-oss-20b-MXFP4.gguf
      --jinja
"""


def test_tune_leaves_no_experts_on_the_cpu_that_fit_would_move(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "config.yaml"
    f.write_text(SWAP)
    main(["lint", str(f), "--gpu", "RTX4090", "--format", "json"])
    assert "LCPP009" not in [d["code"] for d in json.loads(capsys.readouterr().out)]
    main(["tune", str(f), "--gpu", "RTX4090", "--write"])
    capsys.readouterr()
    assert f.read_text() != SWAP
    main(["lint", str(f), "--gpu", "RTX4090", "--format", "json"])
    assert "LCPP009" not in [d["code"] for d in json.loads(capsys.readouterr().out)]
    # a file whose --fit-ctx asks fit to keep a context by moving experts off the GPU keeps that choice
    f.write_text(SWAP.replace("--jinja", "--jinja --fit-ctx 60000").replace("gpt-oss-20b-MXFP4",
                                                                           "Qwen3-Coder-30B-A3B-Instruct-Q4_K_M"))
    main(["tune", str(f), "--gpu", "RTX4090", "--diff"])
    assert "headroom 4.6%: meets the needs" in capsys.readouterr().out


# Lintasarta/vllm-helm: the chart's template runs `args: ["{{ .Values.modelName }}", {{ range
# .Values.extraArgs }}...]`. Without helm (or with --no-render) only the values are read: the server
# was "not checked: vLLM: no model given in the command", though the values key modelName holds it.
CHART_VALUES = """modelName: Qwen/Qwen3-0.6B
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions:
        - key: nvidia.com/gpu.product
          operator: In
          values:
          - NVIDIA-L40S
image:
  repository: vllm/vllm-openai
  tag: v0.11.2
resources:
  limits:
    nvidia.com/gpu: "1"
extraArgs:
  - "--gpu-memory-utilization"
  - "0.9"
  - "--max-model-len"
  - "32768"
"""
CHART_TEMPLATE = """apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: {{ .Values.image.repository }}:{{ .Values.image.tag }}
        args:
          - "{{ .Values.modelName }}"
          {{- range .Values.extraArgs }}
          - "{{ . }}"
          {{- end }}
"""


def test_an_unrendered_charts_model_is_its_values_model_key(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no helm: `servefit models` renders where it can
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: vllm\nversion: 0.1.0\n")
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "deployment.yaml").write_text(CHART_TEMPLATE)
    f = tmp_path / "values.yaml"
    f.write_text(CHART_VALUES)
    main(["lint", str(tmp_path), "--no-render", "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert (site["target"]["model"]["value"], site["gpu"]["name"], site["engine_version"], site["verdict"]) == (
        "Qwen/Qwen3-0.6B", "NVIDIA-L40S", "0.11.2", "started")
    assert site["target"]["model"]["source"] == ("the values key modelName (the chart's templates pass it to the "
                                                 "server; they were not rendered)")
    main(["estimate", str(f), "--format", "json"])
    [plan] = json.loads(capsys.readouterr().out)
    assert (plan["model"]["ref"], plan["outcome"]) == ("Qwen/Qwen3-0.6B", "started")
    assert ("model Qwen/Qwen3-0.6B: the values key modelName, which the chart's templates (not rendered) pass to the "
            "server, as its command names none") in plan["assumptions"]
    # `servefit models` said "(none) -> no model named here (the server loads models on request)"
    main(["models", str(tmp_path)])
    assert capsys.readouterr().out == (
        f"{f}:18  vllm  (none)  -> Qwen/Qwen3-0.6B (596.0M) from catalog (the values key modelName (the chart's "
        "templates pass it to the server; they were not rendered))\n")
    # a values key that holds no model reference is not taken for one
    f.write_text(CHART_VALUES.replace("modelName: Qwen/Qwen3-0.6B", "modelName: qwen3-small"))
    main(["lint", str(tmp_path), "--no-render", "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert site["target"]["model"] is None and site["not_planned"].startswith("this values file's command for vLLM names no model: its chart's templates may add one")


# Austontatious/lex builds its vLLM image in compose (`build: {context: ./docker/vllm}`, a Dockerfile
# FROM nvidia/cuda that pip-installs vLLM) and tags it `image: local/vllm-openai:lexi`. servefit took
# that tag for vLLM's own image pulled by a moving tag ("the image tag lexi runs the newest
# release") and called the file's --swap-space an error (VLLM001, "refuses the configuration").
LEX_COMPOSE = """services:
  vllm:
    build:
      context: ./docker/vllm
    image: local/vllm-openai:lexi
    command:
      - python
      - -m
      - vllm.entrypoints.openai.api_server
      - --model
      - Qwen/Qwen3-30B-A3B
      - --tensor-parallel-size
      - "4"
      - --swap-space
      - "12"
      - --max-model-len
      - "32000"
      - --host
      - 127.0.0.1
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              device_ids: ["0", "1", "2", "3"]
              capabilities: [gpu]
"""


@pytest.mark.parametrize("base, version, dated", [
    ("nvidia/cuda:12.8.0-runtime-ubuntu22.04", "0.17.1", True),  # the flags date it, as with no image at all
    ("vllm/vllm-openai:v0.9.2", "0.9.2", False),  # built on a release: that release
])
def test_a_compose_image_tag_that_names_the_build_is_no_release(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                base: str, version: str, dated: bool) -> None:
    (tmp_path / "docker" / "vllm").mkdir(parents=True)
    (tmp_path / "docker" / "vllm" / "Dockerfile").write_text(f"FROM {base}\nRUN pip install vllm\nENTRYPOINT []\n")
    f = tmp_path / "docker-compose.yml"
    f.write_text(LEX_COMPOSE)
    main(["lint", str(f), "--gpu", "RTX 3090", "--format", "json"])
    codes = [d["code"] for d in json.loads(capsys.readouterr().out)]
    assert "VLLM001" not in codes and ("SF005" in codes) is dated
    [site] = _sites(capsys, str(f).replace("RTX 3090", ""))
    assert site["engine_version"] == version and site["verdict"] == "started"


# Austontatious/lex's build installs a pinned release (`python3 -m pip install vllm==0.11.2` on an
# nvidia/cuda base): that is the version the container runs, as a release image's tag would say.
@pytest.mark.parametrize("install, version", [
    ("RUN python3 -m pip install --upgrade pip \\\n    && python3 -m pip install vllm==0.11.2\n", "0.11.2"),
    ('RUN uv pip install --system "vllm==0.8.5.post1" flashinfer-python\n', "0.8.5.post1"),
    ("RUN pip install 'vllm>=0.8'\n", None),  # a range names no release: the flags date it
])
def test_a_builds_pinned_engine_release_is_its_version(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       install: str, version: str | None) -> None:
    (tmp_path / "docker" / "vllm").mkdir(parents=True)
    (tmp_path / "docker" / "vllm" / "Dockerfile").write_text(
        f"FROM nvidia/cuda:12.8.0-runtime-ubuntu22.04\n{install}ENTRYPOINT []\n")
    f = tmp_path / "docker-compose.yml"
    f.write_text(LEX_COMPOSE)
    [site] = _sites(capsys, str(f))
    assert site["engine_version"] == (version or "0.17.1") and site["verdict"] == "started"
    if version:
        assert site["target"]["engine_version"] == {
            "value": version, "location": None,
            "source": f"pip install vllm=={version} in {tmp_path / 'docker' / 'vllm' / 'Dockerfile'}"}
    else:
        assert site["target"]["engine_version"] is None
    main(["lint", str(f), "--gpu", "L4", "--format", "json"])
    assert ("SF005" in [d["code"] for d in json.loads(capsys.readouterr().out)]) is (version is None)


# KubeRay's own vLLM sample (ray-operator/config/samples/vllm/ray-service.vllm.yaml) serves vLLM from a
# Ray Serve application on rayproject/ray-ml pods: servefit said "0 servers", nothing at all.
RAYSERVICE = """apiVersion: ray.io/v1
kind: RayService
metadata:
  name: llama-3-8b
spec:
  serveConfigV2: |
    applications:
    - name: llm
      route_prefix: /
      import_path: ray-operator.config.samples.vllm.serve:model
      runtime_env:
        pip: ["vllm==0.6.6.post1"]
        env_vars:
          MODEL_ID: "meta-llama/Meta-Llama-3-8B-Instruct"
          TENSOR_PARALLELISM: "2"
  rayClusterConfig:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers:
          - name: ray-head
            image: rayproject/ray-ml:2.33.0.914af0-py311
    workerGroupSpecs:
    - replicas: 1
      groupName: gpu-group
      rayStartParams: {}
      template:
        spec:
          containers:
          - name: llm
            image: rayproject/ray-ml:2.33.0.914af0-py311
            resources:
              limits:
                nvidia.com/gpu: "2"
"""


def test_a_ray_serve_application_that_runs_an_engine_is_said_not_checked(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "ray-service.vllm.yaml"
    f.write_text(RAYSERVICE)
    main(["lint", str(f), "--gpu", "L4", "--format", "json"])
    [d] = json.loads(capsys.readouterr().out)
    assert (d["code"], d["location"]["line"]) == ("SF116", 6)
    assert d["message"] == (
        "RayService llama-3-8b runs vLLM in a Ray Serve application (import_path "
        "ray-operator.config.samples.vllm.serve:model), whose Python code sets the engine's arguments: servefit "
        "does not read Ray Serve applications, so this server's settings were not checked")
    # an application that names no engine is not a server servefit checks
    f.write_text(RAYSERVICE.replace('pip: ["vllm==0.6.6.post1"]', "pip: [torch]").replace(".vllm.", ".text_ml."))
    main(["lint", str(f), "--gpu", "L4", "--format", "json"])
    assert json.loads(capsys.readouterr().out) == []


# redhat-ai-services/helm-charts' vllm-kserve chart serves a KServe "modelcar": the InferenceService's
# storageUri is an OCI image (`oci://quay.io/redhat-ai-services/modelcar-catalog:granite-3.3-2b-instruct`)
# that KServe mounts at /mnt/models, which the runtime's command names. The server was "unknown model
# '/mnt/models'" although the file names the model in the image's tag.
ISVC = """apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: vllm-rt
spec:
  containers:
  - name: kserve-container
    image: vllm/vllm-openai:v0.11.0
    args: [--port=8080, --model=/mnt/models, --max-model-len=8192]
---
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: my-model
spec:
  predictor:
    model:
      modelFormat: {name: vLLM}
      runtime: vllm-rt
      storageUri: oci://quay.io/redhat-ai-services/modelcar-catalog:granite-3.3-2b-instruct
      resources:
        limits: {nvidia.com/gpu: "1"}
"""


def test_a_kserve_modelcar_is_named_by_its_image(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "isvc.yaml"
    f.write_text(ISVC)
    [site] = _sites(capsys, str(f))
    assert site["verdict"] == "started" and site["model_ref"]["resolved"] == "ibm-granite/granite-3.3-2b-instruct"
    main(["estimate", str(f), "--gpu", "L4", "--format", "json"])
    [plan] = json.loads(capsys.readouterr().out)
    assert plan["model"]["resolved"] == "ibm-granite/granite-3.3-2b-instruct" and plan["outcome"] == "started"


# sergey21000/docker-compose-webui-llm-examples mounts its engine configs into the containers
# (`${CONFIG_DIR:-../configs}/vllm:/workspace/configs`) and starts vLLM and SGLang with
# `--config /workspace/configs/cuda.yml`. The mount was not read (its `${VAR:-default}` was split at
# the `:` of `:-`), so vLLM said "--config ... is not in the repository" and "no model given", and
# SGLang "the following arguments are required: --model-path".
@pytest.mark.parametrize("engine, compose, config, model", [
    ("vllm", """services:
  vllm:
    image: vllm/vllm-openai:v0.11.0
    volumes:
      - ${CONFIG_DIR:-../configs}/vllm:/workspace/configs
    command:
      - --config
      - /workspace/configs/cuda.yml
""", "model: Qwen/Qwen3-0.6B\nmax_model_len: 4096\ngpu_memory_utilization: 0.7\n", "Qwen/Qwen3-0.6B"),
    ("sglang", """services:
  sglang:
    image: lmsysorg/sglang:v0.5.4
    volumes:
      - ${CONFIG_DIR:-../configs}/sglang:/sgl-workspace/configs
    entrypoint: python3 -m sglang.launch_server
    command:
      - --config
      - /sgl-workspace/configs/cuda.yml
""", "model-path: Qwen/Qwen3-0.6B\ncontext-length: 4096\nmem-fraction-static: 0.7\n", "Qwen/Qwen3-0.6B"),
])
def test_a_config_file_mounted_into_the_container_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch, engine: str, compose: str,
                                                          config: str, model: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    (tmp_path / "configs" / engine).mkdir(parents=True)
    (tmp_path / "configs" / engine / "cuda.yml").write_text(config)
    (tmp_path / "llm").mkdir()
    f = tmp_path / "llm" / f"compose.{engine}.yml"
    f.write_text(compose)
    sites = _sites(capsys, str(f))
    assert [(s["engine"], s["model"], s["verdict"]) for s in sites] == [(engine, model, "started")]
    main(["lint", str(f), "--gpu", "L4", "--format", "json"])
    assert [d["code"] for d in json.loads(capsys.readouterr().out) if d["severity"] != "info"] == []


def test_a_compose_file_another_extends_with_its_own_command_is_a_server_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same repository runs `llm/compose.vllm.yml` on GPUs and `llm/compose.vllm.cpu.yml`, which
    extends its service with another image and command, on CPUs. The GPU file's server was dropped as
    "the template of the file that extends it", so a directory lint never checked it."""
    (tmp_path / "compose.vllm.yml").write_text(
        "services:\n  vllm:\n    image: vllm/vllm-openai:v0.11.0\n    command: [--model, Qwen/Qwen3-8B, --max-model-len,"
        " '8192', --host, 127.0.0.1]\n")
    (tmp_path / "compose.vllm.cpu.yml").write_text(
        "services:\n  vllm:\n    extends:\n      file: compose.vllm.yml\n      service: vllm\n"
        "    image: vllm/vllm-openai-cpu:v0.11.0\n    command: [--model, Qwen/Qwen3-0.6B, --host, 127.0.0.1]\n")
    got = [(Path(s["file"]).name, s["model"]) for s in _sites(capsys, str(tmp_path))]
    assert sorted(got) == [("compose.vllm.cpu.yml", "Qwen/Qwen3-0.6B"), ("compose.vllm.yml", "Qwen/Qwen3-8B")]
    # the same when the extending service keeps the base's entrypoint and replaces its command
    (tmp_path / "compose.vllm.yml").write_text(
        "services:\n  vllm:\n    image: vllm/vllm-openai:v0.11.0\n    entrypoint: [vllm, serve]\n"
        "    command: [Qwen/Qwen3-8B, --max-model-len, '8192', --host, 127.0.0.1]\n")
    (tmp_path / "compose.vllm.cpu.yml").write_text(
        "services:\n  vllm:\n    extends:\n      file: compose.vllm.yml\n      service: vllm\n"
        "    image: vllm/vllm-openai-cpu:v0.11.0\n    command: [Qwen/Qwen3-0.6B, --host, 127.0.0.1]\n")
    # (the CPU server is placed where its command's first word, the base's entrypoint, is written)
    got = [(Path(s["file"]).name, s["name"], s["model"]) for s in _sites(capsys, str(tmp_path))]
    assert sorted(got) == [("compose.vllm.yml", "compose/vllm", "Qwen/Qwen3-0.6B"),
                           ("compose.vllm.yml", "compose/vllm", "Qwen/Qwen3-8B")]


def test_a_compose_base_run_by_its_images_own_command_is_a_server_when_extended_with_another_image(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """sergey21000/docker-compose-webui-llm-examples: llm/compose.llamacpp.yml runs llama.cpp's server-cuda
    image by its own entrypoint (settings in LLAMA_ARG_* variables); compose.llamacpp.cpu.yml extends it
    with the CPU image. Neither writes a command, and the GPU server was dropped as the CPU file's template."""
    (tmp_path / "compose.llamacpp.yml").write_text(
        "services:\n  llamacpp:\n    image: ghcr.io/ggml-org/llama.cpp:server-cuda\n    gpus: all\n"
        "    environment:\n      LLAMA_ARG_HF_REPO: bartowski/Qwen2.5-7B-Instruct-GGUF\n      LLAMA_ARG_CTX_SIZE: '8192'\n")
    (tmp_path / "compose.llamacpp.cpu.yml").write_text(
        "services:\n  llamacpp:\n    extends:\n      file: compose.llamacpp.yml\n      service: llamacpp\n"
        "    image: ghcr.io/ggml-org/llama.cpp:server\n")
    got = sorted((Path(s["file"]).name, s["image"]) for s in _sites(capsys, str(tmp_path)))
    assert got == [("compose.llamacpp.cpu.yml", "ghcr.io/ggml-org/llama.cpp:server"),
                   ("compose.llamacpp.yml", "ghcr.io/ggml-org/llama.cpp:server-cuda")]
    # an extending service that keeps the base's image is a layer of the same server: the base is its template
    (tmp_path / "compose.llamacpp.cpu.yml").write_text(
        "services:\n  llamacpp:\n    extends:\n      file: compose.llamacpp.yml\n      service: llamacpp\n"
        "    environment:\n      LLAMA_ARG_CTX_SIZE: '4096'\n")
    # (placed where its image is written, in the base's file)
    [site] = _sites(capsys, str(tmp_path))
    assert (site["image"], site["settings"]["ctx_size"]) == ("ghcr.io/ggml-org/llama.cpp:server-cuda", 4096)


def test_an_unmodelled_switch_is_listed_as_on_or_off(capsys: pytest.CaptureFixture[str]) -> None:
    """`--jinja` (llama-server's chat-template switch, not a memory setting) was listed as `jinja=--jinja`."""
    assert main(["lint", "--list-sites", "--output-format", "json", "--", "llama-server", "-m", "/models/x.gguf",
                 "--jinja", "--no-webui", "--no-warmup", "-c", "8192", "--alias", "qwen"]) == 0
    [site] = json.loads(capsys.readouterr().out)
    # --no-webui is a flag of its own (no_webui: on); --no-warmup is warmup's negation (off)
    assert site["settings"] == {"alias": "qwen", "ctx_size": 8192, "jinja": True, "no_webui": True, "warmup": False}
