"""Shell scripts, systemd units, SkyPilot tasks, llama-swap configs and vLLM --config files."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.sources import scan_file

FIX = Path(__file__).parent / "fixtures" / "sources"


def scan(name: str):
    return scan_file(str(FIX / name))


def argv(site) -> list[str]:
    return [t.text for t in site.argv]


def at(tok) -> tuple[str, int, int, str]:
    s = tok.span
    with open(s.file, encoding="utf-8", newline="") as fh:
        return Path(s.file).name, s.line, s.col, fh.read()[s.start:s.end]


def test_comment_inside_a_continuation_ends_the_command():
    r = scan("scripts/continuation-comment.sh")
    [site] = r.sites
    assert argv(site) == ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "65536"]
    assert [f.code for f in r.findings] == ["SF103"]
    assert (r.findings[0].span.line, r.findings[0].span.col) == (4, 3)


def test_variables_defaults_exports_nohup_and_exec():
    vllm, llama = scan("scripts/vars.sh").sites
    assert vllm.name == "script:14" and vllm.line == 14
    assert argv(vllm) == ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen2.5-7B-Instruct",
                          "--port", "8000", "--max-model-len", "32768", "--enable-prefix-caching", "--max-num-seqs",
                          "64"]  # the `--enforce-eager` under `if DEBUG` is not assumed
    assert at(vllm.argv[4]) == ("vars.sh", 4, 17, "Qwen/Qwen2.5-7B-Instruct")
    assert at(vllm.argv[8]) == ("vars.sh", 5, 5, "32768")
    assert at(vllm.argv[11]) == ("vars.sh", 6, 52, "64")  # a word split out of $EXTRA_ARGS
    assert {k: t.text for k, t in vllm.env.items()} == {"VLLM_USE_V1": "1", "VLLM_ATTENTION_BACKEND": "FLASHINFER"}
    assert argv(llama) == ["llama-server", "-m", "/models/phi-3.5-mini-Q4_K_M.gguf", "-c", "4096", "--port", "8081"]
    assert at(llama.argv[4]) == ("vars.sh", 18, 72, "4096")
    assert "VLLM_ATTENTION_BACKEND" not in llama.env  # a prefix assignment is for its command only


def test_vllm_settings_from_a_script():
    pytest.importorskip("servefit.engines.vllm")
    from servefit import engines

    cfg = engines.get("vllm").parse(scan("scripts/vars.sh").sites[0])
    assert cfg.model_ref == "Qwen/Qwen2.5-7B-Instruct"
    assert cfg.settings["max_model_len"] == 32768 and cfg.settings["max_num_seqs"] == 64
    assert cfg.settings.get("enforce_eager") in (False, None)


def test_docker_run_options_and_image_entrypoints():
    tgi, sgl = scan("scripts/docker-run.sh").sites
    assert tgi.engine == "tgi" and tgi.image == "ghcr.io/huggingface/text-generation-inference:3.3.4"
    assert argv(tgi) == ["text-generation-launcher", "--model-id", "meta-llama/Llama-3.1-8B-Instruct", "--num-shard",
                         "2", "--max-total-tokens", "16384"]
    assert tgi.gpu.count == 2 and tgi.workload.shm is True  # --gpus '"device=0,1"', --shm-size 1g
    assert at(tgi.env["MAX_BATCH_PREFILL_TOKENS"]) == ("docker-run.sh", 4, 53, "4096")
    assert sgl.engine == "sglang" and argv(sgl)[:3] == ["python3", "-m", "sglang.launch_server"]
    assert sgl.gpu.count is None and sgl.workload.shm is True  # --gpus all, --ipc=host


def test_unresolved_variables_are_reported_not_guessed():
    r = scan("scripts/unresolved.sh")
    [site] = r.sites
    assert site.unresolved == ["MODEL_DIR", "MAX_LEN", "$(nvidia-smi -L | wc -l)"]
    assert argv(site)[4] == "$MAX_LEN"
    sf001 = [f for f in r.findings if f.code == "SF001"]
    assert len(sf001) == 3 and "${MAX_LEN}" in sf001[1].message
    eng = {"vllm": "vLLM", "llamacpp": "llama.cpp", "sglang": "SGLang", "tgi": "TGI", "ollama": "Ollama"}[site.engine]
    assert f"the value it gives {eng} is not known" in sf001[1].message  # the engine's own name, not servefit's id
    assert (sf001[1].span.line, sf001[1].span.col) == (3, 48) and sf001[1].severity == "info"


def test_systemd_unit_with_drop_in_and_environment_file():
    r = scan("systemd/llama.service")
    [site] = r.sites
    assert site.name == "systemd/llama.service" and site.engine == "llamacpp"
    # the drop-in's empty ExecStart= resets; its own ExecStart is the server
    assert argv(site) == ["/usr/local/bin/llama-server", "--model", "/srv/models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
                          "--ctx-size", "32768", "--parallel", "4", "--port", "8080"]
    assert at(site.argv[2]) == ("llama.env", 1, 12, "/srv/models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf")
    assert at(site.argv[4]) == ("override.conf", 3, 72, "32768")
    assert site.file.endswith("override.conf") and site.line == 3
    assert site.workload.unit_file == str(FIX / "systemd/llama.service")  # the unit the drop-in belongs to
    assert site.env["LLAMA_ARG_N_GPU_LAYERS"].text == "99" and site.env["CTX"].text == "16384"
    assert scan("systemd/llama.service.d/override.conf").sites == []  # read with its unit


def test_systemd_continuation_keeps_lines_after_a_comment():
    from servefit.sources.systemd import entries
    from servefit.sources.text import whole

    text = open(FIX / "systemd/llama.service", newline="").read()
    execs = [v.text for sec, k, v in entries(whole(text, "u")) if k == "ExecStart"]
    assert execs == ["/usr/local/bin/llama-server     --model ${MODEL_PATH}     --ctx-size $CTX --port 8080"]


def test_skypilot_task():
    [site] = scan("skypilot/sglang.yaml").sites
    assert site.engine == "sglang" and site.name == "skypilot/run:12"
    assert argv(site) == ["python", "-m", "sglang.launch_server", "--model-path",
                          "deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "--tp", "8", "--context-length", "32768",
                          "--port", "30000"]
    assert at(site.argv[6]) == ("sglang.yaml", 3, 24, "8")  # $SKYPILOT_NUM_GPUS_PER_NODE -> {H100: 8}
    assert (site.gpu.name, site.gpu.count) == ("H100", 8)
    assert "HF_TOKEN" not in site.env  # `HF_TOKEN: null` is given at launch


def test_llama_swap_macros_comments_env_and_docker():
    gemma, qwen = scan("llama-swap/config.yaml").sites
    assert gemma.name == "llama-swap/gemma" and gemma.line == 7
    assert argv(gemma) == ["/app/llama-server", "--port", "10001", "-ngl", "99", "--flash-attn", "on", "--model",
                           "/models/gemma-3-12b-it-Q4_K_M.gguf", "--ctx-size", "16384"]
    assert at(gemma.argv[4]) == ("config.yaml", 3, 50, "99")  # inside the macro's definition
    assert at(gemma.argv[10]) == ("config.yaml", 10, 18, "16384")
    assert gemma.gpu.count == 1 and gemma.env["CUDA_VISIBLE_DEVICES"].text == "0"
    assert qwen.engine == "vllm" and qwen.image == "vllm/vllm-openai:v0.10.2"
    assert argv(qwen) == ["vllm", "serve", "--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"]


def test_vllm_config_file_tokens_and_standalone_site():
    from servefit.engines.vllm.config_file import config_tokens

    toks = config_tokens(str(FIX / "vllm-config/config.yaml"))
    assert [t.text for t in toks] == ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "32768",
                                      "--gpu-memory-utilization", "0.9", "--enable-prefix-caching",
                                      "--tensor-parallel-size", "1"]
    assert at(toks[3]) == ("config.yaml", 2, 16, "32768") and at(toks[2]) == ("config.yaml", 2, 1, "max_model_len")
    [site] = scan("vllm-config/config.yaml").sites
    assert site.config_only is True and argv(site)[:2] == ["vllm", "serve"]


def test_vllm_config_spliced_by_the_plugin():
    pytest.importorskip("servefit.engines.vllm")
    from servefit import engines

    [site] = scan("vllm-config/serve.sh").sites
    cfg = engines.get("vllm").parse(site)
    assert cfg.settings["max_model_len"] == 32768 and cfg.model_ref == "meta-llama/Llama-3.1-8B-Instruct"
    assert cfg.spans["max_model_len"].file.endswith("config.yaml") and cfg.spans["max_model_len"].line == 2


JINJA_SCRIPT = """{% extends "base.sh" %}
{% block command %}
docker run -d {{ ' --gpus all' if gpu else '' }} \\
  -p {{ port }}:{{ port }} \\
  ghcr.io/huggingface/text-generation-inference:2.3.0 \\
  --model-id /data/{{ revision }}
{% endblock %}
"""


@pytest.mark.parametrize("name, text, marks, col", [
    ("serve.sh", JINJA_SCRIPT, "{% %}", 1),
    ("Dockerfile", "FROM vllm/vllm-openai:v0.9.2\nCMD [{{ .Values.args }}]\n", "{{ }}", 6),
])
def test_a_templated_script_that_gives_no_server_is_said(tmp_path, name, text, marks, col):
    # princeton-ddss/blackfish keeps Jinja job scripts: `-p {{ port }}` took `{{` as the port and `port` as the
    # image, so the TGI server vanished with no word
    f = tmp_path / name
    f.write_text(text)
    r = scan_file(str(f))
    found = [(x.code, x.span.line, x.span.col) for x in r.findings]
    # the Dockerfile's CMD is not JSON, so it is shell form under the image's entrypoint (SF106) as well
    assert r.sites == [] and found == ([("SF106", 2, 5), ("SF104", 2, 6)] if col == 6 else [("SF104", 1, 1)])
    what = "Dockerfile" if name == "Dockerfile" else "script"
    assert r.findings[-1].message == (f"template syntax ({marks}): this {what} is a template, so the servers it starts "
                                     f"were not read; lint the {what} it renders into")


def test_a_model_pulled_by_a_variable_is_said_not_known(tmp_path):
    # khteh/Ollama's run.sh pulls `$i` for each name in $MODELS: lint said nothing and checked nothing
    f = tmp_path / "run.sh"
    f.write_text('#!/bin/bash\nollama serve &\nmodels=(${MODELS//,/ })\nfor i in "${models[@]}"; do\n'
                 '  ollama pull $i\ndone\nollama pull qwen2.5:7b\n')
    r = scan_file(str(f))
    [site] = r.sites
    assert [t.text for t in site.inputs.pulled] == ["$i", "qwen2.5:7b"]
    assert [(x.code, x.span.line, x.span.col, x.message) for x in r.findings] == [
        ("SF001", 4, 5, "${i} takes each value of its `for` loop in turn: the value it gives Ollama is not known "
                        "here")]  # the loop sets it (session 30 trial, test_trial_s30d)


def test_an_option_line_after_a_server_without_a_backslash_is_its_own_command(tmp_path):
    """haskoe/beancount-ledger start-llm.sh's shape: `-fa on` ends its line with no `\\`, so `--host 0.0.0.0`
    runs as a command of its own (ShellCheck SC2215); the server starts without it. A comment that ends
    the continuation is SF103's, said once; an option line after a command that starts nothing is not this."""
    f = tmp_path / "start-llm.sh"
    f.write_text("#!/bin/bash\n"
                 "llama-server \\\n  -m /models/gemma-2-2b-it-q8_0.gguf \\\n  --ctx-size 4096 \\\n  -fa on\n"
                 "  --host 0.0.0.0\n\n"
                 "llama-server \\\n  -m /models/qwen.gguf \\\n#  -fa on\n  --host 0.0.0.0 --port 8080 &\n"
                 "echo started\n  --port 9\n", encoding="utf-8")
    r = scan_file(str(f))
    first = r.sites[0]
    assert argv(first) == ["llama-server", "-m", "/models/gemma-2-2b-it-q8_0.gguf", "--ctx-size", "4096", "-fa", "on"]
    assert [(x.code, x.span.line, x.span.col) for x in r.findings] == [("SF121", 6, 3), ("SF103", 10, 1)]
    assert r.findings[0].message == ("`--host 0.0.0.0` is a command of its own: the line before it does not end in "
                                     "`\\`, so bash starts the server without these options and then fails on "
                                     "`--host: command not found`")
