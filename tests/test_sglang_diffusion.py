"""SGLang's diffusion server (sglang.multimodal_gen): read with its own flags, said not planned."""

from __future__ import annotations

from test_sglang_engine import parse

from servefit.cli import main

FLUX = "black-forest-labs/FLUX.1-dev"


def _codes(cfg) -> list[str]:
    return [f.code for f in cfg.findings]


def test_model_type_diffusion_reads_the_diffusion_flags():
    cfg = parse(f"sglang serve --model-type diffusion --model-path {FLUX} --num-gpus 2 --port 3000 "
                "--dit-cpu-offload true --text-encoder-precisions bf16 fp32")
    assert _codes(cfg) == ["SGL014"]
    assert cfg.model_ref == FLUX and cfg.unplanned and cfg.settings["num_gpus"] == 2
    cfg = parse(f"sglang serve --model-type=diffusion {FLUX}")  # positional model, `=` form
    assert _codes(cfg) == ["SGL014"] and cfg.model_ref == FLUX


def test_module_launches_are_the_diffusion_server():
    for cmd in ("python -m sglang.multimodal_gen.runtime.launch_server",
                "python3 -m sglang.multimodal_gen.runtime.entrypoints.cli.main serve"):
        cfg = parse(f"{cmd} --model-path {FLUX} --tp-size 2")
        assert _codes(cfg) == ["SGL014"], cmd
        assert cfg.settings["tp_size"] == 2


def test_component_overrides_and_a_real_typo():
    cfg = parse(f"sglang serve --model-type diffusion --model-path {FLUX} --vae-path /m/vae "
                "--component-paths.transformer=/m/dit --transformer-quantization fp8 --bogus-flag 3 --warmup")
    bad = [f for f in cfg.findings if f.code == "SGL001"]
    assert [f.message for f in bad] == ["unrecognized argument: --bogus-flag", "ambiguous option: --warmup could "
                                        "match --warmup-mode, --warmup-num-frames, --warmup-resolutions, "
                                        "--warmup-sampling-params, --warmup-steps"]


def test_plain_serve_is_the_diffusion_server_when_only_its_flags_are_rejected():
    cfg = parse(f"sglang serve --model-path {FLUX} --num-gpus 2 --vae-cpu-offload true")
    assert _codes(cfg) == ["SGL014"]
    assert "read as the diffusion server" in cfg.findings[0].message
    # a flag neither server has keeps the LLM reading, with its errors
    cfg = parse("sglang serve --model-path Qwen/Qwen3-8B --num-gpus 2 --mem-fraction-statc 0.8")
    assert _codes(cfg) == ["SGL001", "SGL001"] and not cfg.unplanned


def test_model_type_llm_and_a_wrong_backend():
    cfg = parse("sglang serve --model-type llm --model-path Qwen/Qwen3-8B --tp 2")
    assert _codes(cfg) == [] and cfg.settings["tp_size"] == 2
    cfg = parse("sglang serve --model-type diffusio --model-path Qwen/Qwen3-8B")
    assert _codes(cfg) == ["SGL002"]
    assert "'diffusio' is not a server SGLang ships (choose from auto, llm, diffusion" in cfg.findings[0].message


def test_lint_says_not_checked_and_estimate_one_line(tmp_path, capsys):
    f = tmp_path / "serve.sh"
    f.write_text(f"sglang serve --model-type diffusion --model-path {FLUX} --num-gpus 1 --port 30010\n")
    assert main(["lint", str(f), "--gpu", "H100"]) == 0
    out = capsys.readouterr().out
    assert "SGL014" in out and "memory was not checked" in out and "SF110" not in out
    assert "0 errors, 0 warnings, 1 info" in out
    assert main(["estimate", str(f), "--gpu", "H100"]) == 2
    err = capsys.readouterr().err
    f.write_text(f"sglang serve --model-type diffusion --model-path {FLUX} --bogus-flag 3\n")
    assert main(["lint", str(f), "--gpu", "H100"]) == 1
    assert f"serve.sh:1:{len(FLUX) + 51}: SGL001 unrecognized argument: --bogus-flag" in capsys.readouterr().out
    assert err.strip() == ("servefit: error: SGLang's diffusion server runs an image / video generation pipeline; "
                           "servefit has no memory model for diffusion pipelines, so this server's memory was not checked")
