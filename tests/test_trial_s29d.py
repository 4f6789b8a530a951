"""Found by running servefit as a new platform engineer on deployment files of the engines other than vLLM
(Text Generation Inference, SGLang, llama.cpp, Ollama) from public repositories (session 29, third trial):
each case is a minimal file written for the test, in the shape the repository had.

Repositories tried (owner/name@commit):
  huggingface/Google-Cloud-Containers@8d6aa78b23eb54fdf6bcb8cc1ce26ba7e593fdd9 (containers/tgi, examples/gke)
  genglinliu/WebCoach@7f16afcaa4543c383877cb8a267dd9f2a96c5d45
  hamelsmu/llama-inference@e97035da3c7deecd2cedf25d98c215d7f2e2c5f1
  Siryoos/kserve-vllm-mini@627b171ad83a8637443f85f6919455dfaca2717e
  khteh/Ollama@dd57d1dc14d61f34ca50b6f64d653d4e4418486b
  ChemaAlfonso/kraken-labs-video-transcriber@08b83c965fba931076ded488c8bf8b608dd324df
  dmitrymailk/hidden_capacity_reasoning@1d7f5af2715f1b84ba089934995f6338ffadd924
  chrisspen/llama.cpp-daemon@bde6c9eda25a269149cc79fffcd526210eacbe50
  DeepifyAI/local-ai-infrastructure@11a63821341ebde6585f115530a86ca1f445ae15
  wbic16/exo-plan@6a97ead961a1adbb3c06dcd38c44183c70507acd
  YangZhou08/LongBench@a49eb5b73896d588d3b26f8f2509cb9ebe32cb07
  pintar-team/llama-server@e7955b020a2dcafffae9e159b92bae6393bfcf64
  RubricLab/inference@2cb6cf700479b8e07dfac57eab8fc00a29acfa8d
Also run again, though earlier trials had tried them (nothing new found there):
  awslabs/extending-the-context-length-of-open-source-llms@638d900403be6949675e4ca4ff79dfc861e79b33
  HouXianzhoua/llm-inference-platform@04e01d361ac64af06f574e0e6ec78ea91861ec23
  marieai/marie-ai@35ea04789d8fdef8f9d26b18213439c83181b7fc
  countzero/windows_llama.cpp@c4ada68829f8e5e1e3fd2ee81c8f017fc66cc076
  jshin49/llama-recipes@570aab3b28c0de2c705a36ab020dd8886f36f541
  substratusai/helm@aca799410e55e339a4539366d5e7db0e38ad8c53
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main

# huggingface/Google-Cloud-Containers' containers/tgi/gpu/3.0.1/Dockerfile is built from the repository root
# (`docker build -f containers/tgi/gpu/3.0.1/Dockerfile .`): it ADDs TGI's source archive at tag v3.0.1, builds the
# launcher on a plain CUDA image and copies `containers/tgi/gpu/3.0.1/entrypoint.sh` (a path in the build context,
# not beside the Dockerfile) as its ENTRYPOINT. servefit looked for the script beside the Dockerfile, found none,
# and read the entrypoint alone: TGI with no version (the newest, 3.3.7, said as assumed), the Dockerfile silent.
TGI_SOURCE_DOCKERFILE = """# Fetch and extract the TGI sources
FROM alpine AS tgi
RUN mkdir -p /tgi
ADD https://github.com/huggingface/text-generation-inference/archive/refs/tags/v3.0.1.tar.gz /tgi/sources.tar.gz
RUN tar -C /tgi -xf /tgi/sources.tar.gz --strip-components=1

FROM nvidia/cuda:12.1.0-base-ubuntu22.04 AS base
COPY --from=tgi /tgi/launcher /usr/local/bin/text-generation-launcher

