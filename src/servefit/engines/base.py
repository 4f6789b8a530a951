"""The engine plugin shape: every engine turns a LaunchSite into an EngineConfig and an
EngineConfig into the MemoryPlan the engine itself would make."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from servefit.core import EngineConfig, LaunchSite, MemoryPlan, Span, Token
from servefit.engines.options import Implied, OptionTable
from servefit.rules.catalog import finding
from servefit.rules.registry import rule

if TYPE_CHECKING:
    from servefit.diagnose.fixes import Fixing
    from servefit.diagnose.model import Diagnosis, Event
    from servefit.hardware.spec import GpuSpec
    from servefit.models.spec import ModelSpec


def program(word: str) -> str:
    """`/usr/local/bin/llama-server` -> `llama-server`; a Windows path too, whose `.exe` names the
    same program in any case (`C:\\llama\\Llama-Server.EXE` -> `llama-server`: Windows file names
    are case-insensitive and a program is found with or without its extension)."""
    name = os.path.basename(word).rsplit("\\", 1)[-1]
    return name[:-4].lower() if name.lower().endswith(".exe") else name


def python_module(words: list[str]) -> tuple[str | None, int]:
    """For `python[3[.x]] [-u] -m pkg.mod ...`: (module, words consumed); else (None, 0)."""
    if not words or not program(words[0]).startswith("python"):
        return None, 0
    i = 1
    while i < len(words) and words[i].startswith("-") and not words[i].startswith("-m"):
        i += 1
    if i + 1 < len(words) and words[i] == "-m":
        return words[i + 1], i + 2
    if i < len(words) and words[i].startswith("-m") and len(words[i]) > 2:  # python -mvllm.entrypoints...
        return words[i][2:], i + 1
    return None, 0


def version_tuple(version: str | None, current: str) -> tuple[int, int, int]:
    """`0.6.3.post1`, `v2.4.1-rocm`, `0.10.1.dev101+gbda9d05` -> (major, minor, patch), each the
    leading digits of its part; no version means `current`, the newest release modelled."""
    parts = [int(p[:len(p) - len(p.lstrip("0123456789"))] or 0)
             for p in (version or current).lstrip("v").split(".")[:3]]
    parts += [0] * (3 - len(parts))
    return parts[0], parts[1], parts[2]


def serve_command_length(words: list[str], prog: str, modules: tuple[str, ...], cli_main: str) -> int:
    """`PROG serve ...` or `python -m MODULE ...`, where the CLI's main module takes `serve`
    too (`python -m vllm.entrypoints.cli.main serve`): the words that are the command, or 0."""
    if not words:
        return 0
    if program(words[0]) == prog and len(words) > 1 and words[1] == "serve":
        return 2
    mod, n = python_module(words)
    if mod in modules:
        return n + 1 if mod == cli_main and n < len(words) and words[n] == "serve" else n
    return 0


def wrapper_options(args: list[Token], theirs_flag: Callable[[str], bool]) -> tuple[list[Token], list[Token]]:
    """(the engine's arguments, the launcher's own) where a launcher takes both: each flag
    `theirs_flag` says is the launcher's, with the words up to the next flag (the engines' parsers
    take no positional arguments after their command's own)."""
    mine: list[Token] = []
    theirs: list[Token] = []
    in_theirs = False
    for t in args:
        if t.text.startswith("-"):
            in_theirs = theirs_flag(t.text.split("=", 1)[0])
        (theirs if in_theirs else mine).append(t)
    return mine, theirs


def launcher_options(site: LaunchSite, args: list[Token], table: OptionTable,
                     title: str) -> tuple[list[Token], str | None]:
    """The engine's own arguments where the command runs it through a launcher that takes its
    options and the launcher's (data/engines/*.yaml `wrapper`: the SGLang router's `--router-*`;
    NVIDIA Dynamo's workers, whose own options are every one the engine does not have), and the
    assumption line that names the launcher's, which are not checked."""
    from servefit.sources import detect

    wrapper = detect.wrapper_of([t.text for t in site.argv])
    if wrapper is None:
        return args, None
    prefix = wrapper.get("flag_prefix")
    if prefix:
        mine, theirs = wrapper_options(args, lambda f: f.startswith(prefix))
    else:
        longs = [k for k in table.by_flag if k.startswith("--")]
        mine, theirs = wrapper_options(args, lambda f: f not in table.by_flag and (
            not f.startswith("--") or not any(k.startswith(f) for k in longs)))  # argparse takes a prefix
    if not theirs:
        return mine, None
    named = " ".join(t.text.split("=", 1)[0] for t in theirs if t.text.startswith("-"))
    return mine, f"{named}: options of {wrapper['name']}, not of {title}'s server (not checked)"


