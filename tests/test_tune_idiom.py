"""Write-back in each format's own idiom (issue 15 item 1): a setting a values or config file
keeps as a key is written as that key (numbers stay numbers), a new one becomes its own key
where the format keeps it, and a value reached through a YAML alias is rewritten at this
server's alias, never at the anchor other servers share."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from servefit.cli import main

ROOT = Path(__file__).resolve().parents[1]
TUNE = ROOT / "tests" / "fixtures" / "tune"
SOURCES = ROOT / "tests" / "fixtures" / "sources"


def copy(tmp_path: Path, src: Path, name: str | None = None) -> Path:
    (tmp_path / ".git").mkdir(exist_ok=True)
    dst = tmp_path / (name or src.name)
    shutil.copy2(src, dst)
    return dst


def tune(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    rc = main(["tune", *args])
    return rc, capsys.readouterr().out


def test_prodstack_values_get_numbers_and_new_keys_not_a_string(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's reproduction: Llama-3.3-70B, TP 4, A100-40GB. Before the fix tune wrote
    `gpuMemoryUtilization: 0.9 --max-num-seqs 32` (a string; lint then reported VLLM002)."""
    p = copy(tmp_path, TUNE / "prodstack-70b.yaml")
    old = p.read_text()
    rc, _ = tune(capsys, str(p), "--write")
    assert rc == 0
    new = p.read_text()
    # 4096: vLLM 0.8.5's V1 budget charges the CUDA context (engines/vllm/non_torch.py::device_wide)
    assert new == old.replace("maxModelLen: 131072", "maxModelLen: 4096").replace(
        "        gpuMemoryUtilization: 0.9\n", "        gpuMemoryUtilization: 0.9\n        maxNumSeqs: 32\n")
    vc = yaml.safe_load(new)["servingEngineSpec"]["modelSpec"][0]["vllmConfig"]
    assert vc == {"maxModelLen": 4096, "tensorParallelSize": 4, "gpuMemoryUtilization": 0.9, "maxNumSeqs": 32}
    assert main(["lint", str(p), "--format", "json"]) in (0, 1)
    assert "VLLM002" not in capsys.readouterr().out
    rc, out = tune(capsys, str(p), "--diff")
    assert rc == 0 and "--- a/" not in out  # a second run changes nothing


