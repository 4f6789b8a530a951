"""Commands a shell runs from a string: `eval $CMD` (the words joined and read again, quotes
and all) and `sh -c STRING [NAME [ARGS...]]` given the command as separate words (SF119: only the
first word runs)."""

from __future__ import annotations

from servefit.rules.catalog import finding
from servefit.rules.registry import rule
from servefit.sources import detect
from servefit.sources.launch import SKIP_WORDS, Ctx, Launch, from_commands
from servefit.sources.shell import Vars, Word, split_commands
from servefit.sources.text import Src


@rule("SF119")
def split_command(words: list[Word], payload: Word, ctx: Ctx) -> None:
    """SF119: `sh -c python3 -m sglang.launch_server ...` as separate words: the shell runs only
    its command string (`python3`); the words after it are its $0, $1, ..."""
    k = next((j for j, w in enumerate(words) if w is payload), None)
    rest = [w.text for w in words[k + 1:]] if k is not None else []
    if not rest or any(c.isspace() for c in payload.text.strip()) or \
            detect.find_engine([payload.text, *rest]) is None:
        return
    shown = " ".join(rest[:3]) + (" ..." if len(rest) > 3 else "")
    ctx.findings.append(finding(
        "SF119", f"`sh -c` runs only its command string `{payload.text}`; `{shown}` become the shell's $0, $1, ...: "
        "the engine never starts. Give the whole command as one string", span=payload.token().span))


def eval_launches(args: list[Word], ctx: Ctx, env: Vars) -> list[Launch]:
    """`eval ARGS`: bash joins the words with spaces and runs the result as a command line, so
    quotes inside a variable's value (`CMD="vllm serve --host '0.0.0.0'"`) are quotes again."""
    text: list[str] = []
    offs: list[int] = []
    for k, w in enumerate(args):
        src = w.to_src()
        if k:
            text.append(" ")
            offs.append(offs[-1] if offs else src.off(0))
        text.append(src.text)
        offs.extend(src.off(j) for j in range(len(src.text)))
    offs.append(offs[-1] + 1 if offs else 0)
    inner = Ctx(ctx.file, ctx.li, ctx.findings, ctx.exported_only, ctx.depth + 1, ctx.ollama_models,
                ctx.modelfile_refs, created=ctx.created, pulled_vars=ctx.pulled_vars)
    found = from_commands(split_commands(Src("".join(text), args[0].li, offs=offs), env.copy()), inner, env)
    for launch in found:  # the words' unset variables are the server's
        for w in args:
            launch.unresolved.extend(w.unresolved + w.substituted_refs())
    return found


def server_in_argument(words: list[Word], ctx: Ctx) -> None:
    """SF108 where a program servefit does not run is handed a server's whole command line as one argument
    (`run_engine sglang "source venv/bin/activate && exec python -m sglang.launch_server ..."`, a shell function
    that runs it with `bash -c "$2"`; `ssh gpu-host "vllm serve ..."`): that server is not read, and said so."""
    from servefit.sources.problems import not_read

    for w in words[1:]:
        if not any(c.isspace() for c in w.text.strip()):
            continue
        for c in split_commands(w.to_src(), Vars()):
            texts = [x.text for x in c.words]
            k = 0  # the command's own program, past `exec`, `nohup`, `VAR=value`: a log line's text is no command
            while k < len(texts) and (texts[k] in SKIP_WORDS or c.words[k].assignment() is not None):
                k += 1
            if detect.recognise(texts[k:]) is None:
                continue
            said = " ".join(texts[k:])
            said = said if len(said) <= 80 else said[:77] + "..."
            ctx.findings.append(not_read(
                f"`{words[0].text}` is given a server's command as one argument (`{said}`): servefit does not run "
                f"`{words[0].text}`, so that server was not read; write the command on a line of its own, or lint it "
                "with `servefit lint -- COMMAND`", span=w.token().span))
            return
