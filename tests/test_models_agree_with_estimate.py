"""`servefit models` sizes a server the way estimate does: a path without a model name is read
through what the file says about it (a bind mount's host name); and a name that spells a sibling
family (`DeepSeek-R1-Distill-Qwen`, no size) is not taken as the teacher it shares words with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.models import resolve_model

SCRIPT = """docker run --gpus all --ipc=host \\
  -v /srv/weights/DeepSeek-R1-Distill-Qwen-14B-Q6_K.gguf:/m/DeepSeek-R1-Distill-Qwen.gguf \\
  lmsysorg/sglang:v0.4.6.post5-cu124 \\
  python3 -m sglang.launch_server --model-path /m/DeepSeek-R1-Distill-Qwen.gguf --load-format gguf --port 30000
docker run --gpus all -v $PWD/models/Qwen2.5-7B-Instruct-AWQ:/data \\
  ghcr.io/huggingface/text-generation-inference:3.3.4 --model-id /data --max-total-tokens 4096
"""


def test_models_and_estimate_name_the_same_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sh"
    f.write_text(SCRIPT)
    main(["models", "--format", "json", str(f)])
    rows = json.loads(capsys.readouterr().out)
    assert [(r["line"], r["model"], r["source"]) for r in rows] == [
        (4, "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "assumed base"),
        (6, "Qwen/Qwen2.5-7B-Instruct", "assumed base")]
    assert rows[0]["assumptions"][0] == (
        "'/m/DeepSeek-R1-Distill-Qwen.gguf' names no model; sized as /srv/weights/DeepSeek-R1-Distill-Qwen-14B-Q6_K.gguf: "
        "the file mounts /srv/weights/DeepSeek-R1-Distill-Qwen-14B-Q6_K.gguf at /m/DeepSeek-R1-Distill-Qwen.gguf "
        "(pass --model or `# servefit: model=` to say otherwise)")
    main(["estimate", "--gpu", "h100", "--format", "json", str(f)])
    docs = json.loads(capsys.readouterr().out)
    assert [(d["model"]["resolved"], d["model"]["params"]) for d in docs] == [(r["model"], r["params"]) for r in rows]


@pytest.mark.parametrize("ref, want", [
    ("/m/DeepSeek-R1-Distill-Qwen.gguf", None),  # a Qwen distill of unknown size: not the 671B teacher
    ("deepseek-r1-distill-llama", None),
    ("DeepSeek-R1-Distill-Qwen-7B-GGUF", "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"),
    ("/models/DeepSeek-R1", "deepseek-ai/DeepSeek-R1"),
    ("acme/DeepSeek-R1-AWQ", "deepseek-ai/DeepSeek-R1"),
])
def test_sibling_family_without_a_size_is_not_its_teacher(ref: str, want: str | None) -> None:
    from servefit.core import UsageError

    try:
        got = resolve_model(ref).name
    except UsageError:
        got = None
    assert got == want
