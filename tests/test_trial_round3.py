"""Found by running every command on real deployment files from public repositories (a third
round; tests/test_real_shapes.py holds the second). Each test writes a small file with the shape
that went wrong, never the fetched file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err
    return rc, out, err


# llama-swap on Windows with models under F:\...: the GGUF file name was taken with its whole
# Windows path (os.path.basename splits on / only), so the catalog was asked for the path
# 'F:\ai\...\Devstral-Small-2-24B-Instruct-2512' and answered "a local folder named after it;
# assumed the checkpoint's own fp8 weights", beside the GGUF's own "quant Q4_K_M" line.
WINDOWS_MODELS = r"""macros:
  "llamacpp-rocm": >
    C:\Users\Bob\apps\llamacpp-rocm\llama-server.exe
    --port ${PORT}

models:
  Devstral backslash:
    cmd: |
      ${llamacpp-rocm}
      -m F:\ai\unsloth\Devstral-Small-2-24B-Instruct-2512-GGUF\Devstral-Small-2-24B-Instruct-2512-UD-Q4_K_XL.gguf
      -c 16384
  Devstral slash:
    cmd: |
      ${llamacpp-rocm}
      -m F:/ai/unsloth/Devstral-Small-2-24B-Instruct-2512-GGUF/Devstral-Small-2-24B-Instruct-2512-UD-Q4_K_XL.gguf
      -c 16384
"""


def test_a_windows_model_path_is_named_by_its_file_as_a_posix_one(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "config.yaml"
    f.write_text(WINDOWS_MODELS)
    _, out, _ = _run(capsys, "estimate", str(f), "--gpu", "RX 7900 XTX", "--format", "json")
    back, slash = json.loads(out)
    gguf = "Devstral-Small-2-24B-Instruct-2512-UD-Q4_K_XL.gguf"
    assert back["assumptions"][0] == (f"GGUF '{gguf}' taken as mistralai/Devstral-Small-2-24B-Instruct-2512 "
                                      "(by its name, quant Q4_K_M; no file to read)")
    assert f"model '{gguf}' taken as mistralai/Devstral-Small-2-24B-Instruct-2512 by its name (Q4_K_M, sized as " \
           "llama-quantize makes it)" in back["assumptions"]
    assert not any("local folder" in a or "fp8" in a or "\\" in a for a in back["assumptions"])
    assert back["assumptions"] == slash["assumptions"]
    assert back["memory"] == slash["memory"] and back["model"] == slash["model"]
    _, out, _ = _run(capsys, "models", str(f))
    assert "local folder" not in out and out.count(f"GGUF '{gguf}' taken as") == 2


def test_a_windows_gguf_in_a_modelfile_is_named_by_its_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "Modelfile"
    f.write_text("FROM F:\\models\\Qwen2.5-7B-Instruct-Q4_K_M.gguf\nPARAMETER num_ctx 8192\n")
    _, out, _ = _run(capsys, "estimate", str(f), "--gpu", "RTX4090", "--format", "json")
    [plan] = json.loads(out)
    assert plan["model"]["resolved"] == "Qwen/Qwen2.5-7B-Instruct"
    assert not any("\\" in a for a in plan["assumptions"])
