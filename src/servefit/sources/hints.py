"""Hardware hints a file gives: GPU model labels (node selectors, affinities, instance types),
GPU counts (`nvidia.com/gpu` limits, compose device reservations, `--gpus`,
`CUDA_VISIBLE_DEVICES`), shared-memory sizes, and the in-file directive comments `# servefit: gpu=L4 count=2 model=ORG/NAME`
(kept apart from the repo's own hints: sources/target.py applies the precedence).

GPU names are kept as written (`nvidia-l4`, `NVIDIA-L4`, `g6.xlarge`); the hardware catalog
resolves every alias, so the sources never translate names themselves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from servefit.core import DirectiveValue, GpuHint, LaunchSite, Span, Token

# label key -> (priority, how a finding names the source); lower priority wins
GPU_LABELS: dict[str, tuple[int, str]] = {
    "nvidia.com/gpu.product": (0, "nvidia.com/gpu.product"),
    "cloud.google.com/gke-accelerator": (1, "cloud.google.com/gke-accelerator"),
    "run.googleapis.com/accelerator": (1, "run.googleapis.com/accelerator"),  # Cloud Run's service YAML
    "karpenter.k8s.aws/instance-gpu-name": (2, "karpenter.k8s.aws/instance-gpu-name"),
    "gpu.nvidia.com/class": (3, "gpu.nvidia.com/class"),
    "gpu.nvidia.com/model": (3, "gpu.nvidia.com/model"),
    "accelerator": (4, "accelerator"),
    "node.kubernetes.io/instance-type": (5, "node.kubernetes.io/instance-type"),
    "beta.kubernetes.io/instance-type": (5, "beta.kubernetes.io/instance-type"),
    "karpenter.k8s.aws/instance-type": (5, "karpenter.k8s.aws/instance-type"),
    "eks.amazonaws.com/instance-type": (5, "eks.amazonaws.com/instance-type"),
}
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915", "habana.ai/gaudi")
SHM_MIN = 1 << 30  # below this NCCL's shared-memory transport runs out with TP > 1


@dataclass
class NameHint:
    """A GPU name a file gives (a node-selector label, an instance type), where it is written, and its
    priority (where several labels name a GPU, the lowest wins)."""

    name: str
    source: str
    span: Span | None
    priority: int = 9


def best_label(cands: list[NameHint]) -> NameHint | None:
    if not cands:
        return None
    return min(cands, key=lambda h: h.priority)


# words of a label value that says a node has a GPU, not which: `accelerator: nvidia-gpu`, `accelerator: "true"`
_NO_MODEL = re.compile(r"(?i)(?:nvidia|amd|intel|gpus?|cuda|true|yes|enabled|present)(?:[-_ ](?:nvidia|amd|intel|gpus?|cuda))*")


def label_hint(key: str, value: Token, where: str, alternatives: int = 1) -> NameHint | None:
    """A GPU name from one node-selector / affinity label; a value that names no model (`nvidia-gpu`)
    is none (the GPU stays unknown, SF110), not an unknown GPU."""
    entry = GPU_LABELS.get(key)
    if entry is None or not value.text or "$" in value.text or "{{" in value.text or _NO_MODEL.fullmatch(value.text):
        return None
    src = f"{where} {entry[1]}"
    if alternatives > 1:
        src += f" (first of {alternatives} allowed values)"
    return NameHint(value.text, src, value.span, entry[0])


def merge(name: NameHint | None, count: int | None, count_source: str | None,
          count_span: Span | None = None) -> GpuHint | None:
    if name is None and count is None:
        return None
    parts = []
    if name is not None:
        parts.append(name.source)
    if count is not None and count_source:
        parts.append(f"count from {count_source}")
    return GpuHint(name.name if name else None, count, "; ".join(parts) or "file",
                   name.span if name is not None else count_span)


def to_int(text: str | None) -> int | None:
    if text is None:
        return None
    t = text.strip().strip("\"'")
    try:
        return int(t)
    except ValueError:
        try:
            f = float(t)
        except ValueError:
            return None
        return int(f) if f.is_integer() else None


def count_visible_devices(value: str) -> int | None:
    """CUDA_VISIBLE_DEVICES=0,1 -> 2; empty / "all" / unknown -> None."""
    v = value.strip()
    if not v or v.lower() in ("all", "none", "void") or "$" in v:
        return None
    return len([p for p in v.split(",") if p.strip()])


_GPU_ID = re.compile(r"^(\d+|GPU-[0-9A-Fa-f-]+|MIG-[0-9A-Za-z/-]+)$")


def unread_visible_device(value: str) -> tuple[list[str], int] | None:
    """CUDA_VISIBLE_DEVICES's entries and the index of the first one CUDA reads as no GPU (no
    index, GPU- UUID or MIG- instance), where it stops reading: `all` -> (["all"], 0), so every GPU
    is hidden. None when every entry is read, and for the values that hide the GPUs on purpose
    (empty, a negative index) or a variable's text. CUDA Programming Guide, environment
    variables: "If an invalid index is encountered, only devices with indices that appear before
    the invalid index in the list are visible"."""
    if "$" in value:
        return None
    entries = [e.strip() for e in value.split(",")]
    bad = next((i for i, e in enumerate(entries) if not _GPU_ID.match(e)), None)
    if bad is None or not entries[bad] or entries[bad].startswith("-"):
        return None
    return entries, bad


