"""tune splits a GPU between servers that run on it at once (compose services reserving the same device_ids)
when their memory fractions, as written, add past it (tune/split.py): each server's fraction is written in its
own file idiom, a second --write writes nothing, lint's SF117 is gone and estimate gives what tune said.
Inspired by HouXianzhoua/llm-inference-platform's compose (two servers on device_ids '0', each at 0.9)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from servefit.cli import main

SERVICE = """  {name}:
    image: {image}
    command: {command}
    deploy:
      resources:
        reservations:
          devices: [{{driver: nvidia, device_ids: ["0"], capabilities: [gpu]}}]
"""
TGI = "ghcr.io/huggingface/text-generation-inference:3.3.4"
VLLM = "vllm/vllm-openai:v0.11.2"
SGLANG = "lmsysorg/sglang:v0.5.5"
TGI_3B = "--model-id Qwen/Qwen2.5-3B-Instruct --max-total-tokens 8192 --hostname 127.0.0.1 --cuda-memory-fraction {f}"
TGI_1B = "--model-id Qwen/Qwen2.5-1.5B-Instruct --max-total-tokens 8192 --hostname 127.0.0.1 --cuda-memory-fraction {f}"
VLLM_3B = "--model Qwen/Qwen2.5-3B-Instruct --max-model-len 8192 --host 127.0.0.1 --gpu-memory-utilization {f}"
VLLM_1B = "--model Qwen/Qwen2.5-1.5B-Instruct --max-model-len 8192 --host 127.0.0.1 --gpu-memory-utilization {f}"
SGLANG_1B = ("python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-1.5B-Instruct --context-length 8192 "
             "--host 127.0.0.1 --mem-fraction-static {f}")


def compose(a: tuple[str, str], b: tuple[str, str]) -> str:
    return "services:\n" + SERVICE.format(name="a", image=a[0], command=a[1]) + \
        SERVICE.format(name="b", image=b[0], command=b[1])


# (file as written, file as tune writes it, tune's change lines, estimate's concurrency lines)
CASES = {
    # TGI 3.3.4 sizes its KV cache so the device is cuda_memory_fraction x TGI_WIGGLE_ROOM full: needs 8.89 and
    # 6.23 GiB (all but the KV cache, plus one 8,192-token request), 22.03 GiB shared in proportion: 12.95 and
    # 9.08 GiB; 0.64 and 0.45 hold within them
    "two TGI": (
        compose((TGI, TGI_3B.format(f=0.9)), (TGI, TGI_1B.format(f=0.9))),
        compose((TGI, TGI_3B.format(f=0.64)), (TGI, TGI_1B.format(f=0.45))),
        ["  change  --cuda-memory-fraction 0.64 [safe]\n", "  change  --cuda-memory-fraction 0.45 [safe]\n"],
        ["max concurrency at 8,192 tokens per request: 14.75x\n",
         "max concurrency at 8,192 tokens per request: 13.51x\n"]),
    # vLLM 0.11.2: needs 8.06 and 5.00 GiB, shares 13.60 and 8.44 GiB; util x 22.03 GiB plus what vLLM holds
    # outside its budget stays within each, and each started last finds its util x total free
    # (v1/worker/utils.py::request_memory)
    "two vLLM": (
        compose((VLLM, VLLM_3B.format(f=0.9)), (VLLM, VLLM_1B.format(f=0.9))),
        compose((VLLM, VLLM_3B.format(f=0.59) + " --max-num-seqs 64"),
                (VLLM, VLLM_1B.format(f=0.36) + " --max-num-seqs 32")),
        ["  change  --max-num-seqs 64, --gpu-memory-utilization 0.59 [safe]\n",
         "  change  --max-num-seqs 32, --gpu-memory-utilization 0.36 [safe]\n"],
        ["max concurrency at 8,192 tokens per request: 24.35x\n",
         "max concurrency at 8,192 tokens per request: 22.08x\n"]),
    # SGLang takes its fraction of the memory free when it starts: its need (3.87 GiB) is raised to what keeps
    # one request when it starts last beside vLLM's share (9.06 GiB); shares 10.38 and 11.66 GiB
    "vLLM and SGLang": (
        compose((VLLM, VLLM_3B.format(f=0.9)), (SGLANG, SGLANG_1B.format(f=0.9))),
        compose((VLLM, VLLM_3B.format(f=0.44) + " --max-num-seqs 32"), (SGLANG, SGLANG_1B.format(f=0.51))),
        ["  change  --max-num-seqs 32, --gpu-memory-utilization 0.44 [safe]\n",
         "  change  --mem-fraction-static 0.51 [safe]\n"],
        ["max concurrency at 8,192 tokens per request: 13.22x\n",
         "max concurrency at 8,192 tokens per request: 36.38x\n"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_tune_splits_a_gpu_whose_fractions_add_past_it(case: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    written, expected, changes, concurrency = CASES[case]
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "compose.yaml"
    f.write_text(written)
    main(["lint", ".", "--gpu", "L4", "--select", "SF117"])
    assert "SF117" in capsys.readouterr().out
    main(["tune", "compose.yaml", "--gpu", "L4", "--write"])
    out = capsys.readouterr().out
    assert "nothing meets the needs" not in out
    for line in changes:
        assert line in out
    assert f.read_text() == expected
    main(["tune", "compose.yaml", "--gpu", "L4", "--write"])
    again = capsys.readouterr().out
    assert again.count("  change  none: the config is already the best one\n") == 2
    assert "wrote" not in again
    assert f.read_text() == expected
    main(["lint", ".", "--gpu", "L4", "--select", "SF117"])
    assert capsys.readouterr().out.startswith("0 errors, 0 warnings, 0 info")
    main(["estimate", "compose.yaml", "--gpu", "L4"])
    est = capsys.readouterr().out
    assert [ln + "\n" for ln in est.splitlines() if ln.startswith("max concurrency")] == concurrency
    # tune's "tuned" users are estimate's concurrency, rounded down
    users = [ln.split(" x ")[1].split(" users")[0] for ln in out.splitlines() if ln.startswith("  tuned")]
    assert users == [c.split(": ")[1].split(".")[0] for c in concurrency]


def test_the_split_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "compose.yaml").write_text(CASES["vLLM and SGLang"][0])
    main(["tune", "compose.yaml", "--gpu", "L4"])
    out = capsys.readouterr().out
    assert ("their memory adds past the GPU, so it is split: this server needs 8.06 GiB (all but its KV cache, and "
            "the KV cache of 1 request(s) of its context), the rest is shared in proportion to need: 10.38 GiB, "
            "fraction 0.44; vLLM refuses to start when the memory free is below its fraction of the total "
            "(v1/worker/utils.py::request_memory), so the fraction leaves the others' shares free\n") in out
    assert ("the rest is shared in proportion to need: 11.66 GiB, fraction 0.51; SGLang takes its fraction of the "
            "memory free when it starts (model_runner.py::profile_max_num_token): started after the others its KV "
            "pool holds 99,851 tokens\n") in out


def test_min_concurrency_sizes_the_split(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Each server needs the KV cache of --min-concurrency requests: 8 of 8,192 tokens move the split."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "compose.yaml").write_text(CASES["two vLLM"][0])
    main(["tune", "compose.yaml", "--gpu", "L4", "--min-concurrency", "8"])
    out = capsys.readouterr().out
    assert ("this server needs 10.03 GiB (all but its KV cache, and the KV cache of 8 request(s) of its context), "
            "the rest is shared in proportion to need: 13.34 GiB, fraction 0.57") in out
    assert ("this server needs 6.53 GiB (all but its KV cache, and the KV cache of 8 request(s) of its context), "
            "the rest is shared in proportion to need: 8.69 GiB, fraction 0.37") in out
    assert "  change  --max-num-seqs 32, --gpu-memory-utilization 0.37 [safe]\n" in out


def test_tgi_started_last_keeps_what_the_other_leaves(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """TGI sizes its KV cache from the device's free memory (utils/import_utils.py::get_cuda_free_memory): the
    one that starts last beside the other's share keeps only its warm-up blocks, short of 8 requests."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "compose.yaml").write_text(CASES["two TGI"][0])
    main(["tune", "compose.yaml", "--gpu", "L4", "--min-concurrency", "8"])
    out = capsys.readouterr().out
    assert out.count("the GPU is not split: 'a' has no fraction that holds no more than its 12.85 GiB share and, "
                     "started after the others, still starts with 65,536 tokens of KV cache (TGI sizes its KV "
                     "cache from the memory free on the device at warm-up, so the server that starts last has what "
                     "the others leave; compose's depends_on sets the order)\n") == 2