def test_prodstack_flag_without_a_key_goes_to_a_new_extra_args_list(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    p = copy(tmp_path, TUNE / "prodstack-70b.yaml")
    old = p.read_text()
    # 4k: vLLM 0.8.5 runs an fp8 KV cache on an A100 with its V0 engine (engine/arg_utils.py::
    # _is_v1_supported_oracle: FlashAttention 3 only; engines/vllm/v1_oracle.py), whose profile takes the whole
    # context in one batch, so 8k no longer fits with fp8 (it did while planned as V1)
    rc, _ = tune(capsys, str(p), "--allow", "kv=fp8", "--min-context", "4k", "--write")
    assert rc == 0
    new = p.read_text()
    assert new == old.replace("maxModelLen: 131072", "maxModelLen: 4096").replace(
        "        gpuMemoryUtilization: 0.9\n",
        '        gpuMemoryUtilization: 0.9\n        extraArgs:\n          - "--kv-cache-dtype"\n          - "fp8"\n'
        "        maxNumSeqs: 64\n")
    vc = yaml.safe_load(new)["servingEngineSpec"]["modelSpec"][0]["vllmConfig"]
    assert vc["extraArgs"] == ["--kv-cache-dtype", "fp8"] and vc["maxNumSeqs"] == 64
    rc, out = tune(capsys, str(p), "--allow", "kv=fp8", "--min-context", "4k", "--diff")
    assert rc == 0 and "--- a/" not in out


def test_prodstack_existing_extra_args_and_keys_edited_in_place(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    p = copy(tmp_path, SOURCES / "helm" / "prodstack-values.yaml")
    old = p.read_text()
    # the optimum (8k x 64 sequences at TP2, its all-reduces captured in every graph; the fp8 KV cache
    # runs FlashInfer on the L4, one decode wrapper per full graph) also halves the batch, so the existing
    # maxModelLen key and extraArgs value are edited where they stand
    rc, _ = tune(capsys, str(p), "--allow", "kv=fp8", "--min-context", "4k", "--write")
    assert rc == 0
    new = p.read_text()
    assert new == old.replace("        maxModelLen: 16384\n", "        maxModelLen: 8192\n").replace(
        "        gpuMemoryUtilization: 0.85\n", "        gpuMemoryUtilization: 0.85\n        maxNumSeqs: 64\n").replace(
        '          - "4096"\n', '          - "2048"\n')
    assert yaml.safe_load(new)["servingEngineSpec"]["modelSpec"][0]["vllmConfig"]["maxNumSeqs"] == 64


def test_vllm_config_file_gets_the_new_key_in_its_own_spelling(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    serve = copy(tmp_path, SOURCES / "vllm-config" / "serve.sh")
    cfg = copy(tmp_path, SOURCES / "vllm-config" / "config.yaml")
    old_serve, old_cfg = serve.read_text(), cfg.read_text()
    rc, _ = tune(capsys, str(serve), "--gpu", "L4", "--min-context", "16k", "--write")
    assert rc == 0
    assert serve.read_text() == old_serve  # the command line stays as it was
    assert cfg.read_text() == old_cfg.replace("max_model_len: 32768", "max_model_len: 16384") + "max-num-seqs: 128\n"
    assert yaml.safe_load(cfg.read_text())["max-num-seqs"] == 128


def test_alias_is_rewritten_at_this_servers_use_never_the_anchor(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Service a uses `*len` last on its command; b shares the anchor. Only a's use changes."""
    p = copy(tmp_path, TUNE / "compose-alias.yaml")
    old = p.read_text()
    rc, _ = tune(capsys, str(p), "--gpu", "L4", "--write")
    new = p.read_text()
    assert 'x-len: &len "131072"' in new
    a_old = '"--max-model-len", *len]'
    assert new == old.replace(a_old, '"--max-model-len", "32768", "--max-num-seqs", "128"]')
    doc = yaml.safe_load(new)
    assert doc["services"]["b"]["command"][3] == "131072"
    assert rc in (0, 1)


# --- one JSON shape per input kind, one exit-code contract (issue 15 item 5) ------------------

def test_json_shape_is_by_input_kind_not_by_server_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    f = str(TUNE / "k8s-vllm-l4.yaml")  # one server
    for cmd in ("estimate", "explain"):
        rc = main([cmd, f, "--gpu", "H100", "--format", "json"])
        out = json.loads(capsys.readouterr().out)
        assert isinstance(out, list) and len(out) == 1 and out[0]["engine"] == "vllm" and rc == 0
        rc = main([cmd, "--gpu", "H100", "--format", "json", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"])
        out = json.loads(capsys.readouterr().out)
        assert isinstance(out, dict) and out["engine"] == "vllm" and rc == 0


def test_exit_codes_agree_across_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same refused server: lint, estimate and explain exit 1; tune finds a fix (0); a bad
    flag is exit 2 everywhere."""
    f = str(TUNE / "k8s-vllm-l4.yaml")  # 131,072 tokens on an L4: refused
    assert [main([c, f, "--gpu", "L4"]) for c in ("lint", "estimate", "explain")] == [1, 1, 1]
    assert main(["tune", f, "--gpu", "L4"]) == 0
    assert main(["tune", f, "--gpu", "L4", "--min-context", "128k", "--min-concurrency", "8"]) == 1
    for c in ("lint", "estimate", "explain", "tune"):
        with pytest.raises(SystemExit) as exc:
            main([c, f, "--gpu", "L4", "--no-such-flag"])
        assert exc.value.code == 2
        assert main([c, str(tmp_path / "missing.yaml"), "--gpu", "L4"]) == 2
    capsys.readouterr()


def test_sglang_negative_headroom_is_a_finding_and_the_verdict_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """A negative headroom under "verdict: starts" was shown with no finding (the issue's reproduction,
    at 0.85 when activations were priced at SGLang's 1.5 MiB reserve per prefill token; a prefill step of
    Llama-3.1-8B holds 0.91 GiB, engines/sglang/forward.py, so 0.99 is short now)."""
    import json

    cmd = ["--gpu", "H100", "--", "python3", "-m", "sglang.launch_server", "--model-path",
           "meta-llama/Llama-3.1-8B-Instruct", "--mem-fraction-static", "0.99"]
    main(["estimate", *cmd])
    out = capsys.readouterr().out
    assert "free headroom    -0.62 GiB" in out
    assert "verdict: starts, but the plan is 0.62 GiB short" in out
    main(["estimate", "--format", "json", *cmd])
    plan = json.loads(capsys.readouterr().out)
    [f] = [f for f in plan["findings"] if f["code"] == "SGL011"]
    assert f["severity"] == "warning" and "need 0.62 GiB more" in f["message"]
    main(["estimate", "--format", "json", *cmd[:-1], "0.97"])  # 0.96 GiB free: no finding
    assert not [f for f in json.loads(capsys.readouterr().out)["findings"] if f["code"] == "SGL011"]


def test_cuda_graph_warning_never_beside_a_weights_oom(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    for gpu in ("T4", "L4"):
        rc = main(["estimate", "--gpu", gpu, "--format", "json", "--", "vllm", "serve", "Qwen/Qwen2.5-14B-Instruct",
                   "--engine-version", "0.8.5"])
        plan = json.loads(capsys.readouterr().out)
        codes = {f["code"] for f in plan["findings"]}
        assert rc == 1 and plan["outcome"] == "oom_at_load" and "VLLM005" in codes and "VLLM016" not in codes


def test_k8s_env_flow_item_gets_a_sibling_shaped_like_it() -> None:
    from servefit.sources.text import LineIndex
    from servefit.tune import style

    text = ('          env:\n            - {name: OLLAMA_NUM_PARALLEL, value: "8"}\n'
            "          resources: {}\n")
    at = text.index('"8"') + 1
    sib = LineIndex(text, "f.yaml").span(at, at + 1)
    s, e, new = style.env_entry(text, sib, "OLLAMA_CONTEXT_LENGTH", "16384")
    out = text[:s] + new + text[e:]
    assert out == ('          env:\n            - {name: OLLAMA_NUM_PARALLEL, value: "8"}\n'
                   '            - {name: OLLAMA_CONTEXT_LENGTH, value: "16384"}\n          resources: {}\n')
    assert yaml.safe_load(out.replace("          env:", "env:", 1).replace("          resources", "resources"))["env"][1] \
        == {"name": "OLLAMA_CONTEXT_LENGTH", "value": "16384"}


def test_yaml_key_entry_lands_after_the_siblings_whole_entry() -> None:
    """A new key goes after a sibling's block (a list under it included), at the sibling's column."""
    from servefit.sources.text import LineIndex
    from servefit.tune import style

    text = "vllmConfig:\n  extraArgs:\n  - --x\n  - '1'\n  maxModelLen: 8192\nenv: []\n"
    at = text.index("extraArgs")
    key = LineIndex(text, "v.yaml").span(at, at + len("extraArgs"))
    s, e, new = style.key_entry(text, key, "maxNumSeqs", "64")
    out = text[:s] + new + text[e:]
    assert out == "vllmConfig:\n  extraArgs:\n  - --x\n  - '1'\n  maxNumSeqs: 64\n  maxModelLen: 8192\nenv: []\n"
    assert yaml.safe_load(out)["vllmConfig"]["maxNumSeqs"] == 64


@pytest.mark.parametrize("quote", ['"', ""])
def test_systemd_environment_added_quoted_as_its_neighbour(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           quote: str) -> None:
    """`Environment="A=1"` quotes the whole assignment: a new variable is written the same way
    (and a bare `Environment=A=1` file gets a bare one)."""
    unit = tmp_path / "ollama.service"
    head = f"[Unit]\nDescription=Ollama\n\n[Service]\nEnvironment={quote}OLLAMA_NUM_PARALLEL=8{quote}\n"
    tail = "# servefit: model=llama3.1:8b\nExecStart=/usr/local/bin/ollama serve\n"
    unit.write_text(head + tail)
    rc, _ = tune(capsys, str(unit), "--gpu", "L4", "--write")
    assert rc == 0
    assert unit.read_text() == head + f"Environment={quote}OLLAMA_CONTEXT_LENGTH=16384{quote}\n" + tail


VALUES_HEAD = "image:\n  repository: vllm/vllm-openai\n  tag: v0.11.2\n"
VALUES_TAIL = "resources:\n  limits:\n    nvidia.com/gpu: 1\n"


@pytest.mark.parametrize(("extra", "tuned"), [
    ('extraArgs: [--model, Qwen/Qwen2.5-7B-Instruct, --max-model-len, "32768"]\n',
     'extraArgs: [--model, Qwen/Qwen2.5-7B-Instruct, --max-model-len, "16384", --max-num-seqs, "32"]\n'),
    ("extraArgs:\n  - --model=Qwen/Qwen2.5-7B-Instruct\n  - --max-model-len=32768\n  - --enable-prefix-caching\n",
     "extraArgs:\n  - --model=Qwen/Qwen2.5-7B-Instruct\n  - --max-model-len=16384\n  - --enable-prefix-caching\n"
     "  - --max-num-seqs=32\n"),
])
def test_chart_values_extra_args_in_their_own_list_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         extra: str, tuned: str) -> None:
    """A vLLM chart's values without its templates: `extraArgs` as a flow list of separate words, or
    block items written `--flag=value` (a switch among them does not change that style)."""
    (tmp_path / ".git").mkdir()
    p = tmp_path / "values.yaml"
    p.write_text(VALUES_HEAD + extra + VALUES_TAIL)
    rc, out = tune(capsys, str(p), "--gpu", "L4", "--min-context", "16k", "--write")
    assert rc == 0 and "--max-model-len 16384, --max-num-seqs 32 [safe]" in out
    assert p.read_bytes() == (VALUES_HEAD + tuned + VALUES_TAIL).encode()
    rc, out = tune(capsys, str(p), "--gpu", "L4", "--min-context", "16k", "--write")  # nothing left to write
    assert rc == 0 and "change  none: the config is already the best one" in out
    assert p.read_bytes() == (VALUES_HEAD + tuned + VALUES_TAIL).encode()


@pytest.mark.parametrize(("option", "new"), [
    ("-e LLAMA_ARG_CTX_SIZE=8192", "-e LLAMA_ARG_CTX_SIZE=8192 -e LLAMA_ARG_N_PARALLEL=2"),
    ('--env "LLAMA_ARG_CTX_SIZE=8192"', '--env "LLAMA_ARG_CTX_SIZE=8192" --env "LLAMA_ARG_N_PARALLEL=2"'),
    ("--env=LLAMA_ARG_CTX_SIZE=8192", "--env=LLAMA_ARG_CTX_SIZE=8192 --env=LLAMA_ARG_N_PARALLEL=2"),
])
def test_docker_run_env_option_gets_a_sibling_spelled_like_it(option: str, new: str) -> None:
    """`docker run -e X=1`: the new variable is another option of the same spelling and quoting,
    right after its sibling (not a `VAR=1` prefix of `docker`, which the container never sees)."""
    from servefit.sources.text import LineIndex
    from servefit.tune import style

    text = f"docker run --gpus all {option} ghcr.io/ggml-org/llama.cpp:server-cuda\n"
    at = text.index("8192")
    sib = LineIndex(text, "run.sh").span(at, at + 4)
    s, e, piece = style.env_entry(text, sib, "LLAMA_ARG_N_PARALLEL", "2")
    assert text[:s] + piece + text[e:] == text.replace(option, new)
