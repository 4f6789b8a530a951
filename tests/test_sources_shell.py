"""The shell word splitter: quoting, continuations, comments, expansions and their spans."""

from __future__ import annotations

from servefit.core import Token
from servefit.sources.shell import Vars, expand_word, split_commands, split_words
from servefit.sources.text import LineIndex, Src, align, logical_lines, whole


def cmds(text: str, env: Vars | None = None):
    return split_commands(whole(text, "t.sh"), env if env is not None else Vars())


def texts(text: str, env: Vars | None = None) -> list[list[str]]:
    return [c.texts for c in cmds(text, env)]


def src_of(text: str, tok: Token) -> str:
    assert tok.span is not None
    return text[tok.span.start:tok.span.end]


def test_quotes_escapes_and_separators():
    env = Vars({"X": Token("1")})
    assert texts("a 'b c' \"d $X e\" f\\ g; h && i || j | k & l", env) == [
        ["a", "b c", "d 1 e", "f g"], ["h"], ["i"], ["j"], ["k"], ["l"]]
    assert [c.sep for c in cmds("a; b && c || d | e & f\ng")] == [";", "&&", "||", "|", "&", "\n", ""]


def test_continuation_and_a_comment_that_ends_it():
    text = "vllm serve M \\\n  --a 1 \\\n  # --b 2 \\\n  --c 3\n"
    got = cmds(text)
    assert got[0].texts == ["vllm", "serve", "M", "--a", "1"]
    assert got[0].broken is not None and (got[0].broken.line, got[0].broken.col) == (3, 3)
    assert got[1].texts == ["--c", "3"]  # bash runs this as its own (failing) command


def test_comment_mid_word_is_text_and_crlf_continuations():
    assert texts("echo a#b # gone\n") == [["echo", "a#b"]]
    text = "vllm serve M \\\r\n  --max-model-len 4096\r\n"
    [c] = cmds(text)
    assert c.texts == ["vllm", "serve", "M", "--max-model-len", "4096"]
    tok = c.words[4].token()
    assert (tok.span.line, tok.span.col) == (2, 19) and src_of(text, tok) == "4096"


