"""estimate, explain and models over a file with several servers name each one as lint and tune
do. A Helm chart with four values files (one render each) printed four anonymous estimate
reports, and `models` four rows all at templates/deployment.yaml:86, with nothing to say which
values file each came from."""

from __future__ import annotations

import os
from pathlib import Path

import k8stools
import pytest

from servefit.cli import main

COMPOSE = """services:
  small:
    image: vllm/vllm-openai:v0.9.2
    command: --model Qwen/Qwen2.5-0.5B-Instruct --max-model-len 4096
  big:
    image: vllm/vllm-openai:v0.9.2
    command: --model Qwen/Qwen2.5-7B-Instruct --max-model-len 8192
"""


def _out(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return out.splitlines()


@pytest.mark.parametrize("command", ["estimate", "explain"])
def test_each_report_starts_with_its_server(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(COMPOSE)
    lines = _out(capsys, command, str(f), "--gpu", "L4")
    starts = [i for i, line in enumerate(lines) if line.startswith("vllm 0.9.2  ·  ")]
    assert [lines[i - 1] for i in starts] == [f"compose/small ({f}:4)", f"compose/big ({f}:7)"]
    assert lines[0] == f"compose/small ({f}:4)"
    assert [lines[i] for i in starts] == ["vllm 0.9.2  ·  Qwen/Qwen2.5-0.5B-Instruct", "vllm 0.9.2  ·  Qwen/Qwen2.5-7B-Instruct"]


def test_one_server_keeps_the_plain_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(COMPOSE.split("  big:")[0])
    assert _out(capsys, "estimate", str(f), "--gpu", "L4")[0] == "vllm 0.9.2  ·  Qwen/Qwen2.5-0.5B-Instruct"


def test_models_rows_at_different_places_keep_the_short_form(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(COMPOSE)
    rows = [r for r in _out(capsys, "models", str(f)) if not r.startswith(" ")]
    assert [r.split("  ")[0] for r in rows] == [f"{f}:4", f"{f}:7"]


TEMPLATE = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.9.2
        args: ["--model", {{ .Values.model | quote }}, "--max-model-len", "4096"]
        resources:
          limits:
            nvidia.com/gpu: 1
"""


@pytest.fixture
def chart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where, why = k8stools.tools_dir()
    if where is None:
        pytest.skip(f"no helm 3 here: {why}")
    monkeypatch.setenv("PATH", f"{where}{os.pathsep}{os.environ.get('PATH', '')}")
    d = tmp_path / "llm"
    (d / "templates").mkdir(parents=True)
    (d / "Chart.yaml").write_text("apiVersion: v2\nname: llm\nversion: 0.1.0\n")
    (d / "templates" / "deployment.yaml").write_text(TEMPLATE)
    (d / "values.yaml").write_text("model: Qwen/Qwen2.5-0.5B-Instruct\n")
    (d / "values-a.yaml").write_text("model: Qwen/Qwen2.5-1.5B-Instruct\n")
    (d / "values-b.yaml").write_text("model: Qwen/Qwen2.5-7B-Instruct\n")
    return d


def test_models_tells_apart_the_renders_of_one_template(chart: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [r for r in _out(capsys, "models", str(chart)) if not r.startswith(" ")]
    at = f"{chart}/templates/deployment.yaml:11"
    assert [r.split("  ")[:3] for r in rows] == [
        [f"{at} (Deployment/llm/vllm (values-a.yaml))", "vllm", "Qwen/Qwen2.5-1.5B-Instruct"],
        [f"{at} (Deployment/llm/vllm (values-b.yaml))", "vllm", "Qwen/Qwen2.5-7B-Instruct"]]
    heads = [r for r in _out(capsys, "estimate", str(chart), "--gpu", "L4") if r.startswith("Deployment/")]
    assert heads == [f"Deployment/llm/vllm (values-a.yaml) ({at})", f"Deployment/llm/vllm (values-b.yaml) ({at})"]


UNPLANNABLE = """services:
  first:
    image: vllm/vllm-openai:v0.9.2
    command: --model ${FIRST_MODEL}
  second:
    image: vllm/vllm-openai:v0.9.2
    command: --model ${SECOND_MODEL}
"""


@pytest.mark.parametrize("command", ["estimate", "explain"])
def test_when_no_server_can_be_planned_each_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     command: str) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(UNPLANNABLE)
    assert main([command, str(f), "--gpu", "L4"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"servefit: {f}:7 (compose/second) not estimated: the model is a variable (${{SECOND_MODEL}}): its value is "
        "not known here (pass --model REF)",
        f"servefit: error: {f}:4: the model is a variable (${{FIRST_MODEL}}): its value is not known here (pass "
        "--model REF)"]


def test_when_every_server_has_bad_input_each_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(COMPOSE.replace("--max-model-len 4096", "--max-model-len four").replace(
        "--max-model-len 8192", "--max-model-len eight"))
    assert main(["estimate", str(f), "--gpu", "L4"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert err[0].startswith(f"servefit: {f}:7 (compose/big) not estimated: {f}:7:") and "'eight'" in err[0]
    assert err[1].startswith(f"servefit: error: {f}:4:") and "'four'" in err[1]


def test_one_reason_for_every_server_is_said_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(COMPOSE)
    assert main(["estimate", str(f)]) == 2  # no GPU named anywhere: the same reason for both servers
    assert capsys.readouterr().err == (f"servefit: error: {f}:4: no target GPU: pass --gpu NAME (servefit gpus lists "
                                       "them) or set a default in [tool.servefit]\n")


def test_servers_sharing_the_first_reason_are_named_beside_another(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(UNPLANNABLE.replace("SECOND_MODEL", "FIRST_MODEL") + """  third:
    image: vllm/vllm-openai:v0.9.2
    command: --model ${THIRD_MODEL}
""")
    assert main(["estimate", str(f), "--gpu", "L4"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [e.split(" not estimated:")[0] for e in err[:2]] == [f"servefit: {f}:7 (compose/second)",
                                                                f"servefit: {f}:10 (compose/third)"]
    assert err[2].startswith(f"servefit: error: {f}:4: the model is a variable (${{FIRST_MODEL}})") and len(err) == 3
