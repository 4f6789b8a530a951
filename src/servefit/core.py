"""The types every stage hands to the next: spans, launch sites, engine configs, plans, findings.

Plain dataclasses on purpose: the lint and estimate path must start fast, so nothing here
imports pydantic or anything heavier than the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


class UsageError(Exception):
    """Bad input from the user: the CLI prints the message on one line and exits 2."""


@dataclass(frozen=True)
class Span:
    """Where a value sits in its file. Lines and columns are 1-based; `start`/`end` are
    character offsets into the file text as read (newlines kept as written, so a patch on
    [start, end) changes only those characters). `end_col` is exclusive."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int
    start: int = -1
    end: int = -1

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "col": self.col,
                "end_line": self.end_line, "end_col": self.end_col}

    def skip(self, k: int) -> Span:
        """This span less its first `k` characters (on its first line: the value after `KEY=`, past `docker://`)."""
        return Span(self.file, self.line, self.col + k, self.end_line, self.end_col, self.start + k, self.end)


@dataclass(frozen=True)
class Token:
    """One argv word or env value as the engine will receive it, with where it came from.
    `span` is None for values that exist only on the command line (estimate's `--`)."""

    text: str
    span: Span | None = None
    # a `--flag=value` word whose value is written elsewhere (a chart's values line): where
    value_span: Span | None = field(default=None, compare=False, repr=False)

    def after(self, n: int) -> Token:
        """The token without its first n characters (`--model_id=x` -> `x`, `hf://org/m` -> `org/m`),
        its span narrowed to them where it lies on one line."""
        s = self.span
        if s is None or s.line != s.end_line:
            return Token(self.text[n:], s)
        return Token(self.text[n:], Span(s.file, s.line, s.col + n, s.end_line, s.end_col, s.start + n, s.end))


@dataclass(frozen=True)
class GpuHint:
    """What a file says about the hardware: a name as written (any alias) and a count."""

    name: str | None
    count: int | None
    source: str  # e.g. "k8s nodeSelector nvidia.com/gpu.product", "--gpu", "config default"
    span: Span | None = None
    scheduler_visible: bool = False  # a scheduler (Slurm) sets CUDA_VISIBLE_DEVICES to exactly these GPUs


@dataclass(frozen=True)
class DirectiveValue:
    """One `key=value` of a `# servefit:` directive comment, with where it is written."""

    value: str
    line: int
    span: Span | None = None


@dataclass(frozen=True)
class Together:
    """Servers a proxy in front keeps running at the same time (a llama-swap group with
    `swap: false`), or compose services that reserve the same GPU by id: their memory adds up on the GPUs
    they share. `members` are the site names."""

    name: str  # how the file names the set: "llama-swap group 'group1'"
    members: tuple[str, ...]
    span: Span | None = None
    how: str = "has swap: false, so its members run at the same time"  # why they run at once


