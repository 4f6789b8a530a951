"""Options shared by the commands that evaluate servers (estimate, explain, tune)."""

from __future__ import annotations

import argparse
import os

from servefit.config import user_online
from servefit.conventions import add_color_arg
from servefit.core import UsageError
from servefit.pipeline import Target
from servefit.units import engine_version, parse_size

# servefit's own options that users also put after `--` (e.g. `-- vllm serve X --gpu H100`)
TRAILING = {"--gpu": 1, "--gpus": 1, "--gpu-memory": 1, "--engine-version": 1, "--format": 1, "--output-format": 1,
            "--sweep": 1, "--model-config": 1}


def add_target_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpu", help="target GPU, over what the file says (any name: nvidia-smi, k8s label, GKE name, "
                                 "instance type)")
    p.add_argument("--gpus", type=int, help="number of GPUs available to the server, over what the file says")
    p.add_argument("--gpu-memory", help="override the GPU's memory (e.g. 48GiB for a modded card)")
    p.add_argument("--engine-version", help="engine version to model (default: the image tag's, else the newest "
                                            "servefit knows)")
    p.add_argument("--model", help="model reference, overriding the one in the command")
    p.add_argument("--model-config", help="path to the model's config.json (or its directory)")
    p.add_argument("--online", action="store_true", help="allow reading model configs from the Hugging Face Hub")
    p.add_argument("--output-format", "--format", dest="format", choices=["text", "json"], default="text",
                   help="text (default) or json")
    p.add_argument("--stdin-filename", metavar="NAME",
                   help="the file name standard input stands for (`-`): it decides how the text is read")
    add_color_arg(p)
    p.add_argument("target", nargs="*", help="a file to read servers from (- for standard input), "
                                             "or `-- COMMAND...`")


def split_trailing(words: list[str], args: argparse.Namespace) -> list[str]:
    """Pull servefit's own options out of the launch command (they are never engine flags)."""
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        key, eq, val = w.partition("=")
        dest = key[2:].replace("-", "_")
        if key == "--output-format" and not hasattr(args, dest):  # lint's --output-format is --format
            dest = "format"
        if key in TRAILING and hasattr(args, dest):
            if not eq:
                if i + 1 >= len(words):
                    raise UsageError(f"{key} needs a value")
                val = words[i + 1]
                i += 1
            setattr(args, dest, val)
            i += 1
            continue
        out.append(w)
        i += 1
    return out


def one_word_target(words: list[str], args: argparse.Namespace) -> list[str]:
    """A target given as one word that is no file: a launch command quoted whole (`"vllm serve
    MODEL --tp 2"`) is split as a shell would; a path that does not exist is said to be missing
    rather than read as a command."""
    if len(words) != 1 or os.path.exists(words[0]) or words[0] == "-":
        return words
    w = words[0]
    if any(c.isspace() for c in w.strip()):
        import shlex

        try:
            return split_trailing(shlex.split(w), args)
        except ValueError as exc:
            raise UsageError(f"cannot read the quoted command ({exc}): give it after `--` instead") from None
    if "/" in w or os.sep in w or os.path.splitext(w)[1]:
        from servefit import engines

        if engines.detect([w], None) is None:
            raise UsageError(f"{w}: no such file or directory")
    return words


def target_from(args: argparse.Namespace) -> Target:
    gpus = args.gpus
    if isinstance(gpus, str):
        try:
            gpus = int(gpus)
        except ValueError:
            raise UsageError(f"--gpus: not a count: {gpus!r}") from None
    if gpus is not None and not 1 <= gpus <= 65536:
        raise UsageError(f"--gpus must be 1 to 65,536 (got {gpus})")
    return Target(gpu=args.gpu, gpus=gpus,
                  gpu_memory=parse_size(args.gpu_memory) if args.gpu_memory else None,
                  engine_version=engine_version(args.engine_version), model=args.model, model_config=args.model_config,
                  online=user_online(args))
