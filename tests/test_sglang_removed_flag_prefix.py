"""A flag a release dropped that is the prefix of the flags that replaced it (SGLang's
--cuda-graph-max-bs, gone in 0.5.20, beside --cuda-graph-max-bs-decode / -prefill): argparse
finds no exact match and calls it ambiguous among the release's own flags. The finding listed the
dropped flag itself as a match and lost what the release says about it (seen in a GKE StatefulSet
of GLM-5.1 on RTX PRO 6000 nodes with an unpinned image)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main

STATEFULSET = """apiVersion: apps/v1
kind: StatefulSet
metadata: {name: sglang-glm}
spec:
  template:
    spec:
      containers:
      - name: sglang
        image: lmsysorg/sglang:{tag}
        command: [python3, -m, sglang.launch_server]
        args:
        - --model-path
        - Qwen/Qwen2.5-7B-Instruct
        - --cuda-graph-max-bs
        - "64"
        resources: {limits: {nvidia.com/gpu: 1}}
"""


def _sgl001(tmp_path: Path, capsys: pytest.CaptureFixture[str], tag: str) -> list[str]:
    f = tmp_path / "sts.yaml"
    f.write_text(STATEFULSET.replace("{tag}", tag))
    main(["lint", str(f), "--gpu", "H100"])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return [line[len(str(f)) + 1:].split(" [GPU: ")[0] for line in out.splitlines() if " SGL001 " in line]


def test_the_dropped_flag_is_ambiguous_among_the_release_flags_only(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert _sgl001(tmp_path, capsys, "v0.5.20") == [
        "14:11: SGL001 ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
        "--cuda-graph-max-bs-prefill; --cuda-graph-max-bs (removed in 0.5.20; this is 0.5.20); "
        "use --cuda-graph-max-bs-decode"]


def test_a_release_that_has_the_flag_reads_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _sgl001(tmp_path, capsys, "v0.5.12") == []
