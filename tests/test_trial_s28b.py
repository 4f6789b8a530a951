"""Found by running servefit as a new user on public deployment repositories (session 28, second
round): each case is a minimal file written for the test, in the shape the repository had."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main


# robbypambudi/ray-vllm-benchmark's case-1/docker-compose.yml runs its own Ray image with vLLM installed
# (`robbypambudi/ray-worker-vllm`) as `ray start --head ... --block`: the image's name made it vLLM's image
# and the command its arguments, a server of model "ray" with `--head` taken for `--headless` and four
# VLLM001/VLLM002 errors, where the container is a Ray node that starts no server.
def test_a_ray_node_in_an_image_named_after_vllm_is_not_a_vllm_server(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "docker-compose.yml"
    f.write_text("services:\n"
                 "  ray-head:\n"
                 "    image: someone/ray-worker-vllm:v1\n"
                 "    command: >\n"
                 "      ray start --head --dashboard-host=0.0.0.0 --block\n")
    assert main(["lint", str(f), "--gpu", "L4"]) == 0
    out = capsys.readouterr().out
    assert out == (f"{f}:3:12: SF116 someone/ray-worker-vllm:v1 runs vLLM, but this container starts a Ray node "
                   "(`ray start`), not the server: a server Ray runs there comes from a Ray Serve application or a "
                   "job servefit does not read, so its settings were not checked\n"
                   "0 errors, 1 warning, 0 info in 1 file (0 servers)\n")
    # the engine's own arguments after the image's entrypoint are still read as before
    f.write_text("services:\n"
                 "  vllm:\n"
                 "    image: vllm/vllm-openai:v0.11.0\n"
                 "    command: --model Qwen/Qwen2.5-7B-Instruct --max-model-len 8192\n")
    main(["models", str(f)])
    assert capsys.readouterr().out.startswith(f"{f}:4  vllm  Qwen/Qwen2.5-7B-Instruct  -> ")


# suparious/chat-with-tools' backends/vllm/vllm_start_rocm.sh builds its `docker run ... rocm/vllm ...` line with
# `cmd+=` in a function and runs it with `eval "${docker_cmd}"`; it also lists containers with
# `docker ps -a --format '{{.Names}}'`. The Go template docker fills made servefit call the script a template
# (SF104, "lint the script it renders into"), and the eval it does not run was never named.
def test_a_script_that_evals_a_built_command_says_so_and_a_docker_format_is_no_template(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "start.sh"
    f.write_text("build() {\n"
                 "  local cmd=\"docker run -d rocm/vllm:latest\"\n"
                 "  cmd+=\" python -m vllm.entrypoints.openai.api_server --model ${MODEL_ID}\"\n"
                 "  echo \"$cmd\"\n"
                 "}\n"
                 "if docker ps -a --format '{{.Names}}' | grep -q vllm; then docker rm -f vllm; fi\n"
                 "docker_cmd=$(build)\n"
                 "id=$(eval \"${docker_cmd}\")\n")
    main(["lint", str(f)])
    assert capsys.readouterr().out == (
        f"{f}:8:6: SF108 `eval \"${{docker_cmd}}\"` runs a command line the script builds when it runs: servefit does "
        "not run it, so the server it starts was not read; write the command out, or lint it with "
        "`servefit lint -- COMMAND`\n0 errors, 0 warnings, 1 info in 1 file (0 servers)\n")


# Tomas148-M/MiniLLMBot's LLM_FineTunning/autoscript.sh writes a Modelfile from a heredoc (`TEMPLATE "[INST]
# {{ .Prompt }} [/INST]"`) and runs `ollama create`: the Modelfile's template was taken for the script's own
# template syntax (SF104), though the script is plain shell that starts no server.
def test_a_modelfile_template_in_a_heredoc_is_not_template_syntax_of_the_script(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "autoscript.sh"
    f.write_text("cat > /tmp/Modelfile <<EOF\n"
                 "FROM /models/qwen2.5-3b-instruct-q4_k_m.gguf\n"
                 "TEMPLATE \"[INST] {{ .Prompt }} [/INST]\"\n"
                 "EOF\n"
                 "ollama create qwen2-model -f /tmp/Modelfile\n")
    main(["lint", str(f)])
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (0 servers)\n"
    # a script that is a template still says so
    f.write_text("# starts vllm\n{{ .Values.serverCommand }}\n")
    main(["lint", str(f)])
    assert "SF104 template syntax ({{ }}): this script is a template" in capsys.readouterr().out


# robbypambudi/ray-vllm-benchmark's deployer/config.yaml is a Ray Serve config (`serve deploy config.yaml`)
# whose application imports vLLM's server: a RayService's serveConfigV2 of the same text is said as not read
# (SF116), the file itself was read as nothing at all.
def test_a_ray_serve_config_file_running_vllm_is_said_as_not_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "config.yaml"
    f.write_text("applications:\n"
                 "  - name: llm\n"
                 "    route_prefix: /\n"
                 "    import_path: vllm.entrypoints.openai.api_server:app\n"
                 "    deployments:\n"
                 "      - name: VLLMDeployment\n"
                 "        ray_actor_options: {num_gpus: 2}\n")
    main(["lint", str(f)])
    assert capsys.readouterr().out == (
        f"{f}:1:1: SF116 this Ray Serve config runs vLLM in a Ray Serve application (import_path "
        "vllm.entrypoints.openai.api_server:app), whose Python code sets the engine's arguments: servefit does not "
        "read Ray Serve applications, so this server's settings were not checked\n"
        "0 errors, 1 warning, 0 info in 1 file (0 servers)\n")


# wvdschel/llamaland's containers/llama-cpp/run.sh builds `LLAMA_OPTS="... ${LLAMA_EXTRA_OPTS}"`, then
# `CMD="llama-server ... ${LLAMA_OPTS}"` and runs `exec ${CMD}`: the unset variable two strings deep was
# both SF001 and an LCPP001 error ("invalid argument: ${LLAMA_EXTRA_OPTS}"), as if the file passed that text.
def test_an_unset_variable_two_strings_deep_is_sf001_not_an_invalid_argument(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "run.sh"
    f.write_text('OPTS="--ctx-size 4096 ${EXTRA}"\n'
                 'CMD="llama-server -m /m/qwen2.5-7b-instruct-q4_k_m.gguf ${OPTS}"\n'
                 "exec ${CMD}\n")
    assert main(["lint", str(f), "--gpu", "L4", "--engine-version", "b6500"]) == 0
    assert capsys.readouterr().out == (
        f"{f}:1:23: SF001 ${{EXTRA}} is not set in this repository: the value it gives llama.cpp is not known, so it "
        f"is not checked\n{f}:2:6: SF004 GGUF 'qwen2.5-7b-instruct-q4_k_m.gguf' taken as Qwen/Qwen2.5-7B-Instruct (by "
        "its name, quant Q4_K_M; no file to read)\n0 errors, 0 warnings, 2 info in 1 file (1 server)\n")


# countzero/windows_llama.cpp's examples/speculative_decoding.ps1 runs llama-server with a bare `--flash-attn`
# and `--spec-draft-p-min` (from b9093) beside `--ctx-size-draft` (removed in b9409): SF005 said b9093 "has every
# option it uses" while LCPP002 said that build refuses the bare switch; no build takes them all, and that is said.
def test_a_bare_fa_with_options_of_a_later_build_is_said_to_fit_no_build(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "spec.sh"
    f.write_text("llama-server --model /m/Qwen2.5-Coder-32B-Instruct.IQ3_XXS.gguf -ngl 99 --flash-attn \\\n"
                 "  --model-draft /m/Qwen2.5-Coder-0.5B-Instruct.IQ4_XS.gguf --ctx-size-draft 16384 --spec-draft-p-min 0.5\n")
    main(["lint", str(f), "--gpu", "RTX 4090"])
    out = capsys.readouterr().out
    assert (f"{f}:1:73: SF005 llama.cpp b10309 assumed: no version given, and no release has every option this config "
            "uses: -fa (a bare switch only before b6325), --spec-draft-p-min (added in b9093); the newest release "
            "modelled; pass --engine-version bNNNN or pin the image tag\n") in out
    assert "has every option it uses" not in out
    # a bare -fa alone still dates the config to the last build that takes it
    f.write_text("llama-server --model /m/Qwen2.5-Coder-32B-Instruct.IQ3_XXS.gguf -ngl 99 --flash-attn\n")
    main(["lint", str(f), "--gpu", "RTX 4090"])
    assert "SF005 llama.cpp b6301 assumed: no version given; -fa (a bare switch" in capsys.readouterr().out


# seungrokj/ai_sprint_paris' scripts/0_container.sh opens a shell in `rocm/vllm-dev:nightly_...` (`docker run -it`,
# no command): AMD's rocm/vllm images are the `final` stage of vLLM's docker/Dockerfile.rocm (`CMD ["/bin/bash"]`,
# no ENTRYPOINT; only the vllm-openai stage, vllm/vllm-openai-rocm, adds `vllm serve`), yet servefit invented a
# vLLM server there with no model (SEC004, SF110). The vLLM release in their tags (`..._vllm_0.8.3`) was not read.
def test_amds_rocm_vllm_images_run_a_shell_and_name_their_vllm_release(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "container.sh"
    f.write_text("docker run --rm -it --device=/dev/kfd --device=/dev/dri rocm/vllm-dev:nightly_0610_rc2_20250605\n")
    main(["lint", str(f)])
    assert capsys.readouterr().out == (
        f"{f}:1:57: SF116 rocm/vllm-dev:nightly_0610_rc2_20250605 runs vLLM only when a command starts it (`vllm serve "
        "MODEL` or `python -m vllm.entrypoints.openai.api_server` after the image, its default command being a bash "
        "shell); this container's command starts none that servefit can read, so no server was read here. Give the "
        "container that command, or lint the script it runs\n0 errors, 1 warning, 0 info in 1 file (0 servers)\n")
    f.write_text("docker run -d --device /dev/kfd rocm/vllm:rocm6.3.1_vllm_0.8.3 \\\n"
                 "  vllm serve Qwen/Qwen2.5-7B-Instruct --host 127.0.0.1 --max-model-len 8192\n")
    main(["estimate", str(f), "--gpu", "MI300X"])
    assert capsys.readouterr().out.startswith("vllm 0.8.3  ·  Qwen/Qwen2.5-7B-Instruct\n")
    # vLLM's own ROCm image keeps its `vllm serve` entrypoint
    f.write_text("docker run -d --device /dev/kfd vllm/vllm-openai-rocm:v0.14.0 --model Qwen/Qwen2.5-7B-Instruct "
                 "--host 127.0.0.1\n")
    main(["models", str(f)])
    assert capsys.readouterr().out.startswith(f"{f}:1  vllm  Qwen/Qwen2.5-7B-Instruct  -> ")


# Gunther-Schulz/local-llm-coding-setup's start-llama-server-native.sh serves Qwen2.5-Coder-14B (trained on 32,768)
# at --ctx-size 81920 with --rope-scale 2.5: llama.cpp logs "n_ctx_seq > n_ctx_train" whatever the scaling, and
# servefit's LCPP011 warning made tune count the file's own context as serving 0 users and halve it, though the
# file stretches RoPE over exactly that length (common/arg.cpp: --rope-scale N "expands context by a factor of N").
def test_a_context_the_file_stretches_rope_over_is_kept_by_tune(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "start.sh"
    f.write_text("llama-server -m /m/qwen2.5-coder-7b-instruct-q4_k_m.gguf -ngl 99 --ctx-size 65536 --rope-scale 2 "
                 "--parallel 1 -fa on --host 127.0.0.1\n")
    main(["lint", str(f), "--gpu", "RTX 4090", "--engine-version", "b6500"])
    assert (f"{f}:1:77: LCPP011 n_ctx_seq (65536) > n_ctx_train (32768) -- possible training context overflow "
            "(llama.cpp logs it; --rope-scale 2 stretches RoPE over 65,536 tokens, as this file asks)") \
        in capsys.readouterr().out
    main(["tune", str(f), "--gpu", "RTX 4090", "--engine-version", "b6500", "--diff"])
    out = capsys.readouterr().out
    assert "  now     context 65,536 x 1 user, KV f16, weights Q4_K_M, headroom 64.2%: meets the needs\n" in out
    assert "  tuned   context 65,536 x 4 users" in out
    # without the stretch the same context stays a warning
    f.write_text("llama-server -m /m/qwen2.5-coder-7b-instruct-q4_k_m.gguf -ngl 99 --ctx-size 65536 "
                 "--parallel 1 -fa on --host 127.0.0.1\n")
    main(["lint", str(f), "--gpu", "RTX 4090", "--engine-version", "b6500"])
    assert "LCPP011 n_ctx_seq (65536) > n_ctx_train (32768) -- possible training context overflow [GPU" \
        in capsys.readouterr().out


# quang-vo-ds/video-understanding-chatbot's docker-compose.yaml runs its Ollama service as
# `entrypoint: ["env", "LLM_NAME=llama3.1", "/bin/sh", "/scripts/run-ollama.sh"]` over a bind-mounted ./scripts:
# the `env` prefix hid the script, so the compose service (GPU, published port 11434) was no server, the script
# alone was read with `$LLM_NAME` unset (SF001), and SEC002 was missed. Read, tune then put its variables in the
# service's `environment:` list, not as keys after the entrypoint line (the env prefix's value is no entry).
def test_a_compose_entrypoint_run_through_env_reads_the_mounted_script_with_its_variables(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the repository the script is linted in: the compose file above it is looked at
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "run-ollama.sh").write_text("#!/bin/bash\nollama serve &\npid=$!\nsleep 5\n"
                                                        "ollama run $LLM_NAME --verbose\nwait $pid\n")
    f = tmp_path / "docker-compose.yaml"
    f.write_text("services:\n"
                 "  ollama:\n"
                 "    image: ollama/ollama:0.12.6\n"
                 "    environment:\n"
                 "      - OLLAMA_KEEP_ALIVE=24h\n"
                 "    ports:\n"
                 "      - 11434:11434\n"
                 "    volumes:\n"
                 "      - ./scripts:/scripts\n"
                 "    deploy:\n"
                 "      resources:\n"
                 "        reservations:\n"
                 "          devices:\n"
                 "            - {driver: nvidia, count: 1, capabilities: [gpu]}\n"
                 "    entrypoint: [\"env\", \"LLM_NAME=llama3.1\", \"/bin/sh\", \"/scripts/run-ollama.sh\"]\n")
    main(["models", "."])
    assert capsys.readouterr().out == ("docker-compose.yaml:15  ollama  llama3.1  -> meta-llama/Llama-3.1-8B-Instruct "
                                       "(8.03B) from catalog\n")
    main(["lint", "scripts/run-ollama.sh", "--gpu", "A10G"])
    out = capsys.readouterr().out
    assert "SF001" not in out and "docker-compose.yaml:7:9: SEC002 Ollama has no authentication" in out
    main(["tune", "docker-compose.yaml", "--gpu", "A10G", "--write"])
    capsys.readouterr()
    assert f.read_text().startswith("services:\n  ollama:\n    image: ollama/ollama:0.12.6\n    environment:\n"
                                    "      - OLLAMA_KEEP_ALIVE=24h\n      - OLLAMA_CONTEXT_LENGTH=")
    assert f.read_text().endswith("    entrypoint: [\"env\", \"LLM_NAME=llama3.1\", \"/bin/sh\", \"/scripts/run-ollama.sh\"]\n")


# devopsrustem/slurmv4's 3/13.sh starts SGLang as `LD_LIBRARY_PATH=/usr/local/cuda-13.1/lib64:$LD_LIBRARY_PATH ...
# python3 -m sglang.launch_server ...`: the inherited value the prefix extends was SF001 ("the value it gives SGLang
# is not known"), though it sets no setting; `export LD_LIBRARY_PATH=...:$LD_LIBRARY_PATH` already said nothing.
def test_a_prefix_that_extends_its_own_inherited_value_is_no_unset_variable(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sh"
    f.write_text("CUDA_VISIBLE_DEVICES=$GPU LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH \\\n"
                 "  python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --host 127.0.0.1\n")
    main(["lint", str(f), "--gpu", "H100"])
    assert capsys.readouterr().out == (
        f"{f}:1:22: SF001 ${{GPU}} is not set in this repository: the value it gives SGLang is not known, so it is not "
        "checked\n0 errors, 0 warnings, 1 info in 1 file (1 server)\n")


# shenpeijun0212/S-GRPO's deploy_dpsk/serving.sh takes `model_name=$1` and `nnodes=$2`: SF001 said "$1 is not set in
# this repository", as if a variable were missing, where the value is the script's first argument.
def test_a_script_argument_is_said_as_the_argument_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serving.sh"
    f.write_text("model_name=$1\npython3 -m sglang.launch_server --model-path $model_name --host 127.0.0.1\n")
    main(["lint", str(f), "--gpu", "H100"])
    assert capsys.readouterr().out == (
        f"{f}:1:12: SF001 $1: argument 1 the script is called with is not known: the value it gives SGLang is not "
        "checked\n0 errors, 0 warnings, 1 info in 1 file (1 server)\n")


# countzero/windows_llama.cpp and others write `--fa` for llama.cpp's `-fa`: the suggestion was `--tfs`, the
# closest long flag; the same name with the other number of dashes is what was meant.
def test_the_suggestion_for_a_flag_with_the_wrong_dashes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sh"
    f.write_text("llama-server -m /m/qwen2.5-7b-instruct-q4_k_m.gguf --fa on -c 4096 --host 127.0.0.1\n"
                 "vllm serve Qwen/Qwen2.5-7B-Instruct -max-model-len 4096 --gpu-memory-utilisation 0.9 --host 127.0.0.1\n")
    main(["lint", str(f), "--gpu", "L4", "--select", "LCPP001,VLLM001", "--format", "json"])


    assert [x["message"].split(" [GPU")[0] for x in json.loads(capsys.readouterr().out)] == [
        "error: invalid argument: --fa (did you mean -fa?)",  # llama-server's own wording
        "unrecognized argument: -max-model-len (did you mean --max-model-len?)",
        "unrecognized argument: --gpu-memory-utilisation (did you mean --gpu-memory-utilization?)"]
