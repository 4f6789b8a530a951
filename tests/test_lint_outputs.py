"""Outputs scripts and code scanning rely on: JSON, SARIF 2.1.0 (validated against the official
schema), GitHub annotations; configuration, suppressions and baselines."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from servefit import baseline, config, suppressions
from servefit.core import Fix, Span, UsageError
from servefit.report.formats import to_github, to_json, to_sarif
from servefit.rules.catalog import finding, rules

SARIF_SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())


def sample():
    s1 = Span("k8s/vllm.yaml", 21, 13, 21, 19, 400, 406)
    s2 = Span("scripts/serve.sh", 4, 30, 4, 34, 90, 94)
    return [
        finding("VLLM003", "max-model-len 131,072 needs 16.00 GiB", span=s1, setting="max_model_len",
                site="Deployment/llm/vllm", fix=Fix("set --max-model-len 30672")),
        finding("VLLM017", "gpu_memory_utilization 0.97 with HF_TOKEN=hf_abcdefghijklmnopqrstuvwx", span=s2,
                setting="gpu_memory_utilization", site="script:4"),
        finding("SF001", "unresolved variable ${CTX}"),
    ]


def test_sarif_validates_against_the_official_schema():
    doc = json.loads(to_sarif(sample()))
    jsonschema.validate(doc, SARIF_SCHEMA)
    run = doc["runs"][0]
    assert [r["ruleId"] for r in run["results"]] == ["VLLM003", "VLLM017", "SF001"]
    assert [r["level"] for r in run["results"]] == ["error", "warning", "note"]
    region = run["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 21, "startColumn": 13, "endLine": 21, "endColumn": 19}
    assert "hf_abc" not in json.dumps(doc)


def test_json_and_github_formats():
    objs = json.loads(to_json(sample()))
    assert objs[0]["code"] == "VLLM003" and objs[0]["name"] == "max-model-len-exceeds-kv-cache"
    assert objs[0]["location"] == {"file": "k8s/vllm.yaml", "line": 21, "column": 13}
    assert objs[0]["end_location"] == {"file": "k8s/vllm.yaml", "line": 21, "column": 19}
    assert objs[0]["fix"]["message"] == "set --max-model-len 30672"
    assert objs[2]["location"] is None
    gh = to_github(sample()).splitlines()
    assert gh[0] == ("::error file=k8s/vllm.yaml,line=21,col=13,endLine=21,endColumn=19,"
                     "title=VLLM003 max-model-len-exceeds-kv-cache::max-model-len 131%2C072 needs 16.00 GiB"
                     .replace("131%2C072", "131,072"))
    assert gh[1].startswith("::warning file=scripts/serve.sh") and "hf_abc" not in gh[1]
    assert gh[2].startswith("::notice title=SF001")


def test_every_rule_has_complete_docs():
    for code, r in rules().items():
        assert r["severity"] in ("error", "warning", "info"), code
        assert r["name"] == r["name"].lower() and " " not in r["name"], code
        assert r.get("summary"), code


def test_config_found_upwards_with_targets_and_overrides(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[tool.servefit]\ngpu = "L4"\nignore = ["VLLM019"]\nfail-on = "warning"\n'
        '[tool.servefit.severity]\nVLLM017 = "error"\n'
        '[tool.servefit.per-file-ignores]\n"k8s/dev/**" = ["VLLM0"]\n'
        '[[tool.servefit.targets]]\npaths = ["k8s/prod/**"]\ngpu = "H100"\ncount = 2\n')
    (tmp_path / "k8s" / "prod").mkdir(parents=True)
    cfg = config.load(str(tmp_path / "k8s" / "prod"))
    assert cfg.gpu == "L4" and cfg.fail_on == "warning"
    t = cfg.target_for(str(tmp_path / "k8s" / "prod" / "vllm.yaml"))
    assert t is not None and t.gpu == "H100" and t.count == 2
    assert cfg.target_for(str(tmp_path / "k8s" / "staging.yaml")) is None
    assert not cfg.enabled("VLLM019") and cfg.enabled("VLLM003")
    assert not cfg.enabled("VLLM003", str(tmp_path / "k8s" / "dev" / "a.yaml"))
    assert cfg.severity_of("VLLM017", "warning") == "error"
    assert cfg.fails("warning") and not cfg.fails("info")
    over = config.load(str(tmp_path), overrides=["fail-on=error", 'select=["VLLM"]', "gpus=4"])
    assert over.fail_on == "error" and over.select == ["VLLM"] and over.gpus == 4


@pytest.mark.parametrize("body, message", [
    ('fail-on = "sometimes"', "tool.servefit.fail-on: 'sometimes' is not one of"),
    ("gpus = 0", "tool.servefit.gpus: must be at least 1"),
    ('[[tool.servefit.targets]]\ngpu = "H100"', "tool.servefit.targets[0]: missing required key 'paths'"),
    ("fail_on = 'error'", "tool.servefit.fail_on: unknown key (did you mean 'fail-on'?)"),
    ('[tool.servefit.engine-versions]\nvllmm = "0.11"', "tool.servefit.engine-versions.vllmm"),
])
def test_bad_config_names_the_key_path(tmp_path, body, message):
    (tmp_path / "servefit.toml").write_text("[tool.servefit]\n" + body + "\n")
    with pytest.raises(UsageError) as exc:
        config.load(str(tmp_path))
    assert message in str(exc.value)


@pytest.mark.parametrize("data", [
    {"gpu": "L4", "targets": [{"paths": ["a/**"], "count": 2}]},
    {"gpus": 0}, {"fail-on": "x"}, {"targets": [{"gpu": "x"}]}, {"select": "VLLM"}, {"unknown": 1},
    {"online": "yes"}, {"severity": {"VLLM003": "fatal"}},
])
def test_config_validator_agrees_with_jsonschema(data):
    ours = config.validate(data)
    theirs = list(jsonschema.Draft202012Validator(config.schema()).iter_errors(data))
    assert bool(ours) == bool(theirs)


def test_suppression_with_reason_silences_exactly_its_finding():
    text = ("args:\n"
            "  - --gpu-memory-utilization\n"
            "  - \"0.97\"  # servefit: ignore[VLLM017] dedicated node, measured\n"
            "  # servefit: ignore[VLLM019] batch jobs only\n"
            "  - --max-model-len=32768\n"
            "  - --foo  # servefit: ignore[VLLM001]\n")
    sups = suppressions.scan_text("a.yaml", text)
    assert [(s.line, s.codes, s.applies_to) for s in sups] == [
        (3, ["VLLM017"], {3}), (4, ["VLLM019"], {5}), (6, ["VLLM001"], {6})]
    f17 = finding("VLLM017", "x", span=Span("a.yaml", 3, 5, 3, 11))
    f17_other = finding("VLLM017", "x", span=Span("a.yaml", 5, 5, 5, 11))
    f19 = finding("VLLM019", "y", span=Span("a.yaml", 5, 5, 5, 30))
    f01 = finding("VLLM001", "z", span=Span("a.yaml", 6, 5, 6, 10))
    kept, meta = suppressions.apply([f17, f17_other, f19, f01], sups)
    assert kept == [f17_other, f01]  # the reason-less one is not applied
    assert [m.code for m in meta] == ["SF011"]
    kept, meta = suppressions.apply([f17_other], suppressions.scan_text("a.yaml", text), require_reason=False)
    assert [(m.code, m.span.line) for m in meta] == [("SF010", 3), ("SF010", 4), ("SF010", 6)]


def test_file_ignore_and_k8s_annotation():
    sups = suppressions.scan_text("s.sh", "#!/bin/sh\n# servefit: file-ignore[SF001] env comes from CI\nvllm serve $M\n")
    f = finding("SF001", "unresolved $M", span=Span("s.sh", 3, 12, 3, 14))
    assert suppressions.apply([f], sups) == ([], [])
    ann = suppressions.from_annotations("k.yaml", "Deployment/llm/vllm",
                                        {"servefit.io/ignore-VLLM019": "batch only", "app": "x"}, 4)
    g = finding("VLLM019", "low", span=Span("k.yaml", 30, 1, 30, 2), site="Deployment/llm/vllm")
    h = finding("VLLM019", "low", span=Span("k.yaml", 80, 1, 80, 2), site="Deployment/other/vllm")
    assert suppressions.apply([g, h], ann) == ([h], [])


def test_baseline_survives_edits_above_and_reports_new(tmp_path):
    rel = lambda p: p  # noqa: E731
    today = [finding("VLLM003", "a", span=Span("k.yaml", 20, 1, 20, 2), site="Deployment/a/vllm", setting="max_model_len"),
             finding("VLLM017", "b", span=Span("k.yaml", 22, 1, 22, 2), site="Deployment/a/vllm",
                     setting="gpu_memory_utilization")]
    path = tmp_path / "baseline.json"
    assert baseline.write(str(path), today, rel) == 2
    # lines moved by an unrelated edit above; one new finding
    moved = [finding("VLLM003", "a", span=Span("k.yaml", 27, 1, 27, 2), site="Deployment/a/vllm", setting="max_model_len"),
             finding("VLLM017", "b", span=Span("k.yaml", 29, 1, 29, 2), site="Deployment/a/vllm",
                     setting="gpu_memory_utilization"),
             finding("VLLM003", "c", span=Span("k.yaml", 60, 1, 60, 2), site="Deployment/b/vllm", setting="max_model_len")]
    new = baseline.filter_new(moved, baseline.read(str(path)), rel)
    assert [(f.code, f.site) for f in new] == [("VLLM003", "Deployment/b/vllm")]
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(UsageError):
        baseline.read(str(tmp_path / "bad.json"))


# --- SARIF as code scanning reads it -----------------------------------------------------------

def _lint_sarif(path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> dict:
    from servefit.cli import main

    monkeypatch.chdir(path)
    main(["lint", ".", "--format", "sarif", "--gpu", "L4"])
    return json.loads(capsys.readouterr().out)


def test_sarif_rule_index_points_at_its_rule_on_every_example(monkeypatch, capsys):
    doc = _lint_sarif(Path(__file__).resolve().parents[1] / "examples", monkeypatch, capsys)
    jsonschema.validate(doc, SARIF_SCHEMA)
    run = doc["runs"][0]
    rules_ = run["tool"]["driver"]["rules"]
    assert len(run["results"]) > 10
    for res in run["results"]:
        assert rules_[res["ruleIndex"]]["id"] == res["ruleId"]
    fps = [res["partialFingerprints"]["servefit/v2"] for res in run["results"]]
    assert len(fps) == len(set(fps))  # unique, although three files hold the same server names
    for r in rules_:
        assert r["helpUri"] == f"https://servefit.dev/rules/#{r['id'].lower()}"
        assert r["help"]["markdown"].startswith(f"**{r['name']}** ({r['id']})")
        assert ("security-severity" in r["properties"]) == r["id"].startswith("SEC")
    sec = {r["id"]: r["properties"] for r in rules_ if r["id"].startswith("SEC")}
    assert sec["SEC002"]["security-severity"] == "7.5" and "security" in sec["SEC002"]["tags"]
    for res in run["results"]:
        loc = res["locations"][0]["physicalLocation"]["artifactLocation"]
        assert loc["uriBaseId"] == "%SRCROOT%" and not loc["uri"].startswith(("/", "file:"))
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"].endswith("/examples/")


SCRIPT = ("# servefit: gpu=L4\n"
          "vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization 0.99 --host 0.0.0.0\n")


def test_sarif_fingerprints_survive_a_moved_line_and_name_the_file(tmp_path, monkeypatch, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "serve.sh").write_text(SCRIPT)
    (tmp_path / "b" / "serve.sh").write_text(SCRIPT)
    before = _lint_sarif(tmp_path, monkeypatch, capsys)["runs"][0]["results"]
    (tmp_path / "a" / "serve.sh").write_text("#!/bin/sh\nset -e\n\n" + SCRIPT)
    after = _lint_sarif(tmp_path, monkeypatch, capsys)["runs"][0]["results"]

    def by_key(results):
        return {(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], r["ruleId"]):
                (r["partialFingerprints"]["servefit/v2"], r["locations"][0]["physicalLocation"]["region"]["startLine"])
                for r in results}

    b, a = by_key(before), by_key(after)
    assert set(b) == set(a) and any(k[0] == "a/serve.sh" for k in b)
    for key in b:
        assert b[key][0] == a[key][0], key  # same fingerprint
        if key[0] == "a/serve.sh":
            assert a[key][1] == b[key][1] + 3  # the line really moved
    same_rule = [k for k in b if k[0] == "a/serve.sh" and ("b/serve.sh", k[1]) in b]
    assert same_rule and all(b[k][0] != b[("b/serve.sh", k[1])][0] for k in same_rule)


def test_sarif_files_outside_the_root_are_absolute_uris_and_fixes_are_replacements(tmp_path):
    from servefit.core import Edit

    inside = Span(str(tmp_path / "k8s" / "x.yaml"), 3, 5, 3, 10, 20, 25)
    outside = Span("/elsewhere/y.sh", 1, 1, 1, 2, 0, 1)
    fix = Fix("set --max-model-len 30672", (Edit(inside, "30672"),), "safe")
    doc = json.loads(to_sarif([finding("VLLM003", "m", span=inside, fix=fix, site="s"),
                               finding("VLLM017", "n", span=outside, site="t")], root=str(tmp_path)))
    jsonschema.validate(doc, SARIF_SCHEMA)
    r0, r1 = doc["runs"][0]["results"]
    assert r0["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "k8s/x.yaml", "uriBaseId": "%SRCROOT%"}
    assert r1["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "file:///elsewhere/y.sh"}
    assert r0["fixes"] == [{"description": {"text": "set --max-model-len 30672"},
                            "artifactChanges": [{"artifactLocation": {"uri": "k8s/x.yaml", "uriBaseId": "%SRCROOT%"},
                                                 "replacements": [{"deletedRegion": {"startLine": 3, "startColumn": 5,
                                                                                     "endLine": 3, "endColumn": 10},
                                                                   "insertedContent": {"text": "30672"}}]}]}]


def test_rule_catalogue_validates_against_its_schema():
    schema = json.loads((Path(__file__).resolve().parents[1] / "src" / "servefit" / "schemas"
                         / "rules.schema.json").read_text())
    entries = [e for path in sorted((Path(__file__).resolve().parents[1] / "src" / "servefit" / "data" / "rules")
                                    .glob("*.yaml")) for e in __import__("yaml").safe_load(path.read_text())]
    errors = [f"{e.get('code')}: {err.message}" for e in entries
              for err in jsonschema.Draft202012Validator(schema).iter_errors([e])]
    assert errors == [] and len(entries) == len(rules())
