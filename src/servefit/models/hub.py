"""Reading model facts from the Hugging Face Hub through huggingface_hub: the one network path,
shared by `servefit models lock` and `--online`.

For a repository: model_info (commit sha, file list, the Hub's safetensors parameter count),
config.json through hf_hub_download (so it lands in the HF cache), and the safetensors headers
through HfApi.get_safetensors_metadata (HTTP range requests: every tensor's dtype and shape,
never the weights). For a GGUF reference: the file llama.cpp would pick, and its header read
with HTTP range requests in growing chunks (never the whole file). HF_ENDPOINT, HF_TOKEN and
the HF cache variables are read when a request is made.

huggingface_hub is imported inside the functions that go to the network, never on the lint path.
"""

from __future__ import annotations

import os
import re
from typing import Any

from servefit.core import UsageError
from servefit.models.lock import DEFAULT_GGUF_QUANT

GGUF_FIRST_CHUNK = 1 << 20  # most GGUF headers (KV pairs, tokenizer, tensor table) fit in a few MiB
GGUF_MAX_HEADER = 256 << 20
_SHARD = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.I)
_GGUF_KEEP = ("general.architecture", "general.name", "general.file_type", "general.alignment",
              "general.quantization_version", "general.size_label", "general.basename")


class HubError(Exception):
    """A reference the Hub could not resolve; the message is the reason shown to the user."""


def _hub() -> tuple[Any, str | None, str | None, str]:
    """(HfApi, endpoint, token, cache dir) from the environment as it is now."""
    try:
        from huggingface_hub import HfApi
    except ImportError:
        raise UsageError("reading models from the Hub needs huggingface_hub: pip install 'servefit[hub]'") from None
    from huggingface_hub.utils import disable_progress_bars

    from servefit.models.resolve import hub_cache_dir

    disable_progress_bars()  # servefit prints one line per model; bars for kilobyte files are noise
    endpoint = (os.environ.get("HF_ENDPOINT") or "").rstrip("/") or None
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or None
    return HfApi(endpoint=endpoint, token=token), endpoint, token, hub_cache_dir()


def reason(exc: BaseException) -> str:
    """One line for why a reference could not be read from the Hub."""
    from huggingface_hub import errors as E

    if isinstance(exc, HubError):
        return str(exc)
    if isinstance(exc, E.GatedRepoError):
        return ("gated repository: accept its terms on the Hub and set HF_TOKEN to a token of that account"
                if not os.environ.get("HF_TOKEN") else "gated repository: HF_TOKEN has no access to it")
    if isinstance(exc, E.RepositoryNotFoundError):
        return "no such repository on the Hub (or it is private: set HF_TOKEN)"
    if isinstance(exc, E.RevisionNotFoundError):
        return "no such revision in the repository"
    if isinstance(exc, E.RemoteEntryNotFoundError):
        return "file not found in the repository"
    if isinstance(exc, E.HfHubHTTPError):
        code = getattr(getattr(exc, "response", None), "status_code", None)
        return f"the Hub answered HTTP {code}" if code else f"the Hub refused: {str(exc).splitlines()[0]}"
    if isinstance(exc, E.OfflineModeIsEnabled):
        return "HF_HUB_OFFLINE is set"
    first = str(exc).splitlines()[0] if str(exc) else ""
    if isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "ssl"):
        return f"cannot reach the Hub ({type(exc).__name__}: {first})"
    return f"the Hub's answer could not be read ({type(exc).__name__}: {first})"


def fetch(key: str, kind: str) -> dict[str, Any]:
    """The lock entry for `key` ("safetensors" repo id, or "gguf" key from lock.gguf_key).
    Raises HubError or a huggingface_hub error; `reason` turns either into one line."""
    return fetch_gguf(key) if kind == "gguf" else fetch_repo(key)


# ------------------------------------------------------------------------- config.json repos


def fetch_repo(repo: str, revision: str | None = None) -> dict[str, Any]:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import NotASafetensorsRepoError

    api, endpoint, token, cache = _hub()
    info = api.model_info(repo, revision=revision)
    files = sorted(s.rfilename for s in (info.siblings or []))
    if "config.json" not in files:
        ggufs = [f for f in files if f.lower().endswith(".gguf")]
        raise HubError("no config.json in the repository" +
                       (" (a GGUF repository: serve it with llama.cpp -hf or Ollama hf.co/)" if ggufs else ""))
    path = hf_hub_download(repo, "config.json", revision=info.sha, cache_dir=cache, endpoint=endpoint,
                           token=token)
    from servefit.models.checkpoint_files import load_json_bounded

    try:
        cfg = load_json_bounded(path)
    except (OSError, ValueError) as exc:
        raise HubError(f"config.json unreadable ({exc})") from None
    if not isinstance(cfg, dict):
        raise HubError("config.json is not a JSON object")
    entry: dict[str, Any] = {"kind": "safetensors", "repo": repo, "revision": info.sha, "config": cfg,
                             "quantization_config": cfg.get("quantization_config") or cfg.get("compression_config")}
    counts: dict[str, Any] | None = None
    if any(f.endswith(".safetensors") for f in files):
        try:
            meta = api.get_safetensors_metadata(repo, revision=info.sha)
            counts = _count_headers(meta, cfg, repo)
        except NotASafetensorsRepoError:
            counts = None
    if counts is None and getattr(info, "safetensors", None) is not None:
        st = info.safetensors  # the Hub's own count: per dtype, no tensor names
        counts = {"dtypes": {str(k): int(v) for k, v in dict(st.parameters).items()}, "total": int(st.total),
                  "source": "model info", "params": None if entry["quantization_config"] else int(st.total)}
    if counts is not None:
        entry["params"] = counts.pop("params")
        entry["parameters"] = counts
    else:
        entry["params"] = None
    return entry


