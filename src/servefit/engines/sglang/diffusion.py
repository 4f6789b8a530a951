"""SGLang's diffusion (image / video generation) server, read with its own parser's flags.

`sglang serve` picks a backend (python/sglang/cli/serve.py::serve): `--model-type
{auto,llm,diffusion}` is taken out of the arguments first (_extract_model_type_override), and
`auto` picks the diffusion server for a Diffusers model (model_index.json). The diffusion
server is also `python -m sglang.multimodal_gen.runtime.launch_server` and
`python -m sglang.multimodal_gen.runtime.entrypoints.cli.main serve`. Its flags are
data/engines/sglang_diffusion.yaml (read from multimodal_gen's ServerArgs.add_cli_args);
the words that parser leaves, it reads as per-component overrides
(runtime/server_args/server_args.py::from_cli_args: `--component-paths.vae X`, `--vae-path X`,
`--transformer-quantization X`...) and rejects the rest. servefit has no memory model for
diffusion pipelines, so the server is checked for its flags and said not to be planned.
"""

from __future__ import annotations

from collections.abc import Callable

from servefit.core import EngineConfig, LaunchSite, Token
from servefit.rules.registry import rule

DIFFUSION_MODULES = ("sglang.multimodal_gen.runtime.launch_server",
                     "sglang.multimodal_gen.runtime.entrypoints.cli.main")
BACKENDS = ("auto", "llm", "diffusion")  # cli/serve.py::_create_backend_registry, plus auto
# server_args.py::_extract_component_* : option prefixes (dash and underscore spellings), and
# the `--<component><suffix>` aliases
KINDS = ("paths", "weights-paths", "quantizations", "precisions", "direct-gpu-weight-loading",
         "quantization-ignored-layers", "attention-backends")
COMPONENT_PREFIXES = tuple(f"--component{sep}{k.replace('-', sep)}." for k in KINDS for sep in "-_")
COMPONENT_SUFFIXES = ("-weights-path", "-path", "-quantization")
NOT_PLANNED = ("SGLang's diffusion server runs an image / video generation pipeline; servefit has no "
               "memory model for diffusion pipelines, so this server's memory was not checked")


def split_model_type(args: list[Token]) -> tuple[str | None, Token | None, list[Token]]:
    """`sglang serve`'s `--model-type X` / `--model-type=X`: (X, its token, the other arguments).
    The last one given wins, as in _extract_model_type_override."""
    backend: str | None = None
    where: Token | None = None
    rest: list[Token] = []
    i = 0
    while i < len(args):
        text = args[i].text
        if text == "--model-type":
            where = args[i]
            backend = args[i + 1].text if i + 1 < len(args) else ""
            if i + 1 < len(args):
                where = args[i + 1]
            i += 2
            continue
        if text.startswith("--model-type="):
            backend, where = text.split("=", 1)[1], args[i]
            i += 1
            continue
        rest.append(args[i])
        i += 1
    return backend, where, rest


def component_override(flag: str) -> bool:
    """A word the diffusion server reads as a per-component override (it takes one value)."""
    key = flag.split("=", 1)[0]
    if any(key.startswith(p) and len(key) > len(p) for p in COMPONENT_PREFIXES):
        return True
    return key.startswith("--") and any(key.endswith(s) and len(key) > len(s) + 2 for s in COMPONENT_SUFFIXES)


def without_overrides(args: list[Token], known: Callable[[str], bool]) -> list[Token]:
    """The arguments less the per-component overrides (and their values) that the diffusion
    server's parser leaves for from_cli_args; a flag its parser knows is kept."""
    out: list[Token] = []
    i = 0
    while i < len(args):
        text = args[i].text
        key = text.split("=", 1)[0]
        if not known(key) and component_override(text):
            i += 1 if "=" in text else 2 if i + 1 < len(args) and not args[i + 1].text.startswith("-") else 1
            continue
        out.append(args[i])
        i += 1
    return out


@rule("SGL014")
def parse(site: LaunchSite, args: list[Token], version: str | None, why: str = "") -> tuple[EngineConfig, list[Token]]:
    """The diffusion server's arguments read with its own parser's flags, and the words it
    rejects as unrecognized arguments (the caller reports them). The config says that its memory
    is not planned (EngineConfig.unplanned), and one info finding says so. `why`: how the server
    was told apart from the LLM server when the command does not say."""
    from servefit.engines.argv import parse_argv
    from servefit.engines.options import load_table
    from servefit.rules.catalog import finding

    table = load_table("sglang_diffusion")
    args = without_overrides(args, lambda f: table.resolve(f, None)[0] is not None)
    if args and not args[0].text.startswith("-"):  # `sglang serve MODEL` (_normalize_positional_model_path)
        args = [Token("--model-path", args[0].span), *args]
    parsed = parse_argv(table, args, None, site=site.name)
    values = dict(parsed.values)
    parsed.findings.append(finding("SGL014", NOT_PLANNED + (f" ({why})" if why else ""),
                                   span=site.argv[0].span if site.argv else None, site=site.name))
    cfg = EngineConfig(engine="sglang", model_ref=values.get("model_path"), settings=values,
                       spans=dict(parsed.spans), explicit=set(values),
                       env={k: t.text for k, t in site.env.items()}, version=version,
                       findings=parsed.findings, site=site, unplanned=NOT_PLANNED)
    if "model_path" in cfg.spans:
        cfg.spans["model"] = cfg.spans["model_path"]
    return cfg, parsed.positionals


def diffusion_only(flags: list[str]) -> bool:
    """Whether every flag the LLM server rejected is one of the diffusion server's (and there is
    one): `sglang serve` without --model-type then runs the diffusion server (its auto-detection
    reads the model, which servefit cannot see)."""
    from servefit.engines.options import load_table

    table = load_table("sglang_diffusion")
    keys = [f.split("=", 1)[0] for f in flags]
    return bool(keys) and all(k.startswith("-") and (table.resolve(k, None)[0] is not None or component_override(k))
                              for k in keys)
