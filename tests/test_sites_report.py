"""`servefit lint --list-sites` is the assembly made visible (issue 14 item 5): each setting as
the file writes it (with its span) beside what servefit parsed, the model as written and what it
resolved to, the target and where each part came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

UNIT = """[Unit]
Description=llama

[Service]
ExecStart=/usr/local/bin/llama-server -m /models/Qwen3.6-27B-UD-Q6_K_XL.gguf -c 65536 --host 0.0.0.0 \
--port 9000 --temperature 0.6 --top-p 0.95 -ngl 99

[Install]
WantedBy=multi-user.target
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    rc = main(list(argv))
    return rc, capsys.readouterr().out


def test_llama_server_unit_shows_what_the_file_writes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "llama.service"
    f.write_text(UNIT)
    line = UNIT.splitlines()[4]
    rc, out = run(capsys, "lint", str(f), "--list-sites", "--format", "json", "--gpu", "L4")
    [site] = json.loads(out)
    assert rc == 0
    assert {k: site["settings"][k] for k in ("host", "port", "temp", "top_p")} == {
        "host": "0.0.0.0", "port": "9000", "temp": "0.6", "top_p": "0.95"}
    raw = site["settings_raw"]
    host = raw["host"]
    assert host["written"] == "0.0.0.0" and host["modelled"] is False
    assert (host["location"]["line"], host["location"]["col"]) == (5, line.index("0.0.0.0") + 1)
    assert raw["ctx_size"] == {"written": "65536", "value": "65536", "parsed": 65536, "modelled": True,
                               "location": {"file": str(f), "line": 5, "col": line.index("65536") + 1,
                                            "end_line": 5, "end_col": line.index("65536") + 6}}
    m = site["model_ref"]
    assert m["written"] == "/models/Qwen3.6-27B-UD-Q6_K_XL.gguf" and m["parsed"] == "Qwen/Qwen3.6-27B"
    assert m["location"]["col"] == line.index("/models/") + 1
    assert site["target"]["gpu"] == {"value": "L4", "source": "--gpu", "location": None}
    # the GGUF's name points at a catalogued model: planned (27B at Q6_K with 64k of context does not fit an L4)
    assert site["gpu"]["resolved"] == "NVIDIA L4" and site["verdict"] == "oom_at_load"
    # the finding quotes the same place the report shows
    rc, out = run(capsys, "lint", str(f), "--format", "json", "--gpu", "L4")
    sec = next(d for d in json.loads(out) if d["code"] == "SEC003")
    assert "--host 0.0.0.0" in sec["message"]
    assert (sec["location"]["line"], sec["location"]["column"]) == (host["location"]["line"], host["location"]["col"])
    rc, out = run(capsys, "lint", str(f), "--list-sites", "--gpu", "L4")
    assert "/models/Qwen3.6-27B-UD-Q6_K_XL.gguf (Qwen/Qwen3.6-27B)" in out and "host=0.0.0.0" in out


def test_target_parts_and_verdict(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "serve.sh"
    f.write_text("#!/bin/sh\n# servefit: gpu=H100 engine-version=0.10.2 model=meta-llama/Llama-3.1-8B-Instruct\n"
                 "vllm serve /models/llama --max-model-len 8192\n")
    rc, out = run(capsys, "lint", str(f), "--list-sites", "--format", "json", "--gpus", "2")
    [site] = json.loads(out)
    t = site["target"]
    assert t["gpu"]["value"] == "H100" and t["gpu"]["source"] == "servefit directive (line 2)"
    assert (t["gpu"]["location"]["line"], t["gpu"]["location"]["col"]) == (2, 17)
    assert t["count"] == {"value": 2, "source": "count from --gpus", "location": None}
    assert t["engine_version"]["value"] == "0.10.2" and t["model"]["source"] == "servefit directive (line 2)"
    assert site["model_ref"]["written"] == "/models/llama"
    assert site["model_ref"]["resolved"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert site["gpu"]["resolved"] == "NVIDIA H100 80GB HBM3" and site["verdict"] == "started"