def _count_headers(meta: Any, cfg: dict[str, Any], repo: str) -> dict[str, Any]:
    """Per-dtype element counts of every tensor, and the count an engine loads (MTP modules and
    a tied lm_head stored twice skipped, as for a local checkpoint; none for packed quantized
    weights, whose element counts are not parameter counts)."""
    from servefit.models.checkpoint_files import _skip_tensor
    from servefit.models.config_json import from_config

    spec = from_config(cfg, repo)
    dtypes: dict[str, int] = {}
    loaded = 0
    for fmeta in meta.files_metadata.values():
        for tname, t in fmeta.tensors.items():
            n = 1
            for d in t.shape:
                n *= int(d)
            dtypes[str(t.dtype)] = dtypes.get(str(t.dtype), 0) + n
            if not _skip_tensor(tname, spec):
                loaded += n
    quantized = bool(cfg.get("quantization_config") or cfg.get("compression_config"))
    return {"dtypes": dict(sorted(dtypes.items())), "total": sum(dtypes.values()), "source": "safetensors headers",
            "params": None if quantized or not loaded else loaded}


# ------------------------------------------------------------------------- GGUF


def split_gguf_key(key: str) -> tuple[str, str | None, str | None]:
    """(repo, quant tag, file) of a lock.gguf_key."""
    if ":" in key:
        repo, _, tag = key.partition(":")
        return repo, tag, None
    parts = key.split("/")
    return "/".join(parts[:2]), None, "/".join(parts[2:])


def pick_gguf(files: list[str], tag: str | None) -> str | None:
    """The GGUF file a `repo:TAG` reference loads: the one whose name carries the tag (the
    first shard of a split file), else, for the default tag, the first GGUF in the repo
    (llama.cpp common/arg.cpp: Q4_K_M, or the first file when there is none)."""
    ggufs = sorted(f for f in files if f.lower().endswith(".gguf") and "mmproj" not in f.lower())
    if not ggufs:
        return None
    want = (tag or DEFAULT_GGUF_QUANT).upper()
    pat = re.compile(rf"(?:^|[-_./]){re.escape(want)}(?:[-_.]|$)", re.I)
    hits = [f for f in ggufs if pat.search(_SHARD.sub(".gguf", f))]
    hits = [f for f in hits if not _SHARD.search(f) or _SHARD.search(f).group(1) == "00001"]  # type: ignore[union-attr]
    if hits:
        return min(hits, key=lambda f: (len(f), f))
    if want == DEFAULT_GGUF_QUANT and not tag:
        return ggufs[0]
    return None


def fetch_gguf(key: str) -> dict[str, Any]:
    api, endpoint, token, _ = _hub()
    repo, tag, file = split_gguf_key(key)
    info = api.model_info(repo)
    files = sorted(s.rfilename for s in (info.siblings or []))
    if file:
        if file not in files:
            raise HubError(f"no file {file!r} in the repository")
        chosen = file
    else:
        picked = pick_gguf(files, tag)
        if picked is None:
            have = sorted({m.group(0).strip("-_.") for f in files if f.lower().endswith(".gguf")
                           for m in [re.search(r"[-_.](I?Q\d\w*|F16|BF16|F32)(?=[-_.])", f, re.I)] if m})
            raise HubError(f"no GGUF file for {tag or DEFAULT_GGUF_QUANT} in the repository"
                           + (f" (it has {', '.join(have)})" if have else ""))
        chosen = picked
    shards = [chosen]
    m = _SHARD.search(chosen)
    if m:
        shards = [chosen[: m.start()] + f"-{i:05d}-of-{m.group(2)}.gguf" for i in range(1, int(m.group(2)) + 1)]
        missing = [s for s in shards if s not in files]
        if missing:
            raise HubError(f"split GGUF {chosen!r}: shard {missing[0]!r} is not in the repository")
    kv: dict[str, Any] = {}
    tensors: list[str] = []
    version = 3
    for i, shard in enumerate(shards):
        header = _read_gguf_header(repo, shard, info.sha, endpoint, token)
        if i == 0:
            kv, version = _keep_kv(header.kv), header.version
        tensors.extend(f"{t.name} {t.type} {'x'.join(str(d) for d in t.shape)}" for t in header.tensors)
    return {"kind": "gguf", "repo": repo, "revision": info.sha, "files": shards,
            "gguf": {"version": version, "kv": kv, "tensors": tensors}}


