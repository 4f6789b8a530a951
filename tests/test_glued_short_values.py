"""A short flag glued to its value (`-tp4`, `-O3`) is argparse's reading (vLLM, SGLang); llama.cpp
looks every argument up whole (common/arg.cpp::common_params_parse_ex), so a llama-server unit
with llama-cli's `-cnv` was told "argument -c: invalid int value: 'nv'" instead of llama-server's
own "invalid argument: -cnv" (a systemd unit copied from a llama-cli command line)."""

from __future__ import annotations

from servefit.core import LaunchSite, Token
from servefit.engines import get


def _parse(engine: str, argv: str):  # -> EngineConfig
    site = LaunchSite(file="<t>", line=1, argv=[Token(w) for w in argv.split()], engine=engine)
    return get(engine).parse(site, None)


def test_llama_server_reads_a_glued_short_flag_as_one_unknown_argument() -> None:
    cfg = _parse("llamacpp", "llama-server -m /m/Qwen3-8B-Q4_K_M.gguf -c 8192 -cnv -c4096")
    bad = [(f.code, f.message) for f in cfg.findings if f.code in ("LCPP001", "LCPP002")]
    assert [c for c, _ in bad] == ["LCPP001", "LCPP001"]
    assert bad[0][1].startswith("error: invalid argument: -cnv")
    assert bad[1][1].startswith("error: invalid argument: -c4096")
    assert cfg.settings["ctx_size"] == 8192


def test_vllm_still_reads_argparse_glued_values() -> None:
    cfg = _parse("vllm", "vllm serve Qwen/Qwen2.5-7B-Instruct -tp4")
    assert cfg.settings["tensor_parallel_size"] == 4
    assert not [f for f in cfg.findings if f.code in ("VLLM001", "VLLM002")]
