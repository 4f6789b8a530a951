"""Dockerfiles: exec and shell form, ENV / ARG, stages, continuations, the base image's entrypoint."""

from __future__ import annotations

from pathlib import Path

from servefit.sources import scan_file

FIX = Path(__file__).parent / "fixtures" / "sources" / "docker"


def argv(site) -> list[str]:
    return [t.text for t in site.argv]


def at(tok) -> tuple[int, int, str]:
    s = tok.span
    with open(s.file, encoding="utf-8", newline="") as fh:
        return s.line, s.col, fh.read()[s.start:s.end]


def test_exec_form_cmd_appended_to_the_engine_image_entrypoint():
    r = scan_file(str(FIX / "Dockerfile"))
    [site] = r.sites
    assert site.name == "dockerfile/serve" and site.image == "vllm/vllm-openai:v0.10.2"  # ARG BASE in FROM
    assert argv(site) == ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192",
                          "--gpu-memory-utilization", "0.9"]
    assert at(site.argv[4]) == (11, 26, "8192")  # after a comment line inside the continuation
    assert {k: t.text for k, t in site.env.items()} == {
        "MODEL_NAME": "Qwen/Qwen2.5-7B-Instruct", "VLLM_LOGGING_LEVEL": "INFO", "HF_HOME": "/cache"}
    assert at(site.env["MODEL_NAME"]) == (4, 11, "Qwen/Qwen2.5-7B-Instruct")  # ARG default via ${MODEL}
    assert site.engine_version == "0.10.2" and r.findings == []


def test_shell_form_entrypoint_with_env_and_stages():
    [site] = scan_file(str(FIX / "Dockerfile.shell")).sites
    assert site.engine == "llamacpp" and site.engine_version is None  # ubuntu is not an engine image
    assert argv(site) == ["llama-server", "-m", "/models/gemma-2-9b-it-Q4_K_M.gguf", "--ctx-size", "8192",
                          "-ngl", "99", "--parallel", "2"]  # shell-form ENTRYPOINT ignores CMD
    assert at(site.argv[2]) == (6, 11, "/models/gemma-2-9b-it-Q4_K_M.gguf")
    assert at(site.argv[4]) == (6, 49, "8192")


def test_exec_form_variables_are_literal():
    r = scan_file(str(FIX / "Dockerfile.execvar"))
    [site] = r.sites
    assert argv(site) == ["python3", "-m", "sglang.launch_server", "--model-path", "$MODEL", "--tp", "2"]
    assert [f.code for f in r.findings] == ["SF107"] and at(site.argv[4]) == (4, 23, "$MODEL")