@dataclass
class Workload:
    """What the deployment file says about where and how a server runs; the rules about
    exposure, shared memory and authentication read it, the wrappers fill it."""

    kind: str | None = None  # k8s kind: Deployment, StatefulSet, InferenceService, ...
    chart: str | None = None  # the Helm chart a values file configures
    service: str | None = None  # compose service name
    container: str | None = None  # k8s container name
    runtime: str | None = None  # "docker run"
    namespace: str | None = None
    pod_labels: dict[str, str | None] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    annotation_line: int | None = None
    runtime_env: list[str] = field(default_factory=list)  # variables the runtime sets (env_file, envFrom)
    env_opaque: bool = False  # an environment source servefit cannot read
    ports: list[Any] = field(default_factory=list)
    exposures: list[Any] = field(default_factory=list)  # sources.ports.Exposure: how the file publishes it
    shm: bool | None = None  # shared memory large enough for NCCL; None: not known
    storage_model: str | None = None  # KServe storageUri model, downloaded to storage_path
    storage_path: str | None = None
    shm_limit: str | None = None  # the /dev/shm volume's size limit as written, when it is too small
    admit_limit: int | None = None  # requests a proxy in front lets through at once (llama-swap concurrencyLimit)
    together: Together | None = None  # the servers it runs beside on the same GPUs (llama-swap swap: false)
    path_map: dict[str, str] = field(default_factory=dict)  # container folder -> host folder it mounts
    compose_files: list[str] = field(default_factory=list)  # compose files layered for it, base first (2 or more)
    compose_extends: list[tuple[str, str]] = field(default_factory=list)  # (file, service) its `extends:` reads
    unit_file: str | None = None  # the systemd unit whose drop-in sets its ExecStart
    notes: list[str] = field(default_factory=list)  # how the file was read where servefit assumed something
    version_source: str | None = None  # where the engine release is written when not in an image tag (a pip pin)
    rendered: str | None = None  # how its manifest was rendered (`helm template ...`, `kustomize build ...`)
    # a helm render: the files that configure it alone (its --values files; the chart's values.yaml
    # when it is rendered with no other), where tune may write; its templates are every render's
    render_own: list[str] = field(default_factory=list)
    # the names the file gives this server, each with where it is written (a llama-swap `models:`
    # key, a compose service, a k8s object's name or labels, a unit's Description=): what
    # models/evidence.py reads when the model path names no model
    names: list[tuple[str, str]] = field(default_factory=list)
    # the command's words are items of one list written with this separator (gcloud's `--args=a,b`), and
    # where its environment list's last item ends (`--set-env-vars A=1,B=2`): where tune adds to them
    list_separator: str = ""
    env_list_end: Span | None = None
    # a Kubernetes container that asks for no GPU: no GPU or other device resource, no GPU node selector or
    # affinity, no runtimeClassName (the NVIDIA device plugin then gives it none)
    no_gpu_request: bool = False
    args_at_run: bool = False  # a Dockerfile ENTRYPOINT with no CMD: its arguments come from `docker run`
    runner: str | None = None  # the GitHub-hosted runner label a workflow job runs on (no GPU: no_gpu_request)
    # where an operator's profile runs the server instead of a GPU, what says so and where it is written:
    # ("a TPU", "KubeAI resourceProfile google-tpu-v5e-1x1:1 asks for a Google TPU", its span)
    profile_off_gpu: tuple[str, str, Span | None] | None = None
    # the command the container really runs, which the engine rejects (SF106: a command given as arguments to
    # the image's own entrypoint): the server is read as meant, and not planned as if it started
    refused: str = ""


class ModelDefinition:
    """A file that defines the model a server loads, parsed by the engine that reads it (Ollama's
    Modelfile: engines/ollama_modelfile.ModelfileDoc subclasses it); the wrappers only carry it."""


@dataclass
class InlineFile:
    """A model definition written inside another file (compose `configs: {x: {content: |...}}`)."""

    text: str
    line: int = 1  # its first line in the file
    indent: int = 0  # columns


@dataclass
class ModelInputs:
    """How a server that is told its model outside its command line (Ollama) gets it: files that
    define a model, the models an init step pulls for it, options each request sends. The
    wrappers fill the generic parts; `definition` is the linked file as its engine parsed it."""

    file_refs: list[str] = field(default_factory=list)  # build context, mounts, `-f PATH`, as written
    inline: list[InlineFile] = field(default_factory=list)
    pulled: list[Token] = field(default_factory=list)  # models pulled or listed for it, first of each name
    request_options: dict[str, str] = field(default_factory=dict)  # API options sent with each request
    definition: ModelDefinition | None = None


@dataclass
class LaunchSite:
    """One server found in a file (or given on the command line): the engine argv and
    environment exactly as the engine will receive them, plus hardware and version hints."""

    file: str
    line: int
    argv: list[Token]
    env: dict[str, Token] = field(default_factory=dict)
    engine: str | None = None  # vllm | llamacpp | ollama | tgi | sglang, when the wrapper knows
    image: str | None = None
    engine_version: str | None = None
    gpu: GpuHint | None = None
    name: str = ""  # stable identity for baselines, e.g. "Deployment/llama/vllm"
    unresolved: list[str] = field(default_factory=list)  # variables left unexpanded
    # `# servefit: gpu=… count=… model=… engine-version=… gpu-memory=…` directives that apply to
    # this server (the nearest one above it for each key), kept apart from what the repo says
    directives: dict[str, DirectiveValue] = field(default_factory=dict)
    workload: Workload = field(default_factory=Workload)
    unresolved_spans: list[tuple[str, Span | None]] = field(default_factory=list)  # where each variable is used
    config_only: bool = False  # a vLLM --config file listed on its own (dropped when a command uses it)
    image_span: Span | None = None  # where the image is written
    inputs: ModelInputs = field(default_factory=ModelInputs)  # model files, pulled models, request options
    # pip requirements the build installs, as written (`flashinfer-python`, `vllm[flashinfer]==0.10.1.1`):
    # optional packages that change what the engine runs (vLLM's FlashInfer sampler before 0.12)
    packages: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Edit:
    """Replace [span.start, span.end) with `text`; an insertion has start == end."""

    span: Span
    text: str


