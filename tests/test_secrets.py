"""Credentials never leave servefit: secrets planted in every wrapper appear in no output of any
format (lint text/json/sarif/github/html, --list-sites table and json, estimate and explain in
every format, findings' messages), and a literal credential is itself a finding (SEC001) whose
message shows at most the provider's prefix; references are not findings.

The secrets are assembled at run time so that no token-shaped literal is committed here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.linter.secrets import check_file, is_literal, looks_fake
from servefit.redact import is_secret_name, mask_values, redact_argv, redact_env, redact_text

HF = "hf_" + "Qm7Zt2Lw9Xv4Np8Rk3Js6Hd1Fb5Gc0Ty"
HUB = "hf_" + "Hx3Nq7Vw1Zt5Lr9Bk2Mc6Js0Fd4Gp8Ay"
SK = "sk-" + "Vb83Kq1ZmT6wXr4Ln9Pd2Hs7Jc5Fg0Ya"
OPENAI = "sk-" + "Ox4Lq8Wn2Zr6Tb1Mv9Kc3Hs7Jd5Fp0Ge"
PASSWORD = "Tr0ub4dor" + "-3-horse-battery"
LLAMA_KEY = "lk" + "-7f3a9c2e81d64b05"
SECRETS = (HF, HUB, SK, OPENAI, PASSWORD, LLAMA_KEY)

K8S = f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
spec:
  template:
    metadata:
      labels: {{app: llm}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args: ["meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192", "--api-key", "{SK}"]
          env:
            - name: HF_TOKEN
              value: {HF}
            - name: DB_PASSWORD
              value: "{PASSWORD}"
            - name: HUGGING_FACE_HUB_TOKEN
              valueFrom:
                secretKeyRef: {{name: hf, key: token}}
            - name: VLLM_API_KEY
              value: "$(OTHER_KEY)"
          resources:
            limits:
              nvidia.com/gpu: 1
---
apiVersion: v1
kind: Secret
metadata:
  name: hub
stringData:
  token: {HUB}
"""
COMPOSE = f"""\
services:
  vllm:
    image: vllm/vllm-openai:v0.11.0
    command: ["Qwen/Qwen3-8B", "--hf-token", "{HUB}", "--max-model-len", "4096"]
    environment:
      OPENAI_API_KEY: {OPENAI}
      HF_TOKEN: ${{HF_TOKEN}}
    ports: ["127.0.0.1:8000:8000"]
"""
SCRIPT = f"""\
#!/usr/bin/env bash
export HF_TOKEN={HF}
KEY={LLAMA_KEY}
exec llama-server -m /models/qwen2.5-7b-instruct-q4_k_m.gguf -c 4096 --api-key "$KEY" --host 0.0.0.0
"""
DOCKERFILE = f"""\
FROM vllm/vllm-openai:v0.11.0
ENV HUGGING_FACE_HUB_TOKEN={HUB}
CMD ["vllm", "serve", "Qwen/Qwen3-8B", "--api-key={SK}"]
"""
UNIT = f"""\
[Unit]
Description=vLLM
[Service]
Environment=VLLM_API_KEY={LLAMA_KEY}
Environment=OPENAI_API_KEY={OPENAI}
ExecStart=/opt/venv/bin/vllm serve Qwen/Qwen3-8B --host 127.0.0.1
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {"k8s/vllm.yaml": K8S, "compose.yaml": COMPOSE, "scripts/serve.sh": SCRIPT, "Dockerfile": DOCKERFILE,
             "systemd/vllm.service": UNIT}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def run(capsys, *args: str) -> tuple[int, str]:
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out + out.err


def assert_clean(text: str, where: str) -> None:
    for s in SECRETS:
        assert s not in text, f"{where} leaks {s[:5]}..."
        assert s[6:] not in text, f"{where} leaks the tail of {s[:5]}..."


def test_no_secret_in_any_lint_format(repo, capsys, monkeypatch):
    monkeypatch.chdir(repo)
    for fmt in ("text", "json", "sarif", "github", "html"):
        rc, out = run(capsys, "lint", ".", "--gpu", "H100", "--format", fmt)
        assert rc in (0, 1), out
        assert_clean(out, f"lint --format {fmt}")
    rc, _ = run(capsys, "lint", ".", "--gpu", "H100", "--format", "json", "-o", "r.json", "--format", "html",
                "-o", "r.html", "--format", "sarif", "-o", "r.sarif")
    for name in ("r.json", "r.html", "r.sarif"):
        assert_clean((repo / name).read_text(), name)
    for fmt in ("text", "json"):
        rc, out = run(capsys, "lint", ".", "--list-sites", "--format", fmt)
        assert rc == 0 and "***" in out
        assert_clean(out, f"--list-sites {fmt}")
    rc, out = run(capsys, "lint", ".", "--list-sites", "--format", "json")
    sites = json.loads(out)
    k8s = next(s for s in sites if s["file"].endswith("vllm.yaml"))
    assert k8s["env"]["HF_TOKEN"] == "***" and k8s["settings"]["api_key"] == "***"
    assert k8s["settings"]["max_model_len"] == 8192  # other settings are shown as they are


def test_no_secret_in_estimate_or_explain(repo, capsys):
    cmd = ["--", "vllm", "serve", "Qwen/Qwen3-8B", "--api-key", SK, "--hf-token", HF, "--max-model-len", "4096"]
    for sub, fmts in (("estimate", ("text", "json")), ("explain", ("text", "json", "html"))):
        for fmt in fmts:
            rc, out = run(capsys, sub, "--gpu", "H100", "--format", fmt, *cmd)
            assert rc == 0, out
            assert_clean(out, f"{sub} --format {fmt}")
            rc, out = run(capsys, sub, "--gpu", "H100", "--format", fmt, str(repo / "k8s" / "vllm.yaml"))
            assert rc == 0, out
            assert_clean(out, f"{sub} --format {fmt} FILE")
    # a bad value next to a secret: the one-line error names neither
    rc, out = run(capsys, "estimate", "--gpu", "H100", "--", "vllm", "serve", "Qwen/Qwen3-8B", "--api-key", SK,
                  "--max-model-len", "lots")
    assert rc == 2 and "lots" in out
    assert_clean(out, "estimate error")
    for cmd in (["--api-key", SK, "vllm", "serve", "Qwen/Qwen3-8B"],  # echoed by "no engine recognised"
                ["vllm", "serve", "Qwen/Qwen3-8B", f"--hf-token={HF}", "--port", HF]):  # the value, elsewhere
        rc, out = run(capsys, "estimate", "--gpu", "H100", "--", *cmd)
        assert rc == 2 and "***" in out
        assert_clean(out, "estimate error")


def test_no_secret_in_tune_when_the_engine_refuses_the_command(capsys):
    """A stray credential the engine rejects as an unknown argument: tune's refusal quotes the engine's
    words, masked (the nightly fuzz run found it verbatim in the text and JSON reports)."""
    for fmt in ("text", "json"):
        rc, out = run(capsys, "tune", "--gpu", "H100", "--format", fmt, "--", "vllm", "serve", "Qwen/Qwen3-8B", SK)
        assert "unrecognized arguments" in out and "***" in out
        assert_clean(out, f"tune --format {fmt} refusal")


def test_a_secret_flag_value_repeated_as_a_stray_argument_is_masked_by_value(capsys):
    """`--api-key K K`: the engine reports the second K as an unknown argument; K has no provider's
    shape, so only its value (the word after a secret flag) tells it is a credential."""
    key = "Bearer-PlantedFlagValue-1234"
    cmd = ["--", "vllm", "serve", "Qwen/Qwen3-8B", "--api-key", key, key]
    for sub, fmts in (("explain", ("text", "json", "html")), ("tune", ("text", "json"))):
        for fmt in fmts:
            rc, out = run(capsys, sub, "--gpu", "H100", "--format", fmt, *cmd)
            assert "unrecognized arguments" in out and key not in out, (sub, fmt)


def test_literal_credentials_are_findings_and_references_are_not(repo, capsys, monkeypatch):
    monkeypatch.chdir(repo)
    rc, out = run(capsys, "lint", ".", "--gpu", "H100", "--format", "json", "--select", "SEC001")
    assert rc == 1
    found = {(f["location"]["file"], f["location"]["line"], f["location"]["column"]): f["message"]
             for f in json.loads(out)}
    text = {rel: (repo / rel).read_text() for rel in ("k8s/vllm.yaml", "compose.yaml", "scripts/serve.sh",
                                                        "Dockerfile", "systemd/vllm.service")}

    def where(rel: str, secret: str) -> tuple[str, int, int]:
        before = text[rel][:text[rel].index(secret)]
        return rel, before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1

    expected = {where("k8s/vllm.yaml", SK), where("k8s/vllm.yaml", HF), where("k8s/vllm.yaml", PASSWORD),
                where("k8s/vllm.yaml", HUB),  # the Secret manifest: a provider token, anywhere in a file
                where("compose.yaml", HUB), where("compose.yaml", OPENAI),
                where("scripts/serve.sh", HF), where("scripts/serve.sh", LLAMA_KEY),
                where("Dockerfile", HUB), where("Dockerfile", SK),
                where("systemd/vllm.service", LLAMA_KEY), where("systemd/vllm.service", OPENAI)}
    assert set(found) == expected, sorted(set(found) ^ expected)
    msgs = list(found.values())
    assert any("HF_TOKEN" in m and "(hf_***)" in m for m in msgs)
    assert any("DB_PASSWORD" in m and "(***)" in m for m in msgs)


def test_secret_names_flags_and_free_text():
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY", "VLLM_API_KEY", "DB_PASSWORD", "apiKey",
                 "hfToken", "AWS_SECRET_ACCESS_KEY", "client_secret"):
        assert is_secret_name(name), name
    for name in ("TOKENIZERS_PARALLELISM", "max_num_batched_tokens", "LLAMA_ARG_API_KEY_FILE", "ssl_keyfile",
                 "OLLAMA_KEEP_ALIVE", "skip_tokenizer_init", "MONKEY"):
        assert not is_secret_name(name), name
    assert redact_text(f"HF_TOKEN={HF} --api-key {SK} --hf_token={HUB}") == "HF_TOKEN=*** --api-key *** --hf_token=***"
    assert redact_text(f'{{"api_key": "{PASSWORD}", "max_num_batched_tokens": 2048}}') == \
        '{"api_key": "***", "max_num_batched_tokens": 2048}'
    assert redact_text(f"model pulled with {HF}") == "model pulled with hf_***"
    assert redact_text("HF_TOKEN=${HF_TOKEN}") == "HF_TOKEN=${HF_TOKEN}"
    assert redact_argv(["vllm", "serve", "--api-key", SK, f"--hf-token={HF}", "-hft", HUB]) == \
        ["vllm", "serve", "--api-key", "***", "--hf-token=***", "-hft", "***"]
    assert redact_env({"HF_TOKEN": HF, "TOKENIZERS_PARALLELISM": "false"}) == \
        {"HF_TOKEN": "***", "TOKENIZERS_PARALLELISM": "false"}
    assert mask_values(json.dumps({"x": f'a"{PASSWORD}"'}), {f'a"{PASSWORD}"'}) == '{"x": "***"}'


def test_placeholders_fakes_and_references_are_not_literal():
    for v in ("${HF_TOKEN}", "$(HF_TOKEN)", "<your-token>", "changeme", "EMPTY", "xxxxxxxx", "your_token_here",
              "/var/run/secrets/token", "{{ .Values.token }}", "true", "8000"):
        assert not is_literal(v), v
    assert is_literal(PASSWORD) and is_literal(HF)
    assert looks_fake("hf_abcdefghijklmnopqrstuvwxyz0123") and looks_fake("AKIAIOSFODNN7EXAMPLE")
    assert not looks_fake(HF) and not looks_fake(SK)
    assert check_file("x.yaml", "token: " + "hf_" + "abcdefghijklmnopqrstuvwxyz0123\n", []) == []


# --- one masker, by name and by shape; references stay so diffs apply --------------------------

def test_secret_names_by_part_and_glued():
    for name in ("SSHKEY", "OPENAIKEY", "HF_TOKENS", "API_KEYS", "GITHUB_PAT", "HF_AUTH", "CLIENT_CREDENTIALS"):
        assert is_secret_name(name), name
    for name in ("MAX_INPUT_TOKENS", "MAX_TOTAL_TOKENS", "max_num_batched_tokens", "DATABASE_URL", "key",
                 "secretKeyRef", "secretName", "existingSecret", "MONKEY", "MAX_BATCH_PREFILL_TOKENS"):
        assert not is_secret_name(name), name


@pytest.mark.parametrize("text,shown", [
    ("Environment=HF_TOKEN=hunter2abc", "Environment=HF_TOKEN=***"),
    ("environment: [HF_TOKEN=hunter2abc, OTHER=1]", "environment: [HF_TOKEN=***, OTHER=1]"),
    ('curl -H "Authorization: Bearer abcdefgh123"', 'curl -H "Authorization: Bearer ***"'),
    ("non-default args: {'model': 'm', 'api_key': ['NonDefaultKey-7171'], 'max_num_batched_tokens': 2048}",
     "non-default args: {'model': 'm', 'api_key': ['***'], 'max_num_batched_tokens': 2048}"),
    ("vllm serve m --api-k KEYVALUE1 --max-model-len 8192", "vllm serve m --api-k *** --max-model-len 8192"),
    ("FROM https://user:pass1234@example.com/m.gguf", "FROM https://user:***@example.com/m.gguf"),
    ("HTTPS_PROXY=http://bob:s3cretpw@proxy:3128", "HTTPS_PROXY=http://bob:***@proxy:3128"),
    ("--storage postgresql://user:pw123456@db/x", "--storage postgresql://user:***@db/x"),
    ("git clone https://ghtoken1234@github.com/o/r", "git clone https://***@github.com/o/r"),
    ("apiKeys:\n  - \"sk-abcd1234\"\n  - plainkey99\nmodels:\n  - a",
     "apiKeys:\n  - \"***\"\n  - ***\nmodels:\n  - a"),
    ("GITHUB_PAT=abcd1234 HF_AUTH=zzzz1234 MAX_INPUT_TOKENS=4096", "GITHUB_PAT=*** HF_AUTH=*** MAX_INPUT_TOKENS=4096"),
    # a number after "tokens" is a count (an SGL012 message was shown as "420000 tokens: *** requests");
    # a word there, or a number after the singular, stays masked
    ("the KV pool holds 420000 tokens: 1.60 requests", "the KV pool holds 420000 tokens: 1.60 requests"),
    ("TOKENS=abcdef token: 123456", "TOKENS=*** token: ***"),
    # after a count, "tokens:" is prose (TGI017 was shown as "holds 23141 tokens: *** for 1.00 requests")
    ("the KV cache holds 23141 tokens: room for 1.00 requests", "the KV cache holds 23141 tokens: room for 1.00 requests"),
    ("holds 1,024 tokens: room", "holds 1,024 tokens: room"),
    ("tokens: hunter2abc", "tokens: ***"),
    ("v2 tokens: hunter2abc", "v2 tokens: ***"),
    # SGLang's DeepSeek-V4 pool lines: a number after a measure of tokens is not a credential
    ("DSV4 memory calculation: bytes_per_full_token=7086.75, full_token=1317632, swa_full_tokens_ratio=0.1",
     "DSV4 memory calculation: bytes_per_full_token=7086.75, full_token=1317632, swa_full_tokens_ratio=0.1"),
    ("API_TOKEN=12345678901234567890 ACCESS_TOKEN=abc.def", "API_TOKEN=*** ACCESS_TOKEN=***"),
])
def test_masked_by_shape(text, shown):
    assert redact_text(text) == shown


@pytest.mark.parametrize("reference", [
    "--api-key $(VLLM_API_KEY)", "--api-key ${VLLM_API_KEY}", "secretKeyRef: {key: k, name: s}", "        key: hf-token",
    "HF_TOKEN: ${HF_TOKEN:-}", "token: {{ .Values.hfToken }}", "existingSecret: hf-secret",
    "DATABASE_URL=postgres://${DB_USER}:${DB_PASS}@db/x", "--tokenizer mistral --to x",
])
def test_references_are_never_masked(reference):
    assert redact_text(reference) == reference


def test_env_and_argv_masks_cover_urls_and_abbreviations():
    assert redact_env({"DATABASE_URL": "postgres://u:pw1234@h/db", "HF_TOKEN": "${HF_TOKEN}"}) == \
        {"DATABASE_URL": "postgres://u:***@h/db", "HF_TOKEN": "${HF_TOKEN}"}
    assert redact_argv(["vllm", "serve", "m", "--api-k", "KEYVALUE1"]) == ["vllm", "serve", "m", "--api-k", "***"]
    from servefit.redact import secret_values
    assert secret_values([("DATABASE_URL", "postgres://u:pw1234@h/db"), ("DB_PASSWORD", "hunter22")],
                         [["vllm", "serve", "--api-ke", "abcdef12"]]) == {"pw1234", "hunter22", "abcdef12"}


def test_tune_diff_masks_values_keeps_references_and_applies(tmp_path):
    import shutil
    import subprocess
    import sys

    src = Path(__file__).resolve().parents[1] / "examples" / "k8s" / "vllm-llama-8b.yaml"
    text = src.read_text().replace(
        '            - "64"\n',
        '            - "64"\n            - --api-key\n            - $(VLLM_API_KEY)\n').replace(
        "            - name: HF_TOKEN\n              valueFrom:\n                secretKeyRef: {name: hf-token, key: token}\n",
        "            - {name: HF_TOKEN, valueFrom: {secretKeyRef: {name: hf-token, key: token}}}\n"
        "            - {name: DB_PASSWORD, value: hunter2hunter2}\n")
    assert "{secretKeyRef: {name: hf-token, key: token}}" in text
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "vllm.yaml").write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    proc = subprocess.run([sys.executable, "-m", "servefit", "tune", "vllm.yaml", "--gpu", "L4", "--min-context",
                           "32k", "--diff"], cwd=repo, capture_output=True, text=True, timeout=120)
    diff = proc.stdout[proc.stdout.index("--- a/"):] if "--- a/" in proc.stdout else ""
    assert diff, proc.stdout + proc.stderr
    assert "hunter2" not in proc.stdout and "$(VLLM_API_KEY)" in diff
    assert "- {name: HF_TOKEN, valueFrom: {secretKeyRef: {name: hf-token, key: token}}}" in diff
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy)
    check = subprocess.run(["git", "apply", "--check", "-"], cwd=copy, input=diff, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr + diff


def test_a_boolean_and_a_file_location_are_no_credentials():
    """helm's complaint `(chart/templates/key-manager.yaml:13:15): keyManager.hostname is required when
    keyManager.enabled=true` came out as `key-manager.yaml:*** ... enabled=***` (KEY in both names):
    the line it names and the switch were masked, and the message said nothing."""
    msg = ("execution error at (llm/templates/key-manager-app.yaml:13:15): keyManager.app.hostname is required "
           "when keyManager.app.enabled=true")
    assert redact_text(msg) == msg
    assert redact_text(f"api_key: {PASSWORD} apiKey=yes key-file.yaml: {PASSWORD}") == \
        "api_key: *** apiKey=yes key-file.yaml: ***"
