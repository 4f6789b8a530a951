"""Problems found by running every command on real deployment files from public repositories
(each test carries a tiny synthetic file with the shape that broke, never the fetched file)."""

from __future__ import annotations

import json

from servefit.cli import main

VALUES_TP2 = """servingEngineSpec:
  modelSpec:
  - name: "qwen7b"
    repository: "vllm/vllm-openai"
    tag: "v0.8.5"
    modelURL: "Qwen/Qwen2.5-7B-Instruct"
    requestGPU: 2
    vllmConfig:
      tensorParallelSize: 2
      maxModelLen: 8192
"""


def _lint(capsys, *args: str) -> tuple[int, str]:
    rc = main(["lint", *args])
    return rc, capsys.readouterr().out


def test_list_sites_table_names_the_count_source_and_why_no_verdict(tmp_path, capsys):
    """A Helm values file that sets the GPU count but no GPU model: the table said `?×2 (None)`
    and `-`; it names the count's source and why no plan was made."""
    f = tmp_path / "values.yaml"
    f.write_text(VALUES_TP2)
    rc, out = _lint(capsys, str(f), "--list-sites")
    row = out.splitlines()[1]
    assert rc == 0 and "None" not in out
    assert "no GPU named×2 (count from modelSpec.requestGPU)" in row
    assert row.endswith("not checked: no target GPU: pass --gpu NAME (servefit gpus lists them) "
                        "or set a default in [tool.servefit]")


def test_list_sites_table_verdict_in_estimates_words(tmp_path, capsys):
    f = tmp_path / "values.yaml"
    f.write_text(VALUES_TP2)
    rc, out = _lint(capsys, str(f), "--list-sites", "--gpu", "L4")
    row = out.splitlines()[1]
    assert "L4×2 (--gpu; count from modelSpec.requestGPU)" in row
    assert row.endswith("  starts")
    f.write_text(VALUES_TP2.replace("8192", "1048576"))  # past the model's 32,768 positions
    rc, out = _lint(capsys, str(f), "--list-sites", "--gpu", "L4")
    assert out.splitlines()[1].endswith("  refuses the configuration")


COMPOSE_OLLAMA = """services:
  ollama:
    image: ollama/ollama:0.9.0
    entrypoint: ["/bin/sh", "-c", "ollama serve & sleep 10 && ollama pull gemma3:4b && wait"]
"""


def test_estimate_and_explain_take_a_directory_as_lint_does(tmp_path, capsys):
    """`servefit lint DIR` works; estimate and explain on the same directory read the path as a
    command ("no serving engine recognised in 'DIR' (expected vllm serve, ...)")."""
    (tmp_path / "docker-compose.yml").write_text(COMPOSE_OLLAMA)
    for cmd in ("estimate", "explain"):
        rc = main([cmd, str(tmp_path), "--gpu", "L4"])
        out = capsys.readouterr().out
        assert rc == 0 and out.startswith("ollama 0.9.0  ·  google/gemma-3-4b-it\n1 × NVIDIA L4")
    rc = main(["estimate", str(tmp_path), "--gpu", "L4", "--format", "json"])
    assert rc == 0 and '"file": "' + str(tmp_path / "docker-compose.yml") + '"' in capsys.readouterr().out


def test_estimate_on_a_directory_without_servers_is_one_clear_line(tmp_path, capsys):
    (tmp_path / "README.md").write_text("nothing here\n")
    rc = main(["estimate", str(tmp_path), "--gpu", "L4"])
    assert rc == 2
    err = capsys.readouterr().err
    assert err == f"servefit: error: {tmp_path}: no serving engine found in the files there\n"


UNIT = """[Service]
EnvironmentFile=-%h/llama/.env
ExecStart=/opt/llama.cpp/build/bin/llama-server \\
  -m ${MODEL_PATH} -ngl 99 --ctx-size 8192
"""


def test_models_names_a_variable_model_and_takes_the_directive_as_estimate_does(tmp_path, capsys):
    """A systemd unit whose model comes from an EnvironmentFile outside the repository: `models`
    said "cannot tell which model this GGUF is (unknown model '${MODEL_PATH}'; no catalogued
    model has a similar family and size ...)" where estimate says the model is a variable; and
    `# servefit: model=` (which estimate sizes) was ignored by `models`."""
    f = tmp_path / "llama-server.service"
    f.write_text(UNIT)
    rc = main(["models", str(f)])
    out = capsys.readouterr().out
    assert rc == 1
    assert out.endswith("llamacpp  ${MODEL_PATH}  -> not resolved: the model is a variable (${MODEL_PATH}): its "
                        "value is not known here (add `# servefit: model=ORG/NAME` to the file, or pass "
                        "--model REF to estimate)\n")
    f.write_text("# servefit: model=Qwen/Qwen2.5-7B-Instruct\n" + UNIT)
    rc = main(["models", str(f)])
    out = capsys.readouterr().out
    assert rc == 0 and "llamacpp  ${MODEL_PATH}  -> Qwen/Qwen2.5-7B-Instruct (7.62B) from " in out
    assert "(servefit directive (line 1))" in out