def moving_tag(site: LaunchSite | None) -> str | None:
    """The tag when the server runs the engine's own image by a tag that moves with its releases
    (`vllm/vllm-openai:latest`, no tag, `nightly`, llama.cpp `server-cuda`, Ollama `rocm`): the
    newest release runs where it is pulled, so that is the version given. None otherwise (a
    version in the tag, a digest, another image, someone else's build of the engine)."""
    import re

    from servefit.sources.detect import engine_of_image, split_image
    from servefit.sources.image_release import official_image

    if site is None or not site.image or "@" in site.image or engine_of_image(site.image) != site.engine:
        return None
    if official_image(site.image) is False:  # a rebuild (opea/vllm-gaudi:latest): its tag follows its own releases
        return None
    tag = split_image(site.image)[1] or "latest"
    if re.search(r"\d+\.\d+|\bb\d{3,}", tag.replace("-", " ")) or "$" in tag or "{" in tag:
        return None
    return tag


def own_release_image(image: str | None) -> bool:
    """A rebuild or someone's own image whose tag looks like a release (`1.0`, `b6000`) but is not the
    engine's (image_release.version_of_image gives none)."""
    from servefit.sources.detect import split_image
    from servefit.sources.image_release import LLAMA_BUILD, VERSION, version_of_image

    tag = split_image(image)[1] if image else None
    looks = bool(tag and (VERSION.match(tag) or LLAMA_BUILD.search(tag.replace("-", " "))))
    return looks and version_of_image(image) is None


def implied_release(table: OptionTable, used: Iterable[str], current: str, version: str | None,
                    site: LaunchSite | None = None) -> Implied | None:
    """With no version given (`version` None, and no image tag that moves with the releases): what
    the options the server uses (flags as the table spells them, environment variables) say about
    its release (OptionTable.implied_release); a given version is never second-guessed."""
    return None if version or moving_tag(site) else table.implied_release(used, current)


def unpinned(title: str, implied: Implied | None, site: LaunchSite | None = None, version: str | None = None) -> str:
    """Why the newest release judges a config's flags, for the findings that depend on it ("":
    a version was given, or the flags date the config)."""
    if version:
        return ""
    if implied is not None and implied.version is None:
        return (f"no version given, and no {title} release has every option this config uses, so servefit "
                "models the newest: pin the image tag or pass --engine-version")
    tag = moving_tag(site)
    return f"the image tag {tag} runs the newest release" if tag else ""


@rule("SF005")
def assume_version(cfg: EngineConfig, title: str, current: str, version: str | None, *,
                   hint: str = "--engine-version", vkey: Callable[[str], Any] | None = None,
                   implied: Implied | None = None, where: Mapping[str, Span | None] | None = None) -> None:
    """Say which release was modelled, loudly when it was not given: the one the options the
    config uses imply (`implied`, with SF005 on the option that dates it, `where` its spans),
    else the newest; with `vkey` (the engine's version sort key), that a given version is newer
    than the newest modelled."""
    pin = f"pass {hint} or pin the image tag"
    if version is None and cfg.site is not None and own_release_image(cfg.site.image):
        pin = f"the tag of {cfg.site.image} counts that build's own releases, not {title}'s: pass {hint}"
    if version is None and implied is not None:
        where = where or {}
        if implied.version is not None:
            dated = ", ".join(f"{n} ({why})" for n, why in implied.why)
            said = (f"{title} {implied.version} assumed (no version given; {dated} dates the config to that "
                    f"release line, the newest servefit read that has every option it uses; {pin})")
            shown = implied.version
        else:
            parts = ", ".join(f"{n} ({why})" for n, why in implied.why)
            said = (f"{title} {current} assumed (no version given, and no release has every option this config "
                    f"uses: {parts}; the newest release modelled; {pin})")
            shown = current
        cfg.assumptions.insert(0, f"WARNING: {said}")
        first = implied.why[0][0]
        cfg.findings.append(finding("SF005", f"{title} {shown} assumed: {said.split(' assumed (', 1)[1][:-1]}",
                                    span=where.get(first), site=cfg.site.name if cfg.site else ""))
    elif version is None and (tag := moving_tag(cfg.site)):  # the engine's own image by a moving tag: given
        cfg.assumptions.insert(0, f"{title} {current} assumed: the image tag {tag} runs the newest release, the "
                                  f"newest servefit models (pass {hint} to check another)")
    elif version is None:
        cfg.assumptions.insert(0, f"WARNING: {title} {current} assumed (no version given: the newest release "
                                  f"modelled; older releases size memory differently, {pin})")
    elif vkey is not None and vkey(version) > vkey(current):
        cfg.assumptions.append(f"{title} {version} is newer than the newest release modelled ({current})")


@dataclass(frozen=True)
class Knob:
    """A setting tune may turn: canonical name and the values valid for this config."""

    name: str
    values: tuple[Any, ...]


