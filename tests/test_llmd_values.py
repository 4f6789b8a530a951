"""llm-d-modelservice Helm values (engines/vllm/llmd.py): decode and prefill each become the vLLM
server the chart's templates/_helpers.tpl writes, with the spans of the values that set each flag;
an engine image in a values file whose command servefit cannot know is SF116, never a silent skip;
with helm, the rendered chart's servers replace the values file's (no double report)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.sources import scan_file

FIXTURE = Path(__file__).parent / "fixtures" / "llmd" / "values-pd.yaml"


def scan(text: str, name: str = "values.yaml"):
    return scan_file(f"/tmp/servefit-llmd/{name}", text)


def words(site) -> list[str]:
    return [t.text for t in site.argv]


def where(tok) -> tuple[int, int]:
    return (tok.span.line, tok.span.col)


def lint(capsys, *args: str) -> list[dict]:
    main(["lint", *args, "--format", "json", "--fail-on", "never"])
    return json.loads(capsys.readouterr().out)


def test_decode_and_prefill_are_servers_with_the_chart_flags():
    r = scan_file(str(FIXTURE))
    decode, prefill = r.sites
    assert r.findings == []
    assert decode.name == "helm/decode/vllm" and prefill.name == "helm/prefill/vllm"
    # vllmServeModelCommand: vllm serve MODEL --port <proxy targetPort> --tensor-parallel-size 4 --served-model-name
    assert words(decode) == [
        "vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--port", "8200", "--tensor-parallel-size", "4",
        "--served-model-name", "meta-llama/Llama-3.1-70B-Instruct", "--max-model-len", "32768",
        "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}',
        "--gpu-memory-utilization", "0.92"]
    # imageDefault: llm-d's image entrypoint with --model; prefill listens on routing.servicePort
    assert words(prefill)[:9] == ["python", "-m", "vllm.entrypoints.openai.api_server", "--model",
                                  "meta-llama/Llama-3.1-70B-Instruct", "--port", "8000", "--tensor-parallel-size", "2"]
    spans = {t.text: where(t) for t in decode.argv if t.span is not None}
    assert where(decode.argv[2]) == (6, 9)  # the model: modelArtifacts.uri's value
    assert (spans["--tensor-parallel-size"], spans["4"]) == ((25, 5), (25, 13))  # parallelism.tensor
    assert (spans["--served-model-name"], where(decode.argv[8])) == ((7, 3), (7, 10))  # modelArtifacts.name
    assert spans["32768"] == (38, 12)  # the container's own args
    assert (decode.gpu.name, decode.gpu.count) == ("NVIDIA-H100-80GB-HBM3", 4)
    assert decode.gpu.source == ("nodeSelector nvidia.com/gpu.product; count from decode.parallelism "
                                 "(dataLocal x tensor, as the chart requests)")
    assert (prefill.gpu.name, prefill.gpu.count) == ("NVIDIA-H100-80GB-HBM3", 2)
    assert prefill.gpu.source.startswith("prefill.acceleratorTypes nvidia.com/gpu.product; count from "
                                         "resources.limits.nvidia.com/gpu")
    assert (decode.workload.shm, prefill.workload.shm) == (True, False)  # decode mounts a Memory emptyDir
    assert decode.workload.chart == "llm-d-modelservice" and decode.workload.kind == "Deployment"
    assert decode.workload.ports == [8200, 5600]
    assert decode.workload.runtime_env == ["VLLM_NIXL_SIDE_CHANNEL_HOST"]


def test_lint_reads_both_servers_and_judges_them(capsys):
    found = lint(capsys, str(FIXTURE), "--gpu", "H100")
    assert not [f for f in found if f["code"] in ("SF116", "SF104")]
    shm = [f for f in found if f["code"] == "SF102"]
    assert [(f["server"], f["location"]["line"], f["location"]["column"]) for f in shm] == [
        ("helm/prefill/vllm", 80, 13)]  # tensor: 2 without shared memory
    main(["lint", str(FIXTURE), "--gpu", "H100", "--list-sites", "--format", "json"])
    sites = json.loads(capsys.readouterr().out)
    assert [(s["verdict"], s["settings"]["tensor_parallel_size"]) for s in sites] == [("started", 4), ("started", 2)]


ROOT = """modelArtifacts:
  uri: {uri}
  name: Qwen/Qwen3-8B
{rest}"""
DECODE = """decode:
  replicas: 1
  containers:
  - name: vllm
    image: ghcr.io/llm-d/llm-d-cuda:v0.3.0
    modelCommand: vllmServe
    args: ["--max-model-len", "8192"]
