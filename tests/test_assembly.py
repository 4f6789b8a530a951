"""One assembly for every command (issue 14 item 1): each reproduction from the issue, run the
way a user runs it, plus the target precedence (flag > directive > repo > config)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.sources.assemble import assemble
from servefit.sources.target import Flags

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
LOGS = Path(__file__).parent / "fixtures" / "logs"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# --- Ollama: compose.yaml + the Modelfile beside it --------------------------------------------

def test_ollama_compose_same_server_for_lint_estimate_explain_tune(capsys: pytest.CaptureFixture[str]) -> None:
    f = str(EXAMPLES / "ollama" / "compose.yaml")
    rc, out, _ = run(capsys, "lint", f, "--gpu", "RTX4090", "--format", "json")
    codes = {d["code"] for d in json.loads(out)}
    assert {"OLLM006", "OLLM007"} <= codes
    rc, out, err = run(capsys, "estimate", f, "--gpu", "RTX4090", "--format", "json")
    assert rc == 0, err
    [est] = json.loads(out)  # a file: a list of its servers
    assert est["model"]["ref"] == LLAMA  # the Modelfile's FROM llama3.1:8b-instruct-q4_K_M
    assert est["kv_cache_tokens"] == 131072 * 4  # num_ctx from the Modelfile x OLLAMA_NUM_PARALLEL from compose
    rc, out, err = run(capsys, "explain", f, "--gpu", "RTX4090", "--format", "json")
    assert rc == 0, err
    assert json.loads(out)[0]["kv_cache_tokens"] == 131072 * 4
    rc, out, err = run(capsys, "tune", f, "--gpu", "RTX4090", "--format", "json")
    assert "no model given" not in out + err
    assert json.loads(out)["sites"][0]["engine"] == "ollama"


def test_modelfile_alone_is_tuned_with_the_compose_that_serves_it(capsys: pytest.CaptureFixture[str]) -> None:
    """`tune Modelfile` alone used to assume one slot and propose num_ctx 131072."""
    mf = str(EXAMPLES / "ollama" / "Modelfile")
    rc, out, err = run(capsys, "estimate", mf, "--gpu", "RTX4090", "--format", "json")
    assert rc == 0, err
    assert json.loads(out)[0]["kv_cache_tokens"] == 131072 * 4
    rc, out, _ = run(capsys, "tune", mf, "--gpu", "RTX4090", "--diff")
    assert "+PARAMETER num_ctx 131072" not in out
    assert "-PARAMETER num_ctx 131072" in out  # it shrinks the context the 4 slots multiply


# --- --gpu on a manifest whose nodeSelector names another GPU ----------------------------------

def test_gpu_flag_beats_the_node_selector_in_lint_and_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    f = str(EXAMPLES / "k8s" / "vllm-llama-8b.yaml")
    rc, out, _ = run(capsys, "lint", f, "--gpu", "H100", "--format", "json")
    found = json.loads(out)
    assert "VLLM003" not in {d["code"] for d in found}  # 131k context fits an H100, not the L4
    gpu_msgs = [d["message"] for d in found if "[GPU:" in d["message"]]
    assert gpu_msgs and all("[GPU: H100 ×1 from --gpu; count from nvidia.com/gpu limit" in m for m in gpu_msgs)
    rc, out, _ = run(capsys, "estimate", f, "--gpu", "H100", "--format", "json")
    assert json.loads(out)[0]["gpu"]["name"] == "NVIDIA H100 80GB HBM3"
    rc, out, _ = run(capsys, "lint", f, "--format", "json")  # without the flag: the nodeSelector's L4
    assert "VLLM003" in {d["code"] for d in json.loads(out)}


# --- servefit.toml honoured by every command ---------------------------------------------------

def test_config_gpu_honoured_by_estimate_explain_tune(capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLES)
    rc, out, err = run(capsys, "tune", "docker/Dockerfile", "--format", "json")
    assert "no target GPU" not in out + err
    assert json.loads(out)["sites"][0]["gpu"]["name"] == "NVIDIA L4"
    for cmd in ("estimate", "explain"):
        rc, out, err = run(capsys, cmd, "docker/Dockerfile", "--format", "json")
        assert rc == 1, err  # the example refuses its max-model-len on the L4 (lint: VLLM003)
        assert json.loads(out)[0]["gpu"]["name"] == "NVIDIA L4"


def test_config_found_from_the_file_not_the_working_directory(capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(capsys, "estimate", str(EXAMPLES / "docker" / "Dockerfile"), "--format", "json")
    assert rc == 1, err  # planned on the config's L4, where it refuses its max-model-len
    assert json.loads(out)[0]["gpu"]["name"] == "NVIDIA L4"
    # a config target for scripts/** names the RTX 4090
    rc, out, err = run(capsys, "estimate", str(EXAMPLES / "scripts" / "serve.sh"), "--format", "json")
    assert rc == 0, err
    objs = json.loads(out)
    objs = objs if isinstance(objs, list) else [objs]
    assert {o["gpu"]["name"] for o in objs} == {"NVIDIA GeForce RTX 4090"}


SCRIPT = "#!/bin/sh\nvllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 131072\n"


def _mono(tmp_path: Path) -> Path:
    mono = tmp_path / "mono"
    for sub, gpu, extra in (("a", "L4", 'ignore = ["SEC003"]\n'), ("b", "H100", "")):
        (mono / sub).mkdir(parents=True)
        (mono / sub / "servefit.toml").write_text(f'gpu = "{gpu}"\n{extra}')
        (mono / sub / "x.sh").write_text(SCRIPT)
    (mono / ".git").mkdir()
    return mono


@pytest.mark.parametrize("how", ["files", "dir"])
def test_nearest_config_per_file(capsys: pytest.CaptureFixture[str], tmp_path: Path, how: str) -> None:
    mono = _mono(tmp_path)
    paths = [str(mono / "a" / "x.sh"), str(mono / "b" / "x.sh")] if how == "files" else [str(mono)]
    rc, out, _ = run(capsys, "lint", *paths, "--format", "json")
    found = json.loads(out)
    by_dir: dict[str, set[str]] = {"a": set(), "b": set()}
    for d in found:
        by_dir[Path(d["location"]["file"]).parent.name].add(d["code"])
    assert "VLLM003" in by_dir["a"] and "VLLM003" not in by_dir["b"]  # 131k fits the H100 only
    assert "SEC003" not in by_dir["a"] and "SEC003" in by_dir["b"]  # a's ignore applies to a only
    assert rc == 1
    rc, out, _ = run(capsys, "lint", *paths, "--list-sites", "--format", "json")
    gpus = {Path(d["file"]).parent.name: (d["target"]["gpu"]["value"], d["target"]["gpu"]["source"]) for d in json.loads(out)}
    assert gpus == {"a": ("L4", "config default"), "b": ("H100", "config default")}


# --- directives ---------------------------------------------------------------------------------

def test_directive_after_another_directive(tmp_path: Path) -> None:
    f = tmp_path / "serve.sh"
    f.write_text("#!/bin/sh\n# servefit: file-ignore[SF001] the host sets it\n# servefit: engine-version=0.10.2\n"
                 "# servefit: gpu=L4\n" + SCRIPT.split("\n", 1)[1])
    [srv] = assemble([str(f)]).servers
    assert srv.target.gpu is not None and srv.target.gpu.value == "L4"
    assert srv.target.gpu.source == "servefit directive (line 4)"
    assert srv.target.gpu.span is not None and (srv.target.gpu.span.line, srv.target.gpu.span.col) == (4, 17)
    assert srv.target.engine_version is not None and srv.target.engine_version.value == "0.10.2"
    assert srv.evaluation is not None and srv.evaluation.plan.engine_version == "0.10.2"


def test_model_directive_names_the_model(tmp_path: Path) -> None:
    f = tmp_path / "serve.sh"
    f.write_text(f"#!/bin/sh\n# servefit: gpu=H100 model={LLAMA}\nvllm serve /models/llama --max-model-len 8192\n")
    [srv] = assemble([str(f)]).servers
    assert srv.model_ref == LLAMA and srv.target.model is not None
    assert srv.target.model.source == "servefit directive (line 2)"
    assert srv.evaluation is not None and srv.evaluation.model.name.endswith("Llama-3.1-8B-Instruct")


def test_directives_apply_to_the_server_below_them(tmp_path: Path) -> None:
    f = tmp_path / "serve.sh"
    f.write_text(f"#!/bin/sh\n# servefit: gpu=L4\nvllm serve {LLAMA} --port 8000 &\n"
                 f"# servefit: gpu=H100\nvllm serve {LLAMA} --port 8001 &\nwait\n")
    servers = assemble([str(f)], plan=False).servers
    assert [s.gpu_name for s in servers] == ["L4", "H100"]


def test_an_unusable_directive_is_reported_and_the_next_source_applies(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`gpus=two`, `count=0`, `gpu-memory=lots` and an unknown key are SF012 at their spans; the
    count falls back to what the repo or config says (here: none), never an engine error (SF112)."""
    f = tmp_path / "serve.sh"
    f.write_text("# servefit: gpuu=A100 gpus=two\n# servefit: count=0 gpu-memory=lots\n"
                 f"vllm serve {LLAMA} --max-model-len 8192 --host 127.0.0.1\n")
    asm = assemble([str(f)], Flags(gpu="L4"))
    [srv] = asm.servers
    got = [(x.code, x.span.line, x.span.col, x.message.split(":")[0]) for x in asm.findings if x.span is not None]
    assert got == [("SF012", 1, 13, "unknown directive key 'gpuu' (servefit reads count, engine-version, gpu, "
                                      "gpu-memory, model); it is ignored"),
                   ("SF012", 1, 28, "gpus=two"), ("SF012", 2, 19, "count=0"), ("SF012", 2, 32, "gpu-memory=lots")]
    assert srv.target.count is None and srv.target.gpu_memory is None
    assert not [x for x in srv.findings if x.code == "SF112"]
    assert srv.evaluation is not None and srv.evaluation.plan.outcome == "started"
    rc, _, err = run(capsys, "estimate", str(f), "--gpu", "L4")
    assert rc == 0 and err.count("[SF012]") == 4 and "serve.sh:1:28: gpus=two: not a GPU count" in err


