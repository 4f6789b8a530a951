"""The Modelfile grammar as parser/parser.go reads it, and `ollama create`'s PARAMETER checks."""

from __future__ import annotations

from servefit.engines.ollama_modelfile import check_parameters, modelfile_of, parse_modelfile
from servefit.sources import modelfile as src

MF = '''# a comment
from llama3.1:8b
PARAMETER num_ctx 131072
parameter temperature 0.2
PARAMETER stop "<|eot_id|>"
PARAMETER stop "<|end|>"
  # indented comment
SYSTEM """You are
helpful. # not a comment"""
TEMPLATE "{{ .Prompt }}"
MESSAGE user hello there
LICENSE """MIT"""
'''


def test_instructions_values_and_spans():
    doc = parse_modelfile(MF, "Modelfile")
    assert [i.name for i in doc.instructions] == ["from", "parameter", "parameter", "parameter", "parameter",
                                                  "system", "template", "message", "license"]
    frm = doc.from_ref
    assert frm is not None and frm.text == "llama3.1:8b" and frm.span is not None
    assert (frm.span.line, frm.span.col, frm.span.end_col) == (2, 6, 17)
    assert MF[frm.span.start:frm.span.end] == "llama3.1:8b"
    ctx = doc.parameters["num_ctx"][0]
    assert ctx.text == "131072" and MF[ctx.span.start:ctx.span.end] == "131072"
    assert [t.text for t in doc.parameters["stop"]] == ["<|eot_id|>", "<|end|>"]
    system = next(i for i in doc.instructions if i.name == "system")
    assert system.value.text == "You are\nhelpful. # not a comment"
    assert doc.findings == []


def test_unknown_parameter_bad_values_and_deprecated():
    doc = parse_modelfile("FROM x\nPARAMETER context_length 8192\nPARAMETER num_ctx 8k\nPARAMETER top_p high\n"
                          "PARAMETER use_mmap maybe\nPARAMETER low_vram true\nPARAMETER NUM_CTX 4\n", "M")
    msgs = {f.code: [] for f in doc.findings}
    for f in doc.findings:
        msgs[f.code].append(f.message)
    assert "unknown parameter 'context_length'" in msgs["OLLM002"]
    assert "unknown parameter 'NUM_CTX'" in msgs["OLLM002"]  # names are case-sensitive
    assert "invalid int value [8k]" in msgs["OLLM003"] and "invalid float value [high]" in msgs["OLLM003"]
    assert "invalid bool value [maybe]" in msgs["OLLM003"]
    assert msgs["OLLM004"] == ["warning: parameter low_vram is deprecated"]


def test_parameters_by_version():
    doc = parse_modelfile("FROM x\nPARAMETER low_vram true\nPARAMETER tfs_z 1.0\nPARAMETER draft_num_predict 4\n", "M")
    old = {f.code for f in check_parameters(doc, "0.5.0")}
    assert "OLLM004" not in old  # low_vram and tfs_z were still options in 0.5.0
    assert {f.message for f in check_parameters(doc, "0.5.0") if f.code == "OLLM002"} == \
        {"unknown parameter 'draft_num_predict'"}
    assert {f.message for f in check_parameters(doc, None) if f.code == "OLLM002"} == {"unknown parameter 'tfs_z'"}


def test_syntax_errors():
    codes = lambda text: [f.message for f in parse_modelfile(text, "M").findings]  # noqa: E731
    assert any("command must be one of" in m for m in codes("FORM llama3\n"))
    assert codes("PARAMETER num_ctx 4\n") == ["no FROM line"]
    assert any("message role" in m for m in codes("FROM x\nMESSAGE bot hi\n"))
    assert any("unterminated" in m for m in codes('FROM x\nSYSTEM """never closed\n'))


def test_source_wrapper():
    assert src.detect("deploy/Modelfile", "")
    assert src.detect("models/llama.modelfile", "")
    assert src.detect("x.txt", "# hi\nFROM llama3\nPARAMETER num_ctx 4096\n")
    assert not src.detect("Dockerfile", "FROM ubuntu:22.04\nRUN apt-get update\n")
    sites, findings = src.scan("Modelfile", MF)
    assert len(sites) == 1 and findings == []
    s = sites[0]
    assert [t.text for t in s.argv] == ["ollama", "serve"] and s.engine == "ollama" and s.line == 2
    assert modelfile_of(s).from_ref.text == "llama3.1:8b"