def _keep_kv(kv: dict[str, Any]) -> dict[str, Any]:
    """The header keys servefit reads: the architecture's own (`{arch}.*`), a few general ones,
    and the vocabulary's length (the tokenizer arrays themselves are left out)."""
    from servefit.models.gguf import ArrayLen

    arch = str(kv.get("general.architecture", ""))
    out: dict[str, Any] = {}
    for k, v in kv.items():
        if k in _GGUF_KEEP or (arch and k.startswith(arch + ".")) or k == "tokenizer.ggml.tokens":
            if isinstance(v, ArrayLen):
                v = {"array_len": v.n, "item_type": v.item_type}
            elif k == "tokenizer.ggml.tokens" and isinstance(v, list):
                v = {"array_len": len(v), "item_type": 8}
            out[k] = v
    return out


def _read_gguf_header(repo: str, filename: str, revision: str, endpoint: str | None, token: str | None) -> Any:
    """The header of a GGUF on the Hub, read with range requests of growing size until the
    tensor table is complete."""
    import tempfile

    from servefit.models.gguf import read_header

    have = b""
    want = GGUF_FIRST_CHUNK
    with tempfile.TemporaryDirectory(prefix="servefit-gguf-") as tmp:
        path = os.path.join(tmp, os.path.basename(filename))
        while True:
            asked = want - len(have)
            chunk = _range(repo, filename, revision, len(have), want - 1, endpoint, token)
            have += chunk
            with open(path, "wb") as fh:
                fh.write(have)
            try:
                head = read_header(path)
            except UsageError as exc:
                raise HubError(f"{filename}: {str(exc).split(': ', 1)[-1]}") from None
            if not head.truncated:
                return head
            if len(chunk) < asked or want >= GGUF_MAX_HEADER:  # the file ended, or the header is absurd
                raise HubError(f"{filename}: the GGUF header did not end within {len(have)} bytes")
            want *= 4


def _range(repo: str, filename: str, revision: str, start: int, end: int, endpoint: str | None,
           token: str | None) -> bytes:
    """Bytes start..end of a file on the Hub. The response is streamed and cut at the length
    asked for, so a server that ignores Range never makes this download the whole file."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    url = hf_hub_url(repo, filename, revision=revision, endpoint=endpoint)
    headers = {**build_hf_headers(token=token), "Range": f"bytes={start}-{end}"}
    need = end - start + 1
    out = bytearray()
    with get_session().stream("GET", url, headers=headers) as resp:
        if resp.status_code >= 400:
            resp.read()
            hf_raise_for_status(resp)
        skip = start if resp.status_code == 200 else 0  # Range ignored: the body starts at byte 0
        for block in resp.iter_bytes():
            if skip:
                cut = min(skip, len(block))
                block, skip = block[cut:], skip - cut
            out += block
            if len(out) >= need:
                break
    return bytes(out[:need])


# ------------------------------------------------------------------------- on-disk cache for --online


def cache_path(key: str, kind: str, hf_home: str | None = None) -> str:
    """Where `--online` keeps an entry it fetched: beside the repo's files in the HF cache
    (`models--ORG--NAME/servefit/…json`), so the next offline run finds it."""
    from servefit.models.resolve import hub_cache_dir

    if kind == "gguf":
        repo, tag, file = split_gguf_key(key)
        leaf = "gguf-" + (tag.upper() if tag else (file or "").replace("/", "--"))
    else:
        repo, leaf = key, "repo"
    return os.path.join(hub_cache_dir(hf_home), "models--" + repo.replace("/", "--"), "servefit", leaf + ".json")


def cached_entry(key: str, kind: str, hf_home: str | None = None) -> dict[str, Any] | None:
    if not key or key.startswith((".", "/", "~")) or "/" not in key:
        return None
    try:
        with open(cache_path(key, kind, hf_home), encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, ValueError):  # ValueError: not UTF-8
        return None
    import json  # only once an entry is there (an --online run stored it): not on a plain lint's path

    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and doc.get("kind") else None


def store_entry(key: str, kind: str, entry: dict[str, Any], hf_home: str | None = None) -> None:
    import json

    path = cache_path(key, kind, hf_home)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(entry, fh, sort_keys=True, indent=1)
    except OSError:
        pass  # a read-only cache only costs the next run a request
