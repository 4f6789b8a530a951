"""Compose: interpolation from .env, anchors and merges, both command forms, GPUs and shm."""

from __future__ import annotations

import os
from pathlib import Path

from servefit.sources import scan_file

FIX = Path(__file__).parent / "fixtures" / "sources"


def scan(name: str):
    return scan_file(str(FIX / name))


def argv(site) -> list[str]:
    return [t.text for t in site.argv]


def at(tok) -> tuple[str, int, int, str]:
    s = tok.span
    with open(s.file, encoding="utf-8", newline="") as fh:
        return Path(s.file).name, s.line, s.col, fh.read()[s.start:s.end]


def test_string_command_interpolated_from_env_file_and_merged_anchors():
    r = scan("compose/anchors/docker-compose.yml")
    assert [s.name for s in r.sites] == ["compose/chat", "compose/shell", "compose/sglang"]  # web is not a server
    chat = r.sites[0]
    assert argv(chat) == ["vllm", "serve", "--model", "Qwen/Qwen2.5-14B-Instruct", "--max-model-len", "24576",
                          "--tensor-parallel-size", "2", "--dtype", "auto"]
    assert at(chat.argv[3]) == (".env", 2, 7, "Qwen/Qwen2.5-14B-Instruct")  # the .env line
    assert at(chat.argv[5]) == (".env", 3, 10, "24576")  # quoted in .env: the characters inside
    assert at(chat.argv[9]) == ("docker-compose.yml", 19, 110, "auto")  # ${DTYPE:-auto}: the default
    assert chat.image == "vllm/vllm-openai:v0.10.2" and chat.engine_version == "0.10.2"  # from <<: *vllm
    assert chat.gpu.count == 2 and chat.workload.shm is True  # device_ids via <<: *gpu, ipc: host
    assert {k: t.text for k, t in chat.env.items()} == {"VLLM_USE_V1": "1", "HF_HOME": "/cache"}


def test_sh_c_with_escaped_dollars_reads_the_container_environment():
    shell = scan("compose/anchors/docker-compose.yml").sites[1]
    assert argv(shell) == ["vllm", "serve", "mistralai/Mistral-7B-Instruct-v0.3", "--max-model-len", "16384",
                           "--gpu-memory-utilization", "0.8", "--tensor-parallel-size", "2"]
    assert at(shell.argv[2]) == ("docker-compose.yml", 32, 20, "mistralai/Mistral-7B-Instruct-v0.3")
    assert at(shell.argv[4]) == ("docker-compose.yml", 33, 13, "16384")
    assert shell.workload.shm is False  # shm_size: 64m


def test_sglang_string_command_and_device_count():
    sgl = scan("compose/anchors/docker-compose.yml").sites[2]
    assert sgl.engine == "sglang" and sgl.engine_version == "0.5.3"
    assert argv(sgl) == ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen2.5-14B-Instruct",
                         "--context-length", "24576", "--mem-fraction-static", "0.8"]
    assert sgl.gpu.count == 1 and "count" in sgl.gpu.source


def test_command_that_repeats_the_image_entrypoint_and_ollama_scripts():
    r = scan("compose/doubled/compose.yaml")
    vllm, ollama = r.sites
    assert argv(vllm) == ["vllm", "serve", "Qwen/Qwen3-4B", "--max-model-len", "8192"]
    assert [f.code for f in r.findings] == ["SF106"] and r.findings[0].span.line == 4
    assert argv(ollama) == ["ollama", "serve"]
    assert [t.text for t in ollama.inputs.pulled] == ["llama3.2:3b"]
    assert ollama.inputs.file_refs == ["/modelfiles/Modelfile"]
    assert ollama.workload.path_map == {"/modelfiles": "./ollama"}


def test_in_file_override_comment():
    # the directive is kept apart from what the repo says; sources/target.py applies the precedence
    from servefit.sources.target import Flags, resolve

    [site] = scan("override/docker-compose.yaml").sites
    assert (site.directives["gpu"].value, site.directives["count"].value) == ("L4", "2")
    assert (site.directives["gpu"].span.line, site.directives["gpu"].span.col) == (1, 17)
    t = resolve(site, Flags(), None)
    assert (t.gpu.value, t.count.value) == ("L4", 2) and t.gpu.source == "servefit directive (line 1)"
    assert argv(site)[:4] == ["vllm", "serve", "--model", "Qwen/Qwen2.5-7B-Instruct"]


def test_env_file_spans_name_the_file_as_the_compose_file_is_named(monkeypatch):
    """A value from `.env` points at `compose/anchors/.env` when the compose file was given as
    `compose/anchors/docker-compose.yml`: relative like every other finding, not absolute."""
    monkeypatch.chdir(FIX)
    r = scan_file("compose/anchors/docker-compose.yml")
    tok = r.sites[0].argv[3]
    assert tok.span.file == os.path.join("compose", "anchors", ".env") and tok.span.line == 2


def test_build_context_repeated_pulls_and_where_the_image_is_written(tmp_path: Path, capsys) -> None:
    """The wrappers' facts land in typed fields and in --list-sites: the build context as the place
    of the Modelfile, each pulled model once (at its first mention), the image's span."""
    import json

    from servefit.cli import main
    from servefit.core import Token

    f = tmp_path / "compose.yaml"
    f.write_text("services:\n  ollama:\n    image: ollama/ollama:0.12.3\n    build: ./ollama\n"
                 '    entrypoint: ["/bin/sh", "-c", "ollama serve & ollama pull qwen2.5:7b && '
                 'ollama pull llama3.2:3b && ollama pull qwen2.5:7b && wait"]\n')
    [site] = scan_file(str(f)).sites
    assert site.inputs.file_refs == ["./ollama"]
    assert [at(t) for t in site.inputs.pulled] == [("compose.yaml", 5, 63, "qwen2.5:7b"),
                                                   ("compose.yaml", 5, 89, "llama3.2:3b")]
    assert at(Token(site.image, site.image_span)) == ("compose.yaml", 3, 12, "ollama/ollama:0.12.3")
    main(["lint", str(f), "--list-sites", "--format", "json"])
    [shown] = json.loads(capsys.readouterr().out)
    assert shown["modelfile_refs"] == ["./ollama"] and shown["ollama_models"] == ["qwen2.5:7b", "llama3.2:3b"]
