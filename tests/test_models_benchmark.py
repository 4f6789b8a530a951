"""The model-reference benchmark (benchmarks/models/run.py): its classification of a few
references is exact, it resolves the way pipeline.evaluate does, it really runs offline, and its
data files keep their shape and their split."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import socket
import sys
from pathlib import Path

import pytest
import yaml

from servefit.pipeline import Target, evaluate, site_from_argv

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "benchmarks" / "models" / "run.py"
spec = importlib.util.spec_from_file_location("models_run", RUN)
assert spec is not None and spec.loader is not None
bench = importlib.util.module_from_spec(spec)
sys.modules["models_run"] = bench  # dataclasses look their module up
spec.loader.exec_module(bench)

SOURCE = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/blob/[\w.-]+/[^#\s]+#L[1-9]\d*$")


def one(ref: str, engine: str):
    (out,) = bench.run([{"ref": ref, "engine": engine, "source": "https://github.com/o/r/blob/HEAD/f#L1"}])
    return out


def test_catalog_hit():
    out = one("Qwen/Qwen3-8B", "vllm")
    assert (out.status, out.model, out.resolved_from, out.assumptions, out.reason) == (
        "catalog", "Qwen/Qwen3-8B", "catalog", [], None)


def test_derivative_says_what_it_assumed():
    out = one("TheBloke/Mistral-7B-Instruct-v0.2-GPTQ", "tgi")
    assert (out.status, out.model) == ("derivative", "mistralai/Mistral-7B-Instruct-v0.2")
    assert len(out.assumptions) == 1 and "GPTQ" in out.assumptions[0]
    assert "TheBloke/Mistral-7B-Instruct-v0.2-GPTQ" in out.assumptions[0]


def test_gguf_file_by_name_is_a_derivative():
    out = one("/mnt/models/llm/Qwen2.5-7B-Instruct-Q5_K_M.gguf", "llamacpp")
    assert (out.status, out.model) == ("derivative", "Qwen/Qwen2.5-7B-Instruct")
    assert any("Q5_K_M" in a for a in out.assumptions)


def test_ollama_library_tag_is_a_catalog_hit():
    out = one("llama3.1:8b", "ollama")
    assert (out.status, out.model, out.assumptions) == ("catalog", "meta-llama/Llama-3.1-8B-Instruct", [])
    assert out.notes == ["model tag llama3.1:8b -> meta-llama/Llama-3.1-8B-Instruct (Q4_K_M)"]


def test_a_model_the_engine_cannot_plan_is_not_sized():
    """Resolving the name is not enough: the engine's plan must be one servefit can make."""
    planned = one("deepseek-ai/DeepSeek-V4-Flash", "vllm")
    assert (planned.status, planned.model) == ("catalog", "deepseek-ai/DeepSeek-V4-Flash")
    assert one("deepseek-ai/DeepSeek-V4-Flash", "sglang").status == "catalog"  # SGLang's V4 pools are modelled
    out = one("deepseek-ai/DeepSeek-V4-Flash", "tgi")
    assert (out.status, out.model) == ("unknown", None)
    assert out.reason is not None and out.reason.startswith("servefit does not model how TGI serves deepseek-ai/DeepSeek-V4-Flash (its compressed")


def test_bare_mount_point_is_unknown_with_the_reason():
    out = one("/data", "tgi")
    assert (out.status, out.model, out.resolved_from) == ("unknown", None, None)
    assert out.reason is not None and out.reason.startswith("unknown model '/data'")


def test_command_line_per_engine():
    assert bench.command("vllm", "a/b") == ["vllm", "serve", "a/b"]
    assert bench.command("llamacpp", "org/X-GGUF:Q4_K_M") == ["llama-server", "-hf", "org/X-GGUF:Q4_K_M"]
    assert bench.command("llamacpp", "~/m/x.gguf") == ["llama-server", "-m", "~/m/x.gguf"]
    assert bench.command("llamacpp", r"C:\m\x") == ["llama-server", "-m", r"C:\m\x"]
    assert bench.command("ollama", "qwen3:4b") == ["ollama", "run", "qwen3:4b"]
    assert bench.command("tgi", "a/b") == ["text-generation-launcher", "--model-id", "a/b"]
    assert bench.command("sglang", "a/b")[-2:] == ["--model-path", "a/b"]
    with pytest.raises(ValueError):
        bench.command("trtllm", "a/b")


