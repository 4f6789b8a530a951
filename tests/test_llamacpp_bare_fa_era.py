"""A bare `-fa` with no build given: only builds before b6325 take it (common/arg.cpp made it
`on|off|auto` then), so the config dates itself there instead of being judged by the newest
build, which refuses it (LCPP002 on six services of a public compose file on a custom build)."""

from __future__ import annotations

from servefit.pipeline import Target, evaluate, site_from_argv

CMD = ["llama-server", "-m", "/models/Mistral-7B-Instruct-v0.3-Q4_K_S.gguf", "-c", "4096", "-ngl", "99", "-fa"]


def _plan(argv: list[str], version: str | None = None):
    return evaluate(site_from_argv(argv, {}), Target(gpu="L4", engine_version=version))


def test_a_bare_fa_dates_the_config_before_b6325() -> None:
    r = _plan(CMD)
    assert r.config.version == "b6301"
    assert [f.code for f in r.config.findings if f.code in ("LCPP002", "SF005")] == ["SF005"]
    assert r.config.assumptions[0].startswith("WARNING: llama.cpp b6301 assumed (no version given; -fa (a bare switch, "
                                              "as builds before b6325 take it")


def test_a_given_build_is_never_second_guessed() -> None:
    r = _plan(CMD, "b7000")
    assert r.config.version == "b7000"
    assert [f.code for f in r.config.findings if f.code in ("LCPP002", "SF005")] == ["LCPP002"]


def test_a_later_option_beside_it_means_no_build_takes_both() -> None:
    r = _plan(CMD + ["--fit", "on"])
    assert [f.code for f in r.config.findings if f.code == "LCPP002"] == ["LCPP002"]
