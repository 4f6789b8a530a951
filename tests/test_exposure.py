"""Exposure and supply-chain rules (SEC002-SEC006): they fire on the examples written for them
and on each way a server gets published, stay quiet when a key or loopback protects it, and can
be suppressed; the documented example of every SEC rule fires that rule."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.rules.catalog import rules

ROOT = Path(__file__).resolve().parents[1]
SEC = ROOT / "examples" / "security"


def lint(capsys, *args: str) -> tuple[int, list[dict]]:
    rc = main(["lint", "--format", "json", *args])
    out = capsys.readouterr().out
    return rc, json.loads(out)


def codes(found: list[dict], prefix: str = "SEC") -> list[tuple[str, int]]:
    return sorted((f["code"], f["location"]["line"]) for f in found if f["code"].startswith(prefix))


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text))
    return str(p)


def test_the_security_examples_fire_their_rules(capsys):
    rc, found = lint(capsys, str(SEC))
    assert rc == 1
    assert codes(found) == [("SEC002", 13), ("SEC002", 43), ("SEC005", 4), ("SEC006", 3)]
    by = {(Path(f["location"]["file"]).name, f["code"]): f for f in found}
    k8s = by[("k8s-vllm-public.yaml", "SEC002")]
    assert k8s["severity"] == "error" and "Service/qwen-chat of type LoadBalancer" in k8s["message"]
    assert "its default without --host" in k8s["message"]
    ollama = by[("compose-ollama-public.yaml", "SEC002")]
    assert "no authentication at all" in ollama["message"] and '"11434:11434"' in ollama["message"]
    assert by[("remote-code.sh", "SEC005")]["severity"] == "warning"
    assert "https://example.com" in by[("Modelfile", "SEC006")]["message"]


DEPLOY = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm}
spec:
  selector: {matchLabels: {app: llm}}
  template:
    metadata: {labels: {app: llm, tier: gpu}}
    spec:
      containers:
        - name: server
          image: IMAGE
          args: ARGS
          env: ENV
          resources: {limits: {nvidia.com/gpu: 1}}
"""


def deploy(args: str = '["Qwen/Qwen3-8B"]', env: str = "[]", image: str = "vllm/vllm-openai:v0.11.0",
           service: str = "") -> str:
    text = DEPLOY.replace("IMAGE", image).replace("ARGS", args).replace("ENV", env)
    return text + ("---\n" + textwrap.dedent(service) if service else "")


SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: llm}
spec:
  type: TYPE
  selector: SELECTOR
  ports: [{port: 80, targetPort: 8000}]
"""


@pytest.mark.parametrize("typ, selector, args, env, expected", [
    ("LoadBalancer", "{app: llm}", '["Qwen/Qwen3-8B"]', "[]", [("SEC002", 20)]),
    ("NodePort", "{app: llm, tier: gpu}", '["Qwen/Qwen3-8B", "--host", "0.0.0.0"]', "[]", [("SEC002", 20)]),
    ("ClusterIP", "{app: llm}", '["Qwen/Qwen3-8B"]', "[]", [("SEC004", 12)]),
    ("LoadBalancer", "{app: other}", '["Qwen/Qwen3-8B"]', "[]", [("SEC004", 12)]),
    ("LoadBalancer", "{app: llm}", '["Qwen/Qwen3-8B", "--port", "9000"]', "[]", [("SEC004", 12)]),  # not its port
    ("LoadBalancer", "{app: llm}", '["Qwen/Qwen3-8B", "--api-key", "$(VLLM_API_KEY)"]',
     "[{name: VLLM_API_KEY, valueFrom: {secretKeyRef: {name: k, key: k}}}]", []),
    ("LoadBalancer", "{app: llm}", '["Qwen/Qwen3-8B"]',
     "[{name: VLLM_API_KEY, valueFrom: {secretKeyRef: {name: k, key: k}}}]", []),
    ("LoadBalancer", "{app: llm}", '["Qwen/Qwen3-8B", "--host", "127.0.0.1"]', "[]", []),
])
def test_k8s_services_publish_the_pods_they_select(tmp_path, capsys, typ, selector, args, env, expected):
    svc = SERVICE.replace("TYPE", typ).replace("SELECTOR", selector)
    p = write(tmp_path, "llm.yaml", deploy(args, env, service=svc))
    _, found = lint(capsys, p, "--gpu", "H100")
    assert codes(found) == expected


def test_host_network_and_tgi_default(tmp_path, capsys):
    text = deploy().replace("    spec:\n      containers:", "    spec:\n      hostNetwork: true\n      containers:")
    _, found = lint(capsys, write(tmp_path, "hn.yaml", text), "--gpu", "H100")
    assert codes(found) == [("SEC002", 9)] and "hostNetwork" in found[0]["message"] + found[-1]["message"]
    tgi = deploy('["--model-id", "mistralai/Mistral-7B-Instruct-v0.3"]',
                 image="ghcr.io/huggingface/text-generation-inference:3.3.4")
    _, found = lint(capsys, write(tmp_path, "tgi.yaml", tgi), "--gpu", "H100")
    assert codes(found) == [("SEC004", 12)]
    keyed = tgi.replace("env: []", "env: [{name: API_KEY, valueFrom: {secretKeyRef: {name: k, key: k}}}]")
    _, found = lint(capsys, write(tmp_path, "tgi2.yaml", keyed), "--gpu", "H100")
    assert codes(found) == []


COMPOSE = """\
services:
  llm:
    image: IMAGE
    command: COMMAND
    PORTS
