"""With no version given servefit says loudly which release it models, and the flags (Ollama: the
OLLAMA_* variables) the server uses date the config: the newest release read from the engine's own
parsers (data/engines/<engine>_history.yaml) that has every one of them. A given version is never
second-guessed; a set no release has is said, and the newest modelled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from servefit.cli import main
from servefit.engines.options import _vkey, load_table
from servefit.engines.vllm import CURRENT
from servefit.pipeline import Target, evaluate, site_from_argv
from servefit.sources import scan_file

DATA = Path(__file__).resolve().parents[1] / "src" / "servefit" / "data" / "engines"
CURRENTS = {"vllm": CURRENT, "tgi": "3.3.7", "sglang": "0.5.23", "llamacpp": "b10309", "ollama": "0.32.15"}


def cfg_of(cmd: str, version: str | None = None, env: dict[str, str] | None = None, engine: str = "vllm"):
    site = site_from_argv(cmd.split(), env or {})
    site.engine = engine
    return evaluate(site, Target(gpu="A100-80GB", engine_version=version)).config


def parse(cmd: str, env: dict[str, str] | None = None, engine: str = "vllm"):
    from servefit import engines

    site = site_from_argv(cmd.split(), env or {})
    site.engine = engine
    return engines.get(engine).parse(site, None)


def sf005(cfg):
    return [f for f in cfg.findings if f.code == "SF005"]


def test_no_version_warns_first():
    cfg = cfg_of("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192")
    assert cfg.version == CURRENT
    assert cfg.assumptions[0].startswith(f"WARNING: vLLM {CURRENT} assumed (no version given")
    assert not sf005(cfg)  # nothing dates it: the newest has every flag, no finding


def test_a_removed_flag_dates_the_config():
    cfg = cfg_of("vllm serve meta-llama/Llama-3.1-8B-Instruct --swap-space 4")
    # vllm_history.yaml: --swap-space in [null, 0.18.1): 0.17.1 is the newest release read that has it
    assert cfg.version == "0.17.1"
    assert cfg.assumptions[0].startswith("WARNING: vLLM 0.17.1 assumed (no version given; --swap-space "
                                         "(removed in 0.18.1) dates the config")
    assert not [f for f in cfg.findings if "swap" in f.message and f.code == "VLLM001"]


def test_disable_log_requests_is_not_an_error_when_unpinned():
    """Issue 16: `--disable-log-requests` (gone in 0.17.1) was VLLM001 at the newest release."""
    cfg = parse("vllm serve Qwen/Qwen2.5-7B-Instruct --disable-log-requests")
    assert cfg.version == "0.16.0"
    assert [f.code for f in cfg.findings if f.severity == "error"] == []
    (f,) = sf005(cfg)
    assert f.severity == "warning"
    assert f.message.startswith("vLLM 0.16.0 assumed: no version given; --disable-log-requests (removed in 0.17.1)")


def test_the_finding_sits_on_the_flag_that_dates_it(tmp_path: Path):
    p = tmp_path / "serve.sh"
    p.write_text("vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 \\\n  --use-v2-block-manager\n")
    (site,) = scan_file(str(p)).sites
    from servefit import engines

    cfg = engines.get("vllm").parse(site, None)
    assert cfg.version == "0.9.2"  # --use-v2-block-manager: removed in 0.10.0
    (f,) = sf005(cfg)
    assert (f.span.line, f.span.col, f.span.end_col) == (2, 3, 25)


@pytest.mark.parametrize("engine,cmd,env,version,dating", [
    # vllm_history.yaml --cuda-graph-sizes [0.9.0, 0.13.0) with --swap-space [null, 0.18.1): both up to 0.12.0
    ("vllm", "vllm serve Qwen/Qwen3-8B --cuda-graph-sizes 8 --swap-space 4", {}, "0.12.0", "--cuda-graph-sizes"),
    # added later and removed later: --api-server-count from 0.10.0, --disable-log-requests until 0.16.0
    ("vllm", "vllm serve Qwen/Qwen3-8B --api-server-count 2 --disable-log-requests", {}, "0.16.0",
     "--disable-log-requests"),
    # tgi_history.yaml --disable-usage-stats [2.2.0, 2.3.0); --enable-cuda-graphs [1.4.1, 2.0.0)
    ("tgi", "text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct --disable-usage-stats", {},
     "2.2.0", "--disable-usage-stats"),
    ("tgi", "text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct", {"ENABLE_CUDA_GRAPHS": "true"},
     "1.4.5", "ENABLE_CUDA_GRAPHS"),
    # sglang_history.yaml --disable-flashinfer [null, 0.3.6); --disable-mla [0.3.6, 0.4.6.post5)
    ("sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --disable-flashinfer", {}, "0.3.0",
     "--disable-flashinfer"),
    ("sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --disable-mla --tp 2", {}, "0.4.3",
     "--disable-mla"),
    # llamacpp_history.yaml -gan [null, b4234); LLAMA_ARG_KV_SPLIT [b6301, b7347)
    ("llamacpp", "llama-server -m Qwen3-8B-Q4_K_M.gguf -c 8192 -gan 4", {}, "b3889", "-gan"),
    ("llamacpp", "llama-server -m Qwen3-8B-Q4_K_M.gguf -c 8192", {"LLAMA_ARG_KV_SPLIT": "1"}, "b6301",
     "LLAMA_ARG_KV_SPLIT"),
    # ollama_history.yaml OLLAMA_NEW_ENGINE [0.5.12, 0.30.0); OLLAMA_MAX_VRAM [null, 0.2.8) and [0.3.2, 0.7.0)
    ("ollama", "ollama serve", {"OLLAMA_NEW_ENGINE": "1", "OLLAMA_NUM_PARALLEL": "2"}, "0.24.0", "OLLAMA_NEW_ENGINE"),
    ("ollama", "ollama serve", {"OLLAMA_MAX_VRAM": "8000000000"}, "0.6.8", "OLLAMA_MAX_VRAM"),
])
def test_each_engine_is_dated_by_its_history(engine, cmd, env, version, dating):
    cfg = parse(cmd, env, engine)
    assert cfg.version == version
    (f,) = sf005(cfg)
    assert f.message.split(": no version given; ", 1)[1].startswith(f"{dating} (removed in ")
    assert cfg.assumptions[0].startswith("WARNING: ") and f" {version} assumed (no version given; {dating} " \
        in cfg.assumptions[0]
    assert not [f for f in cfg.findings if f.severity == "error"]  # every flag exists in the release dated


@pytest.mark.parametrize("engine,cmd,env", [
    ("vllm", "vllm serve Qwen/Qwen3-8B --max-model-len 8192 --no-enable-prefix-caching", {}),
    ("tgi", "text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct --max-total-tokens 4096", {}),
    ("llamacpp", "llama-server -m Qwen3-8B-Q4_K_M.gguf -c 8192 --no-mmap", {}),
    # from b8121 LLAMA_ARG_NO_<X> is honoured by rule for every negatable flag: its leaving the list dates nothing
    ("llamacpp", "llama-server -m Qwen3-8B-Q4_K_M.gguf -c 8192", {"LLAMA_ARG_NO_MMAP": "1"}),
    ("ollama", "ollama serve", {"OLLAMA_CONTEXT_LENGTH": "8192", "OLLAMA_FLASH_ATTENTION": "1"}),
])
def test_options_the_newest_has_date_nothing(engine, cmd, env):
    cfg = parse(cmd, env, engine)
    assert cfg.version in (CURRENTS[engine], "0.32.15")
    assert not sf005(cfg)
    assert "the newest release modelled" in cfg.assumptions[0]


def test_no_release_has_them_all():
    """--disable-log-requests is gone in 0.17.1, --cpu-offload-params arrives in 0.17.1."""
    cfg = parse("vllm serve Qwen/Qwen3-8B --cpu-offload-params x --disable-log-requests")
    assert cfg.version == CURRENT
    (f,) = sf005(cfg)
    assert f.message == (f"vLLM {CURRENT} assumed: no version given, and no release has every option this config "
                         "uses: --cpu-offload-params (from 0.17.1 on), --disable-log-requests (up to 0.16.0); the "
                         "newest release modelled; pass --engine-version or pin the image tag")
    (err,) = [f for f in cfg.findings if f.code == "VLLM001"]
    assert "--disable-log-requests (removed in 0.17.1; no version given, and no vLLM release has every option" \
        in err.message
    assert f"this is {CURRENT}" not in err.message


@pytest.mark.parametrize("engine,cmd,env,named", [
    ("tgi", "text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct --enable-cuda-graphs --api-key k",
     {}, "--enable-cuda-graphs (1.4.1 to 1.4.5), --api-key (from 2.3.0 on)"),
    ("ollama", "ollama serve", {"OLLAMA_RUNNERS_DIR": "/r", "OLLAMA_NEW_ENGINE": "1"},
     "OLLAMA_RUNNERS_DIR (up to 0.3.10), OLLAMA_NEW_ENGINE (0.5.12 to 0.24.0)"),
])
def test_contradictions_in_other_engines(engine, cmd, env, named):
    cfg = parse(cmd, env, engine)
    assert cfg.version == CURRENTS[engine]
    (f,) = sf005(cfg)
    assert f"no release has every option this config uses: {named}; the newest release modelled" in f.message


@pytest.mark.parametrize("cmd,version", [
    ("vllm serve Qwen/Qwen3-8B --swap-space 4 --disable-log-requests", "0.11.0"),
    ("vllm serve Qwen/Qwen3-8B --disable-log-requests", CURRENT),  # explicit newest: the flag is an error there
])
def test_a_given_version_is_not_second_guessed(cmd, version):
    cfg = cfg_of(cmd, version=version)
    assert cfg.version == version
    assert not sf005(cfg)
    assert not any(a.startswith("WARNING") for a in cfg.assumptions)


def test_an_image_tag_or_directive_is_a_given_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    p = tmp_path / "compose.yaml"
    p.write_text("services:\n  vllm:\n    image: vllm/vllm-openai:v0.8.5\n"
                 "    command: [\"--model\", \"Qwen/Qwen3-8B\", \"--swap-space\", \"4\"]\n")
    s = tmp_path / "serve.sh"
    s.write_text("# servefit: engine-version=0.7.3\nvllm serve Qwen/Qwen3-8B --swap-space 4\n")
    for path, want in ((p, "0.8.5"), (s, "0.7.3")):
        main(["estimate", str(path), "--gpu", "A100-80GB", "--format", "json"])
        (est,) = json.loads(capsys.readouterr().out)
        assert est["engine_version"] == want
        assert not [f for f in est["findings"] if f["code"] == "SF005"]


def test_lint_estimate_and_tune_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    p = tmp_path / "serve.sh"
    p.write_text("vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --disable-log-requests\n")
    main(["lint", str(p), "--gpu", "L40S", "--format", "json", "--fail-on", "never"])
    lint = [f for f in json.loads(capsys.readouterr().out) if f["code"] == "SF005"]
    main(["estimate", str(p), "--gpu", "L40S", "--format", "json"])
    est = json.loads(capsys.readouterr().out)
    est = est[0] if isinstance(est, list) else est
    main(["tune", str(p), "--gpu", "L40S", "--format", "json"])
    tune = json.loads(capsys.readouterr().out)["sites"][0]
    assert [f["message"].split(" assumed:")[0] for f in lint] == ["vLLM 0.16.0"]
    assert est["engine_version"] == tune["engine_version"] == "0.16.0"
    assert est["assumptions"][0].startswith("WARNING: vLLM 0.16.0 assumed (no version given; --disable-log-requests")
    assert not [f for f in est["findings"] if f["severity"] == "error"]


def test_a_benchmark_log_without_its_version():
    """benchmarks/accuracy newblog-l40s-qwen25-7b-bf16-32k (vLLM 0.8.5.post1) run as if its log named
    no version: judged as the newest, --disable-log-requests refused the config; dated, it starts."""
    site = site_from_argv("vllm serve Qwen/Qwen2.5-7B-Instruct --disable-log-requests".split(), {})
    site.engine = "vllm"
    plan = evaluate(site, Target(gpu="L40S")).plan
    assert plan.outcome == "started"
    assert plan.kv_cache_tokens == 470160


@pytest.mark.parametrize("engine", ["vllm", "tgi", "sglang", "llamacpp", "ollama"])
def test_every_removed_option_dates_to_its_last_release(engine):
    """Each option the history says was removed before the newest modelled release dates a config
    that uses it alone to the newest release read in its last range (read off the YAML here)."""
    raw = yaml.safe_load((DATA / f"{engine}_history.yaml").read_text())
    releases = [str(r) for r in raw["releases_read"]]
    current = CURRENTS[engine]
    cands = sorted({*releases, current}, key=_vkey)
    table = load_table(engine)
    checked = 0
    for section in ("flags", "env"):
        for name, h in (raw.get(section) or {}).items():
            ranges = [(a and str(a), b and str(b)) for a, b in h["in"]]
            end = ranges[-1][1]
            if end is None or _vkey(end) > _vkey(current):
                continue
            inside = [r for r in cands if any((a is None or _vkey(r) >= _vkey(a)) and _vkey(r) < _vkey(b)
                                              for a, b in ranges if b is not None)]
            got = table.implied_release([name], current)
            if not inside:
                assert got is not None and got.version is None, name
                continue
            assert got is not None and got.version == inside[-1], (name, got, inside[-1])
            assert got.why == ((name, f"removed in {end}"),) or "removed in" in got.why[0][1], name
            checked += 1
    assert checked >= 3


def test_the_newest_modelled_counts_even_when_not_read():
    """llama.cpp models b10309 while its parser was read at b10298 and b10603: a flag the modelled
    release still has dates nothing, though the next release read dropped it."""
    from servefit.engines.options import FlagHistory, Option, OptionTable

    table = OptionTable(engine="x", options=[Option("a", ("--a",)), Option("b", ("--b",)), Option("c", ("--c",)),
                                             Option("d", ("--d",), until="1.9.99")],
                        history={"--a": FlagHistory(((None, "3.0.0"),)), "--b": FlagHistory(((None, "2.0.0"),)),
                                 "--c": FlagHistory((("3.0.0", None),))},
                        releases=("1.0.0", "2.0.0", "3.0.0"))
    assert table.implied_release(["--a"], "2.5.0") is None
    assert table.implied_release(["--c"], "2.5.0") is None  # newer than modelled: the newest stands
    got = table.implied_release(["--a", "--b"], "2.5.0")
    assert got is not None and (got.version, got.why) == ("1.0.0", (("--b", "removed in 2.0.0"),))
    got = table.implied_release(["--d"], "2.5.0")  # no history: the table's own until
    assert got is not None and (got.version, got.why) == ("1.0.0", (("--d", "removed after 1.9.99"),))


@pytest.mark.parametrize("image,version,dated", [
    ("vllm/vllm-openai:latest", CURRENT, False),  # pulled today: the newest runs, the flag is refused
    ("vllm/vllm-openai", CURRENT, False),  # no tag is latest
    ("vllm/vllm-openai:nightly", CURRENT, False),
    ("vllm/vllm-openai:v0.9.1", "0.9.1", False),
    ("vllm/vllm-openai@sha256:" + "0" * 64, "0.9.2", True),  # a digest names a build, not a version
    ("myorg/llm-gateway:latest", "0.9.2", True),  # not the engine's image: its vLLM is not known
    ("opea/vllm-gaudi:latest", "0.9.2", True),  # someone's build of vLLM: its latest is not vLLM's newest
    ("docker.io/vllm/vllm-openai:latest", CURRENT, False),
])
def test_a_moving_image_tag_is_the_newest(image, version, dated):
    site = site_from_argv("vllm serve Qwen/Qwen3-8B --use-v2-block-manager".split(), {})
    site.engine, site.image = "vllm", image
    from servefit import engines
    from servefit.sources.image_release import version_of_image

    cfg = engines.get("vllm").parse(site, version_of_image(image))
    assert cfg.version == version
    assert bool(sf005(cfg)) is dated
    if image.endswith(("latest", "openai")) and not dated:
        (err,) = [f for f in cfg.findings if f.code == "VLLM001"]
        assert err.message.endswith("(removed in 0.10.0; the image tag latest runs the newest release)")