SWAP = """models:
  "QwQ":
    cmd: >
      /path/to/llama-server --port 9503 --flash-attn on
      --model /path/to/Qwen_QwQ-32B-Q4_K_M.gguf --ctx-size 32000
      --samplers "top_k;top_p;min_p;temperature;dry;typ_p;xtc"
      --dry-multiplier 0.5 --dry-base 1.75 --dry-allowed-length 2 --dry-penalty-last-n -1
      --dry-sequence-breaker none --xtc-probability 0.5 --xtc-threshold 0.1 --top-nsigma 1.0
      --dynatemp-range 0.5 --dynatemp-exp 1.0 --adaptive-target 0.5 --adaptive-decay 0.9
      --logit-bias 15043+1 -ngl 99
"""


def test_llama_server_sampler_flags_are_known(tmp_path, capsys):
    """llama-swap's own example passes `--dry-multiplier 0.5`: servefit called it LCPP001
    "unrecognized argument" (an error) though llama-server's common/arg.cpp defines it with the
    other DRY / XTC / dynatemp / adaptive-p sampler flags."""
    f = tmp_path / "llama-swap.yaml"
    f.write_text(SWAP)
    rc, out = _lint(capsys, str(f), "--gpu", "L40S", "--format", "json")
    codes = [x["code"] for x in json.loads(out)]
    assert "LCPP001" not in codes and "LCPP002" not in codes
    f.write_text(SWAP.replace("--dry-base", "--dry-bass"))
    rc, out = _lint(capsys, str(f), "--gpu", "L40S", "--format", "json")
    bad = [x for x in json.loads(out) if x["code"] == "LCPP001"]
    assert len(bad) == 1 and bad[0]["message"].startswith("error: invalid argument: --dry-bass")  # llama-server's wording


SKY = """envs:
  MODEL_NAME: Qwen/Qwen2.5-7B-Instruct
resources:
  accelerators: { L4:2, A10G:2, L40S:1 }
run: |
  vllm serve $MODEL_NAME --tensor-parallel-size $SKYPILOT_NUM_GPUS_PER_NODE --max-model-len 8192
"""


def test_skypilot_accelerator_set_form_gives_gpu_and_count(tmp_path, capsys):
    """SkyPilot's set of candidates `{ H100:8, H200:8 }` (SkyPilot's llama-4 example): YAML reads
    `H100:8` as a key, and servefit reported "unknown GPU 'H100:8'", count `?`, and
    $SKYPILOT_NUM_GPUS_PER_NODE unresolved (estimate: VLLM002 "invalid int value")."""
    f = tmp_path / "sky.yaml"
    f.write_text(SKY)
    rc, out = _lint(capsys, str(f), "--list-sites", "--format", "json")
    site = json.loads(out)[0]
    assert site["gpu"]["name"] == "L4" and site["gpu"]["count"] == 2
    assert site["gpu"]["source"] == "SkyPilot resources.accelerators (first of 3 candidates)"
    assert site["settings"]["tensor_parallel_size"] == 2 and site["unresolved"] == []
    tp = site["settings_raw"]["tensor_parallel_size"]
    assert tp["parsed"] == 2 and tp["location"]["line"] == 4  # the `2` of `L4:2`
    rc = main(["estimate", str(f)])
    out = capsys.readouterr().out
    assert rc == 0 and out.splitlines()[1].startswith("2 × NVIDIA L4") and "TP 2 PP 1" in out


def test_a_variable_value_is_an_assumption_in_estimate_as_lint_leaves_it_to_sf001(tmp_path, capsys):
    """`--tensor-parallel-size $TP` with TP set nowhere: lint says SF001 (not known, not checked,
    exit 0) but estimate refused with "invalid int value: '$TP' [VLLM002]" (exit 2) and explain
    listed the same as an error (exit 1)."""
    f = tmp_path / "serve.sh"
    f.write_text("#!/bin/bash\nvllm serve Qwen/Qwen2.5-7B-Instruct --host 127.0.0.1 --tensor-parallel-size $TP "
                 "--max-model-len 8192\n")
    rc, out = _lint(capsys, str(f), "--gpu", "L4", "--format", "json")
    assert rc == 0 and [x["code"] for x in json.loads(out)] == ["SF001"]
    for cmd in ("estimate", "explain"):
        rc = main([cmd, str(f), "--gpu", "L4"])
        out = capsys.readouterr().out
        assert rc == 0 and "VLLM002" not in out and "TP 1 PP 1" in out
        assert ("  - --tensor-parallel-size is ${TP}, which is not set here: planned with the engine's default "
                "(pass the value, or set the variable in the file)\n") in out
    f.write_text(f.read_text().replace("$TP", "two"))  # a literal bad value is still refused, with its place
    assert main(["estimate", str(f), "--gpu", "L4"]) == 2
    assert capsys.readouterr().err == (f"servefit: error: {f}:2:77: vLLM: argument --tensor-parallel-size: "
                                       "invalid int value: 'two' [VLLM002]\n")