"""


@pytest.mark.parametrize("uri,model", [
    ("hf://Qwen/Qwen3-8B", "Qwen/Qwen3-8B"),
    ('hf://"{{ .Values.modelArtifacts.name }}"', "Qwen/Qwen3-8B"),  # the chart renders the template
    ("pvc://model-pvc/models/qwen3-8b", "/model-cache/models/qwen3-8b"),
    ("pvc+hf://model-pvc/hub-cache/Qwen/Qwen3-8B", "Qwen/Qwen3-8B"),
])
def test_the_model_from_each_uri_kind(uri, model):
    r = scan(ROOT.format(uri=f"'{uri}'" if "{" in uri else uri, rest=DECODE))
    (site,) = r.sites
    assert words(site)[2] == model
    line = 3 if "{" in uri else 2  # a templated uri: the span is modelArtifacts.name's value
    assert site.argv[2].span.line == line


def test_an_oci_model_is_said_not_skipped():
    r = scan(ROOT.format(uri="oci://registry.example/models/qwen3-8b:1", rest=DECODE))
    assert r.sites == []
    (f,) = r.findings
    assert f.code == "SF116" and (f.span.line, f.span.col) == (8, 12)  # the decode container's image
    assert "oci://" in f.message and "decode server of this llm-d-modelservice chart" in f.message


def test_parallelism_and_the_gpu_count():
    rest = DECODE.replace("  replicas: 1\n", "  replicas: 1\n  parallelism:\n    tensor: 2\n    data: 4\n    workers: 2\n")
    (site,) = scan(ROOT.format(uri="hf://Qwen/Qwen3-8B", rest=rest)).sites
    w = words(site)
    assert w[5:11] == ["--tensor-parallel-size", "2", "--data-parallel-size", "4", "--data-parallel-size-local", "2"]
    assert site.gpu.count == 4  # dataLocal (data / workers = 2) x tensor 2, one worker pod's request


@pytest.mark.parametrize("rest,servers", [
    (DECODE.replace("  replicas: 1\n", "  replicas: 0\n"), []),
    (DECODE.replace("  replicas: 1\n", "  create: false\n"), []),
    (DECODE.replace("  replicas: 1\n", ""), ["helm/decode/vllm"]),  # decode: 1 replica by default
    (DECODE.replace("decode:", "prefill:").replace("  replicas: 1\n", ""), []),  # prefill: 0 by default
    (DECODE.replace("decode:", "prefill:"), ["helm/prefill/vllm"]),
    (DECODE.replace("ghcr.io/llm-d/llm-d-cuda:v0.3.0", "ghcr.io/llm-d/llm-d-inference-sim:v0.4.0"), []),
])
def test_which_roles_run(rest, servers):
    r = scan(ROOT.format(uri="hf://Qwen/Qwen3-8B", rest=rest))
    assert [s.name for s in r.sites] == servers and r.findings == []


def test_the_decode_port_without_the_routing_proxy():
    text = ROOT.format(uri="hf://Qwen/Qwen3-8B", rest=DECODE + "routing:\n  proxy:\n    enabled: false\n")
    (site,) = scan(text).sites
    assert words(site)[3:5] == ["--port", "8000"]


def test_custom_and_image_default_commands():
    custom = DECODE.replace("modelCommand: vllmServe", 'command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]')
    custom = custom.replace('args: ["--max-model-len", "8192"]', 'args: ["--model", "Qwen/Qwen3-8B", "-tp", "2"]')
    (site,) = scan(ROOT.format(uri="hf://Qwen/Qwen3-8B", rest=custom)).sites
    assert words(site) == ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3-8B", "-tp", "2"]
    official = DECODE.replace("ghcr.io/llm-d/llm-d-cuda:v0.3.0", "vllm/vllm-openai:v0.10.1").replace(
        "vllmServe", "imageDefault")
    (site,) = scan(ROOT.format(uri="hf://Qwen/Qwen3-8B", rest=official)).sites
    assert words(site)[:4] == ["vllm", "serve", "--model", "Qwen/Qwen3-8B"] and site.engine_version == "0.10.1"


@pytest.mark.parametrize("change,why", [
    (("ghcr.io/llm-d/llm-d-cuda:v0.3.0", "myorg/inference:2.1"), "servefit does not know what myorg/inference:2.1 runs"),
    (("vllmServe", "vllmserve"), "modelCommand 'vllmserve' is not vllmServe, imageDefault or custom"),
])
def test_a_command_servefit_cannot_write_is_sf116(change, why):
    rest = DECODE.replace(*change).replace("vllmServe", "imageDefault") if "myorg" in change[1] else DECODE.replace(*change)
    r = scan(ROOT.format(uri="hf://Qwen/Qwen3-8B", rest=rest))
    assert r.sites == []
    (f,) = r.findings
    assert f.code == "SF116" and why in f.message and (f.span.line, f.span.col) == (8, 12)


def test_a_values_file_of_an_unknown_chart_names_its_engine_image():
    """Issue: a values file whose chart writes the command gave 0 servers and no finding."""
    r = scan("server:\n  image:\n    repository: vllm/vllm-openai\n    tag: v0.9.2\n  model: Qwen/Qwen3-8B\n")
    assert r.sites == []
    (f,) = r.findings
    assert f.code == "SF116" and (f.span.line, f.span.col) == (3, 17)
    assert f.message.startswith("vllm/vllm-openai:v0.9.2 runs vLLM, but the command it runs comes from the "
                                "templates of a chart servefit does not read")
    # containers in a list are read like any mapping: with their arguments they are a server
    r = scan("workers:\n  containers:\n  - image: vllm/vllm-openai:v0.9.2\n"
             "    args: [\"--model\", \"Qwen/Qwen3-8B\", \"--max-model-len\", \"8192\"]\n")
    assert [s.name for s in r.sites] == ["helm/workers.containers[0]"] and r.findings == []


CHART_TEMPLATE = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-decode
spec:
  replicas: {{ .Values.decode.replicas }}
  selector:
    matchLabels: {app: decode}
  template:
    metadata:
      labels: {app: decode}
    spec:
      containers:
      {{- range .Values.decode.containers }}
      - name: {{ .name }}
        image: {{ .image }}
        command: ["vllm", "serve"]
        args:
        - {{ trimPrefix "hf://" $.Values.modelArtifacts.uri | quote }}
        - "--tensor-parallel-size"
        - {{ $.Values.decode.parallelism.tensor | quote }}
        {{- range .args }}
        - {{ . | quote }}
        {{- end }}
        resources:
          limits:
            nvidia.com/gpu: {{ $.Values.decode.parallelism.tensor }}
      {{- end }}
"""


