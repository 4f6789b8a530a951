"""Leftovers of the session-30 trials on public deployment repositories: each case is a minimal
file written for the test, in the shape the repository had.

Repositories (owner/name@commit):
  jspaulsen/llama-cpp-docker@a71d1e8124821db3dd62c330c18a552f1d22b753
  freechat-fun/freechat-vllm@f92fab764585e7de2d2e858369736231e050900a
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main


# jspaulsen/llama-cpp-docker: `image: llama-cpp-docker` is built from the repository's Dockerfile
# under a tag a Makefile variable names, and the service sets llama-server's LLAMA_ARG_* variables:
# no server and no message came of it.
def test_a_compose_service_of_an_unknown_image_with_llama_arg_env(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "docker-compose.yml"
    f.write_text("services:\n"
                 "  llama:\n"
                 "    image: llama-cpp-docker\n"
                 "    environment:\n"
                 "      - GGML_CUDA_NO_PINNED=1\n"
                 "      - LLAMA_ARG_MODEL=/models/qwen2.5-7b-instruct-q4_k_m.gguf\n"
                 "      - LLAMA_ARG_CTX_SIZE=4096\n"
                 "      - LLAMA_ARG_N_GPU_LAYERS=99\n"
                 "    deploy:\n"
                 "      resources:\n"
                 "        reservations:\n"
                 "          devices:\n"
                 "            - driver: nvidia\n"
                 "              count: 1\n"
                 "              capabilities: [gpu]\n")
    assert main(["lint", str(f)]) == 0
    assert capsys.readouterr().out == (
        f"{f}:3:1: SF110 no GPU is known for this server, so its memory was not checked: pass --gpu NAME or add "
        "`# servefit: gpu=NAME` to the file\n"
        "0 errors, 0 warnings, 1 info in 1 file (1 server)\n")
    assert main(["estimate", str(f), "--gpu", "L4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("llamacpp b10309  ·  Qwen/Qwen2.5-7B-Instruct\n")
    assert "KV cache: 57,344 bytes per token; 4,096 tokens\n" in out
    assert ("  - llama-cpp-docker is not an image servefit knows, but its environment sets llama-server's own "
            "variables (LLAMA_ARG_CTX_SIZE, LLAMA_ARG_MODEL, LLAMA_ARG_N_GPU_LAYERS): it is read as llama-server "
            "with its command as the arguments; lint the image's Dockerfile to be sure\n") in out


# an image named after nothing that only LLAMA_ARG_* marks is read too (the variables make the file
# worth reading); a LLAMA_ARG_ name llama-server does not have makes no server
def test_only_llama_arg_env_marks_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "docker-compose.yml"
    f.write_text("services:\n"
                 "  web:\n"
                 "    image: local/inference\n"
                 "    environment:\n"
                 "      LLAMA_ARG_MODEL: /models/qwen2.5-7b-instruct-q4_k_m.gguf\n")
    main(["lint", str(f), "--gpu", "L4"])
    assert capsys.readouterr().out == (
        f"{f}:5:24: LCPP008 no -c: the context defaults to the training length 32768 (KV cache 1.75 GiB) "
        "[GPU: L4 ×1 from --gpu]\n"
        f"{f}:5:24: SF004 GGUF 'qwen2.5-7b-instruct-q4_k_m.gguf' taken as Qwen/Qwen2.5-7B-Instruct (by its name, "
        "quant Q4_K_M; no file to read)\n"
        "0 errors, 1 warning, 1 info in 1 file (1 server)\n")
    f.write_text("services:\n"
                 "  web:\n"
                 "    image: local/inference\n"
                 "    environment:\n"
                 "      LLAMA_ARG_NOT_AN_OPTION: 1\n")
    main(["lint", str(f)])
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (0 servers)\n"
    # a container whose command is a program of its own is not llama-server, whatever its environment
    f.write_text("services:\n"
                 "  web:\n"
                 "    image: local/inference\n"
                 "    command: [python, app.py]\n"
                 "    environment:\n"
                 "      LLAMA_ARG_MODEL: /models/qwen2.5-7b-instruct-q4_k_m.gguf\n")
    main(["lint", str(f)])
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (0 servers)\n"
    # its arguments are llama-server's
    f.write_text("services:\n"
                 "  web:\n"
                 "    image: local/inference\n"
                 "    command: [--ctx-size, '8192']\n"
                 "    environment:\n"
                 "      LLAMA_ARG_MODEL: /models/qwen2.5-7b-instruct-q4_k_m.gguf\n")
    main(["lint", str(f), "--gpu", "L4"])
    assert capsys.readouterr().out == (
        f"{f}:6:24: SF004 GGUF 'qwen2.5-7b-instruct-q4_k_m.gguf' taken as Qwen/Qwen2.5-7B-Instruct (by its name, "
        "quant Q4_K_M; no file to read)\n"
        "0 errors, 0 warnings, 1 info in 1 file (1 server)\n")


# freechat-fun/freechat-vllm: configs/helm holds a Chart.yaml (no templates) and values for the
# remote chart its install script names (`helm install -f values.yaml ... repo/vllm`); the values
# set only a `vllm:` section's env: 0 servers and no message.
def test_values_for_a_chart_not_in_the_repository_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / ".git").mkdir()
    d = tmp_path / "configs" / "helm"
    d.mkdir(parents=True)
    (d / "Chart.yaml").write_text("apiVersion: v2\nname: freechat-vllm\ntype: application\nversion: v0.11.0\n")
    (d / "values.yaml").write_text("replicaCount: 1\n"
                                   "tolerations:\n"
                                   "  - effect: NoSchedule\n"
                                   "    key: nvidia.com/gpu\n"
                                   "    operator: Exists\n"
                                   "vllm:\n"
                                   "  env:\n"
                                   "    - name: VLLM_USE_MODELSCOPE\n"
                                   "      value: \"True\"\n")
    main(["lint", str(tmp_path)])
    assert capsys.readouterr().out == (
        f"{d / 'values.yaml'}:6:1: SF116 this values file configures vLLM (its `vllm:` section), but the command "
        "it runs comes from the templates of a chart servefit does not read, so this server's settings were not "
        "checked: put the chart in the repository (servefit renders it with helm) or lint the output of "
        "`helm template`\n"
        "0 errors, 1 warning, 0 info in 2 files (0 servers)\n")
    # a section named after nothing an engine is called is no server's
    (d / "values.yaml").write_text("frontend:\n  env:\n    - name: VLLM_URL\n      value: http://vllm:8000\n")
    main(["lint", str(tmp_path)])
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 2 files (0 servers)\n"


# tune's change line named `--max-total-tokens 32768` while it wrote MAX_TOTAL_TOKENS in the
# service's environment (TGI's env form); the line names what it writes, as the file writes it
def test_tune_names_the_variable_it_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "docker-compose.yml"
    f.write_text("services:\n"
                 "  tgi:\n"
                 "    image: ghcr.io/huggingface/text-generation-inference:2.4.1\n"
                 "    environment:\n"
                 "      - MODEL_ID=Qwen/Qwen2.5-7B-Instruct\n"
                 "      - MAX_TOTAL_TOKENS=4096\n"
                 "      - MAX_INPUT_LENGTH=2048\n")
    main(["tune", str(f), "--gpu", "L4"])
    out = capsys.readouterr().out
    assert "  change  MAX_TOTAL_TOKENS=32768 [safe]\n" in out
    main(["tune", str(f), "--gpu", "L4", "--diff"])
    assert "-      - MAX_TOTAL_TOKENS=4096\n+      - MAX_TOTAL_TOKENS=32768\n" in capsys.readouterr().out
    # llama.cpp's LLAMA_ARG_* form: the one it changes and the one it adds beside them
    f.write_text("services:\n"
                 "  llama:\n"
                 "    image: ghcr.io/ggml-org/llama.cpp:server-cuda-b7327\n"
                 "    environment:\n"
                 "      - LLAMA_ARG_CTX_SIZE=2048\n"
                 "      - LLAMA_ARG_MODEL=/models/Meta-Llama-3.1-8B-Instruct-Q5_K_M.gguf\n"
                 "      - LLAMA_ARG_N_GPU_LAYERS=99\n")
    main(["tune", str(f), "--gpu", "L4"])
    assert "  change  LLAMA_ARG_CTX_SIZE=65536, LLAMA_ARG_N_PARALLEL=8 [safe]\n" in capsys.readouterr().out


# a notes script with `python -m sglang.launch_server ...`: the `...` was an unrecognized argument
# and --model-path a missing one (SGL001 + SGL002 errors); it stands for arguments left out
def test_an_elided_argument_list_is_said_not_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "notes.sh"
    f.write_text("#!/bin/bash\n# start the server\npython -m sglang.launch_server ...\n")
    assert main(["lint", str(f), "--gpu", "L4"]) == 0
    assert capsys.readouterr().out == (
        f"{f}:3:1: SF002 the model is not in the command: it may be among the arguments `...` stands for "
        "(pass --model REF)\n"
        f"{f}:3:32: SF001 `...` leaves out SGLang's arguments here: they are not known, so they are not checked\n"
        "0 errors, 1 warning, 1 info in 1 file (1 server)\n")
    # after the model, the rest is left out: the server is sized; `...` inside a word is a word
    f.write_text("python -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct ...\n"
                 "echo Loading... && ls ../models\n")
    main(["lint", str(f), "--gpu", "L4"])
    assert capsys.readouterr().out == (
        f"{f}:1:1: SGL006 the KV pool holds 7725 tokens, less than context_len=32768: requests longer than 7719 "
        "input tokens are rejected (max_req_input_len) [GPU: L4 ×1 from --gpu]\n"
        f"{f}:1:70: SF001 `...` leaves out SGLang's arguments here: they are not known, so they are not checked\n"
        "0 errors, 1 warning, 1 info in 1 file (1 server)\n")


def test_only_a_whole_word_of_three_dots_is_elided() -> None:
    from servefit.sources.shell import Vars, split_commands
    from servefit.sources.text import whole

    [cmd] = split_commands(whole("serve ... a... ...b .../x ...", "t.sh"), Vars())
    assert [w.text for w in cmd.words] == ["serve", "a...", "...b", ".../x"]
    assert [v for v, _ in cmd.unresolved] == ["...", "..."]


# SF004 called `gs://bucket/...` "a local folder of that name": it is an object-store path
def test_an_object_store_model_path_is_named_as_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sh"
    f.write_text("vllm serve gs://my-bucket/models/Qwen2.5-7B-Instruct --host 127.0.0.1\n"
                 "vllm serve s3://bkt/Qwen2.5-7B-Instruct-AWQ --host 127.0.0.1\n"
                 "vllm serve /models/Qwen2.5-7B-Instruct-AWQ --host 127.0.0.1\n")
    main(["lint", str(f), "--gpu", "L4"])
    sf004 = [line for line in capsys.readouterr().out.splitlines() if " SF004 " in line]
    assert sf004 == [
        f"{f}:1:12: SF004 resolved 'gs://my-bucket/models/Qwen2.5-7B-Instruct' to catalog entry "
        "'Qwen/Qwen2.5-7B-Instruct' by name (an object-store path of that name); assumed the same checkpoint",
        f"{f}:2:12: SF004 resolved 's3://bkt/Qwen2.5-7B-Instruct-AWQ' to catalog entry 'Qwen/Qwen2.5-7B-Instruct' "
        "by name (an object-store path named after it); assumed AWQ 4-bit, group 128",
        f"{f}:3:12: SF004 resolved '/models/Qwen2.5-7B-Instruct-AWQ' to catalog entry 'Qwen/Qwen2.5-7B-Instruct' "
        "by name (a local folder named after it); assumed AWQ 4-bit, group 128"]


# estimate said how a GGUF's name was read three times: "GGUF 'x.gguf' taken as ...", "model 'x.gguf'
# taken as ... by its name (...)" and "weights sized from ... as llama-quantize makes ..."
def test_a_gguf_name_is_read_once_in_the_assumptions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sh"
    f.write_text("llama-server -m /models/qwen2.5-7b-instruct-q4_k_m.gguf -c 4096 -ngl 99 --host 127.0.0.1\n")
    main(["estimate", str(f), "--gpu", "L4", "--engine-version", "b7327"])
    out = capsys.readouterr().out
    named = [line for line in out.splitlines() if "Qwen2.5-7B-Instruct" in line or "llama-quantize" in line]
    assert named == [
        "llamacpp b7327  ·  Qwen/Qwen2.5-7B-Instruct",
        "  - GGUF 'qwen2.5-7b-instruct-q4_k_m.gguf' taken as Qwen/Qwen2.5-7B-Instruct (by its name, quant Q4_K_M; "
        "no file to read)",
        "  - weights sized as llama-quantize makes Q4_K_M (4.36 GiB; the real file may differ slightly)"]


# tune's "KV auto (bfloat16)" for an AWQ checkpoint known by its name: AutoAWQ writes float16
# checkpoints, and vLLM's auto dtype (so its auto KV dtype) is the checkpoint's; the size is the same
def test_an_awq_checkpoint_runs_in_float16(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sh"
    f.write_text("vllm serve Qwen/Qwen2.5-7B-Instruct-AWQ --host 127.0.0.1 --max-model-len 8192\n")
    main(["tune", str(f), "--gpu", "L4"])
    out = capsys.readouterr().out
    assert ("  now     context 8,192 x 31 users, KV auto (float16), weights awq (checkpoint), headroom 8.8%: "
            "meets the needs\n") in out
    f.write_text("vllm serve Qwen/Qwen2.5-7B-Instruct --host 127.0.0.1 --max-model-len 8192\n")
    main(["tune", str(f), "--gpu", "L4"])
    assert "  now     context 8,192 x " in (out := capsys.readouterr().out) and "KV auto (bfloat16)" in out