def test_vllm_fraction_leaves_room_to_start_last() -> None:
    """Two vLLM servers: each, started after the other holds its share, finds its util x total free
    (request_memory); one hundredth more is refused or holds more than its share."""
    import tempfile

    from servefit.engines import get
    from servefit.sources.assemble import assemble_named
    from servefit.sources.target import Flags
    from servefit.tune.objective import Needs
    from servefit.tune.split import held, split

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "compose.yaml"
        p.write_text(CASES["two vLLM"][0])
        servers = assemble_named([str(p)], Flags(gpu="L4")).servers
        shares, why = split(servers, Needs())
    assert why == ""
    assert {k: v.fraction for k, v in shares.items()} == {"compose/a": 0.59, "compose/b": 0.36}
    for srv in servers:
        sh = shares[srv.site.name]
        ev = srv.evaluation
        for f, ok in ((sh.fraction, True), (round(sh.fraction + 0.01, 2), False)):
            cfg = replace(ev.config, settings={**ev.config.settings, "gpu_memory_utilization": f})
            first = get("vllm").plan(cfg, ev.model, ev.gpu, 1)
            last = get("vllm").plan(cfg, ev.model, replace(ev.gpu, in_use_bytes=sh.others), 1)
            assert (held(first) <= sh.share and last.outcome == "started") is ok, (srv.site.name, f)


def test_no_split_when_the_needs_do_not_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "compose.yaml").write_text(CASES["two vLLM"][0])
    main(["tune", "compose.yaml", "--gpu", "L4", "--min-concurrency", "64"])
    out = capsys.readouterr().out
    assert out.count("the GPU is not split: their needs ('a' 25.78 GiB, 'b' 18.78 GiB) add past the GPU's 22.03 "
                     "GiB\n") == 2
    assert out.count("  tuned   nothing meets the needs") == 2


def test_a_member_that_cannot_take_its_share_undoes_the_split(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """a's fraction is a variable set outside the repository: tune cannot write its share, so both servers are
    tuned beside the other as written, and tune says why."""
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "compose.yaml"
    f.write_text(CASES["two vLLM"][0].replace(VLLM_3B.format(f=0.9), VLLM_3B.format(f="${UTIL}")))
    main(["tune", "compose.yaml", "--gpu", "L4", "--write"])
    out = capsys.readouterr().out
    assert out.count("as written it holds 20.40 GiB, more than that; the GPU is not split: 'a' cannot take its "
                     "share: its change cannot be placed in the file\n") == 1
    assert out.count("the GPU is not split: 'a' cannot take its share") == 2
    assert out.count("  tuned   nothing meets the needs") == 2
    assert "wrote" not in out
