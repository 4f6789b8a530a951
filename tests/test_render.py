"""Helm charts rendered with a real helm 3 (tests/k8stools.py fetches one when it is not on
PATH; these tests skip, saying why, where none can be had): findings land on the values line
that set the value, else on the template with a note; without helm, one finding per chart."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import k8stools
import pytest

from servefit.cli import main

CHART = Path(__file__).parent / "fixtures" / "charts" / "llm"


@pytest.fixture(scope="module")
def tools() -> Path:
    where, why = k8stools.tools_dir()
    if where is None:
        pytest.skip(f"no helm 3 here: {why}")
    return where


@pytest.fixture
def helm(tools, monkeypatch) -> Path:
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ.get('PATH', '')}")
    return tools


@pytest.fixture
def no_helm(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))


@pytest.fixture
def chart(tmp_path) -> Path:
    dst = tmp_path / "deploy" / "llm"
    shutil.copytree(CHART, dst)
    return dst


def lint(capsys, *args: str) -> tuple[int, list[dict]]:
    rc = main(["lint", *args, "--format", "json"])
    return rc, json.loads(capsys.readouterr().out)


def where(f: dict) -> tuple[str, int, int]:
    loc = f["location"]
    return Path(loc["file"]).name, loc["line"], loc["column"]


def text_at(f: dict) -> str:
    loc, end = f["location"], f["end_location"]
    lines = Path(loc["file"]).read_text(encoding="utf-8").splitlines()
    assert loc["line"] == end["line"]
    return lines[loc["line"] - 1][loc["column"] - 1:end["column"] - 1]


def test_a_rendered_chart_reports_on_the_values_line(helm, capsys, chart):
    """values-prod.yaml sets maxModelLen: 131072; the template quotes it into the vLLM args."""
    rc, found = lint(capsys, str(chart))
    errors = [f for f in found if f["severity"] == "error"]
    assert rc == 1 and [f["code"] for f in errors] == ["VLLM003"]
    assert where(errors[0]) == ("values-prod.yaml", 2, 14) and text_at(errors[0]) == "131072"
    assert errors[0]["server"] == "Deployment/llm-llm/vllm (values-prod.yaml)"
    assert not [f for f in found if f["code"] == "SF104"]


def test_a_chart_linted_from_its_own_folder(helm, capsys, chart, monkeypatch):
    """`cd chart && servefit lint .`: the templates are rendered, not also "not read" (SF104 on
    each), and findings name the files as the folder's own (`values-prod.yaml`, not `./...`)."""
    monkeypatch.chdir(chart)
    rc, found = lint(capsys, ".")
    assert [(f["code"], f["location"]["file"], f["location"]["line"]) for f in found if f["severity"] == "error"] == [
        ("VLLM003", "values-prod.yaml", 2)]
    assert not [f for f in found if f["code"] == "SF104" or f["location"]["file"].startswith("./")]


def test_every_setting_maps_to_the_line_a_user_edits(helm, capsys, chart):
    from servefit.sources import iter_files, render

    [site] = render.charts(list(iter_files([str(chart)]))).sites
    spans = {t.text: (Path(t.span.file).name, t.span.line, t.span.col) for t in site.argv if t.span is not None}
    assert spans == {
        "--model": ("deployment.yaml", 23, 15),  # literal in the template
        "meta-llama/Llama-3.1-8B-Instruct": ("values.yaml", 5, 8),  # {{ .Values.model | quote }}
        "--host": ("deployment.yaml", 25, 15), "127.0.0.1": ("deployment.yaml", 26, 15),
        "--max-model-len": ("deployment.yaml", 27, 15),
        "131072": ("values-prod.yaml", 2, 14),  # the later values file wins, as in helm
        "--gpu-memory-utilization": ("deployment.yaml", 29, 15),
        "0.9": ("values.yaml", 7, 23),
        "--enable-prefix-caching": ("values-prod.yaml", 4, 5),  # a toYaml block: found by its unique text
    }
    assert (Path(site.file).name, site.line) == ("deployment.yaml", 23)
    assert site.gpu.name == "NVIDIA-L4" and site.gpu.count == 1 and site.engine_version == "0.11.0"
    assert (Path(site.gpu.span.file).name, site.gpu.span.line) == ("values.yaml", 12)  # nodeSelector via toYaml
    assert site.workload.rendered == "helm template llm with values-prod.yaml"