@pytest.mark.parametrize("engine,ref", [
    ("vllm", "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8"),
    ("llamacpp", "bartowski/Qwen2.5-1.5B-Instruct-GGUF:Q4_K_M"),
    ("ollama", "gemma3:12b"),
    ("sglang", "/home/ckpt/Qwen3-8B"),
    ("tgi", "meta-llama/Llama-2-70b-chat-hf"),
])
def test_same_model_as_lint_and_estimate(engine, ref):
    """The benchmark's model step gives what pipeline.evaluate sizes the server with."""
    out = one(ref, engine)
    site = site_from_argv(bench.command(engine, ref))
    site.engine = engine
    ev = evaluate(site, Target(gpu="H200", gpus=8))
    assert out.status in ("catalog", "derivative")
    assert out.model == ev.model.name
    assert out.assumptions == ev.model.assumptions


def test_offline_sandbox_refuses_sockets_and_restores_everything(tmp_path):
    cwd, home = os.getcwd(), os.environ.get("HF_HOME")
    with bench.offline():
        with pytest.raises(OSError, match="network disabled"):
            socket.create_connection(("127.0.0.1", 9))
        with pytest.raises(OSError):
            socket.socket()
        assert os.listdir(os.getcwd()) == [] and os.getcwd() != cwd
        assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["HF_HOME"] != home
    assert os.getcwd() == cwd and os.environ.get("HF_HOME") == home
    socket.socket().close()


def test_summary_counts_and_share():
    Out = bench.Outcome
    rows = [Out("a", "vllm", status="catalog"), Out("b", "vllm", status="derivative"),
            Out("c", "vllm", status="unknown"), Out("d", "tgi", status="lock")]
    s = bench.summarize(rows)
    assert s["vllm"] == {"n": 3, "catalog": 1, "derivative": 1, "lock": 0, "unknown": 1, "sized": 2,
                         "share": 2 / 3}
    assert (s["all"]["n"], s["all"]["sized"], s["all"]["share"]) == (4, 3, 0.75)
    assert "sglang" not in s


def test_data_files_shape_and_split():
    halves = {h: bench.load(h) for h in bench.HALVES}
    allrows = halves["calibration"] + halves["heldout"]
    assert len(allrows) >= 200
    for engine in bench.ENGINES:
        assert sum(r["engine"] == engine for r in allrows) >= 25, engine
    for half, rows in halves.items():
        for r in rows:
            assert set(r) <= {"ref", "engine", "source", "kind", "expected", "command"}, r
            assert "command" not in r or (isinstance(r["command"], str) and r["command"].strip()), r
            assert isinstance(r["ref"], str) and r["ref"].strip() == r["ref"] and r["ref"], r
            assert r["engine"] in bench.ENGINES and SOURCE.match(r["source"]), r
            parity = int(hashlib.sha256(r["source"].encode()).hexdigest(), 16) % 2
            assert parity == (0 if half == "calibration" else 1), r["source"]
    keys = [(r["source"], r["ref"]) for r in allrows]
    assert len(keys) == len(set(keys))


