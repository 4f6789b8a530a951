"""A container's server: its entrypoint and command as a Kubernetes, compose, Helm, Cloud Run or Dockerfile
file gives them, or the engine image's own entrypoint (and its dispatch script, or its client) when the file
gives only arguments. The reading of the command itself is launch.py's."""

from __future__ import annotations

from servefit.core import Token
from servefit.rules.catalog import finding
from servefit.rules.registry import rule
from servefit.sources import detect, image_release
from servefit.sources.launch import (
    NODE_STARTERS,
    PROGRAM_PATH,
    SKIP_WORDS,
    Ctx,
    Launch,
    from_commands,
    from_words,
)
from servefit.sources.shell import Vars, Word, split_commands


def _image_launch(eng: str, program: list[str], args: list[Word], default_cmd: list[str], image: Token | None,
                  ctx: Ctx, env: Vars) -> Launch:
    """The server an engine image runs: its program, then the container's arguments (or the image's CMD)."""
    argv = [Token(w) for w in program] + ([w.token() for w in args] if args else [Token(w) for w in default_cmd])
    unres = [u for w in args for u in w.unresolved]
    line = args[0].line if args else (ctx.li.pos(image.span.start)[0] if image and image.span else 0)
    return Launch(eng, argv, dict(env.values), line, unresolved=unres, env_taint=dict(env.taint))


@rule("SF106")
def container(image: Token | None, entry: list[Word] | None, cmd: list[Word] | None, ctx: Ctx,
              env: Vars) -> list[Launch]:
    """A container's launch: its entrypoint (k8s `command`, compose `entrypoint`) and command
    (k8s `args`, compose `command`), or the engine image's own entrypoint when none is set."""
    img = image.text if image is not None else None
    found: list[Launch]
    disp = image_release.dispatched(img, [w.text for w in cmd or []]) if not entry else None
    client = image_release.client_image(img) if not entry else None
    if entry:
        found = from_words(list(entry) + list(cmd or []), ctx, env)
    elif client is not None and image is not None:  # llama.cpp's light image: llama-cli, whatever the arguments
        from servefit.sources.problems import unread_server

        ctx.findings.append(unread_server(
            f"{img} runs {client[1]['runs']}, a command-line client, not a server: this container serves nothing "
            f"(its arguments go to {client[1]['runs']}); for a server use {client[1]['instead']}", span=image.span))
        found = []
    elif disp is not None and cmd:  # llama.cpp's full image: `--server ...` runs llama-server with the rest
        found = [_image_launch(disp[0], disp[1], cmd[1:], [], image, ctx, env)]
    else:
        texts = [w.text for w in cmd or []]
        eng_of_image = detect.engine_of_image(img) or detect.server_build_image(img, texts)
        ie = image_release.image_entrypoint(img) or (image_release.image_entrypoint(img, eng_of_image) if eng_of_image else None)
        # a command rather than the engine's arguments: a server, a shell, or a Python program (an
        # engine image running `python3 -m sglang.bench_serving` is a benchmark client, no server)
        starts_command = bool(texts) and (detect.recognise(texts) is not None
                                          or detect.program(texts[0]) in detect.SHELLS
                                          or detect.program(texts[0]) in SKIP_WORDS
                                          or detect.program(texts[0]).startswith("python")
                                          or detect.program(texts[0]) in NODE_STARTERS
                                          or PROGRAM_PATH.match(texts[0]) is not None)
        if cmd and (starts_command or ie is None):
            runs = ""
            if ie is not None and ie[2] and starts_command:
                shown = " ".join(ie[0])
                runs = f"`{shown} {' '.join(texts[:3])} ...`"
                ctx.findings.append(finding(
                    "SF106", f"{img} already runs `{shown}`; with this command the container runs "
                    f"{runs} and the engine rejects it. Set the entrypoint "
                    "(Dockerfile `ENTRYPOINT`, k8s `command`, compose `entrypoint`) or pass only the engine's arguments",
                    span=cmd[0].token().span))
            found = from_words(list(cmd), ctx, env)
            for launch in found if runs else []:  # estimate, explain and tune say so too, not "starts" (SF106)
                launch.facts["refused"] = (f"the container runs {runs} ({img} already runs `{shown}`), which the "
                                           "engine rejects: set the entrypoint or pass only the engine's arguments")
        elif ie is not None and cmd and _command_in_one_word(cmd[0]):
            # k8s `args: ["vllm serve MODEL --max-model-len 8192 | tee log"]`: the server meant is read; an official
            # image's entrypoint gets the whole line as one argument (vLLM takes it as the model name and refuses it)
            found = from_commands(split_commands(cmd[0].to_src(), env.copy()), ctx, env)
            if ie[2]:
                shown = " ".join(ie[0])
                said = cmd[0].text if len(cmd[0].text) <= 48 else cmd[0].text[:45] + "..."
                why = (f"{img} already runs `{shown}`, and this command is one string holding a command line: the "
                       f"engine gets `{shown} '{said}'`, the whole line as one argument, and rejects it")
                ctx.findings.append(finding("SF106", why + ". Write each word as its own list item, or run the line "
                                            "through a shell (k8s `command: [sh, -c]`, compose `entrypoint: [sh, -c]`)",
                                            span=cmd[0].token().span))
                for launch in found:
                    launch.facts["refused"] = why + ": write each word as its own list item, or run it through a shell"
        elif ie is not None and not cmd and not ie[2] and img and image_release.release_image(img) is True:
            found = []  # the engine's own image sets no server entrypoint (lmsysorg/sglang): it runs a shell
        elif ie is not None:
            eng = eng_of_image
            assert eng is not None
            found = [_image_launch(eng, ie[0], cmd or [], ie[1], image, ctx, env)]
            if not cmd and not ie[2]:
                from servefit.sources.image_env import env_named_options

                env_named_options(found[0], eng, img or "", env)
        else:
            found = []
    if not found and image is not None and not entry and cmd and detect.program(cmd[0].text) in NODE_STARTERS \
            and detect.engine_of_image(img) is not None:
        from servefit.sources.helm import image_not_read

        ctx.findings.append(image_not_read(image, why=(
            f"this container starts a Ray node (`{' '.join(w.text for w in cmd[:2])}`), not the server: a server Ray "
            "runs there comes from a Ray Serve application or a job servefit does not read, so its settings were "
            "not checked")))
    elif not found:
        _launcher_not_started(image, ctx)
    for launch in found:
        if launch.image is None:
            launch.image = img
        if image is not None and image.span is not None:
            launch.facts.setdefault("image_span", image.span)
    return found


def _command_in_one_word(word: Word) -> bool:
    """Whether a container's first argument is a whole command line written as one string (a server, a shell or a
    Python program, then more words), not an argument."""
    words = word.text.split()
    return len(words) > 1 and (detect.recognise(words) is not None or detect.program(words[0]) in detect.SHELLS
                               or detect.program(words[0]).startswith("python"))


def _launcher_not_started(image: Token | None, ctx: Ctx) -> None:
    """SF116 on a container of an image that carries an engine but runs it only when a command
    starts it (IPEX-LLM's Ollama), where no such command was found: not a silent "0 servers"."""
    hit = detect.launcher_image(image.text if image is not None else None)
    if hit is None or image is None:
        return
    from servefit.engines import get
    from servefit.sources.problems import unread_server

    ctx.findings.append(unread_server(
        f"{image.text} runs {get(hit[0]).title} only when a command starts it ({hit[1]}); this container's "
        "command starts none that servefit can read, so no server was read here. Give the container that "
        "command, or lint the script it runs", span=image.span))
