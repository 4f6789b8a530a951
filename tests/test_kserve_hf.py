"""KServe's built-in Hugging Face runtime (sources/kserve_hf.py, data/kserve_runtimes.yaml): an
InferenceService with `modelFormat.name: huggingface` and no ServingRuntime in its file is read as the
vLLM server kserve-huggingfaceserver starts. It was "runtime ... is not in this file ... did not check
it" (SF114), and `tune` stopped with "no serving engine found"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from servefit.cli import main
from servefit.core import Token
from servefit.sources import scan_file
from servefit.sources.kserve_hf import split_args, vllm_version

ROOT = Path(__file__).resolve().parents[1] / "src" / "servefit"

ISVC = """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llama3
spec:
  predictor:
    nodeSelector:
      cloud.google.com/gke-accelerator: nvidia-l4
    model:
      modelFormat:
        name: huggingface
      runtimeVersion: v0.15.2
      args:
        - --model_name=llama3
        - --model_id=meta-llama/Meta-Llama-3-8B-Instruct
        - --max-model-len=8192
        - --gpu-memory-utilization=0.9
      resources:
        limits:
          cpu: "6"
          memory: 24Gi
          nvidia.com/gpu: "1"
"""


def _write(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "isvc.yaml"
    f.write_text(text)
    return f


def _at(text: str, tok: Token) -> tuple[int, int, str]:
    s = tok.span
    assert s is not None
    return s.line, s.col, text[s.start:s.end]


def test_table_validates_against_its_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "schemas" / "kserve_runtimes.schema.json").read_text(encoding="utf-8"))
    table = yaml.safe_load((ROOT / "data" / "kserve_runtimes.yaml").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(table, schema)
    with pytest.raises(jsonschema.ValidationError):  # a release written as `v0.15` is no key
        jsonschema.validate({**table, "vllm_versions": {"v0.15": "0.8.5"}}, schema)


@pytest.mark.parametrize(("release", "version", "said"), [
    # each tag's python/huggingfaceserver/poetry.lock or uv.lock
    ("v0.12.0", "0.2.7", "KServe v0.12.0's huggingfaceserver image"),
    ("v0.13.1", "0.4.3", "KServe v0.13.1's"),
    ("0.14.1", "0.6.1.post2", "KServe 0.14.1's"),
    ("v0.15.0", "0.8.2", "KServe v0.15.0's"),
    ("v0.16.0", "0.9.2", "KServe v0.16.0's"),
    ("v0.17.1", "0.15.1", "KServe v0.17.1's"),
    ("v0.13", "0.4.3", "KServe v0.13's"),  # a minor release alone: its newest patch
    (None, "0.20.0", "no runtimeVersion is given: KServe 0.19.0's huggingfaceserver image is assumed (vLLM 0.20.0)"),
    ("v9.9.9", "0.20.0", "runtimeVersion v9.9.9 is not a KServe release servefit knows, so KServe 0.19.0's"),
])
def test_vllm_version_of_each_kserve_release(release, version, said):
    got, source = vllm_version(release)
    assert got == version and source.startswith(said)


def test_the_server_is_read_as_vllm(tmp_path):
    f = _write(tmp_path, ISVC)
    r = scan_file(str(f))
    assert r.findings == []
    [site] = r.sites
    assert site.engine == "vllm" and site.name == "InferenceService/llama3/kserve-container"
    assert [t.text for t in site.argv] == ["vllm", "serve", "meta-llama/Meta-Llama-3-8B-Instruct",
                                           "--max-model-len=8192", "--gpu-memory-utilization=0.9"]
    assert _at(ISVC, site.argv[2]) == (15, 22, "meta-llama/Meta-Llama-3-8B-Instruct")  # after --model_id=
    assert _at(ISVC, site.argv[3]) == (16, 11, "--max-model-len=8192")
    assert site.engine_version == "0.8.5" and site.image == "kserve/huggingfaceserver:v0.15.2"
    assert _at(ISVC, Token("", site.image_span)) == (12, 23, "v0.15.2")
    assert (site.gpu.name, site.gpu.count) == ("nvidia-l4", 1)
    assert site.workload.runtime == "kserve-huggingfaceserver"
    assert site.workload.notes == [
        "KServe runs it with its built-in ClusterServingRuntime kserve-huggingfaceserver (not in this file), read as "
        "the vLLM server huggingfaceserver starts (--backend auto); vLLM version: KServe v0.15.2's huggingfaceserver "
        "image (its uv.lock / poetry.lock pins vLLM 0.8.5)",
        "huggingfaceserver drops an argument neither it nor vLLM knows without an error (parse_known_args): the "
        "server starts without that setting"]


def test_lint_finds_a_vllm_flag_at_its_line(tmp_path, capsys):
    f = _write(tmp_path, ISVC.replace("gpu-memory-utilization", "gpu-memory-utilisation"))
    assert main(["lint", str(f), "--format", "json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert [(x["code"], x["location"]["line"], x["location"]["column"], x["end_location"]["column"])
            for x in found] == [("VLLM001", 17, 11, 39)]
    assert "--gpu-memory-utilisation (did you mean --gpu-memory-utilization?)" in found[0]["message"]


def test_estimate_agrees_with_the_vllm_command(tmp_path, capsys):
    f = _write(tmp_path, ISVC)
    assert main(["estimate", str(f), "--format", "json"]) == 0
    [mine] = json.loads(capsys.readouterr().out)
    assert main(["estimate", "--gpu", "nvidia-l4", "--engine-version", "0.8.5", "--format", "json", "--",
                 "vllm", "serve", "meta-llama/Meta-Llama-3-8B-Instruct", "--max-model-len", "8192",
                 "--gpu-memory-utilization", "0.9"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert mine["engine_version"] == "0.8.5"
    assert mine["kv_cache_tokens"] == plain["kv_cache_tokens"] == 27312
    assert mine["memory"] == plain["memory"]


TUNED = ISVC.replace("--max-model-len=8192\n", "--max-model-len=4096\n").replace(
    "--gpu-memory-utilization=0.9\n", "--gpu-memory-utilization=0.9\n        - --max-num-seqs=64\n")


def test_tune_writes_the_args_in_their_idiom_once(tmp_path, capsys):
    f = _write(tmp_path, ISVC)
    assert main(["tune", str(f), "--min-concurrency", "8", "--write"]) == 0
    assert "change  --max-model-len 4096, --max-num-seqs 64 [safe]" in capsys.readouterr().out
    assert f.read_text() == TUNED
    assert main(["tune", str(f), "--min-concurrency", "8", "--write"]) == 0
    out = capsys.readouterr().out
    assert "change  none: the config is already the best one" in out and "wrote" not in out
    assert f.read_text() == TUNED


def test_the_transformers_backend_is_said_not_checked(tmp_path):
    text = ISVC.replace("- --max-model-len=8192\n", "- --backend=huggingface\n")
    r = scan_file(str(_write(tmp_path, text)))
    assert r.sites == []
    [found] = r.findings
    assert found.code == "SF116" and found.message == (
        "InferenceService llama3: KServe's huggingfaceserver runs this model with --backend=huggingface (plain "
        "transformers, not vLLM), whose memory and settings servefit does not model, so this server was not checked")
    assert _at(text, Token("", found.span)) == (16, 21, "huggingface")


OLD_FORM = """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: qwen
spec:
  predictor:
    huggingface:
      storageUri: {uri}
      args: [--max_length, "4096", --backend, vllm, --tensor-parallel-size, "2"]
      resources: {{limits: {{nvidia.com/gpu: 2}}}}