class Engine:
    """Base class; subclasses set the class attributes and implement parse/plan."""

    name: str = ""
    title: str = ""  # human name: "vLLM", "llama.cpp"
    default_version: str = ""
    image_patterns: tuple[str, ...] = ()  # substrings of container image names
    # words whose presence makes the sources read a file for this engine (plugins; the built-ins
    # are in data/engines/<name>.yaml)
    markers: tuple[str, ...] = ()
    # the server loads models when requests name them (`ollama serve`): a command without a
    # model is not a problem, only nothing to plan (SF115 says so, unless the engine's own rule
    # named here does: llama.cpp's router, LCPP015)
    models_on_request: bool = False
    unnamed_models_code: str = ""

    def command_length(self, words: list[str]) -> int:
        """How many leading words are this engine's command (0: not this engine)."""
        raise NotImplementedError

    def parse(self, site: LaunchSite, version: str | None = None) -> EngineConfig:
        raise NotImplementedError

    def plan(self, cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> MemoryPlan:
        raise NotImplementedError

    def knobs(self, cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> list[Knob]:
        return []

    def matches_image(self, image: str | None) -> bool:
        return bool(image) and any(p in image.lower() for p in self.image_patterns)  # type: ignore[union-attr]

    def link_sites(self, sites: list[LaunchSite], scanned: set[str]) -> list[LaunchSite]:
        """Join this engine's servers with the files they use elsewhere (`scanned`: the files
        already read in this run). Most engines have nothing to join."""
        return sites

    def tune_adapter(self) -> Any:
        """The tune adapter (tune.space.Adapter) for this engine's knobs; None: tune does not
        know them."""
        return None

    def image_command(self, image: str | None) -> list[str] | None:
        """The command an image of this engine runs when a file gives only arguments."""
        return None

    # -- sources: this engine's own charts, operator resources and config files --------------
    # (the recognition data says which: `chart_keys`, `resource_kinds`, `config_files`)
    def scan_chart(self, y: Any, root: Any, fc: Any, label: str) -> bool:
        """Helm values of this engine's own chart as servers (fc.add); True when they were its."""
        return False

    def scan_resource(self, y: Any, doc: Any, fc: Any, label: str) -> None:
        """A Kubernetes resource of this engine's operator (one of its `resource_kinds`) as servers."""

    def scan_config(self, y: Any, doc: Any, fc: Any) -> bool:
        """A YAML document that is one of this engine's own config files, as a server; True when it was."""
        return False

    # -- tune: how a changed setting is written back -----------------------------------------
    def expand_args(self, args: list[Token], site: LaunchSite) -> list[Token]:
        """The arguments as the engine reads them, with the spans of where each is written (vLLM
        splices a `--config FILE`'s keys in, spans in that file). Most engines read them as given."""
        return args

    def written_as(self, name: str, site: LaunchSite | None = None) -> tuple[str, str] | None:
        """Where a setting goes when the file does not write it yet: ("env", VARIABLE), ("parameter",
        NAME) in the model file the site carries, or None for the engine's own flag."""
        return None

    def table(self, key: str) -> dict[str, Any]:
        """A section of this engine's data: `logs` (what diagnose reads in its logs), `sweep` (its
        context setting and the variants worth sweeping), `recognise`, `listen`, `parallel`. The
        built-in engines keep them in data/engines/<name>.yaml; a plugin returns its own."""
        from servefit import data

        try:
            return dict(data.load(f"engines/{self.name}.yaml").get(key) or {})
        except (OSError, ValueError):
            return {}

    def context_limit(self, model: ModelSpec, version: str | None = None) -> int:
        """The longest context worth sweeping: the model's own limit (max_position_embeddings with
        its rope scaling, model_max_length when the tokenizer sets one), derived as vLLM's
        ModelConfig derives it; an engine that derives it otherwise overrides this."""
        from servefit.engines.vllm.checks import derived_max_len
        from servefit.engines.vllm.era import era

        return derived_max_len(model, era(None), False)

    # -- diagnose: what this engine's failures mean and what fixes them -----------------------
    def oom_cause(self, primary: Event, related: list[Event], figures: dict[str, Any]) -> tuple[str, str, str] | None:
        """(root cause, timing, confidence) for a failure that one of this engine's own log lines
        reports, where the line's `cause` in the logs table is not the whole answer; None: the
        table's cause, else judged by when it happened (like a PyTorch OOM)."""
        return None

    def oom_summary(self, diag: Diagnosis, primary: Event) -> str | None:
        """What this engine's failure line says, with its figures (diag: root cause, stage and
        figures already set); None: the root cause's sentence."""
        return None

    def oom_fixes(self, fx: Fixing) -> list[str] | None:
        """The fix lines for a diagnosis of this engine's log, most direct first, in its own flags
        (fx: the diagnosis, the setting located in the user's file, helpers); None: generic ones."""
        return None


def split_command(engine: Engine, argv: list[Token], image: str | None = None) -> tuple[list[Token], list[Token]]:
    """(command words, engine arguments). With only an image (a container whose args are
    the engine's arguments), the command is empty."""
    n = engine.command_length([t.text for t in argv])
    return argv[:n], argv[n:]
