"""Session 31's second real-file trial (Ollama, llama.cpp, SGLang, TGI deployments): shapes from public
repositories (named with their commits) that servefit read wrongly or silently, each reduced to the part
that mattered.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main

# nemo6655/TDPFuzz@1d3b49e access_adapt/start_tgi_servers.sh: TGI 1.4.5 on an HPC cluster, run from the .sif
# `apptainer pull docker://ghcr.io/huggingface/text-generation-inference:1.4.5` writes (GetName in apptainer's
# internal/pkg/util/uri/uri.go names it NAME_TAG.sif), with `--env PORT=$PORT` and PORT never set in the script.
# servefit found no server in the file and said nothing.
TDPFUZZ = """#!/usr/bin/env bash
volume=/projects/x/hf_model
CONTAINER_HOME=/projects/x/containers
model=codellama/CodeLlama-13b-hf

apptainer run --nv --env HF_TOKEN=$TOKEN --env PORT=$PORT --bind $volume:/data:rw $CONTAINER_HOME/text-generation-inference_1.4.5.sif \\
--model-id $model \\
--dtype bfloat16 \\
--max-total-tokens 8192 --max-input-length 8000 --max-batch-prefill-tokens 8000 --enable-cuda-graphs --sharded false
apptainer run --nv ./my_server.sif --model-id $model
"""


def test_apptainer_run_of_a_pulled_sif_is_the_engine_image(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "start_tgi_servers.sh"
    f.write_text(TDPFUZZ)
    assert main(["lint", str(f), "--gpu", "A100-80GB"]) == 0
    assert capsys.readouterr().out == (
        f"{f}:6:53: SF001 ${{PORT}} is not set in this repository: the value it gives Text Generation Inference is "
        "not known, so it is not checked\n"
        f"{f}:7:1: SEC003 TGI has no API key and listens on every interface of this machine (its default without "
        "--hostname): anyone who can reach it can use it; bind 127.0.0.1 or pass --api-key\n"
        f"{f}:10:20: SF108 `apptainer run` starts the runscript of ./my_server.sif, which servefit cannot read, so "
        "the server it starts with these options was not checked: run the engine's image as docker://REPO:TAG, or "
        "keep the name `apptainer pull docker://REPO:TAG` gives it (NAME_TAG.sif)\n"
        "0 errors, 1 warning, 2 info in 1 file (1 server)\n")
    assert main(["estimate", str(f), "--gpu", "A100-80GB"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "tgi 1.4.5  ·  codellama/CodeLlama-13b-hf"
    assert "engine says: Setting max batch total tokens to 64656" in out
