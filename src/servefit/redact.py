"""Credentials never leave servefit: values of secret-looking variables and flags are masked in
every output format and diff.

A name is secret when one of its parts (split at `_`, `-`, `.` and camelCase humps) is TOKEN,
KEY, APIKEY, SECRET, PASSWORD, PASSWD, PASS, PWD, CREDENTIAL(S) or AUTHORIZATION; a name that
ends in _FILE / _PATH / _DIR names where a secret lives, not the secret. So `HF_TOKEN`,
`OPENAI_API_KEY`, `apiKey` and `db.password` are secret; `max_num_batched_tokens`,
`TOKENIZERS_PARALLELISM` and `LLAMA_ARG_API_KEY_FILE` are not.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable

MASK = "***"
SECRET_PARTS = frozenset({"TOKEN", "KEY", "APIKEY", "SECRET", "PASSWORD", "PASSWD", "PASS", "PWD", "CREDENTIAL",
                          "CREDENTIALS", "AUTHORIZATION", "HFTOKEN", "ACCESSKEY", "SECRETKEY", "AUTHTOKEN"})
GLUED = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY")  # HFTOKEN, CLIENTSECRET, MYAPIKEY
NOT_SECRET_SUFFIX = ("_FILE", "_PATH", "_DIR", "-FILE", "-PATH", "FILE", "PATH")
SECRET_FLAGS = ("--api-key", "--hf-token", "--token", "--api-keys", "--admin-api-key", "--ssl-keyfile-password",
                "--api_key", "--hf_token", "--api_keys", "--admin_api_key", "-hft", "--openai-api-key")
# literal tokens of well-known providers, wherever they appear (prefix shown, rest masked)
LITERAL = re.compile(r"\b(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|ghp_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
                     r"|xox[bpoa]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|glpat-[A-Za-z0-9_-]{20,}|nvapi-[A-Za-z0-9_-]{20,})\b")
PREFIXES = ("hf_", "sk-ant-", "sk-proj-", "sk-", "ghp_", "github_pat_", "xoxb-", "xoxp-", "xoxa-", "xoxo-", "AKIA",
            "glpat-", "nvapi-")
_VALUE = r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s,;\"'}\]]+)"
ASSIGN = re.compile(r"([\"']?)\b([A-Za-z_][A-Za-z0-9_.-]*)\1(\s*[=:]\s*)" + _VALUE)
FLAG = re.compile(r"(?<![\w-])(" + "|".join(re.escape(f) for f in sorted(SECRET_FLAGS, key=len, reverse=True))
                  + r")(=|\s+)" + _VALUE)
_HUMPS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def name_parts(name: str) -> list[str]:
    out: list[str] = []
    for chunk in re.split(r"[_.\-\s/]+", name):
        out.extend(p.upper() for p in _HUMPS.findall(chunk))
    return out


def is_secret_name(name: str) -> bool:
    """Whether a variable, flag or setting name carries a credential."""
    if not name:
        return False
    up = name.strip("-").upper()
    if up.endswith(NOT_SECRET_SUFFIX):
        return False
    parts = name_parts(name.strip("-"))
    return any(p in SECRET_PARTS or p.endswith(GLUED) for p in parts)


def is_secret_flag(flag: str) -> bool:
    return flag in SECRET_FLAGS or ("--" + flag[2:].replace("_", "-")) in SECRET_FLAGS


def masked(value: str) -> str:
    """What may be shown of a secret: a provider's public prefix (`hf_***`), else only the mask."""
    for p in PREFIXES:
        if value.startswith(p) and len(value) > len(p) + 4:
            return p + MASK
    return MASK


def _assign(m: re.Match[str]) -> str:
    q, name, sep, value = m.group(1), m.group(2), m.group(3), m.group(4)
    if not is_secret_name(name) or value.strip("\"'") in ("", MASK) or value.startswith("$"):
        return m.group(0)
    quote = value[0] if value[0] in "\"'" and len(value) > 1 else ""
    return f"{q}{name}{q}{sep}{quote}{MASK}{quote}"


def redact_text(text: str) -> str:
    """Mask secret assignments, secret flags' values and provider tokens in free text."""
    if not text:
        return text
    text = LITERAL.sub(lambda m: masked(m.group(0)), text)
    text = ASSIGN.sub(_assign, text)
    text = FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    return text


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret_name(k) and v else redact_text(v)) for k, v in env.items()}


def redact_argv(words: Iterable[str]) -> list[str]:
    """An argv with the values of secret flags (`--api-key X`, `--hf-token=X`) masked."""
    out: list[str] = []
    hide_next = False
    for w in words:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        flag, eq, _ = w.partition("=")
        if is_secret_flag(flag):
            if eq:
                out.append(f"{flag}={MASK}")
            else:
                out.append(w)
                hide_next = True
            continue
        out.append(redact_text(w))
    return out


def secret_values(pairs: Iterable[tuple[str, str]], argvs: Iterable[Iterable[str]] = ()) -> set[str]:
    """The values to hide: of secret-named (name, value) pairs and of the words after secret flags."""
    out: set[str] = set()
    for name, value in pairs:
        if is_secret_name(name) and len(value) >= 4 and not value.startswith("$"):
            out.add(value)
    for argv in argvs:
        words = list(argv)
        for i, w in enumerate(words):
            flag, eq, val = w.partition("=")
            if is_secret_flag(flag):
                v = val if eq else (words[i + 1] if i + 1 < len(words) else "")
                if len(v) >= 4 and not v.startswith("$"):
                    out.add(v)
    return out


def mask_values(text: str, values: Iterable[str]) -> str:
    """Mask known secret values wherever they appear: as written, JSON-escaped and HTML-escaped."""
    forms: set[str] = set()
    for v in values:
        if len(v) < 4:
            continue
        forms.update({v, json.dumps(v)[1:-1], html.escape(v), html.escape(v, quote=False)})
    for f in sorted(forms, key=len, reverse=True):
        if f and f in text:
            text = text.replace(f, MASK)
    return text