FRESH_SOURCE = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/[^#\s]+#L[1-9]\d*$")
SIZE_WORD = re.compile(r"(?<![a-z0-9])(\d+x)?\d+(\.\d+)?[bm](?![a-z0-9])", re.I)  # 7b, 125m, 1.5B, 8x7b


def _is_path(ref: str) -> bool:
    return (ref.startswith(("/", ".", "~", "$")) or "\\" in ref or (len(ref) > 1 and ref[1] == ":")
            or ref.lower().endswith(".gguf"))


def test_fresh_heldout_file_shape():
    """The 2026-11-28 set: complete entries citing a line at a commit, no repository either earlier
    half has, and `command` exactly where the README's mechanical rule puts it."""
    rows = yaml.safe_load((ROOT / "benchmarks" / "models" / bench.PARTS[bench.FRESH]).read_text(encoding="utf-8"))
    assert len(rows) >= 150
    for engine in bench.ENGINES:
        assert sum(r["engine"] == engine for r in rows) >= 25, engine
    old = {bench._repo(r["source"]) for h in bench.HALVES for r in bench.load(h)}
    for r in rows:
        assert {"ref", "engine", "source", "kind"} <= set(r) <= {"ref", "engine", "source", "kind", "expected",
                                                                  "command"}, r
        assert isinstance(r["ref"], str) and r["ref"].strip() == r["ref"] and r["ref"], r
        assert r["engine"] in bench.ENGINES and FRESH_SOURCE.match(r["source"]), r
        assert bench._repo(r["source"]) not in old, r["source"]
        last = re.split(r"[/\\]", r["ref"].rstrip("/\\"))[-1]
        wants = _is_path(r["ref"]) and not SIZE_WORD.search(last) and r["kind"] != "modelfile"
        assert ("command" in r) == wants, r
        assert "command" not in r or (isinstance(r["command"], str) and r["command"].strip()), r
    keys = [(r["ref"], r["source"]) for r in rows]
    assert len(keys) == len(set(keys))


def _tiny_fresh(tmp_path, monkeypatch):
    """Point the held-out parts (and the later batches' calibration halves) at a one-line stand-in, so CLI
    tests never resolve the real held-out sets."""
    (tmp_path / "fresh.yaml").write_text(yaml.safe_dump([{
        "ref": "TheBloke/Mistral-7B-Instruct-v0.2-GPTQ", "engine": "tgi", "kind": "shell",
        "source": "https://github.com/o/r/blob/0000000000000000000000000000000000000000/f#L1"}]))
    for part in (*bench.HELD_OUT, bench.CALIBRATION3, bench.CALIBRATION4, bench.CALIBRATION5):
        monkeypatch.setitem(bench.PARTS, part, str(tmp_path / "fresh.yaml"))


def test_cli_prints_every_part_separately(capsys, tmp_path, monkeypatch):
    _tiny_fresh(tmp_path, monkeypatch)
    assert bench.main(["--engine", "tgi"]) == 0
    out = capsys.readouterr().out
    assert "calibration:" in out and "calibration-2 (was held out until 2026-11-28):" in out
    assert "calibration-2-unseen-repos (repositories not in calibration):" in out
    assert re.search(r"^  tgi +\d+/\d+ +sized offline", out, re.M)
    fresh = out.split("fresh (held-out, gathered 2026-11-28):\n", 1)[1]
    assert re.match(r"  tgi +1/1 +sized offline 100\.0%   \(catalog 0, derivative 1, lock 0, unknown 0\)\n"
                    r"  all +1/1 ", fresh)
    assert "fresh-unseen-repos (held-out, gathered 2026-11-28, repositories in neither calibration part):\n  tgi " in fresh


SECOND_BATCH = (bench.CALIBRATION3, bench.FRESH2)
KINDS = {"shell", "k8s", "helm-values", "compose", "compose-env", "dockerfile", "systemd", "modelfile", "llama-swap",
         "skypilot", "ci-workflow", "terraform", "slurm"}


def _rows(part):
    return yaml.safe_load((ROOT / "benchmarks" / "models" / bench.PARTS[part]).read_text(encoding="utf-8"))


def _batch(parts, earlier_parts):
    """A batch's two files: complete entries citing a line at a commit, kinds the README names, `command`
    exactly where the mechanical rule puts it, split by the first hex digit of sha256(source) (even: the first
    part, odd: the second), and no repository any file gathered before it has. Returns the batch's rows."""
    earlier = {bench._repo(r["source"]) for part in earlier_parts for r in bench.load(part)}
    batch = []
    for part in parts:
        rows = _rows(part)
        assert rows, part
        for r in rows:
            assert {"ref", "engine", "source", "kind"} <= set(r) <= {"ref", "engine", "source", "kind", "expected",
                                                                      "command"}, r
            assert isinstance(r["ref"], str) and r["ref"].strip() == r["ref"] and r["ref"], r
            assert r["engine"] in bench.ENGINES and FRESH_SOURCE.match(r["source"]), r
            assert r["kind"] in KINDS, r
            assert bench._repo(r["source"]) not in earlier, r["source"]
            first = int(hashlib.sha256(r["source"].encode()).hexdigest()[0], 16)
            assert first % 2 == (0 if part == parts[0] else 1), r["source"]
            last = re.split(r"[/\\]", r["ref"].rstrip("/\\"))[-1]
            wants = _is_path(r["ref"]) and not SIZE_WORD.search(last) and r["kind"] != "modelfile"
            assert ("command" in r) == wants, r
            assert "command" not in r or (isinstance(r["command"], str) and r["command"].strip()), r
            assert "expected" not in r or (isinstance(r["expected"], str) and r["expected"].strip()), r
        batch += rows
    keys = [(r["ref"], r["source"]) for r in batch]
    assert len(keys) == len(set(keys))
    return batch


def test_second_batch_shape_and_split():
    """The second 2026-11-28 batch: calibration-3 (even) and fresh-2 (odd), after the first three parts."""
    batch = _batch(SECOND_BATCH, (*bench.HALVES, bench.FRESH))
    assert len(batch) >= 160
    for engine in bench.ENGINES:
        assert sum(r["engine"] == engine for r in batch) >= 30, engine


THIRD_BATCH = (bench.CALIBRATION4, bench.FRESH3)


def test_third_batch_shape_and_split():
    """The third 2026-11-28 batch: calibration-4 (even) and fresh-3 (odd), from repositories none of the five
    earlier parts has; at least 150 references, every engine and the file kinds beyond scripts represented."""
    batch = _batch(THIRD_BATCH, (*bench.HALVES, bench.FRESH, *SECOND_BATCH))
    assert len(batch) >= 150
    for engine in bench.ENGINES:
        assert sum(r["engine"] == engine for r in batch) >= 15, engine
    kinds = {r["kind"] for r in batch}
    assert {"k8s", "helm-values", "compose", "systemd", "llama-swap", "modelfile", "dockerfile"} <= kinds, kinds


FOURTH_BATCH = (bench.CALIBRATION5, bench.FRESH4)


def test_fourth_batch_shape_and_split():
    """The fourth 2026-11-28 batch: calibration-5 (even) and fresh-4 (odd), from repositories none of the seven
    earlier parts has; at least 120 references, at most 3 a repository, every engine (SGLang and TGI at least 12
    each) and the file kinds beyond scripts represented."""
    batch = _batch(FOURTH_BATCH, (*bench.HALVES, bench.FRESH, *SECOND_BATCH, *THIRD_BATCH))
    assert len(batch) >= 120
    for engine in bench.ENGINES:
        assert sum(r["engine"] == engine for r in batch) >= 12, engine
    per_repo: dict[str, int] = {}
    for r in batch:
        per_repo[bench._repo(r["source"])] = per_repo.get(bench._repo(r["source"]), 0) + 1
    assert max(per_repo.values()) <= 3, max(per_repo.items(), key=lambda kv: kv[1])
    kinds = {r["kind"] for r in batch}
    assert {"k8s", "helm-values", "compose", "systemd", "llama-swap", "modelfile", "dockerfile", "slurm"} <= kinds, kinds


def test_held_out_repositories_appear_in_no_other_file():
    """No repository of the fresh part has a line in any other file; none of fresh-2's or fresh-3's has one in
    any file gathered before its batch (a batch's lines are split per line, so a repository can have lines in
    both halves of a batch: run.py reports the held-out half's lines from repositories its calibration half
    lacks)."""
    repos = {part: {bench._repo(r["source"]) for r in bench.load(part)} for part in bench.PARTS}
    for part, mine in repos.items():
        if part != bench.FRESH:
            assert not mine & repos[bench.FRESH], (part, sorted(mine & repos[bench.FRESH]))
    for part in (*bench.HALVES, bench.FRESH):
        assert not repos[bench.FRESH2] & repos[part], (part, sorted(repos[bench.FRESH2] & repos[part]))
    assert repos[bench.FRESH2] - repos[bench.CALIBRATION3]  # the unseen-repos line has something to report
    for part in (*bench.HALVES, bench.FRESH, *SECOND_BATCH):  # the third batch: repositories no earlier file has
        for mine in THIRD_BATCH:
            assert not repos[mine] & repos[part], (mine, part, sorted(repos[mine] & repos[part]))
    assert repos[bench.FRESH3] - repos[bench.CALIBRATION4]
    for part in (*bench.HALVES, bench.FRESH, *SECOND_BATCH, *THIRD_BATCH):  # the fourth batch likewise
        for mine in FOURTH_BATCH:
            assert not repos[mine] & repos[part], (mine, part, sorted(repos[mine] & repos[part]))
    assert repos[bench.FRESH4] - repos[bench.CALIBRATION5]


def test_second_batch_parts_print_on_their_own(capsys, tmp_path, monkeypatch):
    _tiny_fresh(tmp_path, monkeypatch)
    assert bench.main(["--half", "calibration3", "--engine", "tgi"]) == 0
    out = capsys.readouterr().out
    assert re.match(r"calibration-3:\n  tgi +1/1 +sized offline", out) and "fresh" not in out
    assert bench.main(["--half", "fresh2", "--engine", "tgi"]) == 0
    out = capsys.readouterr().out
    assert re.match(r"fresh-2 \(held out, gathered 2026-11-28, second batch\):\n  tgi +1/1 +sized offline", out)
    assert "fresh-2-unseen-repos (held out, gathered 2026-11-28, second batch, repositories in no calibration part):\n" in out
    assert "calibration" not in out.replace("in no calibration part", "")
    assert bench.main(["--engine", "tgi"]) == 0
    out = capsys.readouterr().out
    titles = [line for line in out.splitlines() if not line.startswith(" ")]
    assert titles == ["calibration:", "calibration-2 (was held out until 2026-11-28):",
                      "calibration-2-unseen-repos (repositories not in calibration):",
                      "fresh (held-out, gathered 2026-11-28):",
                      "fresh-unseen-repos (held-out, gathered 2026-11-28, repositories in neither calibration part):",
                      "calibration-3:", "fresh-2 (held out, gathered 2026-11-28, second batch):",
                      "fresh-2-unseen-repos (held out, gathered 2026-11-28, second batch, repositories in no "
                      "calibration part):",
                      "calibration-4:", "fresh-3 (held out, gathered 2026-11-28, third batch):",
                      "fresh-3-unseen-repos (held out, gathered 2026-11-28, third batch, repositories in no "
                      "calibration part):",
                      "calibration-5:", "fresh-4 (held out, gathered 2026-11-28, fourth batch):",
                      "fresh-4-unseen-repos (held out, gathered 2026-11-28, fourth batch, repositories in no "
                      "calibration part):"]


@pytest.mark.parametrize("cal,fresh,cal_title,fresh_title,before", [
    ("calibration4", "fresh3", "calibration-4", "fresh-3 (held out, gathered 2026-11-28, third batch)", "fresh-2"),
    ("calibration5", "fresh4", "calibration-5", "fresh-4 (held out, gathered 2026-11-28, fourth batch)", "fresh-3"),
])
def test_later_batch_parts_print_on_their_own(capsys, tmp_path, monkeypatch, cal, fresh, cal_title, fresh_title,
                                              before):
    """A batch's calibration and fresh parts print on their own; its fresh-N-unseen-repos counts only the fresh
    lines whose repository that batch's calibration part (and every calibration part before it) lacks."""
    _tiny_fresh(tmp_path, monkeypatch)

    def entry(repo):
        return {"ref": "TheBloke/Mistral-7B-Instruct-v0.2-GPTQ", "engine": "tgi", "kind": "shell",
                "source": f"https://github.com/{repo}/blob/{'0' * 40}/f#L1"}
    (tmp_path / f"{cal}.yaml").write_text(yaml.safe_dump([entry("a/seen")]))
    (tmp_path / f"{fresh}.yaml").write_text(yaml.safe_dump([entry("a/seen"), entry("b/unseen"), entry("c/unseen")]))
    monkeypatch.setitem(bench.PARTS, cal, str(tmp_path / f"{cal}.yaml"))
    monkeypatch.setitem(bench.PARTS, fresh, str(tmp_path / f"{fresh}.yaml"))
    assert bench.main(["--half", cal, "--engine", "tgi"]) == 0
    out = capsys.readouterr().out
    assert re.match(rf"{cal_title}:\n  tgi +1/1 +sized offline", out) and "fresh" not in out
    assert bench.main(["--half", fresh, "--engine", "tgi"]) == 0
    out = capsys.readouterr().out
    assert re.match(rf"{re.escape(fresh_title)}:\n  tgi +3/3 +sized offline", out)
    unseen = out.split(f"{fresh_title.split(' (')[0]}-unseen-repos ({fresh_title.split(' (')[1][:-1]}, repositories "
                       "in no calibration part):\n", 1)[1]
    assert re.match(r"  tgi +2/2 +sized offline", unseen)
    assert before not in out and "calibration" not in out.replace("in no calibration part", "")


def test_half_fresh_prints_only_the_fresh_part(capsys, tmp_path, monkeypatch):
    _tiny_fresh(tmp_path, monkeypatch)
    assert bench.main(["--half", "fresh", "--engine", "tgi"]) == 0
    out = capsys.readouterr().out
    assert "calibration:" not in out and "calibration-2" not in out
    assert re.match(r"fresh \(held-out, gathered 2026-11-28\):\n  tgi +1/1 +sized offline", out)
    with pytest.raises(SystemExit):
        bench.main(["--half", "held-out"])


def test_verbose_names_the_reason(capsys):
    data = yaml.safe_load((ROOT / "benchmarks" / "models" / "calibration.yaml").read_text())
    assert any(r["ref"] == "/data" for r in data)
    assert bench.main(["--half", "calibration", "--engine", "tgi", "-v"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\[unknown {3}\] tgi +/data  NOT SIZED: unknown model '/data'", out)


def test_entry_command_line_is_scanned_for_evidence():
    """An entry's `command` (the file's own command line) is scanned like the file: the mount that
    puts a named folder at the path the server loads sizes it, and says so."""
    (out,) = bench.run([{"ref": "/data", "engine": "tgi", "kind": "shell", "source": "https://github.com/o/r/blob/HEAD/f#L1",
                         "command": "docker run -v $PWD/models/Mistral-7B-Instruct-v0.2:/data "
                                    "ghcr.io/huggingface/text-generation-inference:2.4.0 --model-id /data"}])
    assert (out.status, out.model) == ("derivative", "mistralai/Mistral-7B-Instruct-v0.2")
    assert out.assumptions[0].startswith("'/data' names no model; sized as /models/Mistral-7B-Instruct-v0.2: "
                                         "the file mounts $PWD/models/Mistral-7B-Instruct-v0.2 at /data")
    (bare,) = bench.run([{"ref": "/data", "engine": "tgi", "source": "https://github.com/o/r/blob/HEAD/f#L1"}])
    assert bare.status == "unknown"


# what a `command` snippet of each kind may hold (README, "Deployment context in `command`"): the keys
# servefit reads for the server's command, its model evidence and the names the file gives it
SNIPPET_KEYS = {
    "llama-swap": {"model": {"cmd", "aliases", "env"}},
    "compose": {"service": {"container_name", "image", "build", "entrypoint", "command", "environment", "env_file",
                            "volumes"}},
    "k8s": {"metadata": {"name", "labels"}, "container": {"name", "image", "command", "args", "env", "envFrom"}},
    "systemd": {"Unit": {"Description"}, "Service": {"Environment", "EnvironmentFile", "ExecStart"}},
}
FAMILY = {"shell": "script", "systemd": "systemd", "llama-swap": "yaml", "compose": "yaml", "k8s": "yaml",
          "helm-values": "yaml"}
MACRO = re.compile(r"\$\{([\w-]+)\}")


def _containers(node):
    """Every mapping under a `containers:` list, anywhere in a manifest."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "containers" and isinstance(v, list):
                yield from (c for c in v if isinstance(c, dict))
            else:
                yield from _containers(v)
    elif isinstance(node, list):
        for v in node:
            yield from _containers(v)


def _snippet_shape(r):
    """The README's rule for one entry's `command`, checked on the text alone."""
    kind, text = r["kind"], r["command"]
    if kind == "llama-swap":
        doc = yaml.safe_load(text)
        assert set(doc) <= {"macros", "models"} and len(doc["models"]) == 1, r
        (model,) = doc["models"].values()
        assert "cmd" in model and set(model) <= SNIPPET_KEYS[kind]["model"], r
        macros = doc.get("macros") or {}
        used = set(MACRO.findall(model["cmd"])) | {m for v in macros.values() for m in MACRO.findall(str(v))}
        assert set(macros) <= used, r  # only the macros its cmd uses
        assert used - {"PORT", "MODEL_ID"} <= set(macros), r  # and every one it uses
    elif kind == "compose":
        doc = yaml.safe_load(text)
        assert set(doc) == {"services"} and len(doc["services"]) == 1, r
        (svc,) = doc["services"].values()
        assert set(svc) <= SNIPPET_KEYS[kind]["service"], r
    elif kind == "k8s":
        docs = [d for d in yaml.safe_load_all(text) if d]
        assert len(docs) == 1, r
        (doc,) = docs
        assert {"apiVersion", "kind", "metadata"} <= set(doc) and set(doc) <= {"apiVersion", "kind", "metadata", "spec"}, r
        assert "name" in doc["metadata"] and set(doc["metadata"]) <= SNIPPET_KEYS[kind]["metadata"], r
        (c,) = list(_containers(doc))
        assert "name" in c and set(c) <= SNIPPET_KEYS[kind]["container"], r
    elif kind == "systemd":
        section, seen = "", []
        for line in text.splitlines():
            if line.startswith("["):
                section = line.strip("[]")
                assert section in SNIPPET_KEYS[kind], r
            elif not line.startswith((" ", "\t")):  # a continuation line belongs to the key above it
                key = line.split("=", 1)[0]
                assert key in SNIPPET_KEYS[kind][section], (key, r)
                seen.append(key)
        assert seen.count("ExecStart") == 1, r


def test_command_snippets_follow_the_rule():
    """Every `command`, in all three parts, is a snippet of its own file kind that servefit reads as
    that kind under the source file's name: the server's command and the names the file gives it."""
    from servefit.sources import scan_file

    rows = [r for part in bench.PARTS for r in bench.load(part) if "command" in r]
    assert len(rows) >= 30
    by_kind = {k: sum(r["kind"] == k for r in rows) for k in ("llama-swap", "compose", "k8s", "systemd")}
    assert all(by_kind.values()), by_kind
    for r in rows:
        _snippet_shape(r)
        text = r["command"] + "\n"
        name = bench.snippet_name(r["source"], r["kind"], text)
        assert name == r["source"].split("#")[0].rsplit("/", 1)[-1], r  # its own file name
        with bench.offline():
            path = os.path.join(os.getcwd(), name)
            Path(path).write_text(text, encoding="utf-8")
            result = scan_file(path)
        assert result.kind == FAMILY[r["kind"]], r
        labels = [s.name for s in result.sites if s.engine == r["engine"]]
        wrapper = {"llama-swap": "llama-swap/", "compose": "compose/", "systemd": "systemd/"}.get(r["kind"])
        if wrapper:  # servefit reads these files whole: the server is found, under the wrapper's name
            assert labels and all(n.startswith(wrapper) for n in labels), (labels, r)
        if r["kind"] == "k8s":
            doc = yaml.safe_load(r["command"])
            assert all(n.startswith(f"{doc['kind']}/{doc['metadata']['name']}/") for n in labels), (labels, r)


def test_snippet_is_scanned_under_its_file_name():
    """The name a file gives a server reaches the benchmark: a llama-swap key, a unit file's name."""
    swap = ("models:\n  llama-3.1-8b-instruct:\n    cmd: llama-server --port ${PORT} -m /models/model.gguf\n")
    (out,) = bench.run([{"ref": "/models/model.gguf", "engine": "llamacpp", "kind": "llama-swap", "command": swap,
                         "source": "https://github.com/o/r/blob/HEAD/llama-swap.yml#L3"}])
    assert (out.status, out.model) == ("derivative", "meta-llama/Llama-3.1-8B-Instruct")
    assert "its llama-swap `models:` key is 'llama-3.1-8b-instruct'" in out.assumptions[0]
    unit = "[Service]\nExecStart=/usr/bin/llama-server -m /srv/model.gguf\n"
    (out,) = bench.run([{"ref": "/srv/model.gguf", "engine": "llamacpp", "kind": "systemd", "command": unit,
                         "source": "https://github.com/o/r/blob/HEAD/qwen2.5-7b-instruct.service#L2"}])
    assert out.model == "Qwen/Qwen2.5-7B-Instruct" and "its unit file's name is 'qwen2.5-7b-instruct'" in out.assumptions[0]
    assert bench.snippet_name("https://github.com/o/r/blob/HEAD/f#L1", "systemd", unit) == "server.service"
    assert bench.snippet_name("https://github.com/o/r/blob/HEAD/f#L1", "shell", "vllm serve /m\n") == "command.sh"
    (bare,) = bench.run([{"ref": "/srv/model.gguf", "engine": "llamacpp", "kind": "systemd", "command": unit,
                          "source": "https://github.com/o/r/blob/HEAD/f#L2"}])
    assert bare.status == "unknown"
