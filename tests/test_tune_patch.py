"""Patching: a tuned point becomes edits on the spans the sources found, in every wrapper's own
style. Each expected text is the original with a few exact substitutions, so everything outside
the edits (comments, quoting, indentation, key order, line endings) is byte-identical."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from servefit.core import LaunchSite, Span, Token
from servefit.pipeline import Target, evaluate
from servefit.sources import scan_file
from servefit.sources.text import LineIndex
from servefit.tune.objective import Needs
from servefit.tune.patch import DISPLAY, SAFE, UNSAFE, Patch, apply_edits, by_file, make_patch, reader
from servefit.tune.space import build_space

FIXTURES = Path(__file__).parent / "fixtures" / "tune"
VLLM = {"max_model_len": 32768, "kv_cache_dtype": "fp8", "max_num_seqs": 64}


def patched(path: Path, changes: dict[str, Any], model: str | None = None, site: LaunchSite | None = None,
            **needs: Any) -> tuple[Patch, dict[str, str], dict[str, str]]:
    site = site or scan_file(str(path)).sites[0]
    ev = evaluate(site, Target(gpu="L4", model=model))
    space = build_space(ev, Needs(allow_kv=frozenset({"fp8", "q8_0"}), allow_eager=True, **needs))
    point = space.start()
    point.update(changes)
    read = reader()
    patch = make_patch(space, point, read)
    new = {f: apply_edits(read(f), es) for f, es in by_file(patch.edits).items()}
    return patch, {f: read(f) for f in new}, new


def subst(text: str, *pairs: tuple[str, str]) -> str:
    for old, new in pairs:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def copy(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copyfile(FIXTURES / name, dst)
    return dst


def one(new: dict[str, str]) -> str:
    assert len(new) == 1
    return next(iter(new.values()))


def test_k8s_block_list_replaces_in_place_and_adds_items_quoted_like_neighbours(tmp_path: Path) -> None:
    p = copy(tmp_path, "k8s-vllm-l4.yaml")
    patch, old, new = patched(p, VLLM)
    assert patch.applicability == SAFE
    assert one(new) == subst(old[str(p)], ('- "131072"', '- "32768"'),
                             ('- "0.92"\n', '- "0.92"\n            - "--kv-cache-dtype"\n            - "fp8"\n'
                                            '            - "--max-num-seqs"\n            - "64"\n'))


def test_k8s_sh_c_block_scalar_keeps_continuations(tmp_path: Path) -> None:
    p = copy(tmp_path, "k8s-sh-c.yaml")
    _, old, new = patched(p, VLLM)
    assert one(new) == subst(old[str(p)], ("--max-model-len 131072", "--max-model-len 32768"),
                             ("--gpu-memory-utilization 0.92\n",
                              "--gpu-memory-utilization 0.92 \\\n                --kv-cache-dtype fp8 \\\n"
                              "                --max-num-seqs 64\n"))


def test_k8s_flow_list(tmp_path: Path) -> None:
    p = copy(tmp_path, "k8s-flow.yaml")
    _, old, new = patched(p, VLLM)
    assert one(new) == subst(old[str(p)], ('"--max-model-len", "131072"]',
                                           '"--max-model-len", "32768", "--kv-cache-dtype", "fp8", '
                                           '"--max-num-seqs", "64"]'))


def test_compose_list_and_string_commands(tmp_path: Path) -> None:
    p = copy(tmp_path, "compose-list.yaml")
    _, old, new = patched(p, VLLM)
    assert one(new) == subst(old[str(p)], ('      - "131072"\n', '      - "32768"\n      - --kv-cache-dtype\n'
                                                                 '      - "fp8"\n      - --max-num-seqs\n      - "64"\n'))
    p = copy(tmp_path, "compose-string.yaml")
    _, old, new = patched(p, VLLM)
    assert one(new) == subst(old[str(p)], ("--max-model-len 131072 --gpu-memory-utilization 0.92\n",
                                           "--max-model-len 32768 --gpu-memory-utilization 0.92 --kv-cache-dtype fp8"
                                           " --max-num-seqs 64\n"))


def test_shell_script_continuations(tmp_path: Path) -> None:
    p = copy(tmp_path, "serve.sh")
    _, old, new = patched(p, VLLM)
    assert one(new) == subst(old[str(p)], ("131072 \\", "32768 \\"),
                             ("0.92\n", "0.92 \\\n    --kv-cache-dtype fp8 \\\n    --max-num-seqs 64\n"))


def test_dockerfile_exec_form(tmp_path: Path) -> None:
    p = copy(tmp_path, "Dockerfile")
    _, old, new = patched(p, VLLM)
    assert one(new) == subst(old[str(p)], ('"131072"]', '"32768", "--kv-cache-dtype", "fp8", "--max-num-seqs", "64"]'))


def test_crlf_file_stays_crlf_and_inline_flag_value_is_edited(tmp_path: Path) -> None:
    p = copy(tmp_path, "k8s-crlf.yaml")
    _, old, new = patched(p, VLLM)
    text = one(new)
    assert text == subst(old[str(p)], ("--max-model-len=131072\r\n",
                                       "--max-model-len=32768\r\n            - --kv-cache-dtype\r\n            - fp8\r\n"
                                       "            - --max-num-seqs\r\n            - \"64\"\r\n"))
    assert text.count("\n") == text.count("\r\n")


def test_modelfile_parameter_replaced_and_inserted(tmp_path: Path) -> None:
    p = copy(tmp_path, "Modelfile")
    _, old, new = patched(p, {"num_ctx": 32768})
    assert one(new) == subst(old[str(p)], ("PARAMETER num_ctx 131072", "PARAMETER num_ctx 32768"))
    q = tmp_path / "Modelfile.rag"
    q.write_text("FROM llama3.1:8b\nPARAMETER temperature 0.2\nSYSTEM hi\n")
    _, old, new = patched(q, {"num_ctx": 32768})
    assert one(new) == "FROM llama3.1:8b\nPARAMETER temperature 0.2\nPARAMETER num_ctx 32768\nSYSTEM hi\n"


def test_llama_swap_cmd_one_setting_per_line(tmp_path: Path) -> None:
    p = copy(tmp_path, "llama-swap.yaml")
    patch, old, new = patched(p, {"context": 32768, "parallel": 4, "cache_type_k": "q8_0", "cache_type_v": "q8_0"})
    assert [pl.shown for pl in patch.placed] == ["--cache-type-k q8_0", "--cache-type-v q8_0", "--parallel 4"]
    assert one(new) == subst(old[str(p)], ("-ngl 99\n", "-ngl 99\n        --cache-type-k q8_0\n"
                                                        "        --cache-type-v q8_0\n        --parallel 4\n"))


def test_a_shell_quoted_last_word_takes_new_flags_after_its_closing_quote(tmp_path: Path) -> None:
    # llama-swap configs often end the command with `-ot ".ffn_.*_exps.=CPU"` (the experts on the CPU)
    p = tmp_path / "config.yaml"
    p.write_text('models:\n  "gpt-oss-120b":\n    cmd: |\n      llama-server --port ${PORT}\n'
                 '      --model /m/gpt-oss-120b-Q4_K_M.gguf\n      -ngl 99\n      -ot ".ffn_.*_exps.=CPU"\n'
                 '    ttl: 600\n')
    patch, old, new = patched(p, {"context": 8192, "parallel": 2})
    assert [(pl.shown, pl.applicability) for pl in patch.placed] == [("--ctx-size 16384", SAFE),
                                                                      ("--parallel 2", SAFE)]
    assert one(new) == subst(old[str(p)], ('=CPU"\n', '=CPU"\n      --ctx-size 16384\n      --parallel 2\n'))
    s = tmp_path / "serve.sh"
    s.write_text("llama-server -m /m/gpt-oss-120b-Q4_K_M.gguf -ngl 99 -ot '.ffn_.*_exps.=CPU'\n")
    _, old, new = patched(s, {"context": 8192, "parallel": 2})
    assert one(new) == subst(old[str(s)], ("=CPU'\n", "=CPU' --ctx-size 16384 --parallel 2\n"))


def test_a_yaml_quoted_scalar_is_not_a_shell_word(tmp_path: Path) -> None:
    from servefit.tune.style import insert_words

    text = 'command: "--jinja"\n'
    at = text.index("--jinja")
    assert insert_words(text, Span("c.yaml", 1, at + 1, 1, at + 8, at, at + 7), [["--parallel", "2"]]) is None
    flag = Span("c.yaml", 1, 10, 1, 13, 9, 12)  # a word before it in the same command, then the quoted one
    text = 'command: -ot ".ffn=CPU"\n'
    at = text.index(".ffn")
    word = Span("c.yaml", 1, at + 1, 1, at + 9, at, at + 8)
    assert insert_words(text, word, [["--parallel", "2"]], prev=flag) == (
        at + 9, at + 9, " --parallel 2")


def test_compose_environment_map_entry(tmp_path: Path) -> None:
    p = copy(tmp_path, "compose-ollama.yaml")
    _, old, new = patched(p, {"num_ctx": 32768, "OLLAMA_NUM_PARALLEL": 2}, model="llama3.1:8b")
    assert one(new) == subst(old[str(p)], ('OLLAMA_CONTEXT_LENGTH: "131072"', 'OLLAMA_CONTEXT_LENGTH: "32768"'),
                             ('OLLAMA_KEEP_ALIVE: "24h"\n', 'OLLAMA_KEEP_ALIVE: "24h"\n      OLLAMA_NUM_PARALLEL: "2"\n'))


def test_k8s_env_list_entries(tmp_path: Path) -> None:
    p = tmp_path / "ollama.yaml"
    p.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: ollama}\nspec:\n  template:\n    spec:\n"
                 "      nodeSelector: {cloud.google.com/gke-accelerator: nvidia-l4}\n      containers:\n"
                 "        - name: ollama\n          image: ollama/ollama:0.12.3\n          args: [\"serve\"]\n"
                 "          env:\n            - name: OLLAMA_KEEP_ALIVE\n              value: \"24h\"\n")
    _, old, new = patched(p, {"OLLAMA_NUM_PARALLEL": 4, "OLLAMA_KV_CACHE_TYPE": "q8_0",
                              "OLLAMA_FLASH_ATTENTION": True}, model="llama3.1:8b")
    assert one(new) == old[str(p)] + (
        "            - name: OLLAMA_NUM_PARALLEL\n              value: \"4\"\n"
        "            - name: OLLAMA_KV_CACHE_TYPE\n              value: \"q8_0\"\n"
        "            - name: OLLAMA_FLASH_ATTENTION\n              value: \"1\"\n")


def test_shell_exports_go_before_the_command(tmp_path: Path) -> None:
    p = tmp_path / "ollama.sh"
    p.write_text("#!/bin/sh\nexport OLLAMA_KEEP_ALIVE=24h\nollama serve\n")
    _, _, new = patched(p, {"OLLAMA_NUM_PARALLEL": 2, "num_ctx": 16384}, model="llama3.1:8b")
    assert one(new) == ("#!/bin/sh\nexport OLLAMA_KEEP_ALIVE=24h\nexport OLLAMA_CONTEXT_LENGTH=16384\n"
                        "export OLLAMA_NUM_PARALLEL=2\nollama serve\n")


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("eager.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: e}\nspec:\n  nodeSelector: "
                   "{cloud.google.com/gke-accelerator: nvidia-l4}\n  containers:\n    - name: vllm\n"
                   "      image: vllm/vllm-openai:v0.11.0\n      args:\n        - --model\n"
                   "        - meta-llama/Llama-3.1-8B-Instruct\n        - --enforce-eager\n        - --max-model-len\n"
                   "        - \"8192\"\n", "        - --enforce-eager\n"),
    ("eager.sh", "vllm serve meta-llama/Llama-3.1-8B-Instruct --enforce-eager --max-model-len 8192\n",
     " --enforce-eager"),
    ("eager2.sh", "vllm serve meta-llama/Llama-3.1-8B-Instruct \\\n  --enforce-eager \\\n  --max-model-len 8192\n",
     "  --enforce-eager \\\n"),
])
def test_boolean_flag_turned_off_is_removed(tmp_path: Path, name: str, text: str, expected: str) -> None:
    p = tmp_path / name
    p.write_text(text)
    patch, _, new = patched(p, {"enforce_eager": False})
    assert patch.applicability == SAFE
    assert one(new) == text.replace(expected, "")


def test_quantization_and_checkpoint_changes_are_unsafe(tmp_path: Path) -> None:
    p = copy(tmp_path, "k8s-vllm-l4.yaml")
    patch, old, new = patched(p, {"weights": "fp8"}, allow_quant=frozenset({"fp8"}))
    assert patch.applicability == UNSAFE
    assert one(new) == subst(old[str(p)], ('- "0.92"\n', '- "0.92"\n            - "--quantization"\n'
                                                         '            - "fp8"\n'))
    patch, old, new = patched(p, {"weights": "ref:hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"},
                              allow_quant=frozenset({"awq"}))
    assert patch.applicability == UNSAFE
    assert one(new) == subst(old[str(p)], ('"meta-llama/Llama-3.1-8B-Instruct"',
                                           '"hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"'))


def _hand_site(text: str, path: Path, words: list[str]) -> LaunchSite:
    """A LaunchSite built by hand: every word located in `text` in order (tests the patcher on
    its own, whatever the sources layer does)."""
    li = LineIndex(text, str(path))
    toks, pos = [], 0
    for w in words:
        at = text.index(w, pos)
        toks.append(Token(w, li.span(at, at + len(w))))
        pos = at + len(w)
    return LaunchSite(file=str(path), line=1, argv=toks, engine="vllm", name="hand")


def test_patcher_on_a_hand_built_site(tmp_path: Path) -> None:
    text = "run: vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len=131072  # long\n"
    p = tmp_path / "x.txt"
    p.write_text(text)
    site = _hand_site(text, p, ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len=131072"])
    _, _, new = patched(p, {"max_model_len": 32768, "max_num_seqs": 64}, site=site)
    assert one(new) == ("run: vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len=32768 "
                        "--max-num-seqs=64  # long\n")


def test_unplaceable_change_is_display_only(tmp_path: Path) -> None:
    p = tmp_path / "y.txt"
    p.write_text("anything\n")
    site = LaunchSite(file=str(p), line=1, argv=[Token("vllm"), Token("serve"),
                                                 Token("meta-llama/Llama-3.1-8B-Instruct")], name="nospans")
    patch, _, new = patched(p, {"max_model_len": 32768}, site=site)
    assert patch.applicability == DISPLAY and new == {}
    assert patch.manual() == ["--max-model-len 32768"]


def test_edits_keep_spans_consistent() -> None:
    text = "a b c\n"
    li = LineIndex(text, "f")
    from servefit.core import Edit

    e1, e2 = Edit(li.span(2, 3), "B"), Edit(li.span(5, 5), " d")
    assert apply_edits(text, [e2, e1]) == "a B c d\n"
    with pytest.raises(ValueError):
        apply_edits(text, [Edit(li.span(0, 3), "x"), Edit(li.span(2, 4), "y")])
    assert isinstance(li.span(0, 1), Span)


def test_llama_server_automatic_slots_are_tuned_from_what_the_file_plans(tmp_path: Path) -> None:
    """No -np: llama-server's 4 automatic slots share one unified cache of -c cells. tune's `now` is
    that plan (one request of the whole context), not 4 x -c (which would not load on this card)."""
    import io
    import json
    from contextlib import redirect_stdout

    from servefit.cli import main

    p = tmp_path / "llama-server.service"
    p.write_text("[Service]\nExecStart=/opt/llama.cpp/llama-server \\\n    --model /m/Qwen3.5-35B-A3B-Q4_K_M.gguf \\\n"
                 "    --n-gpu-layers 99 \\\n    --ctx-size 98304 \\\n    --flash-attn on\n")

    def run(*args: str) -> dict[str, Any]:
        buf = io.StringIO()
        with redirect_stdout(buf):
            main(["tune", str(p), "--gpu", "RTX 3090", "--format", "json", *args])
        return json.loads(buf.getvalue())

    est = io.StringIO()
    with redirect_stdout(est):
        main(["estimate", str(p), "--gpu", "RTX 3090", "--format", "json"])
    tokens = json.loads(est.getvalue())[0]["kv_cache_tokens"]
    now = run()["sites"][0]["current"]
    assert (now["context"], now["users"], now["feasible"], now["outcome"]) == (98304, 1, True, "started")
    assert now["kv_cache_tokens"] == tokens == 98304