"""


@pytest.mark.parametrize("image, command, ports, expected", [
    ("vllm/vllm-openai:v0.11.0", '["Qwen/Qwen3-8B"]', 'ports: ["8000:8000"]', [("SEC002", 5)]),
    ("vllm/vllm-openai:v0.11.0", '["Qwen/Qwen3-8B"]', 'ports: ["0.0.0.0:8000:8000/tcp"]', [("SEC002", 5)]),
    ("vllm/vllm-openai:v0.11.0", '["Qwen/Qwen3-8B"]', 'ports: ["127.0.0.1:8000:8000"]', [("SEC004", 4)]),
    ("vllm/vllm-openai:v0.11.0", '["Qwen/Qwen3-8B"]', "ports: [{target: 8000, published: 8000, host_ip: 127.0.0.1}]",
     [("SEC004", 4)]),
    ("vllm/vllm-openai:v0.11.0", '["Qwen/Qwen3-8B"]', "ports: [{target: 8000, published: 80}]", [("SEC002", 5)]),
    ("vllm/vllm-openai:v0.11.0", '["Qwen/Qwen3-8B"]', "network_mode: host", [("SEC002", 5)]),
    ("vllm/vllm-openai:v0.11.0", '["Qwen/Qwen3-8B", "--api-key", "${KEY}"]', 'ports: ["8000:8000"]', []),
    ("vllm/vllm-openai:v0.11.0", '["Qwen/Qwen3-8B"]', 'ports: ["8000:8000"]\n    environment: [VLLM_API_KEY]', []),
    ("ollama/ollama:0.12.3", "serve", 'ports: ["11434:11434"]', [("SEC002", 5)]),
    ("ollama/ollama:0.12.3", "serve", 'ports: ["127.0.0.1:11434:11434"]', [("SEC004", 4)]),
    ("ghcr.io/ggml-org/llama.cpp:server-cuda-b6700", '["-m", "/m/q.gguf"]', 'ports: ["8080:8080"]', [("SEC002", 5)]),
    ("ghcr.io/ggml-org/llama.cpp:server-cuda-b6700", '["-m", "/m/q.gguf", "--api-key-file", "/run/k"]',
     'ports: ["8080:8080"]', []),
])
def test_compose_ports_on_all_interfaces_publish(tmp_path, capsys, image, command, ports, expected):
    text = COMPOSE.replace("IMAGE", image).replace("COMMAND", command).replace("PORTS", ports)
    _, found = lint(capsys, write(tmp_path, "compose.yaml", text), "--gpu", "H100")
    assert codes(found) == expected, found


@pytest.mark.parametrize("script, expected", [
    ("vllm serve Qwen/Qwen3-8B", [("SEC003", 2)]),
    ("vllm serve Qwen/Qwen3-8B --host 127.0.0.1", []),
    ("VLLM_API_KEY=$KEY vllm serve Qwen/Qwen3-8B", []),
    ("llama-server -m /m/q.gguf", []),  # 127.0.0.1 by default
    ("llama-server -m /m/q.gguf --host 0.0.0.0", [("SEC003", 2)]),
    ("LLAMA_API_KEY=abc llama-server -m /m/q.gguf --host 0.0.0.0", []),
    ("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --host 0.0.0.0", [("SEC003", 2)]),
    ("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --host 0.0.0.0 --api-key $K", []),
    ("OLLAMA_HOST=0.0.0.0:11434 ollama serve", [("SEC003", 2)]),
    ("OLLAMA_HOST=127.0.0.1 ollama serve", []),
    ("ollama serve", []),
    ("docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.11.0 --model Qwen/Qwen3-8B", [("SEC002", 2)]),
    ("docker run --gpus all -p 127.0.0.1:8000:8000 vllm/vllm-openai:v0.11.0 --model Qwen/Qwen3-8B", [("SEC004", 2)]),
    ("docker run --gpus all --network host vllm/vllm-openai:v0.11.0 --model Qwen/Qwen3-8B", [("SEC002", 2)]),
])
def test_servers_started_on_a_host(tmp_path, capsys, script, expected):
    _, found = lint(capsys, write(tmp_path, "serve.sh", "#!/bin/sh\n" + script + "\n"), "--gpu", "H100")
    assert codes(found) == expected, found


def test_systemd_ollama_and_skypilot_ports(tmp_path, capsys):
    unit = "[Service]\nEnvironment=OLLAMA_HOST=0.0.0.0\nExecStart=/usr/bin/ollama serve\n"
    _, found = lint(capsys, write(tmp_path, "ollama.service", unit), "--gpu", "H100")
    assert codes(found) == [("SEC003", 2)] and "no authentication at all" in found[0]["message"]
    sky = "resources:\n  accelerators: H100:1\n  ports: 8000\nrun: |\n  vllm serve Qwen/Qwen3-8B --port 8000\n"
    _, found = lint(capsys, write(tmp_path, "sky.yaml", sky))
    assert codes(found) == [("SEC002", 3)] and "opened to the internet" in found[0]["message"]


@pytest.mark.parametrize("model, extra, expected", [
    ("someone/Model-7B", "", [("SEC005", 2)]),
    ("Qwen/Qwen3-8B", "", []),
    ("deepseek-ai/DeepSeek-V3", "", []),
    ("/models/local-checkpoint", "", []),
    ("my-org/Model-7B", "", [("SEC005", 2)]),
    ("my-org/Model-7B", "--config=trusted-orgs=['My-Org']", []),
])
def test_trust_remote_code(tmp_path, capsys, model, extra, expected):
    p = write(tmp_path, "serve.sh", f"#!/bin/sh\nvllm serve {model} --trust-remote-code --host 127.0.0.1\n")
    args = [p, "--gpu", "H100"] + ([extra] if extra else [])
    _, found = lint(capsys, *args)
    assert codes(found) == expected


def test_suppression_with_a_reason(tmp_path, capsys):
    text = (SEC / "compose-ollama-public.yaml").read_text().replace(
        '      - "11434:11434"', '      - "11434:11434"  # servefit: ignore[SEC002] LAN-only workstation behind a VPN')
    rc, found = lint(capsys, write(tmp_path, "compose.yaml", text))
    assert codes(found) == [] and codes(found, "SF01") == [] and rc == 0
    text = (SEC / "k8s-vllm-public.yaml").read_text().replace(
        "  name: qwen-chat\n  labels", "  name: qwen-chat\n  annotations:\n"
        "    servefit.io/ignore-SEC002: \"an IAP proxy fronts this load balancer\"\n  labels")
    _, found = lint(capsys, write(tmp_path, "k8s.yaml", text))
    assert codes(found) == []


POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
CONTAINER = POD + "  containers:\n    - name: vllm\n      image: vllm/vllm-openai:v0.11.0\n      args: [Qwen/Qwen3-8B]\n"
DOC_FILES = {  # each SEC rule's documented example, in the file it comes from
    "SEC001": ("pod.yaml", lambda ex: CONTAINER + textwrap.indent(ex, " " * 6)),
    "SEC002": ("svc.yaml", lambda ex: deploy() + "---\n" + ex.replace("{app: vllm}", "{app: llm}")),
    "SEC003": ("serve.sh", lambda ex: ex),
    "SEC004": ("pod.yaml", lambda ex: POD + textwrap.indent(ex, "  ")),
    "SEC005": ("serve.sh", lambda ex: ex),
    "SEC006": ("Modelfile", lambda ex: ex),
}


@pytest.mark.parametrize("code", sorted(c for c in rules() if c.startswith("SEC")))
def test_documented_example_fires_its_rule(tmp_path, capsys, code):
    entry = rules()[code]
    assert all(entry.get(k) for k in ("what", "why", "example", "fix")), code
    ex = entry["example"]
    if isinstance(ex, dict):  # an executable example: its own file (tests/test_rule_examples.py runs it too)
        p = write(tmp_path, ex["file"], ex["text"])
    else:
        name, make = DOC_FILES[code]
        p = write(tmp_path, name, make(ex))
    _, found = lint(capsys, p, "--gpu", "H100")
    assert code in {f["code"] for f in found}, (Path(p).read_text(), found)