FROM base
COPY --chmod=775 containers/tgi/gpu/3.0.1/entrypoint.sh entrypoint.sh
ENTRYPOINT ["./entrypoint.sh"]
"""

TGI_ENTRYPOINT = """#!/bin/bash
export MODEL_ID="Qwen/Qwen2-7B-Instruct"
exec text-generation-launcher --max-total-tokens 8192 $@
"""


def _gcc_repo(root: Path) -> tuple[Path, Path]:
    (root / ".git").mkdir()
    d = root / "containers" / "tgi" / "gpu" / "3.0.1"
    d.mkdir(parents=True)
    (d / "Dockerfile").write_text(TGI_SOURCE_DOCKERFILE)
    (d / "entrypoint.sh").write_text(TGI_ENTRYPOINT)
    return d / "Dockerfile", d / "entrypoint.sh"


def test_dockerfile_copying_a_script_by_its_build_context_path_runs_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, script = _gcc_repo(tmp_path)
    for target in (tmp_path / "containers", script):  # the repository, or the script alone (a pre-commit hook)
        assert main(["lint", str(target), "--gpu", "L4", "--list-sites"]) == 0
        rows = capsys.readouterr().out.splitlines()
        assert len(rows) == 2, rows
        assert rows[1].split()[0].endswith("/containers/tgi/gpu/3.0.1/Dockerfile:12")  # the Dockerfile's ENTRYPOINT
        assert rows[1].split()[1] == "tgi"
        assert "max_total_tokens=8192 model_id=Qwen/Qwen2-7B-Instruct" in rows[1]
        assert "3.0.1 (the release the file builds from source)" in rows[1]
    assert main(["estimate", str(tmp_path / "containers"), "--gpu", "L4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tgi 3.0.1  ·  Qwen/Qwen2-7B-Instruct\n")
    assert "TGI 3.3.7 assumed" not in out
    assert "  - TGI_WIGGLE_ROOM=0.95 (TGI 3.0.1 default)\n" in out  # 3.3.7 keeps 0.9


def test_tgi_source_archive_release(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`ADD .../archive/<tag>.tar.gz` (the TPU Dockerfile's form, without refs/tags) names the release too; an archive of
    another repository, or at a branch, names none."""
    _, script = _gcc_repo(tmp_path)
    dockerfile = script.parent / "Dockerfile"
    for url, version in (
            ("https://github.com/huggingface/text-generation-inference/archive/v2.4.1.tar.gz", "2.4.1"),
            ("https://github.com/huggingface/text-generation-inference/archive/refs/heads/main.tar.gz", None),
            ("https://github.com/huggingface/optimum-tpu/archive/refs/tags/v0.2.3.tar.gz", None)):
        dockerfile.write_text(TGI_SOURCE_DOCKERFILE.replace(
            "https://github.com/huggingface/text-generation-inference/archive/refs/tags/v3.0.1.tar.gz", url))
        main(["lint", str(dockerfile.parent), "--gpu", "L4", "--list-sites"])
        row = capsys.readouterr().out.splitlines()[1]
        if version:
            assert f" {version} (the release the file builds from source)" in row
        else:
            assert "the release the file builds from source" not in row



# Ollama on Linux is configured with a drop-in of the unit its installer writes (`systemctl edit ollama` ->
# /etc/systemd/system/ollama.service.d/override.conf, Environment= lines only): DeepifyAI/local-ai-infrastructure's
# chapter-03 14_sudo.sh writes one from a heredoc, wbic16/exo-plan's scripts/ollama-latency.sh another. A drop-in
# whose unit is not in the repository has no ExecStart=, so servefit found no server in it ("No servers found"):
# every OLLAMA_* setting went unchecked and unsaid.
OLLAMA_DROPIN = """[Service]
Environment="OLLAMA_HOST=127.0.0.1:11434"
Environment="OLLAMA_KV_CACHE_TYPE=q8_0"
Environment="OLLAMA_FLASH_ATTENTION=1"
Environment="OLLAMA_NUM_PARALLEL=1"
"""

OLLAMA_DROPIN_SCRIPT = """#!/bin/bash
sudo mkdir -p /etc/systemd/system/ollama.service.d
sudo tee /etc/systemd/system/ollama.service.d/environment.conf > /dev/null <<EOF
[Service]
Environment="OLLAMA_HOST=0.0.0.0:11434"
Environment="OLLAMA_NUM_PARALLEL=4"
EOF
sudo systemctl daemon-reload
sudo systemctl restart ollama
"""


