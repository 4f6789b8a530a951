"""tmux: the commands a script starts in a tmux session. `tmux new-session | new-window | split-window |
respawn-pane [OPTIONS] [shell-command ...]` runs its shell-command (one argument: through the shell; several:
the program itself), and `tmux send-keys [-t PANE] KEY ...` types its keys into the pane's shell, which runs the
line at each Enter (`C-m`, `Enter`, `KPEnter`). Its options and their values: tmux(1), COMMANDS and WINDOWS AND
PANES. A script that types the server's command into a session (`tmux send-keys -t vllm "$CMD_START" C-m`) starts
that server."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.sources.shell import Vars, Word, split_commands

if TYPE_CHECKING:
    from servefit.sources.launch import Ctx, Launch

# the commands that run a shell-command, with the options of theirs that take a value (the rest are flags)
RUNS = {"new-session": "cefnstxyF", "new": "cefnstxyF", "new-window": "ceFnt", "neww": "ceFnt",
        "split-window": "celtFp", "splitw": "celtFp", "respawn-pane": "cet", "respawnp": "cet",
        "respawn-window": "cet", "respawnw": "cet"}
SEND = {"send-keys": "Nt", "send": "Nt"}
ENTER = {"Enter", "C-m", "KPEnter", "^M"}
GLOBAL = "cfLST"  # tmux's own options before the command that take a value (-L socket, -S path, -f file)


def tmux(words: list[Word], ctx: Ctx, env: Vars) -> list[Launch]:
    """`words` after `tmux`."""
    from servefit.sources.launch import from_commands, from_words

    i = 0
    while i < len(words) and words[i].text.startswith("-") and len(words[i].text) > 1:
        i += 2 if words[i].text[1:] in GLOBAL else 1
    if i >= len(words):
        return []
    verb = words[i].text
    table = RUNS.get(verb) or SEND.get(verb)
    if table is None:
        return []
    j = i + 1
    while j < len(words) and words[j].text.startswith("-") and len(words[j].text) > 1 and words[j].text != "--":
        opt = words[j].text[1:]
        j += 2 if len(opt) == 1 and opt in table else 1  # `-d`, `-s NAME`; `-dP` are flags together
    j += 1 if j < len(words) and words[j].text == "--" else 0
    rest = words[j:]
    found: list[Launch] = []
    if verb in RUNS:
        if len(rest) == 1:
            found = from_commands(split_commands(rest[0].to_src(), env.copy()), ctx, env)
        elif rest:
            found = from_words(rest, ctx, env)
        return found
    typed: list[Word] = []
    for w in rest:
        if w.text in ENTER:
            if typed:
                line = Word([p for t in typed for p in t.pieces], typed[0].li, [u for t in typed for u in t.unresolved])
                found.extend(from_commands(split_commands(line.to_src(), env.copy()), ctx, env))
            typed = []
        else:
            typed.append(w)
    return found
