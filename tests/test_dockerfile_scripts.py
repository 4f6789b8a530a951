"""A Dockerfile whose ENTRYPOINT / CMD runs a script the build copies from the repository: the
server is the script's, in the Dockerfile's image (its version, its ENV). Read alone, the script
got the newest release assumed although the image pins another (a real repository's shape)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from servefit.cli import main

DOCKERFILE = ('FROM vllm/vllm-openai:v0.8.5\nENV VLLM_LOGGING_LEVEL=DEBUG\nCOPY start.sh /app/start.sh\n'
              'ENTRYPOINT ["/bin/bash", "/app/start.sh"]\n')
SCRIPT = ("#!/bin/bash\nset -e\nexec python3 -m vllm.entrypoints.openai.api_server "
          "--model meta-llama/Llama-3.1-8B-Instruct --max-model-len 131072 --gpu-memory-utilization 0.9\n")


def _sites(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:
    rc = main(["lint", *args, "--list-sites", "--output-format", "json"])
    assert rc == 0
    return json.loads(capsys.readouterr().out)


def _lint(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[tuple[str, int, str]]]:
    rc = main(["lint", *args, "--gpu", "L4", "--output-format", "json"])
    out = json.loads(capsys.readouterr().out)
    return rc, sorted((os.path.basename(f["location"]["file"]), f["location"]["line"], f["code"])
                      for f in out)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    (tmp_path / "start.sh").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_script_runs_in_the_dockerfiles_image(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [site] = _sites(capsys, ".", "--gpu", "L4")
    assert (site["file"], site["engine"], site["engine_version"], site["model"]) == (
        "Dockerfile", "vllm", "0.8.5", "meta-llama/Llama-3.1-8B-Instruct")
    assert site["settings"] == {"max_model_len": 131072, "gpu_memory_utilization": 0.9}
    loc = site["settings_raw"]["max_model_len"]["location"]
    assert (loc["file"], loc["line"], loc["col"], loc["end_col"]) == ("start.sh", 3, 109, 115)
    assert site["env"]["VLLM_LOGGING_LEVEL"] == "DEBUG"


def test_lint_and_estimate_of_the_script_alone_find_the_dockerfile(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A pre-commit hook passes only the changed script: it is still the image's server."""
    [site] = _sites(capsys, "start.sh", "--gpu", "L4")
    assert (site["engine_version"], site["env"]["VLLM_LOGGING_LEVEL"]) == ("0.8.5", "DEBUG")
    assert _lint(capsys, "start.sh") == _lint(capsys, ".") == (1, [("Dockerfile", 4, "SEC004"), ("start.sh", 3, "VLLM003")])
    main(["estimate", "start.sh", "--gpu", "L4", "--format", "json"])
    [plan] = json.loads(capsys.readouterr().out)
    assert plan["engine_version"] == "0.8.5"


