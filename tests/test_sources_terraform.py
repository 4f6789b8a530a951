"""Terraform is not read; a .tf file that starts an engine says its server was not checked,
once, at the first string that starts it."""

from __future__ import annotations

from servefit.sources import scan_file

TF = '''resource "kubernetes_deployment_v1" "llm" {
  spec {
    template {
      spec {
        container {
          name  = "server"
          image = "${var.registry}/serving/vllm-openai:v0.11.0"
          args  = ["--model", var.model_id, "--max-model-len", tostring(var.max_len)]
        }
      }
    }
  }
}
'''


def test_a_vllm_container_in_terraform_is_reported_unchecked() -> None:
    r = scan_file("infra/main.tf", TF)
    assert r.kind == "terraform" and r.sites == []
    [f] = r.findings
    assert (f.code, f.severity) == ("SF108", "info")
    assert f.message == (
        "servefit does not read Terraform, and this file starts vLLM here: its settings were not checked. "
        "Lint the manifests it applies (`kubectl get deploy NAME -o yaml > deploy.yaml`) or the launch command "
        "(`servefit estimate -- vllm serve ...`)")
    assert (f.span.line, f.span.col) == (7, 20)
    assert TF[f.span.start:f.span.end] == "${var.registry}/serving/vllm-openai:v0.11.0"


def test_a_python_module_split_over_list_items_names_the_engine() -> None:
    tf = 'locals {\n  cmd = ["python3", "-m", "sglang.launch_server", "--tp", "2"]\n}\n'
    [f] = scan_file("sgl.tf", tf).findings
    assert "starts SGLang here" in f.message
    assert f.message.endswith("(`servefit estimate -- sglang serve ...`)")
    assert tf[f.span.start:f.span.end] == "sglang.launch_server"


def test_terraform_without_an_engine_says_nothing() -> None:
    tf = 'resource "google_container_node_pool" "gpu" {\n  node_config { machine_type = "g2-standard-8" }\n}\n'
    assert scan_file("pool.tf", tf).findings == []
    assert scan_file("notes.tf", '# we used to run vllm here\nvariable "x" {}\n').findings == []