"""


def test_the_older_predictor_form_with_an_hf_storage_uri(tmp_path):
    text = OLD_FORM.format(uri="hf://Qwen/Qwen2.5-7B-Instruct")
    [site] = scan_file(str(_write(tmp_path, text))).sites
    # --max_length is huggingfaceserver's name for max_model_len (__main__.py: dest="max_model_len")
    assert [t.text for t in site.argv] == ["vllm", "serve", "/mnt/models", "--max-model-len", "4096",
                                           "--tensor-parallel-size", "2"]
    assert _at(text, site.argv[4]) == (9, 29, "4096")
    assert site.workload.storage_model == "Qwen/Qwen2.5-7B-Instruct" and site.workload.storage_path == "/mnt/models"
    assert site.gpu.count == 2 and site.engine_version == "0.20.0" and site.image is None
    assert site.workload.notes[0].endswith("(--backend vllm); vLLM version: no runtimeVersion is given: KServe "
                                           "0.19.0's huggingfaceserver image is assumed (vLLM 0.20.0)")


def test_another_storage_says_the_model_is_not_known(tmp_path, capsys):
    f = _write(tmp_path, OLD_FORM.format(uri="gs://bucket/qwen"))
    assert main(["lint", str(f), "--gpu", "L4", "--format", "json"]) == 0
    [found] = json.loads(capsys.readouterr().out)
    assert found["code"] == "SF002" and found["message"] == (
        "the model is the one KServe downloads to /mnt/models from this InferenceService's storageUri, which names "
        "no Hugging Face model (an hf:// one or --model_id would), so its memory was not checked: pass --model "
        "ORG/NAME or add `# servefit: model=ORG/NAME` beside the server")
    assert main(["estimate", str(f), "--gpu", "L4", "--model", "Qwen/Qwen2.5-7B-Instruct", "--format", "json"]) == 0
    [est] = json.loads(capsys.readouterr().out)
    assert est["model"]["resolved"] == "Qwen/Qwen2.5-7B-Instruct" and est["max_model_len"] == 4096


def test_runtime_named_as_the_built_in_one_is_read(tmp_path):
    text = ISVC.replace("      runtimeVersion: v0.15.2\n", "      runtime: kserve-huggingfaceserver\n")
    [site] = scan_file(str(_write(tmp_path, text))).sites
    assert site.engine == "vllm" and site.engine_version == "0.20.0"
    other = ISVC.replace("      runtimeVersion: v0.15.2\n", "      runtime: my-hf-runtime\n")
    r = scan_file(str(_write(tmp_path, other)))
    assert r.sites == [] and [x.code for x in r.findings] == ["SF114"]


def test_split_args_keeps_vllm_flags_and_drops_kserve_ones():
    own, rest = split_args([Token(w) for w in ["--model_name", "m", "--enable_docs_url", "--http_port=8080",
                                               "--dtype", "half", "--model_dir", "/data", "--model-id", "x"]])
    assert {k: v.text for k, v in own.items()} == {"model_name": "m", "enable_docs_url": "", "http_port": "8080",
                                                   "model_dir": "/data"}
    assert [t.text for t in rest] == ["--dtype", "half", "--model-id", "x"]  # declared --model_id only


def test_a_release_older_than_those_modelled_is_said(capsys) -> None:
    """KServe 0.12's image runs vLLM 0.2.7: planned with 0.4's accounting, which estimate says."""
    from servefit.cli import main

    argv = ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"]
    main(["estimate", "--gpu", "L4", "--engine-version", "0.2.7", "--format", "json", "--", *argv])
    said = [a for a in json.loads(capsys.readouterr().out)["assumptions"] if "older than" in a]
    assert said == ["vLLM 0.2.7 is older than the releases servefit models (0.4.0 and later): planned the way "
                    "0.4.0 accounts memory, so its figures are rough"]
    main(["estimate", "--gpu", "L4", "--engine-version", "0.4.0", "--format", "json", "--", *argv])
    assert not [a for a in json.loads(capsys.readouterr().out)["assumptions"] if "older than" in a]


# A predictor with a workerSpec runs KServe's multi-node runtime (config/runtimes/
# kserve-huggingfaceserver-multinode.yaml): huggingfaceserver with --tensor-parallel-size /
# --pipeline-parallel-size from the workerSpec, over the Ray cluster its pods start.
MULTI = ISVC.replace("    model:\n", "    workerSpec:\n      pipelineParallelSize: 2\n      tensorParallelSize: 2\n"
                                   "    model:\n", 1)


def test_a_worker_spec_runs_the_multinode_runtime(tmp_path, capsys):
    f = _write(tmp_path, MULTI)
    [site] = scan_file(str(f)).sites
    assert [t.text for t in site.argv][5:] == ["--tensor-parallel-size", "2", "--pipeline-parallel-size", "2",
                                               "--distributed-executor-backend", "ray"]
    assert all(t.span is None for t in site.argv[5:])  # the runtime writes them: no place for tune
    assert site.workload.runtime == "kserve-huggingfaceserver-multinode"
    assert site.workload.notes[:2] == [
        "KServe runs it with its built-in ClusterServingRuntime kserve-huggingfaceserver-multinode (not in this "
        "file), read as the vLLM server huggingfaceserver starts (--backend auto); vLLM version: KServe v0.15.2's "
        "huggingfaceserver image (its uv.lock / poetry.lock pins vLLM 0.8.5)",
        "a workerSpec runs the multi-node runtime: vLLM's pipeline stages on as many pods (the head and its "
        "workers), each with tensorParallelSize GPUs, over the Ray cluster the pods start (vLLM's Ray backend: its "
        "ranks span the nodes)"]
    # four ranks over pods of one GPU each: Ray places them (no VLLM008); huggingfaceserver's own server answers
    assert main(["lint", str(f), "--format", "json", "--fail-on", "never"]) == 0
    assert [x["code"] for x in json.loads(capsys.readouterr().out)] == []
    assert main(["estimate", str(f), "--format", "json"]) == 0
    [est] = json.loads(capsys.readouterr().out)
    assert est["parallel"] == {"tensor": 2, "pipeline": 2, "data": 1}
    assert main(["tune", str(f), "--min-concurrency", "8", "--write"]) == 0
    capsys.readouterr()
    text = f.read_text()
    assert text.count("workerSpec:\n      pipelineParallelSize: 2\n      tensorParallelSize: 2\n") == 1
    assert "        - --gpu-memory-utilization=0.9\n        - --max-num-seqs=" in text  # in the args, their idiom
    assert main(["tune", str(f), "--min-concurrency", "8", "--write"]) == 0
    assert f.read_text() == text


def test_tune_keeps_tensor_parallel_within_the_gpus_each_stage_has():
    """Each pipeline stage takes tensor-parallel-size GPUs: TP 2 with PP 2 needs four."""
    from servefit.engines.vllm import ENGINE
    from servefit.engines.vllm.knobs import knobs
    from servefit.hardware.catalog import lookup
    from servefit.pipeline import site_from_argv
    from tests.test_vllm_engine import LLAMA8B

    def tps(argv: str, count: int) -> tuple:
        cfg = ENGINE.parse(site_from_argv(argv.split()), "0.11.0")
        return next(k.values for k in knobs(cfg, LLAMA8B, lookup("L4"), count) if k.name == "tensor_parallel_size")

    assert tps("vllm serve m --pipeline-parallel-size 2", 2) == (1,)
    assert tps("vllm serve m --pipeline-parallel-size 2", 4) == (1, 2)
    assert tps("vllm serve m", 4) == (1, 2, 4)