def no_gpu_visible(site: LaunchSite) -> str:
    """Why the server's GPU memory is not planned when its CUDA_VISIBLE_DEVICES hides every GPU
    (`all`: sources/hints.py::unread_visible_device); "" when a GPU stays visible."""
    tok = site.env.get("CUDA_VISIBLE_DEVICES")
    hit = unread_visible_device(tok.text) if tok is not None else None
    if tok is None or hit is None or hit[1] > 0:
        return ""
    entries, _ = hit
    fix = "remove it (all belongs to NVIDIA_VISIBLE_DEVICES)" if entries[0].lower() == "all" else \
        "name the GPUs by index (0,1) or UUID"
    return (f"CUDA_VISIBLE_DEVICES={tok.text} hides every GPU from this server (CUDA reads no GPU from "
            f"{entries[0]!r}), so its GPU memory is not planned: {fix}")


def docker_gpus(value: str) -> tuple[int | None, str]:
    """`--gpus all` -> (None, ...), `--gpus 2` -> 2, `--gpus '"device=0,1"'` -> 2."""
    v = value.strip().strip("\"'")
    if v == "all":
        return None, "all GPUs of the host"
    m = re.search(r"device=([0-9,\s]+)", v)
    if m:
        return len([p for p in m.group(1).split(",") if p.strip()]), f"--gpus {v}"
    n = to_int(v.split(",")[0].replace("count=", ""))
    return n, f"--gpus {v}"


def size_bytes(text: str) -> int | None:
    """Docker / compose sizes (16g, 16gb, 1024m, bytes), where `m` is MiB as Docker reads it,
    taken as binary units: close enough for the shared-memory threshold. Kubernetes quantities
    are not this (`m` is milli there): `servefit.units.k8s_quantity`."""
    m = re.match(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgtp]?)i?b?\s*$", text.strip().strip("\"'"), re.I)
    if not m:
        return None
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}[m.group(2).lower()]
    return int(float(m.group(1)) * mult)


# a comment line, or a `#` comment after the server's own line (`image: ollama/ollama  # servefit: model=...`)
COMMENT = re.compile(r"(?:^[ \t]*(?:#|//|;)|[ \t]#)[ \t]*servefit:[ \t]*(.*?)[ \t]*\r?$", re.M)
PAIR = re.compile(r"([A-Za-z_-]+)\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s#]+)")
# the keys a directive may set, and the names users also write for them
DIRECTIVE_KEYS = {"gpu": "gpu", "count": "count", "gpus": "count", "model": "model",
                  "engine-version": "engine-version", "version": "engine-version", "gpu-memory": "gpu-memory"}


