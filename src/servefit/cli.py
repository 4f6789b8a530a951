"""servefit's command line. Each subcommand lives in servefit/commands/<name>.py with
`add_parser(subparsers)` and `run(args) -> int`; this file only wires them up, so the
start-up path imports nothing heavy."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import NoReturn

from servefit import __version__

COMMANDS = ["estimate", "explain", "lint", "tune", "diagnose", "gpus", "models", "rules", "rule", "completion"]
DESCRIPTION = ("Lint and tune LLM serving configs (vLLM, llama.cpp, Ollama, TGI, SGLang): find every server in "
               "a deployment repo and predict the GPU memory the engine will plan.")


_ARGV: list[str] = []  # this run's arguments: a usage error never echoes a credential among them


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints usage too)
        self.exit(2, f"servefit: error: {_redact(message, _ARGV)}\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with `only` just that command's parser: a run of one command
    imports and builds one subcommand, not all ten."""
    parser = _Parser(prog="servefit", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"servefit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in [only] if only in COMMANDS else COMMANDS:
        try:
            mod = importlib.import_module(f"servefit.commands.{name}")
        except ModuleNotFoundError:
            continue
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from servefit.core import UsageError

    argv = sys.argv[1:] if argv is None else argv
    _ARGV[:] = argv
    import gc

    # a run is short and builds long-lived tables (the catalog's index): collect the youngest generation
    # less often, as mypy's main does, so full collections do not rescan those tables mid-lint
    gc.set_threshold(200_000, 30, 30)
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    args.argv = list(argv)  # as typed: messages that show the command to run next
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    from servefit.termsafe import SafeWriter

    real = sys.stdout
    sys.stdout = SafeWriter(real)  # type: ignore[assignment]  # nothing from an input reaches the terminal raw
    try:
        return int(args.run(args) or 0)
    except UsageError as exc:
        print(f"servefit: error: {_redact(str(exc), argv)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # unreadable paths and the like: the user's input, one line
        print(f"servefit: error: {_redact(str(exc), argv)}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: still one line; SERVEFIT_DEBUG=1 shows the traceback
        if os.environ.get("SERVEFIT_DEBUG"):
            raise
        print(f"servefit: internal error: {type(exc).__name__}: {_redact(str(exc), argv)} (set SERVEFIT_DEBUG=1 "
              "for the traceback)", file=sys.stderr)
        return 2
    finally:
        sys.stdout = real


def entry() -> NoReturn:
    """The `servefit` program (console script and `python -m servefit`): main(), then a quick exit.
    Tearing the interpreter down (freeing every object of every module) is ~8% of a one-file
    lint; as mypy does, the exit handlers run and the output is flushed, then the process ends
    without it. Where another thread still runs, the exit is the ordinary one. The cycle
    collector is off for the run (not for tune and diagnose, whose searches and logs can run long):
    start-up allocates ~100k objects that live until the end, and
    scanning them again and again is ~5% of a lint (peak memory of a 1,000-file lint is the same
    without it: the run holds what it reads until the report anyway)."""
    import gc

    from servefit import codecache

    command = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] in COMMANDS else ""
    if command not in ("tune", "diagnose"):  # a long search or a long log keeps the collector
        gc.disable()
    # before the first dataclass and pattern: they come compiled from the cache
    codecache.install(command)
    code = main()
    if "threading" in sys.modules and sys.modules["threading"].active_count() > 1:
        sys.exit(code)
    import atexit

    atexit._run_exitfuncs()  # noqa: SLF001 - what Python's own exit runs first (codecache, logging, ...)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more to say
            pass
    os._exit(code)


def _redact(message: str, argv: list[str]) -> str:
    """An error line never echoes a credential, even one given on this command line."""
    from servefit.redact import mask_values, redact_text, secret_values
    from servefit.termsafe import one_line

    return one_line(mask_values(redact_text(message), secret_values((), [argv])))
