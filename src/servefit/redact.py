"""Credentials never leave servefit: values of secret-looking variables and flags are masked in
every output format and diff."""

from __future__ import annotations

import re

MASK = "***"
SECRET_NAME = re.compile(r"(TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
SECRET_FLAGS = ("--api-key", "--hf-token", "--token", "--api-keys", "--admin-api-key", "--ssl-keyfile-password")
# literal tokens of well-known providers, wherever they appear
LITERAL = re.compile(r"\b(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|ghp_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
                     r"|xox[bpoa]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|glpat-[A-Za-z0-9_-]{20,})\b")
ASSIGN = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*(?:TOKEN|KEY|SECRET|PASSWORD|PASSWD)[A-Za-z0-9_]*)\s*([=:])\s*"
                    r"(\"[^\"]*\"|'[^']*'|[^\s,;\"']+)", re.I)
FLAG = re.compile(r"(" + "|".join(re.escape(f) for f in SECRET_FLAGS) + r")(=|\s+)(\"[^\"]*\"|'[^']*'|[^\s\"']+)")


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name)) and not name.upper().endswith(("_KEY_FILE", "_PATH", "_FILE"))


def redact_text(text: str) -> str:
    """Mask secret assignments, secret flags' values and provider tokens in free text."""
    text = LITERAL.sub(MASK, text)
    text = ASSIGN.sub(lambda m: f"{m.group(1)}{m.group(2)}{' ' if m.group(2) == ':' else ''}{MASK}", text)
    text = FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    return text


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret_name(k) and v else redact_text(v)) for k, v in env.items()}