def test_tune_writes_the_script(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", ".", "--gpu", "L4", "--write"]) == 0
    capsys.readouterr()
    assert (repo / "start.sh").read_text() == SCRIPT.replace(
        "--max-model-len 131072", "--max-model-len 32768").replace("0.9\n", "0.9 --max-num-seqs 64\n")
    assert (repo / "Dockerfile").read_text() == DOCKERFILE
    assert _lint(capsys, ".")[1] == [("Dockerfile", 4, "SEC004"), ("start.sh", 3, "VLLM019")]


def test_shell_form_relative_to_workdir_and_a_folder_copy(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "scripts").mkdir()
    (repo / "start.sh").rename(repo / "scripts" / "serve.sh")
    (repo / "Dockerfile").write_text("FROM vllm/vllm-openai:v0.10.2\nWORKDIR /srv\nCOPY scripts/ ./bin/\n"
                                     "ENTRYPOINT ./bin/serve.sh\n")
    [site] = _sites(capsys, ".", "--gpu", "L4")
    assert (site["file"], site["engine_version"], site["settings"]["max_model_len"]) == ("Dockerfile", "0.10.2", 131072)


def test_a_script_not_copied_from_the_repository_is_said(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Copied from another stage: the Dockerfile cannot tell which server it starts (SF116, not a
    silent skip); the script in the repository is read on its own."""
    (repo / "Dockerfile").write_text("FROM alpine AS fetch\nRUN echo\nFROM vllm/vllm-openai:v0.8.5\n"
                                     "COPY --from=fetch /start.sh /app/start.sh\nENTRYPOINT [\"/bin/bash\", \"/app/start.sh\"]\n")
    [site] = _sites(capsys, ".", "--gpu", "L4")
    assert (site["file"], site["engine_version"] == "0.8.5") == ("start.sh", False)
    assert ("Dockerfile", 5, "SF116") in _lint(capsys, ".")[1]


def test_a_cmd_after_the_engine_images_entrypoint_is_its_arguments(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No ENTRYPOINT: the vLLM image's own one runs with the CMD as its arguments (SF106), even
    when the CMD names a copied script."""
    (repo / "Dockerfile").write_text('FROM vllm/vllm-openai:v0.8.5\nCOPY start.sh /app/start.sh\nCMD ["/app/start.sh"]\n')
    assert ("Dockerfile", 3, "SF106") in _lint(capsys, ".")[1]


def test_a_compose_service_built_from_the_dockerfile_runs_the_script(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "compose.yaml").write_text("services:\n  api:\n    build: .\n    environment:\n      - VLLM_LOGGING_LEVEL=INFO\n")
    [site] = _sites(capsys, ".", "--gpu", "L4")
    assert (site["file"], site["line"], site["engine_version"], site["env"]["VLLM_LOGGING_LEVEL"]) == (
        "compose.yaml", 3, "0.8.5", "INFO")
    assert site["settings"]["max_model_len"] == 131072


@pytest.mark.parametrize("dockerfile, script", [
    # a bare name given to bash is relative to the working directory the COPY wrote to
    ('FROM vllm/vllm-openai:v0.8.5\nCOPY --chmod=775 endpoints-entrypoint.sh entrypoint.sh\n'
     'ENTRYPOINT ["/bin/bash", "entrypoint.sh"]\nCMD [""]\n', "endpoints-entrypoint.sh"),
    # a script without .sh, known by its #! line
    ('FROM vllm/vllm-openai:v0.8.5\nCOPY sagemaker/serve /usr/bin/serve\nENTRYPOINT ["/usr/bin/serve"]\n', "sagemaker/serve"),
    # `COPY /src/...` is in the build context; `ENTRYPOINT []` makes the CMD the whole command
    ('FROM vllm/vllm-openai:v0.8.5\nWORKDIR /app\nCOPY /src/start.sh /app/\nENTRYPOINT []\nCMD ["/app/start.sh"]\n',
     "src/start.sh"),
])
def test_shapes_of_public_dockerfiles(repo: Path, capsys: pytest.CaptureFixture[str], dockerfile: str, script: str) -> None:
    (repo / "start.sh").unlink()
    (repo / script).parent.mkdir(parents=True, exist_ok=True)
    (repo / script).write_text(SCRIPT)
    (repo / "Dockerfile").write_text(dockerfile)
    [site] = _sites(capsys, ".", "--gpu", "L4")
    assert (site["file"], site["engine_version"], site["settings"]["max_model_len"]) == ("Dockerfile", "0.8.5", 131072)


def test_a_copied_program_is_not_a_script(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "serve").write_bytes(b"\x7fELF\x02\x01\x01")
    (repo / "Dockerfile").write_text('FROM vllm/vllm-openai:v0.8.5\nCOPY serve /usr/bin/serve\nENTRYPOINT ["/usr/bin/serve"]\n')
    [site] = _sites(capsys, ".", "--gpu", "L4")
    assert site["file"] == "start.sh"


OLLAMA_COMPOSE = """services:
  ollama:
    image: ollama/ollama:0.9.0
    volumes:
      - ./model_data:/root/.ollama/models
      - ./scripts/entrypoint-ollama.sh:/entrypoint-ollama.sh:ro
    entrypoint: ["/bin/sh", "/entrypoint-ollama.sh"]
    environment:
      - OLLAMA_CONTEXT_LENGTH=32768
      - OLLAMA_KV_CACHE_TYPE=q8_0
"""
OLLAMA_SCRIPT = "#!/bin/sh\nollama serve &\nsleep 5\nollama pull qwen2.5:7b\nwait\n"


def test_a_script_a_compose_service_mounts_and_runs(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A public compose file's shape: the service's environment sets the context, the script it
    mounts starts the server. Read alone, the script's server had neither (OLLM008: "num_ctx not
    set", on a server whose compose file sets 32768) and the newest Ollama."""
    (repo / "Dockerfile").unlink()
    (repo / "start.sh").unlink()
    (repo / "scripts").mkdir()
    (repo / "scripts" / "entrypoint-ollama.sh").write_text(OLLAMA_SCRIPT)
    (repo / "compose.yaml").write_text(OLLAMA_COMPOSE)
    for target in (".", "scripts/entrypoint-ollama.sh"):
        [site] = _sites(capsys, target, "--gpu", "L4")
        assert (site["name"], site["file"], site["engine_version"], site["model"]) == (
            "compose/ollama", "compose.yaml", "0.9.0", "Qwen/Qwen2.5-7B-Instruct")
        assert site["settings"] == {"OLLAMA_CONTEXT_LENGTH": 32768, "OLLAMA_KV_CACHE_TYPE": "q8_0"}
        # the service's q8_0 KV cache without flash attention (OLLM005) is found: its environment is read
        assert _lint(capsys, target)[1] == [("compose.yaml", 7, "SEC004"), ("compose.yaml", 10, "OLLM005")]


def test_a_mounted_script_run_by_a_relative_path_from_the_services_working_dir(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`working_dir: /app` with `./scripts:/app/scripts` mounted and `command: ./scripts/serve.sh`:
    the script runs from the service's working directory (compose's `working_dir`), not from /."""
    (repo / "Dockerfile").unlink()
    (repo / "start.sh").unlink()
    (repo / "scripts").mkdir()
    (repo / "scripts" / "serve.sh").write_text(SCRIPT)
    (repo / "compose.yaml").write_text(
        "services:\n  llm:\n    image: vllm/vllm-openai:v0.8.5\n    working_dir: /app\n"
        "    volumes:\n      - ./scripts:/app/scripts\n    entrypoint: [\"bash\", \"./scripts/serve.sh\"]\n")
    [site] = _sites(capsys, ".", "--gpu", "L4")
    assert (site["name"], site["file"], site["engine_version"], site["settings"]["max_model_len"]) == (
        "compose/llm", "compose.yaml", "0.8.5", 131072)