def test_values_flag_as_helm_takes_it(helm, capsys, chart, tmp_path):
    short = tmp_path / "short.yaml"
    short.write_text("maxModelLen: 8192\n", encoding="utf-8")
    rc, found = lint(capsys, str(chart), "--values", str(short))
    assert rc == 0 and not [f for f in found if f["severity"] == "error"]
    # later files win: prod after short sets 131072 again, and the finding is on prod's line
    rc, found = lint(capsys, str(chart), "--values", f"{short},{chart / 'values-prod.yaml'}")
    [err] = [f for f in found if f["severity"] == "error"]
    assert rc == 1 and where(err) == ("values-prod.yaml", 2, 14)
    rc, found = lint(capsys, str(chart), "--values", str(chart / "values-prod.yaml"), "--values", str(short))
    assert rc == 0
    assert main(["lint", str(chart), "--values", str(tmp_path / "nope.yaml")]) == 2


def test_without_paired_values_the_chart_defaults_render(helm, capsys, chart):
    (chart / "values-prod.yaml").unlink()
    rc, found = lint(capsys, str(chart), "--list-sites")
    rc2 = main(["lint", str(chart), "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert rc2 == 0 and site["settings"]["max_model_len"] == 16384 and site["name"] == "Deployment/llm-llm/vllm"


def test_a_computed_value_points_at_the_template_with_a_note(helm, capsys, chart):
    tpl = chart / "templates" / "deployment.yaml"
    tpl.write_text(tpl.read_text(encoding="utf-8").replace(
        "{{ .Values.maxModelLen | quote }}", "{{ mul .Values.contextK 1024 | quote }}"), encoding="utf-8")
    (chart / "values-prod.yaml").write_text("contextK: 128\n", encoding="utf-8")
    rc, found = lint(capsys, str(chart))
    [err] = [f for f in found if f["severity"] == "error"]
    assert rc == 1 and where(err) == ("deployment.yaml", 28, 15)
    assert text_at(err) == "{{ mul .Values.contextK 1024 | quote }}"
    assert err["message"].endswith("(set by `{{ mul .Values.contextK 1024 | quote }}` in this template; "
                                   "not traced to one values line)")


def test_a_chart_whose_dependencies_are_not_vendored_renders_without_them(helm, capsys, chart):
    """helm template refuses a chart whose dependencies are not in charts/; servefit renders a copy
    without them (it never downloads them) and says so once."""
    with open(chart / "Chart.yaml", "a", encoding="utf-8") as fh:
        fh.write("dependencies:\n  - name: redis\n    version: 1.0.0\n    repository: https://charts.example.com\n"
                 "    condition: redis.enabled\n")
    rc, found = lint(capsys, str(chart))
    [note] = [f for f in found if f["code"] == "SF104"]
    assert where(note) == ("Chart.yaml", 1, 1) and note["message"].startswith(
        "rendered without the dependencies redis: they are not in charts/")
    [err] = [f for f in found if f["severity"] == "error"]
    assert rc == 1 and where(err) == ("values-prod.yaml", 2, 14)  # the spans still point at the user's files


def _use_dependency(chart: Path, name: str, template: str) -> None:
    """The chart takes `name` from the folder beside it and its pod labels include `template`."""
    with open(chart / "Chart.yaml", "a", encoding="utf-8") as fh:
        fh.write(f"dependencies:\n  - name: {name}\n    version: 0.1.0\n    repository: file://../{name}\n")
    tpl = chart / "templates" / "deployment.yaml"
    labels = "  template:\n    metadata:\n      labels:\n"
    tpl.write_text(tpl.read_text(encoding="utf-8").replace(
        labels, labels + f'        {{{{- include "{template}" . | nindent 8 }}}}\n', 1))


def test_a_dependency_in_a_folder_of_the_repository_is_used(helm, capsys, chart):
    """`repository: file://../common` names a chart in the same repository: servefit copies it into
    the rendered copy's charts/, as `helm dependency build` would, so templates that include its
    helpers render (without it helm fails on the missing template)."""
    lib = chart.parent / "common"
    (lib / "templates").mkdir(parents=True)
    (lib / "Chart.yaml").write_text("apiVersion: v2\nname: common\nversion: 0.1.0\ntype: library\n")
    (lib / "templates" / "_labels.tpl").write_text('{{- define "common.team" -}}\nteam: serving\n{{- end -}}\n')
    _use_dependency(chart, "common", "common.team")
    rc, found = lint(capsys, str(chart))
    assert [f["code"] for f in found if f["code"] == "SF104"] == []
    [err] = [f for f in found if f["severity"] == "error"]
    assert rc == 1 and where(err) == ("values-prod.yaml", 2, 14)
    rc, found = lint(capsys, str(chart.parent))  # the library chart linted with it renders nothing alone: no finding
    assert [f["message"][:40] for f in found if f["code"] == "SF104"] == []
    shutil.rmtree(lib)  # the folder gone: said, and rendered without it (which fails on the include)
    rc, found = lint(capsys, str(chart))
    assert [f["message"].split(":")[0] for f in found if f["code"] == "SF104"][0] == "rendered without the dependencies common"


def test_a_repository_dependency_brings_its_own_repository_dependencies(helm, capsys, chart):
    """An umbrella chart's subchart that uses a library chart beside it: both are vendored."""
    for name, dep in (("mid", "file://../common"), ("common", None)):
        lib = chart.parent / name
        (lib / "templates").mkdir(parents=True)
        deps = f"dependencies:\n  - name: common\n    version: 0.1.0\n    repository: {dep}\n" if dep else ""
        (lib / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: 0.1.0\ntype: library\n{deps}")
    (chart.parent / "common" / "templates" / "_t.tpl").write_text('{{- define "common.team" -}}\nteam: serving\n{{- end -}}\n')
    (chart.parent / "mid" / "templates" / "_t.tpl").write_text('{{- define "mid.labels" -}}\n{{ include "common.team" . }}\n{{- end -}}\n')
    _use_dependency(chart, "mid", "mid.labels")
    rc, found = lint(capsys, str(chart))
    assert [f["code"] for f in found if f["code"] == "SF104"] == []
    assert rc == 1 and [where(f) for f in found if f["severity"] == "error"] == [("values-prod.yaml", 2, 14)]


def test_a_chart_that_does_not_render_says_why(helm, capsys, chart):
    tpl = chart / "templates" / "deployment.yaml"
    tpl.write_text(tpl.read_text(encoding="utf-8") + "{{ required \"set apiToken\" .Values.apiToken }}\n")
    rc, found = lint(capsys, str(chart))
    [note] = [f for f in found if f["code"] == "SF104"]
    assert rc == 0 and where(note) == ("Chart.yaml", 1, 1)
    assert note["message"].startswith("helm could not render this chart with values-prod.yaml: ")
    assert "set apiToken" in note["message"] and note["message"].endswith("; its templates were not read")


def test_without_helm_one_finding_per_chart(no_helm, capsys, chart):
    rc, found = lint(capsys, str(chart.parent))
    assert rc == 0 and [f["code"] for f in found] == ["SF104"]
    assert where(found[0]) == ("Chart.yaml", 1, 1)
    assert found[0]["message"].startswith("helm is not on PATH: the templates of chart 'llm' were not rendered")


def test_no_render_is_the_same_as_no_helm(helm, capsys, chart):
    rc, found = lint(capsys, str(chart), "--no-render")
    assert rc == 0 and [f["code"] for f in found] == ["SF104"]
    assert found[0]["message"].startswith("rendering is off (--no-render)")


def test_templates_outside_a_chart_are_still_reported_one_by_one(no_helm, capsys, tmp_path):
    t = tmp_path / "x" / "templates" / "vllm.yaml"
    t.parent.mkdir(parents=True)
    t.write_text("kind: Deployment\nspec:\n  image: vllm/vllm-openai\n  args: [{{ .Values.model | quote }}]\n")
    rc, found = lint(capsys, str(tmp_path))
    assert [(f["code"], where(f)) for f in found] == [("SF104", ("vllm.yaml", 4, 10))]


# ---------------------------------------------------------------------------- kustomize

KUSTOMIZE = Path(__file__).parent / "fixtures" / "kustomize"


@pytest.fixture
def kustomize_tree(tmp_path) -> Path:
    dst = tmp_path / "k"
    shutil.copytree(KUSTOMIZE, dst)
    return dst


def test_an_overlay_is_built_and_its_patch_line_reported(helm, capsys, kustomize_tree, monkeypatch):
    """`kubectl kustomize` (from the same npm package) builds overlays/prod: the JSON patch sets
    args[5] to 131072, and the error is on the patch's value line, not the base's 16384."""
    monkeypatch.chdir(kustomize_tree)
    rc, found = lint(capsys, ".")
    errors = [f for f in found if f["severity"] == "error"]
    assert rc == 1 and [f["code"] for f in errors] == ["VLLM003"]
    assert where(errors[0]) == ("long-context.yaml", 3, 11) and text_at(errors[0]) == "131072"
    assert errors[0]["server"] == "Deployment/prod-vllm/vllm (overlays/prod)"
    # the base is not linted a second time on its own: it is a resource of the overlay
    assert {f["server"] for f in found if f.get("server")} == {"Deployment/prod-vllm/vllm (overlays/prod)"}


def test_a_setting_from_the_base_points_at_the_base(helm, kustomize_tree):
    from servefit.sources import iter_files, render

    out = render.Rendered()
    render.kustomizations(list(iter_files([str(kustomize_tree)])), out)
    [site] = out.sites
    spans = {t.text: (Path(t.span.file).name, t.span.line) for t in site.argv if t.span is not None}
    assert spans["--max-model-len"] == ("deployment.yaml", 13) and spans["131072"] == ("long-context.yaml", 3)
    assert (Path(site.gpu.span.file).name, site.gpu.span.line) == ("deployment.yaml", 9)
    assert site.workload.rendered == f"kustomize build {kustomize_tree / 'overlays' / 'prod'}"


def test_without_kustomize_the_overlay_is_named_once(no_helm, capsys, kustomize_tree, monkeypatch):
    monkeypatch.chdir(kustomize_tree)
    rc, found = lint(capsys, ".")
    sf104 = [f for f in found if f["code"] == "SF104"]
    assert rc == 0 and len(sf104) == 1 and where(sf104[0]) == ("kustomization.yaml", 1, 1)
    assert sf104[0]["location"]["file"].endswith("overlays/prod/kustomization.yaml")
    assert "neither kustomize nor kubectl is on PATH" in sf104[0]["message"]


def test_a_remote_resource_is_not_built(helm, capsys, kustomize_tree, monkeypatch):
    k = kustomize_tree / "overlays" / "prod" / "kustomization.yaml"
    k.write_text(k.read_text().replace("  - ../../base\n", "  - ../../base\n  - github.com/acme/k8s//vllm?ref=v1\n"))
    monkeypatch.chdir(kustomize_tree)
    rc, found = lint(capsys, ".")
    [note] = [f for f in found if f["code"] == "SF104"]
    assert "remote resource" in note["message"] and rc == 0


def test_helper_actions_map_to_their_own_lines(helm, chart):
    """Two `- {{ include ... | quote }}` lines match any list item: each rendered line goes to the
    next such template line in order (control lines such as `{{- with }}` are not counted)."""
    from servefit.sources import iter_files, render

    (chart / "templates" / "_helpers.tpl").write_text(
        (chart / "templates" / "_helpers.tpl").read_text(encoding="utf-8")
        + '{{- define "llm.model" -}}{{ .Values.model }}{{- end -}}\n{{- define "llm.host" -}}127.0.0.1{{- end -}}\n',
        encoding="utf-8")
    tpl = chart / "templates" / "deployment.yaml"
    tpl.write_text(tpl.read_text(encoding="utf-8")
                   .replace("{{ .Values.model | quote }}", '{{ include "llm.model" . | quote }}')
                   .replace("            - 127.0.0.1\n", '            - {{ include "llm.host" . | quote }}\n'),
                   encoding="utf-8")
    out = render.charts(list(iter_files([str(chart)])))
    [site] = out.sites
    spans = {t.text: t.span for t in site.argv if t.span is not None}
    host = spans["127.0.0.1"]
    assert (Path(host.file).name, host.line, host.col) == ("deployment.yaml", 26, 15)
    assert out.notes[(host.file, host.start, host.end)].startswith('set by `{{ include "llm.host" . | quote }}`')
    model = spans["meta-llama/Llama-3.1-8B-Instruct"]  # through a helper, but one values line holds it
    assert (Path(model.file).name, model.line) == ("values.yaml", 5)


def test_the_assembly_knows_every_file_rendering_starts_from():
    # the assembly loads the renderer only when one of these is among the files
    from servefit.sources import assemble, render

    assert assemble.RENDER_ROOTS == {render.CHART_FILE, *render.KUSTOMIZATIONS}


def test_a_values_file_away_from_the_chart_is_pointed_at_the_chart_here(no_helm, tmp_path, capsys):
    # examples/x-values.yaml for charts/serve: not paired with it, so SF116 names the chart and --values
    chart = tmp_path / "charts" / "serve"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: serve\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("image:\n  repository: busybox\n")
    (chart / "templates" / "deployment.yaml").write_text("kind: Deployment\n")
    ex = tmp_path / "examples" / "x-values.yaml"
    ex.parent.mkdir()
    ex.write_text("model: Qwen/Qwen3-8B\nimage:\n  repository: vllm/vllm-openai\n  tag: v0.19.0\n")
    _, found = lint(capsys, str(tmp_path), "--fail-on", "never")
    [f] = [f for f in found if f["code"] == "SF116"]
    assert where(f) == ("x-values.yaml", 3, 15)
    assert f["message"] == (
        f"vllm/vllm-openai:v0.19.0 runs vLLM, but the command it runs comes from the templates of chart {chart}, and "
        "servefit renders a chart only with the values files in or beside its directory, so this server's settings "
        f"were not checked: run `servefit lint --values {ex}` with helm 3 on PATH")
