"""Problems found by running every command on real deployment files from public repositories
(each test carries a tiny synthetic file with the shape that broke, never the fetched file)."""

from __future__ import annotations

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
