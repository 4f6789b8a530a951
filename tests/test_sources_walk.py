"""Walking a repository, choosing the wrapper, and staying safe on hostile input."""

from __future__ import annotations

import os
import time

from servefit.sources import file_kind, iter_files, scan_file
from servefit.sources.walk import ignored, parse_gitignore


def write(path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_walk_skips_vcs_tools_venvs_and_gitignored(tmp_path):
    for rel in ["k8s/a.yaml", "k8s/tmp/b.yaml", ".git/config.yaml", "node_modules/x/c.yaml", "venv/d.yaml",
                "env/pyvenv.cfg", "env/lib/e.yaml", "build/out.yaml", "scripts/serve.sh", "scripts/keep.log",
                "docs/f.yaml", "docs/g.yaml"]:
        write(tmp_path / rel, "x: 1\n")
    (tmp_path / ".gitignore").write_text("# generated\n*.log\n/build/\ntmp/\n")
    (tmp_path / "docs" / ".gitignore").write_text("*.yaml\n!g.yaml\n")
    got = sorted(os.path.relpath(p, tmp_path) for p in iter_files([str(tmp_path)]))
    assert got == [".gitignore", "docs/.gitignore", "docs/g.yaml", "k8s/a.yaml", "scripts/serve.sh"]
    # a path named explicitly is always read
    assert list(iter_files([str(tmp_path / "build" / "out.yaml")])) == [str(tmp_path / "build" / "out.yaml")]


def test_gitignore_patterns():
    rules = parse_gitignore("/root.yaml\nsecret-*\n**/gen/**\ndir/\n!keep.yaml\n*.yaml\n!keep.yaml\n", "")
    assert ignored(rules, "root.yaml", False)
    assert ignored(rules, "a/secret-x", False) and ignored(rules, "x/gen/y/z.txt", False)
    assert ignored(rules, "a/dir", True) and not ignored(rules, "a/dir", False)
    assert ignored(rules, "b/c.yaml", False) and not ignored(rules, "b/keep.yaml", False)


def test_file_kinds_by_name_and_shebang():
    assert file_kind("x/Dockerfile") == file_kind("x/Dockerfile.cuda") == file_kind("api.Dockerfile") == "dockerfile"
    assert file_kind("k8s/x.yml") == "yaml" and file_kind("run.sh") == "script"
    assert file_kind("etc/vllm.service") == "systemd" and file_kind("etc/vllm.service.d/10-gpu.conf") == "systemd"
    assert file_kind("ollama/Modelfile") == "modelfile" and file_kind("llama.modelfile") == "modelfile"
    assert file_kind("bin/serve", "#!/bin/bash\nvllm serve x\n") == "script"
    assert file_kind("README.md") is None and file_kind("bin/serve", "plain text") is None


def test_files_that_mention_no_engine_are_not_parsed(tmp_path):
    p = write(tmp_path / "web.yaml", "apiVersion: apps/v1\nkind: Deployment\nspec: [unclosed\n")
    r = scan_file(p)
    assert r.sites == [] and r.findings == []  # not even parsed: no YAML error for a file we do not read


def test_yaml_bomb_and_deep_nesting_are_bounded(tmp_path):
    bomb = "# vllm\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))
    t0 = time.perf_counter()
    r = scan_file(write(tmp_path / "bomb.yaml", bomb))
    assert time.perf_counter() - t0 < 1.0 and r.sites == []
    deep = "# vllm\na: " + "[" * 100000 + "]" * 100000 + "\n"
    r = scan_file(write(tmp_path / "deep.yaml", deep))
    assert [f.code for f in r.findings] == ["SF105"]


def test_binary_huge_and_malformed_files_are_findings(tmp_path):
    b = tmp_path / "bin.yaml"
    b.write_bytes(b"vllm\0\0\0")
    assert [f.code for f in scan_file(str(b)).findings] == ["SF108"]
    huge = write(tmp_path / "huge.yaml", "# vllm\n" + "x: 1\n" * 600000)
    assert [f.code for f in scan_file(huge).findings] == ["SF108"]
    bad = write(tmp_path / "bad.yaml", "image: vllm/vllm-openai\nargs: [\"--model\", x\nother: 1\n")
    [f] = scan_file(bad).findings
    assert f.code == "SF105" and f.span.line == 3


def test_templates_are_reported_not_parsed(tmp_path):
    p = write(tmp_path / "chart" / "templates" / "vllm.yaml",
              "kind: Deployment\nspec:\n  image: vllm/vllm-openai\n  args: [{{ .Values.model | quote }}]\n")
    [f] = scan_file(p).findings
    assert f.code == "SF104" and (f.span.line, f.span.col) == (4, 10)


def test_a_terraform_template_written_as_yaml_is_said_as_one(tmp_path):
    """ooiyeefei/rafay-templates' ollama-values.yaml: a values file with templatefile() directives (`%{ if x ~}`),
    not YAML until Terraform renders it: SF104 naming Terraform, not a YAML error. `${var}` alone is no template."""
    p = write(tmp_path / "ollama-values.yaml",
              "# values for the ollama chart\n\n%{ if ollama_on_gpu ~}\nnodeSelector:\n  accelerator: nvidia\n"
              "%{ endif ~}\nollama:\n  gpu:\n    enabled: ${ollama_on_gpu}\n")
    [f] = scan_file(p).findings
    assert (f.code, f.span.line, f.span.col) == ("SF104", 3, 1)
    assert f.message == ("template syntax (%{ }): this file is a Terraform template, not YAML until templatefile() "
                         "renders it, so it was not read; lint the file Terraform writes from it")
    plain = write(tmp_path / "compose.yaml", "services:\n  o:\n    image: ollama/ollama:${TAG}\n    x: '50%{y}'\n")
    assert [f.code for f in scan_file(plain).findings if f.code in ("SF104", "SF105")] == []
