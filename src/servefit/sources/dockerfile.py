"""Dockerfiles: the final stage's ENTRYPOINT and CMD (exec form as JSON, shell form run by
`/bin/sh -c`), ENV (both syntaxes) and ARG defaults, FROM with stages (`FROM base AS x`, then
`FROM x` inherits), the `# escape=` directive, continuations with comment lines dropped.

Docker semantics kept: a CMD alone is appended to the base image's entrypoint (the engine
image's `vllm serve` and friends); setting ENTRYPOINT drops the base CMD; a shell-form
ENTRYPOINT ignores CMD; the exec form expands no variables (SF107 when it holds `$VAR`); the
shell form sees ENV values (not ARG values, which exist only at build time).
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from dataclasses import dataclass, field

from servefit.core import Token
from servefit.sources import detect, image_release
from servefit.sources.base import FileCtx
from servefit.sources.container import container
from servefit.sources.docker_scripts import Copy, copy_of, run_copied
from servefit.sources.launch import Ctx, Launch
from servefit.sources.ollama_client import ollama_client
from servefit.sources.problems import literal_variable
from servefit.sources.shell import Piece, Vars, Word, expand_word, split_commands, split_words
from servefit.sources.text import Src, align, logical_lines, sub

INSTR = re.compile(r"\s*([A-Za-z]+)(?:\s+|$)")
JSON_STR = re.compile(r'"((?:[^"\\]|\\.)*)"')
ESCAPE = re.compile(r"^#\s*escape\s*=\s*(\S)", re.M | re.I)
VAR = re.compile(r"\$(?:\{[A-Za-z_]|[A-Za-z_])")


@dataclass
class Stage:
    """One Dockerfile build stage: base image, ARG and ENV in scope, ENTRYPOINT and CMD, and what RUN commands
    put in the image; a later `FROM <stage>` inherits it."""

    name: str | None
    image: Token | None
    scope: Vars = field(default_factory=Vars)  # ARG + ENV, for build-time expansion
    runtime: Vars = field(default_factory=Vars)  # ENV only: what the server process sees
    entry: list[Word] | None = None
    cmd: list[Word] | None = None
    exec_vars: list[Word] = field(default_factory=list)
    built: list[list[Word]] = field(default_factory=list)  # RUN commands: `ollama pull X` puts X in the image
    workdir: str = "/"
    copies: list[Copy] = field(default_factory=list)  # COPY / ADD of build-context files
    fetched: list[str] = field(default_factory=list)  # URLs an ADD puts in the image (a source archive)
    written: set[str] = field(default_factory=set)  # CMD / ENTRYPOINT written in this stage (not inherited)


def _exec_form(src: Src) -> list[Src] | None:
    text = src.text.strip()
    if not text.startswith("["):
        return None
    try:
        vals = json.loads(text)
    except ValueError:
        return None
    if not isinstance(vals, list) or not all(isinstance(v, str) for v in vals):
        return None
    ms = list(JSON_STR.finditer(src.text))
    if len(ms) != len(vals):
        return None
    out = []
    for m, val in zip(ms, vals, strict=True):
        a, b = m.start(1), m.end(1)
        if src.text[a:b] == val:
            out.append(sub(src, a, b))
        else:
            local = align(val, src.text, a, b)
            out.append(Src(val, src.li, offs=[src.off(k) for k in local[:-1]] + [src.end_off(local[-1])]))
    return out


def _synthetic(text: str, src: Src) -> Word:
    """A word Docker adds (`/bin/sh -c` of the shell form): located at the instruction's value,
    zero characters wide, since it is not written in the file."""
    at = src.off(0)
    return Word([Piece(text, at, at, exp=Token(text))], src.li)


def _command(rest: Src, st: Stage) -> list[Word]:
    items = _exec_form(rest)
    if items is not None:
        words = [expand_word(i, None) for i in items]
        # `["/bin/bash", "-c", "vllm serve $MODEL"]`: the shell it runs expands the payload
        shell = bool(words) and detect.program(words[0].text) in detect.SHELLS and \
            any(w.text.startswith("-") and "c" in w.text[1:] for w in words[1:2])
        st.exec_vars = [] if shell else [w for w in words if VAR.search(w.text)]
        return words
    body = rest.text.strip()
    lead = len(rest.text) - len(rest.text.lstrip())
    payload = expand_word(sub(rest, lead, lead + len(body)), None)
    return [_synthetic("/bin/sh", rest), _synthetic("-c", rest), payload]


def stages(fc: FileCtx) -> list[Stage]:
    """The file's build stages in order, each with what it sets (a compose service built from the
    file runs the last one, or its `target`)."""
    m = ESCAPE.search(fc.text[:500])
    escape = m.group(1) if m else "\\"
    found: list[Stage] = []
    global_args = Vars()
    st: Stage | None = None
    for line in logical_lines(fc.src, escape):
        if line.text.lstrip().startswith("#"):
            continue
        im = INSTR.match(line.text)
        if not im:
            continue
        instr = im.group(1).upper()
        rest = sub(line, im.end())
        scope = st.scope if st is not None else global_args
        if instr == "FROM":
            words = [w for w in split_words(rest, global_args) if not w.text.startswith("--")]
            if not words:
                continue
            base = words[0].text
            name = words[2].text if len(words) > 2 and words[1].text.lower() == "as" else None
            parent = next((s for s in found if s.name and s.name == base), None)
            if parent is not None:
                st = Stage(name, parent.image, parent.scope.copy(), parent.runtime.copy(), parent.entry, parent.cmd,
                           built=list(parent.built), workdir=parent.workdir, copies=list(parent.copies))
            else:
                st = Stage(name, words[0].token())
            found.append(st)
        elif st is None and instr == "ARG":
            for w in split_words(rest, global_args):
                a = w.assignment()
                if a is not None:
                    global_args.set(a[0], a[1].token(), a[1].unresolved)
        elif st is None:
            continue
        elif instr == "ARG":
            for w in split_words(rest, scope):
                a = w.assignment()
                if a is not None and st.runtime.get(a[0]) is None:
                    st.scope.set(a[0], a[1].token(), a[1].unresolved)
                elif a is None and global_args.get(w.text) is not None:
                    st.scope.set(w.text, global_args.get(w.text))  # type: ignore[arg-type]
        elif instr == "ENV":
            words = split_words(rest, scope)
            pairs = []
            if words and words[0].assignment() is not None:
                pairs = [(a[0], a[1]) for w in words if (a := w.assignment()) is not None]
            elif words:
                key = words[0].text
                k_end = rest.text.find(key) + len(key)
                val = rest.text[k_end:].strip()
                lead = k_end + (len(rest.text[k_end:]) - len(rest.text[k_end:].lstrip()))
                pairs = [(key, expand_word(sub(rest, lead, lead + len(val)), scope))]
            for k, v in pairs:
                tok = v.token()
                st.scope.set(k, tok, v.unresolved)
                st.runtime.set(k, tok, v.unresolved)
        elif instr == "WORKDIR":
            words = split_words(rest, scope)
            if words:
                st.workdir = posixpath.normpath(posixpath.join(st.workdir, words[0].text))
        elif instr in ("COPY", "ADD"):
            texts = [w.text for w in split_words(rest, scope)]
            c = copy_of(texts, st.workdir)
            if c is not None:
                st.copies.append(c)
            elif instr == "ADD":
                st.fetched.extend(t for t in texts if "://" in t)
            st.built.extend(_models_copied(texts, found[:-1]))
        elif instr == "RUN" and not rest.text.lstrip().startswith("["):
            st.built.extend(c.words for c in split_commands(rest, st.scope.copy()))
        elif instr in ("CMD", "ENTRYPOINT"):
            words = _command(rest, st)
            st.written.add(instr)
            if instr == "CMD":
                st.cmd = words
            else:
                st.entry = words
                if words and words[0].text == "/bin/sh" and words[0].pieces[0].start == words[0].pieces[0].end:
                    st.cmd = []  # shell-form ENTRYPOINT ignores CMD
    return found


def _models_copied(words: list[str], earlier: list[Stage]) -> list[list[Word]]:
    """`COPY --from=STAGE /root/.ollama /root/.ollama`: the models that stage's RUN commands pulled or
    created (`ollama create NAME -f Modelfile`) are in this image too. Ollama keeps them under
    ~/.ollama/models, or OLLAMA_MODELS (envconfig/config.go Models)."""
    src = next((w.split("=", 1)[1] for w in words if w.startswith("--from=")), None)
    if not src:
        return []
    stage = next((s for s in earlier if s.name == src), None)
    if stage is None and src.isdigit() and int(src) < len(earlier):
        stage = earlier[int(src)]
    if stage is None:
        return []
    store = stage.runtime.get("OLLAMA_MODELS")
    store_dir = store.text.rstrip("/") if store is not None else None
    paths = [w.rstrip("/") for w in words if not w.startswith("--")][:-1]
    if any(".ollama" in p or (store_dir and p and (store_dir + "/").startswith(p + "/")) for p in paths):
        return stage.built
    return []


def _unclosed_exec_form(fc: FileCtx) -> tuple[str, Src] | None:
    """A CMD / ENTRYPOINT / RUN whose JSON array goes on past its line with no `\\` at the line's end
    (`CMD [` then `"python",` on the next line): Docker reads the next line as an instruction and stops
    the build there (moby/buildkit frontend/dockerfile/instructions/parse.go, ParseInstruction: an
    UnknownInstructionError), so no image is built. What to say (SF105), else None. A file
    with a heredoc (`<<EOF`) is not judged: its body lines are no instructions."""
    if "<<" in fc.text:
        return None
    m = ESCAPE.search(fc.text[:500])
    lines = [ln for ln in logical_lines(fc.src, m.group(1) if m else "\\") if ln.text.strip()]
    for line, nxt in zip(lines, lines[1:], strict=False):
        im = INSTR.match(line.text)
        rest = line.text[im.end():].strip() if im else ""
        if im and im.group(1).upper() in ("CMD", "ENTRYPOINT", "RUN") and rest.startswith("[") \
                and not rest.endswith("]") and INSTR.match(nxt.text) is None:
            at = nxt.span(0, 0).line
            return (f"the JSON array of {im.group(1).upper()} goes on past its line with no \\ at the line's end: "
                    f"docker build stops at line {at} ({nxt.text.strip()[:40]!r}), which is no instruction, so no "
                    "image is built; end each line of the array but the last with \\, or write it on one line",
                    line)
    return None


def scan(fc: FileCtx) -> None:
    unclosed = _unclosed_exec_form(fc)
    if unclosed is not None:
        from servefit.sources.problems import unreadable

        fc.findings.append(unreadable(unclosed[0], span=unclosed[1].span(0, len(unclosed[1].text.rstrip()))))
        return
    found = stages(fc)
    if not found:
        return
    st = found[-1]
    engine = detect.engine_of_image(st.image.text if st.image else None)
    if st.entry is None and st.cmd is None and not detect.models_on_request(engine) and \
            not any(_reads_env(engine, k) for k in st.runtime.values):
        return  # only extends an engine image (a token, a cache path): nothing about the server is set here
    st.runtime.exported = set(st.runtime.values)
    ctx = fc.ctx()
    for words in st.built:  # models pulled at build time are the ones the image's server has
        ollama_client(words, ctx)
    entry, cmd = st.entry, st.cmd or None
    if entry == [] and cmd:  # `ENTRYPOINT []` clears the image's: the CMD is the whole command
        entry, cmd = cmd, None
    launches = run_stage(st, entry, cmd, ctx, st.runtime, os.path.dirname(fc.path) or ".", fc.path, source_releases(found))
    if not launches:
        return
    for w in st.exec_vars:
        fc.findings.append(literal_variable(f"the exec form passes {w.text!r} to the engine literally: "
                                            "no shell expands variables here", span=w.token().span))
    if "ENTRYPOINT" in st.written and "CMD" not in st.written:  # setting ENTRYPOINT resets the base image's CMD
        for launch in launches:  # (Dockerfile reference): the arguments are what runs the image gives
            launch.facts["args_at_run"] = True
    fc.add(launches, "dockerfile" + (f"/{st.name}" if st.name else ""), None, None, ctx.ollama_models)


def run_stage(st: Stage, entry: list[Word] | None, cmd: list[Word] | None, ctx: Ctx, env: Vars,
              context: str, dockerfile: str = "", built_from: dict[str, str] | None = None) -> list[Launch]:
    """The servers a container of this stage starts: through a script the build copied from the
    repository (read there, run in this image), else as its entrypoint and command say. A release
    of the engine the build installs (`pip install vllm==0.11.2`) is the version it runs, else one the
    file builds from source (`built_from`: source_releases)."""
    found = run_copied(st.image, entry, cmd, ctx, env, st.copies, st.workdir, context,
                       f"stage {st.name!r} (FROM {{image}})" if st.name else "this Dockerfile's image (FROM {image})")
    launches = found if found is not None else container(st.image, entry, cmd, ctx, env)
    where = dockerfile or "the Dockerfile"
    packages = pip_requirements(st.built)
    for launch in launches:
        if packages:
            launch.facts["packages"] = packages
        pin = pinned_release(st.built, launch.engine)
        if pin:
            launch.facts["engine_version"] = pin
            launch.facts["version_source"] = f"pip install {launch.engine}=={pin} in {where}"
        elif launch.engine in (built_from or {}):
            launch.facts["engine_version"] = (built_from or {})[launch.engine]
            launch.facts["version_source"] = "the release the file builds from source"
    return launches


def pip_requirements(built: list[list[Word]]) -> list[str]:
    """The requirements the stage's RUN commands pip-install (pip / pip3 / python -m pip / uv pip), as written,
    options (`--no-cache-dir`, `-U`, `-r FILE`'s operand) left out: `flashinfer-python`, `vllm[flashinfer]==0.10.1.1`."""
    out: list[str] = []
    for words in built:
        texts = [w.text for w in words]
        for i, t in enumerate(texts):
            if t != "install" or i == 0 or detect.program(texts[i - 1]) not in ("pip", "pip3"):
                continue
            skip = False
            for w in texts[i + 1:]:
                if w in ("&&", "||", ";", "|"):
                    break
                if skip:
                    skip = False
                elif w in ("-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url",
                           "--extra-index-url", "-f", "--find-links", "--target", "-t", "--prefix"):
                    skip = True  # the option's operand is a file, a path or an index, not a requirement
                elif not w.startswith("-"):
                    req = w.strip("'\"")
                    if req and req not in out:
                        out.append(req)
    return out


def pinned_release(built: list[list[Word]], engine: str) -> str | None:
    """The release of the engine a RUN command pip-installs (pip / pip3 / python -m pip / uv pip),
    pinned with `==`; the last one wins, as it is installed last. None for a range or no pin."""
    out = None
    for words in built:
        texts = [w.text for w in words]
        for i, t in enumerate(texts):
            if t == "install" and i > 0 and detect.program(texts[i - 1]) in ("pip", "pip3"):  # uv pip, python -m pip
                for w in texts[i + 1:]:
                    if w in ("&&", "||", ";"):
                        break
                    pin = image_release.pip_release(w.strip("'\""))
                    if pin is not None and pin[0] == engine:
                        out = pin[1]
    return out


def source_releases(found: list[Stage]) -> dict[str, str]:
    """{engine: release} for each engine a stage of the file builds from its own repository at a release
    tag: `git clone --branch b7327 https://github.com/ggml-org/llama.cpp` (`-b`, `--branch=`), or `ADD` of
    its source archive at a tag (`.../text-generation-inference/archive/refs/tags/v3.0.1.tar.gz`)."""
    out: dict[str, str] = {}
    for st in found:
        for url in st.fetched:
            hit = image_release.archive_release(url)
            if hit is not None:
                out.setdefault(*hit)
        for words in st.built:
            texts = [w.text for w in words]
            if texts[:2] != ["git", "clone"]:
                continue
            branch = next((texts[i + 1] for i, t in enumerate(texts[:-1]) if t in ("--branch", "-b")), None)
            branch = branch or next((t.split("=", 1)[1] for t in texts if t.startswith("--branch=")), None)
            for url in texts[2:] if branch else ():
                hit = image_release.source_release(url, branch or "")
                if hit is not None:
                    out.setdefault(*hit)
    return out


def _reads_env(engine: str | None, name: str) -> bool:
    """Whether the engine's server reads this environment variable: its option table's twins
    (TGI, llama.cpp), its own prefix (VLLM_*, SGLANG_*), anything for a launcher that takes its
    whole configuration from the environment (TGI's image_serves)."""
    if engine is None:
        return bool(name)
    if detect.trait(engine, "image_serves") or name.startswith(engine.upper() + "_"):
        return True
    from servefit.engines.options import load_table

    try:
        return name in load_table(engine).by_env
    except Exception:  # noqa: BLE001 - a plugin engine without a table: count it, as before
        return True
