"""Security rules on one server (docs in data/rules/security.yaml):

- SEC002 unauthenticated-public-endpoint: no API key, listening on all interfaces, and the same
  file publishes it (site.workload.exposures, filled by the wrappers through sources/ports.py).
- SEC003 unauthenticated-host-listener: the same, started directly on a machine.
- SEC004 unauthenticated-pod-listener: the same, in a container nothing in the file publishes.
- SEC005 trust-remote-code-untrusted: --trust-remote-code on a Hub model of an unknown publisher.
- SEC006 modelfile-remote-adapter: a Modelfile ADAPTER fetched from a URL.
- SF129 published-loopback-listener: the file publishes a port of a server that listens on 127.0.0.1 only.

Defaults as the engines have them: vLLM binds every interface unless --host is given
(vllm/entrypoints/openai/api_server.py: `create_server_socket((args.host or "", port))`), TGI's
launcher defaults `--hostname 0.0.0.0`, llama-server and SGLang default to 127.0.0.1, Ollama to
127.0.0.1:11434; the llama.cpp server images set LLAMA_ARG_HOST=0.0.0.0 and the ollama/ollama
image OLLAMA_HOST=0.0.0.0:11434. Keys: vLLM `--api-key` or VLLM_API_KEY, llama-server `--api-key`,
`--api-key-file` (LLAMA_API_KEY, LLAMA_ARG_API_KEY_FILE), SGLang `--api-key`, TGI `--api-key`
(API_KEY, 2.3+); Ollama has no authentication.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from servefit.core import EngineConfig, Finding, LaunchSite, Span
from servefit.rules.catalog import finding
from servefit.rules.registry import rule


@dataclass(frozen=True)
class Auth:
    """How an engine listens and authenticates: the `listen` key of data/engines/<name>.yaml."""

    title: str
    host: str | None  # the option naming the listen address
    binds_all: bool  # by default
    keys: tuple[str, ...]  # options that turn authentication on
    key_env: tuple[str, ...]
    port: int | None = None  # the default port where it is the same everywhere
    host_env: str | None = None  # the address (host[:port]) comes from this variable instead
    no_auth: bool = False  # the server has no authentication at all
    image_host: str | None = None  # what the engine's official image sets, when it binds all
    no_api_server: tuple[str, ...] = ()  # `setting=value` with which it serves no API (vLLM --headless)


def auth_of(engine: str | None) -> Auth | None:
    from servefit import data

    if not engine:
        return None
    try:
        d = data.load(f"engines/{engine}.yaml").get("listen")
    except (OSError, ValueError):
        return None
    if not d:
        return None
    return Auth(d["title"], d.get("host_setting"), bool(d.get("binds_all")), tuple(d.get("key_settings") or ()),
                tuple(d.get("key_env") or ()), d.get("default_port"), d.get("host_env"), bool(d.get("no_auth")),
                d.get("image_host"), tuple(d.get("no_api_server") or ()))
RAW_FLAGS = {"host": ("--host",), "hostname": ("--hostname",), "api_key": ("--api-key", "--api_key"),
             "api_key_file": ("--api-key-file",), "port": ("--port",), "trust_remote_code": ("--trust-remote-code",)}
ALL_INTERFACES = {"0.0.0.0", "::", "[::]", "*", "0"}
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
# Original publishers whose architectures ship modelling code on the Hub (rule docs list them).
TRUSTED_ORGS = frozenset(o.lower() for o in (
    "meta-llama", "mistralai", "Qwen", "google", "microsoft", "nvidia", "deepseek-ai", "openai", "ibm-granite",
    "allenai", "tiiuae", "01-ai", "zai-org", "THUDM", "moonshotai", "baichuan-inc", "internlm", "OpenGVLab",
    "MiniMaxAI", "stepfun-ai", "CohereLabs", "CohereForAI", "HuggingFaceTB", "HuggingFaceM4", "bigcode",
    "Salesforce", "facebook", "apple", "ai21labs", "Snowflake", "databricks", "xai-org", "LiquidAI", "tencent",
    "baidu", "inclusionAI"))


def _raw(site: LaunchSite, name: str) -> tuple[str | None, Span | None]:
    """A setting read from the argv and the environment with the engine's option table (flags,
    aliases, abbreviations, env twins); the flags in RAW_FLAGS when there is no table."""
    table = None
    try:
        from servefit.engines.options import load_table

        table = load_table(site.engine or "")
    except Exception:  # no table for this engine: the plain flags
        table = None
    words = site.argv
    for i, tok in enumerate(words):
        key, eq, val = tok.text.partition("=")
        if not key.startswith("-"):
            continue
        hit = table.lookup(key)[0] if table is not None else None
        if (hit.name == name) if hit is not None else key in RAW_FLAGS.get(name, ()):
            if eq:
                return val, tok.span
            if name == "trust_remote_code":
                return "true", tok.span
            if i + 1 < len(words):
                return words[i + 1].text, words[i + 1].span
    if table is not None:
        for var, tok in site.env.items():
            opt = table.by_env.get(var)
            if opt is not None and opt.name == name:
                return tok.text, tok.span
    return None, None


def _setting(site: LaunchSite, cfg: EngineConfig | None, name: str) -> tuple[str | None, Span | None]:
    """A setting as the user gave it (flag, env twin, --config file), with its span: the engine's
    parsed value where it keeps one, else the argv and environment as written."""
    if cfg is not None and cfg.settings.get(name) is not None and (name in cfg.explicit or name in cfg.spans):
        v = cfg.settings[name]
        return (None if v is False else str(v)), cfg.spans.get(name)
    return _raw(site, name)


def context(site: LaunchSite) -> str | None:
    """pod | container | host, or None for what is not a running server (a vLLM --config file,
    a Modelfile not joined to its server)."""
    x = site.workload
    if site.config_only or (site.name.startswith("Modelfile ") and all(t.span is None for t in site.argv)):
        return None
    if x.kind or x.chart:
        return "pod"
    from servefit.sources.launch import RUNS_IMAGES

    if x.service is not None or x.runtime in RUNS_IMAGES or site.name.startswith("dockerfile"):
        return "container"
    return "host"


def _listen(site: LaunchSite, cfg: EngineConfig | None, auth: Auth, where: str) -> tuple[str, Span | None] | None:
    """(how it listens on all interfaces, span of the address) or None when it does not."""
    from servefit.sources.detect import engine_of_image

    eng = site.engine or ""
    if auth.host_env:
        tok = site.env.get(auth.host_env)
        if tok is not None:
            host = tok.text.split("://", 1)[-1].split("/", 1)[0]
            host = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
            return (f"{auth.host_env}={tok.text}", tok.span) if host in ALL_INTERFACES | {""} else None
    else:
        value, span = _setting(site, cfg, auth.host or "")
        if value is not None:
            if "$" in value or value not in ALL_INTERFACES:
                return None
            return f"--{(auth.host or '').replace('_', '-')} {value}", span
        if auth.binds_all:
            return f"its default without --{auth.host}", None
    if where != "host" and engine_of_image(site.image) == eng and auth.image_host:
        return auth.image_host, None
    return None


def _has_key(site: LaunchSite, cfg: EngineConfig | None, auth: Auth) -> bool:
    """A key is set, or may be: a variable filled in at start (a Secret, the shell's environment)
    or variables from a source this file does not show (`envFrom: secretRef`) count as set."""
    if any(_setting(site, cfg, k)[0] for k in auth.keys):
        return True
    if site.workload.env_opaque:
        return True
    runtime = set(site.workload.runtime_env or ()) | set(site.unresolved)
    return any((site.env.get(e) is not None and site.env[e].text) or e in runtime for e in auth.key_env)


def _port(site: LaunchSite, cfg: EngineConfig | None, auth: Auth) -> int | None:
    if auth.host_env:
        tok = site.env.get(auth.host_env)
        tail = tok.text.rsplit(":", 1)[-1] if tok is not None and ":" in tok.text.split("://", 1)[-1] else ""
        return int(tail) if tail.isdigit() else auth.port
    value, _ = _setting(site, cfg, "port")
    return int(value) if value is not None and value.isdigit() else None


def check(site: LaunchSite, cfg: EngineConfig | None, trusted: Iterable[str] = ()) -> list[Finding]:
    out: list[Finding] = []
    auth = auth_of(site.engine)
    where = context(site)
    if auth is not None and where is not None and _serves_http(site) and not _no_api_server(auth, cfg):
        out.extend(_exposure(site, cfg, auth, where))
        out.extend(_unreachable(site, cfg, auth, where))
    out.extend(_remote_code(site, cfg, trusted))
    out.extend(_adapters(site))
    return out


def _serves_http(site: LaunchSite) -> bool:
    """False where a launcher runs the engine without its HTTP server (a Dynamo worker answers
    Dynamo's own request plane; its frontend is the HTTP server): data/engines/*.yaml `wrapper`;
    KServe's huggingfaceserver (data/kserve_runtimes.yaml) runs vLLM's engine behind its own server."""
    from servefit import data
    from servefit.sources import detect

    kserve = data.load("kserve_runtimes.yaml")
    if site.workload.runtime in (kserve["runtime"], kserve["multinode_runtime"]):
        return False  # KServe's built-in runtime: huggingfaceserver answers (kserve ModelServer), not vLLM's server
    w = detect.wrapper_of([t.text for t in site.argv])
    return w is None or w.get("serves_http", True)


def _no_api_server(auth: Auth, cfg: EngineConfig | None) -> bool:
    """The engine runs without its API server (`vllm serve --headless`, `--api-server-count 0`: the engine
    cores of a multi-node data-parallel worker): data/engines/<name>.yaml `listen.no_api_server`."""
    settings = cfg.settings if cfg is not None else {}
    return any(str(settings.get(k, "")) == v for k, _, v in (c.partition("=") for c in auth.no_api_server))


@rule("SEC002", "SEC003", "SEC004")
def _exposure(site: LaunchSite, cfg: EngineConfig | None, auth: Auth, where: str) -> list[Finding]:
    listen = _listen(site, cfg, auth, where)
    if listen is None or _has_key(site, cfg, auth):
        return []
    reason, span = listen
    nokey = "has no authentication at all" if auth.no_auth else "has no API key"
    port = _port(site, cfg, auth)
    exps = [e for e in site.workload.exposures if not (port and e.ports and port not in e.ports)]
    if exps:
        e = exps[0]
        return [finding("SEC002", f"{auth.title} {nokey} and listens on all interfaces ({reason}); {e.how} "
                                  "publishes it: anyone who can reach that address can run prompts on this server",
                        span=e.span or span, site=site.name)]
    if site.workload.runtime == "Cloud Run":  # only callers with IAM permission reach it (no --allow-unauthenticated)
        return []
    if where == "host":
        fix = "bind 127.0.0.1" + (" or pass --api-key" if auth.keys else " and put an authenticating proxy in front")
        return [finding("SEC003", f"{auth.title} {nokey} and listens on every interface of this machine ({reason}): "
                                  f"anyone who can reach {f'port {port}' if port else 'it'} can use it; {fix}",
                        span=span, site=site.name)]
    return [finding("SEC004", f"{auth.title} {nokey} and listens on all interfaces ({reason}): anything on the "
                              f"{'pod' if where == 'pod' else 'container'} network can use it",
                    span=span, site=site.name)]


def _loopback(site: LaunchSite, cfg: EngineConfig | None, auth: Auth, where: str) -> tuple[str, str] | None:
    """(how it listens on loopback only, how to listen on all interfaces) or None when it does not."""
    from servefit.sources.detect import engine_of_image

    if auth.host_env:
        tok = site.env.get(auth.host_env)
        if tok is not None:
            host = tok.text.split("://", 1)[-1].rsplit(":", 1)[0] if ":" in tok.text else tok.text
            return (f"{auth.host_env}={tok.text}", f"set {auth.host_env}=0.0.0.0") if host in LOOPBACK else None
        fix = f"set {auth.host_env}=0.0.0.0"
    else:
        value, _ = _setting(site, cfg, auth.host or "")
        fix = f"pass --{(auth.host or '').replace('_', '-')} 0.0.0.0"
        if value is not None:
            return (f"--{(auth.host or '').replace('_', '-')} {value}", fix) if value in LOOPBACK else None
        if auth.binds_all:
            return None
    if where != "host" and engine_of_image(site.image) == (site.engine or "") and auth.image_host:
        return None
    return f"its default without {'--' + (auth.host or '').replace('_', '-') if auth.host else auth.host_env}", fix


@rule("SF129")
def _unreachable(site: LaunchSite, cfg: EngineConfig | None, auth: Auth, where: str) -> list[Finding]:
    """SF129: a port published (a NodePort or LoadBalancer Service, compose `ports`, SkyPilot `ports`, ...) for a
    server that listens on 127.0.0.1 only: what comes in on it finds nothing listening outside the loopback."""
    loop = _loopback(site, cfg, auth, where)
    port = _port(site, cfg, auth)
    # the published port is the server's (or every port is): another port is not this server's to reach
    # host networking: the server's 127.0.0.1 is the host's, reachable there (not dead, only not published)
    exps = [e for e in site.workload.exposures if (not e.ports or port in e.ports) and not e.host_network]
    if loop is None or not exps:
        return []
    (reason, fix), e = loop, exps[0]
    inside = {"pod": "its pod", "container": "its container"}.get(where, "this machine")
    key = f" (with {' or '.join('--' + k.replace('_', '-') for k in auth.keys[:1])})" if auth.keys else ""
    return [finding("SF129", f"{auth.title} listens on 127.0.0.1 only ({reason}), so {e.how} publishes a port that "
                             f"nothing outside {inside} can reach: every request on it fails; {fix}{key}",
                    span=e.span, site=site.name)]


@rule("SEC005")
def _remote_code(site: LaunchSite, cfg: EngineConfig | None, trusted: Iterable[str]) -> list[Finding]:
    if cfg is None:
        return []
    on, span = _setting(site, cfg, "trust_remote_code")
    if on is None or on.lower() in ("false", "0", "no"):
        return []
    ref = (cfg.model_ref or "").removeprefix("hf://")
    if not ref or "$" in ref or ref.startswith(("/", ".", "~")) or "://" in ref or ref.count("/") != 1:
        return []
    org = ref.split("/", 1)[0]
    revision, _ = _setting(site, cfg, "revision")
    if revision is not None and re.fullmatch(r"[0-9a-f]{7,40}", revision.strip().lower()):
        return []  # pinned to a commit, as the finding advises: the code that runs is the one reviewed there
    if org.lower() in TRUSTED_ORGS or org.lower() in {t.lower() for t in trusted}:
        return []
    return [finding("SEC005", f"--trust-remote-code runs the Python files of {ref} at load time, and {org} is not a "
                              "trusted publisher: use the original publisher's repository, pin --revision to a "
                              "reviewed commit, or add the organisation to trusted-orgs",
                    span=span or cfg.spans.get("model"), setting="trust_remote_code", site=site.name)]


@rule("SEC006")
def _adapters(site: LaunchSite) -> list[Finding]:
    if site.inputs.definition is None:
        return []
    from servefit.engines.ollama_modelfile import modelfile_of  # only a server with a Modelfile needs it

    doc = modelfile_of(site)
    out = []
    for ins in doc.instructions if doc is not None else []:
        if ins.name == "adapter" and ins.value.text.strip().lower().startswith(("http://", "https://")):
            out.append(finding("SEC006", f"ADAPTER {ins.value.text.strip()} is fetched from outside the repository "
                                         "when the model is created: not reviewed, not pinned",
                               span=ins.value.span, site=site.name))
    return out