def test_expansion_spans_point_at_the_definition():
    text = 'LEN=8192\nM="${MODEL:-Qwen/Qwen3-8B}"\nvllm serve "$M" --max-model-len $LEN --x=$LEN\n'
    env = Vars()
    c = cmds(text, env)[-1]
    toks = [w.token() for w in c.words]
    assert [t.text for t in toks] == ["vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "8192", "--x=8192"]
    assert (toks[2].span.line, toks[2].span.col) == (2, 13) and src_of(text, toks[2]) == "Qwen/Qwen3-8B"
    assert (toks[4].span.line, toks[4].span.col) == (1, 5) and src_of(text, toks[4]) == "8192"
    assert src_of(text, toks[5]) == "--x=$LEN"  # a mixed word keeps the span of the word as written


def test_unquoted_expansion_is_split_with_exact_sub_spans():
    text = 'ARGS="--dtype half --enforce-eager"\nvllm serve M $ARGS "$ARGS"\n'
    c = cmds(text)[-1]
    assert c.texts == ["vllm", "serve", "M", "--dtype", "half", "--enforce-eager", "--dtype half --enforce-eager"]
    half = c.words[4].token()
    assert (half.span.line, half.span.col, half.span.end_col) == (1, 15, 19)


def test_default_forms_and_assignment_operators():
    env = Vars({"EMPTY": Token(""), "SET": Token("v")})
    assert texts("x ${EMPTY:-d} ${EMPTY-d} ${SET:+alt} ${UNSET:+alt} ${NEW:=n} $NEW", env) == [
        ["x", "d", "alt", "n", "n"]]
    assert env.get("NEW").text == "n"


def test_unresolved_variables_are_kept_and_named():
    c = cmds('vllm serve "$MODEL" --max-model-len ${LEN} --tp $(nproc) `date` "$@"\n')[0]
    assert c.texts == ["vllm", "serve", "$MODEL", "--max-model-len", "${LEN}", "--tp", "$(nproc)", "`date`"]
    names = [n for w in c.words for n, _ in w.unresolved] + [n for n, _ in c.unresolved]
    assert names == ["MODEL", "LEN", "$(nproc)", "`date`", "$@"]


def test_assignments_prefixes_exports_and_conditionals():
    env = Vars()
    got = cmds("A=1\nexport B=2\nif [ -n \"$X\" ]; then\n  A=3\nfi\n[ -z \"$C\" ] && C=4\nD=5 vllm serve m\n", env)
    assert env.get("A").text == "1"  # the assignment under `if` does not override
    assert env.get("C").text == "4"  # ... but sets a variable that had no value
    assert env.exported == {"B"}
    assert got[-1].texts == ["D=5", "vllm", "serve", "m"] and env.get("D") is None


def test_redirections_and_heredocs_are_dropped():
    text = "cat > x.yaml <<'EOF'\nvllm serve inside\nEOF\nnohup vllm serve m > log 2>&1 &\necho done\n"
    assert texts(text) == [["cat"], ["nohup", "vllm", "serve", "m"], ["echo", "done"]]


def test_k8s_and_compose_syntax():
    k8s = Vars({"LEN": Token("4096")})
    w = expand_word(whole("$(LEN) $$(LEN) $LEN", "k.yaml"), None, k8s=k8s)
    assert w.text == "4096 $(LEN) $LEN"
    interp = Vars({"TP": Token("2")})
    words = split_words(whole("--tp ${TP} --x '$$Y' ${U:-7}", "c.yaml"), interp, compose=True)
    assert [x.text for x in words] == ["--tp", "2", "--x", "$Y", "7"]


def test_mapped_sources_keep_file_offsets():
    text = 'args: "--a \\"q\\" b"\n'
    li = LineIndex(text, "f")
    value = '--a "q" b'
    offs = align(value, text, 7, 18)
    src = Src(value, li, offs=offs + [])
    words = split_words(Src(value, li, offs=offs), None)
    assert [w.text for w in words] == ["--a", "q", "b"]
    b = words[2].token()
    assert text[b.span.start:b.span.end] == "b"
    assert src.off(0) == 7


def test_logical_lines_drop_comment_lines_in_continuations():
    text = "CMD a \\\n  # note\n  b\nENV X=1\n"
    lines = logical_lines(whole(text, "Dockerfile"))
    assert [ln.text for ln in lines] == ["CMD a   b", "ENV X=1"]
    assert lines[0].off(len("CMD a   ")) == text.index("b\n")


def test_bash_arrays_expand_element_by_element_with_their_spans():
    """`args=( ... )` over several lines, `args+=(...)`, then `"${args[@]}"`: the command as bash runs it,
    each element a word whose span is where the element is written (so a fix edits the array)."""
    text = ('M=Qwen/Qwen3-8B\nARGS=(\n  --model "$M"   # the model\n  --max-model-len 32768\n)\n'
            'ARGS+=(--max-num-seqs 64)\nvllm serve "${ARGS[@]}" --port 8000\n')
    c = cmds(text)[-1]
    assert c.texts == ["vllm", "serve", "--model", "Qwen/Qwen3-8B", "--max-model-len", "32768",
                       "--max-num-seqs", "64", "--port", "8000"]
    toks = [w.token() for w in c.words]
    assert (toks[5].span.line, toks[5].span.col) == (4, 19) and src_of(text, toks[5]) == "32768"
    assert (toks[7].span.line, toks[7].span.col) == (6, 23) and src_of(text, toks[7]) == "64"
    assert src_of(text, toks[3]) == "Qwen/Qwen3-8B"  # through $M: where M is written


def test_array_forms_star_index_unset_and_conditional():
    text = 'A=(x "y z")\necho "${A[*]}" ${A[1]} ${B[@]} "${A[@]}"\n'
    assert cmds(text)[-1].texts == ["echo", "x y z", "y", "z", "${B[@]}", "x", "y z"]
    assert cmds(text)[-1].unresolved == [] and cmds(text)[-1].words[4].unresolved[0][0] == "B"
    # inside a condition an array that is already set keeps its value, as a plain variable does
    assert cmds('A=(1)\nif x; then\n  A=(2)\nfi\necho "${A[@]}"\n')[-1].texts == ["echo", "1"]
    assert cmds('E=()\necho "${E[@]}" end\n')[-1].texts == ["echo", "end"]


def test_a_command_substitution_in_a_variable_stays_one_word():
    # the SCRIPT_DIR idiom: the command's output is one unknown path, not its own text split on spaces
    text = ('D=$(cd $(dirname $0); pwd)\nOPTS="--a 1 $(nproc) --b"\n'
            'docker run -v $D/c:/c -v ${D}:/x img $OPTS --m M\n')
    c = cmds(text)[-1]
    assert c.texts == ["docker", "run", "-v", "$(cd $(dirname $0); pwd)/c:/c", "-v", "$(cd $(dirname $0); pwd):/x",
                       "img", "--a", "1", "$(nproc)", "--b", "--m", "M"]
    assert [n for n, _ in c.words[3].unresolved] == ["$(cd $(dirname $0); pwd)"]
    one = c.words[8].token()  # the literal part around the substitution still splits with exact spans
    assert (one.span.line, one.span.col, one.span.end_col) == (2, 11, 12)


def test_a_script_dir_idiom_keeps_the_docker_run_server(tmp_path):
    from servefit.sources import scan_file

    p = tmp_path / "run.sh"
    p.write_text('HERE="$(cd "$(dirname "$0")" && pwd)"\nCACHE=${HERE}/../cache\n'
                 'docker run --gpus all -v ${CACHE}:/root/.cache \\\n  -v $HERE/t:/t vllm/vllm-openai:latest \\\n'
                 '  --model Qwen/Qwen2.5-7B-Instruct --max_model_len 1024\n')
    [site] = scan_file(str(p)).sites
    argv = [t.text for t in site.argv]
    assert (site.engine, site.line, argv[argv.index("--model") + 1]) == ("vllm", 5, "Qwen/Qwen2.5-7B-Instruct")


def test_a_note_after_the_last_argument_does_not_break_the_continuation():
    [c] = cmds("vllm serve M \\\n  --a 1 # --max-model-len 4096\n")
    assert c.texts == ["vllm", "serve", "M", "--a", "1"] and c.broken is None
    text = "vllm serve M \\\n  # --b 2\n  --c 3\n"  # a commented-out continued line, no backslash: still broken
    got = cmds(text)
    assert got[0].texts == ["vllm", "serve", "M"] and got[1].texts == ["--c", "3"]
    assert got[0].broken is not None and (got[0].broken.line, got[0].broken.col, got[0].broken.end_col) == (2, 3, 10)


def test_inside_double_quotes_escapes_and_an_empty_word():
    # bash: `\"` `\\` `\$` lose the backslash inside "...", `\n` keeps it; `""` is a word of its own (an empty
    # value passed to the flag), and `"${EMPTY[@]}"` of an empty array is no word at all
    text = 'echo "a\\"b" "c\\\\d" "\\$X" "e\\nf" --api-key "" "${EMPTY[@]}" end\n'
    env = Vars()
    env.arrays["EMPTY"] = []
    assert texts(text, env) == [["echo", 'a"b', "c\\d", "$X", "e\\nf", "--api-key", "", "end"]]