def directives(text: str, li_span, problems: list[tuple[str, Span]] | None = None  # type: ignore[no-untyped-def]
               ) -> list[dict[str, DirectiveValue]]:
    """Every `# servefit: gpu=L4 count=2 model=ORG/NAME engine-version=0.11.0` comment in the
    file, wherever it stands (suppressions `# servefit: ignore[...]` are not directives). A key
    servefit does not know, or a value it cannot read, is left out and described in `problems`
    (message, where), so that a typo is reported instead of silently changing nothing."""
    if "servefit:" not in text:
        return []
    out = []
    for m in COMMENT.finditer(text):
        body = m.group(1)
        if body.startswith(("ignore[", "file-ignore[")):
            continue
        vals: dict[str, DirectiveValue] = {}
        pairs = list(PAIR.finditer(body))
        for i, pm in enumerate(pairs):
            raw = pm.group(2)
            quoted = raw[:1] in "\"'" and len(raw) >= 2
            a = m.start(1) + pm.start(2) + (1 if quoted else 0)
            b = m.start(1) + pm.end(2) - (1 if quoted else 0)
            key = DIRECTIVE_KEYS.get(pm.group(1).lower().replace("_", "-"))
            if key == "gpu" and not quoted:
                b += _name_rest(raw, body[pm.end(2):pairs[i + 1].start() if i + 1 < len(pairs) else len(body)])
            if key is None:
                if problems is not None:
                    known = ", ".join(sorted(set(DIRECTIVE_KEYS.values())))
                    problems.append((f"unknown directive key '{pm.group(1)}' (servefit reads {known}); "
                                     "it is ignored", li_span(m.start(1) + pm.start(1), m.start(1) + pm.end(1))))
                continue
            sp = li_span(a, b)
            bad = _invalid_value(key, text[a:b])
            if bad:
                if problems is not None:
                    problems.append((f"{pm.group(1)}={text[a:b]}: {bad}; the directive is ignored", sp))
                continue
            vals[key] = DirectiveValue(text[a:b], sp.line, sp)
        if vals:
            out.append(vals)
    return out


def _name_rest(first: str, gap: str) -> int:
    """`gpu=Arc Pro B70 count=2`: how far the unquoted GPU name runs on past its first word
    (the words before the next key), when the longer name is a GPU the catalog knows and the
    first word alone is not; 0 otherwise (`gpu=L4 prod pool` keeps L4)."""
    rest = gap.rstrip()
    if not rest.strip():
        return 0
    from servefit.hardware.catalog import lookup

    return len(rest) if lookup(first) is None and lookup(first + rest) is not None else 0


def _invalid_value(key: str, value: str) -> str | None:
    """Why a directive's value cannot be used, or None."""
    if not value:
        return "no value"
    if key == "count":
        n = to_int(value)
        if n is None or str(n) != value.strip():
            return "not a GPU count (a whole number such as 2)"
        return None if n >= 1 else "a GPU count must be at least 1"
    if key == "gpu-memory":
        from servefit.units import parse_size

        try:
            ok = parse_size(value)
        except Exception:  # noqa: BLE001 - any unreadable size is reported the same way
            ok = None
        return None if ok else "not a memory size (such as 48GiB)"
    if key == "engine-version":
        from servefit.units import engine_version

        try:
            engine_version(value)
        except Exception:  # noqa: BLE001 - the reason is the same for every unreadable version
            return "not a version (such as 0.11.0)"
    return None


# keys that name one server's own setting: a directive sets them for the first server below it only
PER_SERVER_KEYS = frozenset({"model"})


def for_line(found: list[dict[str, DirectiveValue]], line: int,
             servers: list[int] | tuple[int, ...] = ()) -> dict[str, DirectiveValue]:
    """The directives that apply to a server starting at `line`: for each key, the nearest one
    above it, else the first one in the file. A `model=` directive is the next server's only:
    it applies when no other server (`servers`: every server's line in the file) starts between
    it and this one, and never to a server above it."""
    out: dict[str, DirectiveValue] = {}
    for d in found:
        for k, v in d.items():
            if k in PER_SERVER_KEYS:
                if v.line > line or any(v.line <= other < line for other in servers):
                    continue
            cur = out.get(k)
            if cur is None or (v.line <= line and (cur.line > line or v.line > cur.line)):
                out[k] = v
    return out