def _chart(tmp_path: Path) -> Path:
    chart = tmp_path / "ms"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: ms\nversion: 0.1.0\n")
    (chart / "templates" / "decode.yaml").write_text(CHART_TEMPLATE)
    (chart / "values.yaml").write_text(ROOT.format(uri="hf://Qwen/Qwen3-8B", rest=DECODE.replace(
        "  replicas: 1\n", "  replicas: 1\n  parallelism:\n    tensor: 2\n")))
    return chart


def test_with_helm_the_rendered_chart_is_read_once(tmp_path, capsys, monkeypatch):
    import k8stools

    tools, why = k8stools.tools_dir()
    if tools is None:
        pytest.skip(f"no helm 3 here: {why}")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ.get('PATH', '')}")
    chart = _chart(tmp_path)
    main(["lint", str(chart), "--gpu", "L4", "--list-sites", "--format", "json"])
    sites = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in sites] == ["Deployment/ms-decode/vllm"]
    assert sites[0]["settings"]["tensor_parallel_size"] == 2


def test_without_helm_the_values_file_is_read(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    chart = _chart(tmp_path)
    main(["lint", str(chart), "--gpu", "L4", "--list-sites", "--format", "json"])
    sites = json.loads(capsys.readouterr().out)
    assert [(s["name"], s["settings"]["tensor_parallel_size"]) for s in sites] == [("helm/decode/vllm", 2)]
    found = lint(capsys, str(chart), "--gpu", "L4")
    assert [f["code"] for f in found if f["code"] in ("SF104", "SF116")] == ["SF104"]


def test_tune_writes_new_flags_into_the_container_args(tmp_path, capsys):
    p = tmp_path / "values.yaml"
    p.write_text(FIXTURE.read_text())
    main(["tune", str(p), "--gpu", "H100", "--diff"])
    diff = capsys.readouterr().out.split("--- a/", 1)[1]
    added = [ln for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert added and all(ln.startswith("+        - ") for ln in added), added  # list items of `args`


@pytest.mark.parametrize("with_helm", [True, False])
def test_a_chart_in_the_repository_is_not_sf116(tmp_path, capsys, monkeypatch, with_helm):
    """The chart's own templates are there: rendered with helm, else SF104 says they were not;
    SF116 (no chart to read) would repeat it."""
    import k8stools

    tools, why = k8stools.tools_dir() if with_helm else (None, "")
    if with_helm and tools is None:
        pytest.skip(f"no helm 3 here: {why}")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ.get('PATH', '')}" if with_helm
                       else str(tmp_path / "empty"))
    chart = tmp_path / "srv"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: srv\nversion: 0.1.0\n")
    (chart / "templates" / "d.yaml").write_text(CHART_TEMPLATE.replace("$.Values.modelArtifacts.uri",
                                                                       '"hf://Qwen/Qwen3-8B"'))
    (chart / "values.yaml").write_text("image:\n  repository: vllm/vllm-openai\n  tag: v0.9.2\n"
                                       "decode: {replicas: 1, parallelism: {tensor: 1}, containers: []}\n")
    found = lint(capsys, str(chart), "--gpu", "L4")
    assert [f["code"] for f in found if f["code"] in ("SF104", "SF116")] == ([] if with_helm else ["SF104"])
    if with_helm:  # a values file beside the chart, rendered with it
        (tmp_path / "srv-values.yaml").write_text("image:\n  repository: vllm/vllm-openai\n  tag: v0.10.0\n")
        found = lint(capsys, str(tmp_path), "--gpu", "L4")
        assert [f["code"] for f in found if f["code"] in ("SF104", "SF116")] == []
