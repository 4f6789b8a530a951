"""Someone else's build of an engine image run without a command: its own entrypoint is not in
the file, and such images commonly take their configuration from environment variables named
after the engine's options (MODEL, MAX_MODEL_LEN)."""

from __future__ import annotations

from servefit.core import Token
from servefit.sources.launch import Ctx, Launch
from servefit.sources.shell import Vars, Word


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


def llama_arg_server(image: Token, cmd: list[Word], env: Vars, ctx: Ctx) -> list[Launch]:
    """A container of an image servefit does not know (`image: llama-cpp-docker`, built elsewhere)
    whose environment sets an engine's own variables (its `env_prefix`: llama-server's LLAMA_ARG_MODEL,
    LLAMA_ARG_CTX_SIZE, which only llama-server reads: common/arg.cpp, each option's `set_env`): the
    container is read as that engine's program with its command as the arguments, and that is said."""
    from servefit.sources.detect import engine_tables, reads_setting_env

    for name, t in engine_tables():
        prefix, programs = t.get("env_prefix"), t.get("programs") or []
        named = sorted(k for k in env.values if prefix and k.startswith(prefix) and reads_setting_env(name, k))
        if not named or not programs:
            continue
        program = programs[0]["program"]
        line = cmd[0].line if cmd else (ctx.li.pos(image.span.start)[0] if image.span is not None else 0)
        launch = Launch(name, [Token(program), *(w.token() for w in cmd)], dict(env.values), line, image=image.text,
                        unresolved=[u for w in cmd for u in w.unresolved], env_taint=dict(env.taint))
        if image.span is not None:
            launch.facts["image_span"] = image.span
        shown = ", ".join(named[:3]) + (", ..." if len(named) > 3 else "")
        launch.facts["notes"] = [f"{image.text} is not an image servefit knows, but its environment sets "
                                 f"{program}'s own variables ({shown}): it is read as {program} with its "
                                 "command as the arguments; lint the image's Dockerfile to be sure"]
        return [launch]
    return []