def test_precedence_flag_directive_repo_config(tmp_path: Path) -> None:
    (tmp_path / "servefit.toml").write_text('gpu = "A10G"\n')
    (tmp_path / ".git").mkdir()
    manifest = (EXAMPLES / "k8s" / "vllm-llama-8b.yaml").read_text()
    (tmp_path / "m.yaml").write_text(manifest)
    (tmp_path / "d.yaml").write_text("# servefit: gpu=A100-80GB\n" + manifest)
    (tmp_path / "c.sh").write_text(SCRIPT)
    def gpu(path: str, flags: Flags | None = None) -> tuple[str | None, str]:
        [s] = assemble([str(tmp_path / path)], flags, plan=False).servers
        return s.gpu_name, s.target.gpu.source if s.target.gpu else ""
    assert gpu("m.yaml") == ("nvidia-l4", "nodeSelector cloud.google.com/gke-accelerator; count from nvidia.com/gpu limit")
    assert gpu("d.yaml") == ("A100-80GB", "servefit directive (line 1)")
    assert gpu("d.yaml", Flags(gpu="H100")) == ("H100", "--gpu")
    assert gpu("c.sh") == ("A10G", "config default")


# --- diagnose --repo ------------------------------------------------------------------------------

def test_diagnose_repo_picks_the_server_that_wrote_the_log(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    (tmp_path / "a-k8s").mkdir()
    shutil.copy(EXAMPLES / "k8s" / "vllm-llama-8b.yaml", tmp_path / "a-k8s" / "llama.yaml")
    (tmp_path / "b-qwen").mkdir()
    (tmp_path / "b-qwen" / "serve.sh").write_text(
        "#!/bin/sh\nvllm serve Qwen/Qwen2.5-32B-Instruct-AWQ --max-model-len 32768 --gpu-memory-utilization 0.9\n")
    log = tmp_path / "server.log"
    log.write_text((LOGS / "vllm_kv_refusal.log").read_text().replace(LLAMA, "Qwen/Qwen2.5-32B-Instruct-AWQ"))
    rc, out, err = run(capsys, "diagnose", str(log), "--repo", str(tmp_path), "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["setting"]["file"].endswith("b-qwen/serve.sh")
    assert not any("could have written" in n for n in doc.get("notes", []))
    # the Llama log still goes to the Llama server
    rc, out, _ = run(capsys, "diagnose", str(LOGS / "vllm_kv_refusal.log"), "--repo", str(tmp_path), "--format", "json")
    assert json.loads(out)["setting"]["file"].endswith("a-k8s/llama.yaml")


# --- parse once, resolve the GPU once ------------------------------------------------------------

def test_each_server_parsed_once_and_its_gpu_resolved_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from servefit import engines, hardware
    from servefit.linter.run import LintOptions, lint_paths

    calls: dict[str, int] = {"parse": 0, "gpu": 0}
    eng = engines.get("vllm")
    cls = type(eng)
    real_parse, real_resolve = cls.parse, hardware.resolve_target

    def parse(self, site, version=None):  # type: ignore[no-untyped-def]
        calls["parse"] += 1
        return real_parse(self, site, version)

    def resolve(name):  # type: ignore[no-untyped-def]
        calls["gpu"] += 1
        return real_resolve(name)

    monkeypatch.setattr(cls, "parse", parse)
    monkeypatch.setattr(hardware, "resolve_target", resolve)
    result = lint_paths([str(EXAMPLES / "k8s" / "vllm-llama-8b.yaml")], LintOptions())
    assert len(result.sites) == 1 and result.sites[0].plan is not None
    assert calls == {"parse": 1, "gpu": 1}


def test_config_exclude_applies_to_walked_files_not_named_ones(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "servefit.toml").write_text('gpu = "L4"\nexclude = ["legacy/**", "scratch"]\n')
    for d in ("legacy/old", "scratch", "prod"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "serve.sh").write_text(SCRIPT)
    found = {Path(s.site.file).parent.relative_to(tmp_path).as_posix()
             for s in assemble([str(tmp_path)], plan=False).servers}
    assert found == {"prod"}
    named = assemble([str(tmp_path / "scratch" / "serve.sh")], plan=False).servers
    assert len(named) == 1  # named on the command line: read regardless, as ruff does


@pytest.mark.parametrize("version", ["foo", "unknown (Aug 2026 build)", "latest"])
def test_a_word_that_is_not_a_version_is_refused_not_modelled_as_the_oldest_release(
        version: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, _, err = run(capsys, "estimate", "--engine-version", version, "--gpu", "L4", "--", "vllm", "serve", LLAMA)
    assert rc == 2 and err == f"servefit: error: --engine-version: not a version: {version!r} " \
                              "(try 0.11.0, or b5000 for a llama.cpp build)\n"
    f = tmp_path / "serve.sh"
    f.write_text(f"# servefit: engine-version={version.split()[0]}\nvllm serve {LLAMA} --max-model-len 8192\n")
    asm = assemble([str(f)], Flags(gpu="L4"))
    assert [(x.code, x.span.col) for x in asm.findings if x.span is not None] == [("SF012", 28)]
    assert asm.servers[0].target.engine_version is None


def test_versions_as_users_write_them_are_taken(capsys: pytest.CaptureFixture[str]) -> None:
    for version in ("0.6.3", "v0.6.3", "0.6.3.post1", "0.10.1.dev101+gbda9d05"):
        rc, out, err = run(capsys, "estimate", "--engine-version", version, "--gpu", "L4", "--format", "json",
                           "--", "vllm", "serve", LLAMA, "--max-model-len", "8192")
        assert rc in (0, 1), err
        assert json.loads(out)["engine_version"] == version


def test_a_model_directive_is_the_next_servers_only(tmp_path: Path) -> None:
    """`# servefit: model=` names the model of the server below it: not the one above it (which
    names its own), and not the one after the next; `gpu=` still applies file-wide."""
    f = tmp_path / "serve.sh"
    f.write_text("#!/bin/sh\n# servefit: gpu=L4\n"
                 f"vllm serve {LLAMA} --port 8000 &\n"
                 "# servefit: model=Qwen/Qwen2.5-7B-Instruct\n"
                 "vllm serve /models/qwen --port 8001 &\n"
                 "vllm serve /models/other --port 8002 &\nwait\n")
    servers = assemble([str(f)], plan=False).servers
    assert [s.target.model.value if s.target.model else None for s in servers] == \
        [None, "Qwen/Qwen2.5-7B-Instruct", None]
    assert [s.gpu_name for s in servers] == ["L4", "L4", "L4"]