@dataclass(frozen=True)
class Fix:
    """A change that resolves a finding, in ruff's shape."""

    message: str
    edits: tuple[Edit, ...] = ()
    applicability: Literal["safe", "unsafe", "display-only"] = "display-only"


@dataclass
class Finding:
    """One problem a rule found: code, severity and message, where it is written, the setting it is about, and
    a fix when there is one."""

    code: str
    name: str
    severity: Severity
    message: str
    span: Span | None = None
    fix: Fix | None = None
    setting: str | None = None  # canonical option name the finding is about
    site: str = ""  # LaunchSite.name

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "name": self.name,
                               "severity": self.severity, "message": self.message}
        if self.setting:
            out["setting"] = self.setting
        if self.span is not None:
            out["location"] = self.span.as_dict()
        if self.fix is not None:
            out["fix"] = {"message": self.fix.message, "applicability": self.fix.applicability}
        return out


@dataclass
class EngineConfig:
    """An engine's settings after parsing: canonical option names (underscores) mapped to
    the values the engine will use, defaults applied, and the span of each value the user
    wrote. `explicit` names the options the user set (defaults are not explicit)."""

    engine: str
    model_ref: str | None
    settings: dict[str, Any]
    spans: dict[str, Span] = field(default_factory=dict)
    explicit: set[str] = field(default_factory=set)
    env: dict[str, str] = field(default_factory=dict)
    version: str | None = None
    findings: list[Finding] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    site: LaunchSite | None = None
    unplanned: str = ""  # why the engine's memory cannot be planned (a server servefit has no model for)


@dataclass
class DeviceMemory:
    """Bytes on one GPU. `budget` is what the engine lets itself use on it."""

    total: int = 0
    budget: int = 0
    weights: int = 0
    activation_peak: int = 0
    non_torch: int = 0
    cuda_graphs: int = 0
    kv_cache: int = 0
    free_headroom: int = 0
    label: str = ""

    def as_dict(self) -> dict[str, int]:
        return {"budget": self.budget, "weights": self.weights,
                "activation_peak": self.activation_peak, "non_torch": self.non_torch,
                "cuda_graphs": self.cuda_graphs, "kv_cache": self.kv_cache,
                "free_headroom": self.free_headroom}


@dataclass
class EngineDetail:
    """What one engine's plan adds to the common figures. Each engine subclasses it with typed
    fields named after its own settings and log figures (engines/<name>/detail.py); a field whose
    metadata says `omit` is left out of the JSON while it is None (a figure this run does not
    have), and a field that is itself an EngineDetail (Ollama's runner) is flattened into it."""

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import fields

        nested: dict[str, Any] = {}
        own: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, EngineDetail):
                nested.update(v.as_dict())
            elif not (v is None and f.metadata.get("omit")):
                own[f.name] = v
        return {**nested, **own}

    def resolved(self, name: str) -> Any:
        """The value the engine resolved for its setting `name` (max_num_seqs, mem_fraction_static...)
        when the plan records one: for readers that know the setting by name, such as tune's
        token-pool adapter; None otherwise."""
        return getattr(self, name, None) if name in getattr(self, "__dataclass_fields__", {}) else None


@dataclass
class MemoryPlan:
    """What the engine will do at start on this hardware (DESIGN.md's JSON contract).
    `memory` is the GPU that runs out first; `devices` lists every GPU when they differ."""

    engine: str
    engine_version: str
    outcome: str  # started | refused_max_model_len | no_kv_memory | oom_at_load | rejected_config
    memory: DeviceMemory
    kv_bytes_per_token: int = 0
    kv_cache_tokens: int = 0
    max_model_len: int = 0
    max_concurrency: float = 0.0
    fitting_max_model_len: int | None = None  # largest length that fits, when refused
    devices: list[DeviceMemory] = field(default_factory=list)
    parallel: dict[str, int] = field(default_factory=lambda: {"tensor": 1, "pipeline": 1})
    assumptions: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)  # the engine's own log/error lines
    detail: EngineDetail = field(default_factory=lambda: EngineDetail())  # the engine's own figures
