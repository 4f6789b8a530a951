"""`servefit completion bash|zsh|fish`: a shell completion script, generated from the parser
itself so it always lists today's commands, options and choices.

    servefit completion bash > ~/.local/share/bash-completion/completions/servefit
    servefit completion zsh > "${fpath[1]}/_servefit"
    servefit completion fish > ~/.config/fish/completions/servefit.fish
"""

from __future__ import annotations

import argparse
import re
import sys

SHELLS = ("bash", "zsh", "fish")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh or fish)",
                       description="Print a completion script for your shell; see `servefit completion --help`.",
                       epilog="bash: servefit completion bash > ~/.local/share/bash-completion/completions/servefit  "
                              "zsh: servefit completion zsh > \"${fpath[1]}/_servefit\"  "
                              "fish: servefit completion fish > ~/.config/fish/completions/servefit.fish")
    p.add_argument("shell", choices=SHELLS)
    p.set_defaults(run=run)


Option = tuple[list[str], str, list[str], bool]  # (option strings, help, choices, takes a value)


def commands() -> dict[str, tuple[str, list[Option]]]:
    """{command: (help, options)} read from servefit's own parser."""
    from servefit.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    out: dict[str, tuple[str, list[Option]]] = {}
    for name, p in sub.choices.items():
        opts: list[Option] = []
        for a in p._actions:
            if not a.option_strings:
                continue
            takes = a.nargs != 0
            opts.append((list(a.option_strings), a.help or "", [str(c) for c in a.choices or []], takes))
        out[name] = (helps.get(name, ""), opts)
    return out


def _plain(text: str) -> str:
    """Help text safe inside single quotes and zsh's [..] / fish's -d."""
    text = re.sub(r"\s+", " ", text.replace("%(default)s", "")).strip()
    text = text.replace("'", "\u2019")  # a typographic apostrophe needs no shell quoting
    return re.sub(r"[\[\]:`\\$\"]", "", text)[:90]


def bash(cmds: dict[str, tuple[str, list[Option]]]) -> str:
    lines = ["# bash completion for servefit (servefit completion bash)", "_servefit() {",
             '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
             '    if [ "$COMP_CWORD" -eq 1 ]; then',
             f'        COMPREPLY=($(compgen -W "{" ".join(cmds)} --help --version" -- "$cur"))',
             "        return", "    fi", '    local opts=""', '    case "${COMP_WORDS[1]}" in']
    for name, (_, opts) in cmds.items():
        words = " ".join(s for o in opts for s in o[0])
        lines.append(f'        {name}) opts="{words}"')
        choice = [(o[0], o[2]) for o in opts if o[2]]
        if choice:
            lines.append('            case "$prev" in')
            for strings, ch in choice:
                lines.append(f'                {"|".join(strings)}) COMPREPLY=($(compgen -W "{" ".join(ch)}" -- "$cur")); '
                             "return;;")
            lines.append("            esac")
        lines.append("            ;;")
    lines += ["    esac",
              '    if [[ "$cur" == -* ]]; then',
              '        COMPREPLY=($(compgen -W "$opts" -- "$cur"))',
              "    else",
              '        COMPREPLY=($(compgen -f -- "$cur"))',
              "    fi", "}", "complete -o filenames -o bashdefault -F _servefit servefit", ""]
    return "\n".join(lines)


def zsh(cmds: dict[str, tuple[str, list[Option]]]) -> str:
    lines = ["#compdef servefit", "# zsh completion for servefit (servefit completion zsh)", "_servefit() {",
             "    local -a cmds", "    cmds=("]
    lines += [f"        '{name}:{_plain(h)}'" for name, (h, _) in cmds.items()]
    lines += ["    )", "    if (( CURRENT == 2 )); then", "        _describe 'command' cmds", "        return", "    fi",
              "    case $words[2] in"]
    for name, (_, opts) in cmds.items():
        specs = []
        for strings, h, ch, takes in opts:
            value = (f":value:({' '.join(ch)})" if ch else ":value:_files") if takes else ""
            group = "{" + ",".join(strings) + "}" if len(strings) > 1 else strings[0]
            specs.append(f"'({' '.join(strings)})'{group}'[{_plain(h)}]{value}'")
        lines.append(f"        {name}) _arguments -s {' '.join(specs)} '*:file:_files' ;;")
    lines += ["    esac", "}", 'compdef _servefit servefit', ""]
    return "\n".join(lines)


def fish(cmds: dict[str, tuple[str, list[Option]]]) -> str:
    names = " ".join(cmds)
    lines = ["# fish completion for servefit (servefit completion fish)"]
    for name, (h, _) in cmds.items():
        lines.append(f"complete -c servefit -f -n 'not __fish_seen_subcommand_from {names}' -a {name} -d '{_plain(h)}'")
    for name, (_, opts) in cmds.items():
        for strings, h, ch, takes in opts:
            flags = " ".join(f"-l {s[2:]}" if s.startswith("--") else f"-s {s[1:]}" for s in strings)
            value = f" -xa '{' '.join(ch)}'" if ch else (" -r" if takes else "")
            lines.append(f"complete -c servefit -n '__fish_seen_subcommand_from {name}' {flags}{value} -d '{_plain(h)}'")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    sys.stdout.write({"bash": bash, "zsh": zsh, "fish": fish}[args.shell](commands()))
    return 0