def test_ollama_drop_in_without_its_unit_is_the_installed_server(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "ollama.service.d"
    d.mkdir()
    f = d / "override.conf"
    f.write_text(OLLAMA_DROPIN)
    script = tmp_path / "setup.sh"
    script.write_text(OLLAMA_DROPIN_SCRIPT)
    assert main(["lint", str(tmp_path), "--gpu", "L4"]) == 0
    assert capsys.readouterr().out == (
        f"{f}:1:1: SF115 Ollama loads the models requests name, and this file names none, so their memory was not "
        "checked: add `# servefit: model=REF` above it for the model it serves\n"
        f"{script}:4:1: SF115 Ollama loads the models requests name, and this file names none, so their memory was not "
        "checked: add `# servefit: model=REF` above it for the model it serves\n"
        f"{script}:5:26: SEC003 Ollama has no authentication at all and listens on every interface of this machine "
        "(OLLAMA_HOST=0.0.0.0:11434): anyone who can reach port 11434 can use it; bind 127.0.0.1 and put an "
        "authenticating proxy in front\n"
        "0 errors, 1 warning, 2 info in 2 files (2 servers)\n")
    assert main(["estimate", str(f), "--gpu", "L4", "--model", "llama3.1:8b"]) == 0
    out = capsys.readouterr().out
    assert ("  - a drop-in of ollama.service, which the engine's installer writes: the server is its "
            "ExecStart=/usr/local/bin/ollama serve, with this drop-in's environment\n") in out
    assert "KV cache: 69,632 bytes per token" in out  # OLLAMA_KV_CACHE_TYPE=q8_0 with flash attention read
    # tune writes Environment= lines in the drop-in, and a second run writes nothing
    assert main(["tune", str(f), "--gpu", "L4", "--model", "llama3.1:8b", "--write"]) == 0
    capsys.readouterr()
    assert f.read_text() == OLLAMA_DROPIN.replace("OLLAMA_KV_CACHE_TYPE=q8_0", "OLLAMA_KV_CACHE_TYPE=f16").replace(
        'OLLAMA_NUM_PARALLEL=1"\n', 'OLLAMA_NUM_PARALLEL=4"\nEnvironment="OLLAMA_CONTEXT_LENGTH=32768"\n')
    written = f.read_text()
    main(["tune", str(f), "--gpu", "L4", "--model", "llama3.1:8b", "--write"])
    capsys.readouterr()
    assert f.read_text() == written


def test_drop_in_of_a_unit_no_installer_writes_stays_silent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "vllm.service.d"
    d.mkdir()
    (d / "override.conf").write_text('[Service]\nEnvironment="VLLM_LOGGING_LEVEL=DEBUG"\n')
    assert main(["lint", str(tmp_path), "--gpu", "L4"]) == 0
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (0 servers)\n"


# pintar-team/llama-server's llama-cuda/Dockerfile builds llama-server from its llama.cpp submodule and ends in
# `ENTRYPOINT ["/llama-server"]` with no CMD: an image whose users give `-m ...` at `docker run` (its README's
# `docker run --gpus all ... local/llama.cpp:server-cuda -m /models/7B/ggml-model-q4_0.gguf ...`). servefit read the
# bare binary as llama.cpp's router mode (LCPP015 warning "no -m: llama-server runs as a router ... up to 4 at once").
BARE_LLAMA_DOCKERFILE = """ARG CUDA_VERSION=12.4.1
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu22.04 as build
WORKDIR /app
COPY ./llama.cpp /app
RUN make clean && make -j8

FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu22.04 as runtime
COPY --from=build /app/llama-server /llama-server
ENTRYPOINT ["/llama-server"]
"""


def test_dockerfile_with_the_bare_llama_server_entrypoint_is_not_a_router(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "Dockerfile"
    f.write_text(BARE_LLAMA_DOCKERFILE)
    assert main(["lint", str(f), "--gpu", "L4"]) == 0
    assert capsys.readouterr().out == (
        f"{f}:9:14: SF115 the Dockerfile's command is the bare llama.cpp server: the model and settings are the "
        "arguments `docker run IMAGE ...` gives it, which are not in this file, so its memory was not checked: add "
        "`# servefit: model=REF` above it for the model it serves\n"
        "0 errors, 0 warnings, 1 info in 1 file (1 server)\n")
    # a command with its own arguments and no -m is still the router
    f.write_text(BARE_LLAMA_DOCKERFILE.replace('["/llama-server"]', '["/llama-server", "--port", "8080"]'))
    main(["lint", str(f), "--gpu", "L4"])
    assert ": LCPP015 no -m: llama-server runs as a router" in capsys.readouterr().out


# Ollama looks each setting up by its exact name (envconfig.Var) and says nothing about others: a drop-in with
# OLLAMA_CONTEXT_LENGHT leaves the context at its default (OLLM008 shows the 4096 it gets), and servefit said
# nothing about the misspelt line. A name far from every variable stays silent:
# DeepifyAI/local-ai-infrastructure's chapter-05 10_OLLAMA_NUM_GPU_2.sh sets OLLAMA_NUM_GPU=2, which ipex-llm's
# Ollama build reads.
MISSPELT_DROPIN = """[Service]
Environment="OLLAMA_CONTEXT_LENGHT=16384"
Environment="OLLAMA_KEEPALIVE=-1"
Environment="OLLAMA_NUM_GPU=2"
Environment="OLLAMA_NUM_PARALLEL=2"
"""


def test_misspelt_ollama_variable_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "ollama.service.d"
    d.mkdir()
    f = d / "override.conf"
    f.write_text(MISSPELT_DROPIN)
    assert main(["lint", str(f), "--gpu", "L4", "--model", "llama3.1:8b"]) == 0
    assert capsys.readouterr().out == (
        f"{f}:1:1: OLLM008 num_ctx not set: VRAM-based default for 22 GiB gives 4096 tokens (the model supports "
        "131072); longer prompts are truncated [GPU: L4 ×1 from --gpu]\n"
        f"{f}:2:36: OLLM016 OLLAMA_CONTEXT_LENGHT is not a variable Ollama reads (did you mean OLLAMA_CONTEXT_LENGTH?): "
        "the server ignores it, so OLLAMA_CONTEXT_LENGTH keeps its default [GPU: L4 ×1 from --gpu]\n"
        f"{f}:3:31: OLLM016 OLLAMA_KEEPALIVE is not a variable Ollama reads (did you mean OLLAMA_KEEP_ALIVE?): the "
        "server ignores it, so OLLAMA_KEEP_ALIVE keeps its default [GPU: L4 ×1 from --gpu]\n"
        "0 errors, 3 warnings, 0 info in 1 file (1 server)\n")
