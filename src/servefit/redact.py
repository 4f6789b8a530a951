"""Credentials never leave servefit: values of secret-looking variables and flags are masked in
every output format and diff.

A name is secret when one of its parts (split at `_`, `-`, `.` and camelCase humps) is TOKEN,
KEY(S), APIKEY, SECRET, PASSWORD, PASSWD, PASS, PWD, PAT, AUTH, CREDENTIAL(S) or AUTHORIZATION,
or TOKENS without a word that makes it a count (MAX, NUM, BATCH, INPUT...); a name that ends in
_FILE / _PATH / _DIR names where a secret lives, not the secret. So `HF_TOKEN`, `HF_TOKENS`,
`OPENAI_API_KEY`, `OPENAIKEY`, `GITHUB_PAT`, `apiKey` and `db.password` are secret;
`max_num_batched_tokens`, `MAX_INPUT_TOKENS`, `TOKENIZERS_PARALLELISM` and
`LLAMA_ARG_API_KEY_FILE` are not. The bare name `key` is a reference (a k8s `secretKeyRef`
names the key it reads), not a secret.

Values are masked by shape too: the password of a URL's userinfo (`https://user:***@host`), the
credential of an `Authorization:` header, provider tokens (hf_..., sk-...), the items of a
secret-named list (llama-swap `apiKeys:`), and the values of secret flags written in full or as
an abbreviation the engine's parser accepts (`--api-k`). References are never masked
(`${HF_TOKEN}`, `$(VLLM_API_KEY)`, `{{ .Values.token }}`), so a masked diff still applies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from servefit.core import LaunchSite

MASK = "***"
SECRET_PARTS = frozenset({"TOKEN", "KEY", "KEYS", "APIKEY", "APIKEYS", "SECRET", "SECRETS", "PASSWORD", "PASSWD",
                          "PASS", "PWD", "PAT", "AUTH", "CREDENTIAL", "CREDENTIALS", "AUTHORIZATION", "HFTOKEN",
                          "ACCESSKEY", "SECRETKEY", "AUTHTOKEN"})
GLUED = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "APIKEYS", "SSHKEY", "AIKEY", "PRIVATEKEY",
         "ACCESSKEY", "AUTHKEY")  # HFTOKEN, CLIENTSECRET, MYAPIKEY, SSHKEY, OPENAIKEY
# TOKENS is a count next to these words (MAX_INPUT_TOKENS, max_num_batched_tokens), a secret otherwise
COUNT_WORDS = frozenset({"MAX", "MIN", "NUM", "BATCH", "BATCHED", "INPUT", "TOTAL", "PREFILL", "NEW", "CONTEXT",
                         "CTX", "PREDICT", "CHUNK", "DRAFT", "SPECULATIVE", "OUTPUT", "PROMPT", "GENERATED",
                         "LIMIT", "PER", "SEQ", "WAITING", "COMPLETION", "CACHED", "SPECIAL", "STOP", "BAD",
                         "EXTRA", "ADDED", "IMAGE", "VISION", "AUDIO", "LOOKAHEAD", "REASONING", "THINKING"})
# with a number for its value, a name with these words measures tokens (bytes_per_token, full_token)
_MEASURE_WORDS = COUNT_WORDS | {"BYTES", "FULL", "SWA", "RATIO", "SIZE"}
REFERENCE_NAMES = frozenset({"KEY"})  # secretKeyRef / configMapKeyRef: `key: hf-token` names the key
# secretKeyRef, secretName, existingSecret, tokenSecretRefs: they name a k8s Secret, not its value
REFERENCE_LAST = frozenset({"REF", "REFS", "NAME", "NAMES"})
NOT_SECRET_SUFFIX = ("_FILE", "_PATH", "_DIR", "-FILE", "-PATH", "FILE", "PATH")
SECRET_FLAGS = ("--api-key", "--hf-token", "--token", "--api-keys", "--admin-api-key", "--ssl-keyfile-password",
                "--api_key", "--hf_token", "--api_keys", "--admin_api_key", "-hft", "--openai-api-key")
# literal tokens of well-known providers, wherever they appear (prefix shown, rest masked)
LITERAL = re.compile(r"\b(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|ghp_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
                     r"|xox[bpoa]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|glpat-[A-Za-z0-9_-]{20,}|nvapi-[A-Za-z0-9_-]{20,})\b")
PREFIXES = ("hf_", "sk-ant-", "sk-proj-", "sk-", "ghp_", "github_pat_", "xoxb-", "xoxp-", "xoxa-", "xoxo-", "AKIA",
            "glpat-", "nvapi-")
_VALUE = r"(\[[^\]\n]*\]|\"[^\"\n]*\"|'[^'\n]*'|[^\s,;\"'}\]]+)"
ASSIGN = re.compile(r"([\"']?)\b([A-Za-z_][A-Za-z0-9_.-]*)\1([ \t]*[=:][ \t]*)" + _VALUE)
FLAG = re.compile(r"(?<![\w-])(--[A-Za-z][A-Za-z0-9_-]*|-hft)(=|\s+(?!--[A-Za-z]))" + _VALUE)  # a flag is no value
URL_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)([^/\s:@'\"<>]+)(?::([^/\s@'\"<>]*))?@(?=[^\s/@])")
AUTH_HEADER = re.compile(r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(bearer|basic|token|digest|apikey)?"
                         r"(\s*)([^\s\"',;}\]]+)")
_SCHEMES = {"bearer", "basic", "token", "digest", "apikey"}
SECRET_LIST_KEY = re.compile(r"^(\s*)([\"']?)([A-Za-z_][A-Za-z0-9_.-]*)\2\s*:\s*(#.*)?$")
_BOOLEANS = frozenset({"true", "false", "yes", "no", "on", "off"})
_FILE_NAME = re.compile(r"\.(?:ya?ml|tpl|json|toml|txt|conf|sh|py|go)$", re.I)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_COUNT_BEFORE = re.compile(r"(?<![\w.-])\d[\d,]*[ \t]+$")
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
    if up.endswith(NOT_SECRET_SUFFIX) or up in REFERENCE_NAMES:
        return False
    parts = name_parts(name.strip("-"))
    if parts and (parts[-1] in REFERENCE_LAST or parts[0] == "EXISTING"):
        return False
    if parts and parts[-1] == "TOKEN" and {"MAX", "NUM", "BATCHED"}.intersection(parts[:-1]) \
            and "TOKEN" not in parts[:-1]:
        return False  # a count abbreviated the way argparse allows (--max-num-batched-token)
    if any(p in SECRET_PARTS or p.endswith(GLUED) for p in parts):
        return True
    return "TOKENS" in parts and not COUNT_WORDS.intersection(parts)


_FULL_FLAGS = tuple(sorted({"--" + f[2:].replace("_", "-") for f in SECRET_FLAGS if f.startswith("--")}))


def is_secret_flag(flag: str) -> bool:
    """A secret flag as written in full, with underscores, or abbreviated the way argparse
    accepts (`--api-k` for `--api-key`: at least three letters past the dashes and a prefix of
    exactly one secret flag's name... or of several that are all secret)."""
    if flag in SECRET_FLAGS:
        return True
    if not flag.startswith("--"):
        return False
    norm = "--" + flag[2:].replace("_", "-")
    if norm in _FULL_FLAGS:
        return True
    if len(norm) < 7 or norm.endswith("-"):  # --api-k and longer; `--api` or `--to` mean other flags too
        return False
    return any(f.startswith(norm) for f in _FULL_FLAGS)


def masked(value: str) -> str:
    """What may be shown of a secret: a provider's public prefix (`hf_***`), else only the mask."""
    for p in PREFIXES:
        if value.startswith(p) and len(value) > len(p) + 4:
            return p + MASK
    return MASK


def is_reference(value: str) -> bool:
    """`${X}`, `$(X)`, `$X`, `{{ .Values.x }}`: where a secret comes from, never the secret."""
    v = value.strip("\"'[] ")
    return v.startswith(("$", "{{")) or v in ("", MASK)


def _mask_item(item: str) -> str:
    s = item.strip()
    if is_reference(s):
        return item
    quote = s[0] if s[:1] in "\"'" and len(s) > 1 else ""
    return item.replace(s, f"{quote}{MASK}{quote}") if s else item


def _assign(m: re.Match[str]) -> str:
    q, name, sep, value = m.group(1), m.group(2), m.group(3), m.group(4)
    if not is_secret_name(name):
        if "=" in value or ":" in value:  # Environment=HF_TOKEN=x, environment: [HF_TOKEN=x]
            inner = ASSIGN.sub(_assign, value[1:]) if value[:1] in "[\"'" else ASSIGN.sub(_assign, value)
            return f"{q}{name}{q}{sep}{value[:1] + inner if value[:1] in '[' + chr(34) + chr(39) else inner}"
        return m.group(0)
    if value.strip("\"'").lower() in _BOOLEANS or (_FILE_NAME.search(name) and sep.strip() == ":" and value[:1].isdigit()):
        return m.group(0)  # `keyManager.enabled=true`, `templates/key-manager.yaml:13:15` (helm's error): no credential
    if name.lower().endswith("authorization") and value.strip("\"'").lower() in _SCHEMES:
        return m.group(0)  # the header pass masked the credential after the scheme
    if is_reference(value):
        return m.group(0)
    if name_parts(name) == ["TOKENS"] and _COUNT_BEFORE.search(m.string, 0, m.start()):
        return m.group(0)  # prose counting tokens ("holds 23141 tokens: room for 1.00 requests"), not a key
    if _NUMBER.fullmatch(value) and (name_parts(name)[-1:] == ["TOKENS"] or "." in value
                                     or _MEASURE_WORDS.intersection(name_parts(name))):
        # a count or a measure of tokens ("holds 420000 tokens: 1.60 requests", "tokens=512", SGLang's
        # "bytes_per_full_token=7086.75, full_token=1317632, swa_full_tokens_ratio=0.1"), not a credential
        return m.group(0)
    if value.startswith("["):  # 'api_key': ['NonDefaultKey-7171'] (vLLM's non-default args)
        return f"{q}{name}{q}{sep}[" + ",".join(_mask_item(i) for i in value[1:-1].split(",")) + "]"
    quote = value[0] if value[0] in "\"'" and len(value) > 1 else ""
    return f"{q}{name}{q}{sep}{quote}{MASK}{quote}"


def _flag(m: re.Match[str]) -> str:
    flag, sep, value = m.group(1), m.group(2), m.group(3)
    if not is_secret_flag(flag) or is_reference(value) or value.startswith("-"):
        return m.group(0)
    quote = value[0] if value[0] in "\"'" and len(value) > 1 else ""
    return f"{flag}{sep}{quote}{MASK}{quote}"


def _userinfo(m: re.Match[str]) -> str:
    scheme, user, password = m.group(1), m.group(2), m.group(3)
    if password is None:  # https://TOKEN@host: the user part is the credential
        return m.group(0) if is_reference(user) else f"{scheme}{MASK}@"
    if is_reference(password):
        return m.group(0)
    return f"{scheme}{user}:{MASK}@"


def _auth(m: re.Match[str]) -> str:
    head, scheme, space, cred = m.group(1), m.group(2) or "", m.group(3), m.group(4)
    if is_reference(cred) or cred.lower() in _SCHEMES:
        return m.group(0)
    return f"{head}{scheme}{space}{MASK}"


def _secret_lists(text: str) -> str:
    """Items of a YAML block list under a secret-named key (llama-swap `apiKeys:`)."""
    if "\n" not in text or ":" not in text:
        return text
    lines = text.split("\n")
    indent: int | None = None
    for i, line in enumerate(lines):
        if indent is not None:
            stripped = line.lstrip()
            if stripped.startswith("- ") and len(line) - len(stripped) >= indent:
                lines[i] = line[:len(line) - len(stripped) + 2] + _mask_item(stripped[2:])
                continue
            if stripped and not stripped.startswith("#"):
                indent = None
        m = SECRET_LIST_KEY.match(line)
        if m and is_secret_name(m.group(3)):
            indent = len(m.group(1))
    return "\n".join(lines)


def redact_text(text: str) -> str:
    """Mask secret assignments, secret flags' values, URL passwords, Authorization credentials,
    secret-named lists and provider tokens in free text; references stay as written."""
    if not text:
        return text
    text = LITERAL.sub(lambda m: masked(m.group(0)), text)
    text = URL_USERINFO.sub(_userinfo, text)
    text = AUTH_HEADER.sub(_auth, text)
    text = ASSIGN.sub(_assign, text)
    text = FLAG.sub(_flag, text)
    return _secret_lists(text)


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret_name(k) and v and not is_reference(v) else redact_text(v)) for k, v in env.items()}


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
    pairs = list(pairs)
    out: set[str] = set()
    for name, value in pairs:
        if is_secret_name(name) and len(value) >= 4 and not is_reference(value):
            out.add(value)
    for argv in argvs:
        words = list(argv)
        for i, w in enumerate(words):
            flag, eq, val = w.partition("=")
            if is_secret_flag(flag):
                v = val if eq else (words[i + 1] if i + 1 < len(words) else "")
                if len(v) >= 4 and not is_reference(v):
                    out.add(v)
    for _name, value in pairs:  # credentials inside URLs (DATABASE_URL, HTTPS_PROXY, --download-dir)
        for m in URL_USERINFO.finditer(value):
            secret = m.group(3) if m.group(3) is not None else m.group(2)
            if len(secret) >= 4 and not is_reference(secret):
                out.add(secret)
    return out


def site_secret_values(sites: Iterable[LaunchSite]) -> set[str]:
    """The secret values the servers were given (secret_values over their env and argv): what an
    output that may repeat the engine's words masks by value."""
    sites = list(sites)
    return secret_values([(k, tok.text) for s in sites for k, tok in s.env.items()],
                         [[tok.text for tok in s.argv] for s in sites])


def mask_values(text: str, values: Iterable[str]) -> str:
    """Mask known secret values wherever they appear: as written, JSON-escaped and HTML-escaped."""
    import json  # both only when there are values to mask: not on the lint path
    from html import escape

    forms: set[str] = set()
    for v in values:
        if len(v) < 4:
            continue
        forms.update({v, json.dumps(v)[1:-1], escape(v), escape(v, quote=False)})
    for f in sorted(forms, key=len, reverse=True):
        if f and f in text:
            text = text.replace(f, MASK)
    return text
