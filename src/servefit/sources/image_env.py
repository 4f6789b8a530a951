"""Someone else's build of an engine image run without a command: its own entrypoint is not in
the file, and such images commonly take their configuration from environment variables named
after the engine's options (MODEL, MAX_MODEL_LEN)."""

from __future__ import annotations

from servefit.core import Token
from servefit.sources.launch import Launch
from servefit.sources.shell import Vars


def env_named_options(launch: Launch, engine: str, image: str, env: Vars) -> None:
    """Someone else's build of an engine image, run without a command (its own entrypoint, which
    servefit cannot read), configured by environment variables named after the engine's options
    (MODEL, MAX_MODEL_LEN, GPU_MEMORY_UTILIZATION: substratusai/vllm's chart): taken as those
    options, which such entrypoints pass on, and said so (the note lands in the assumptions)."""
    from servefit.engines import get
    from servefit.engines.options import load_table

    try:
        table = load_table(engine)
        title = get(engine).title
    except Exception:  # noqa: BLE001 - a plugin engine has no table
        return
    added: list[str] = []
    for name, tok in env.values.items():
        opt = table.by_flag.get("--" + name.lower().replace("_", "-"))
        if opt is None or not opt.takes_value or name in table.by_env or name.startswith(engine.upper() + "_"):
            continue
        launch.argv += [Token(opt.flags[0]), tok]
        added.append(name)
    if added:
        launch.facts["notes"] = [f"{image} is not {title}'s own image and its command is not in this file: its "
                                 f"environment variables named after options ({', '.join(added)}) are taken as those "
                                 "options, as such images' entrypoints pass them on; lint the entrypoint script to be sure"]
