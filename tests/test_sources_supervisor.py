"""supervisord program files (Hiroaki-Masuzawa/llm_vlm_memo keeps one `[program:x]` per model in
supervisor_configs/*.conf): each `command=` that starts an engine is a server, split like shlex with no shell,
with `environment=` as its variables; other `.conf` files are not read."""

from __future__ import annotations

from servefit.sources import file_kind, scan_file

PROGRAMS = """[program:qwen-vl]
command=vllm serve Qwen/Qwen2.5-VL-7B-Instruct --limit-mm-per-prompt "{\\"images\\": 4}" --max_model_len 32768
environment=HF_HOME="/data/hf cache",VLLM_USE_V1=1
autostart=false

[program:web]
command=/usr/bin/python3 -m http.server 8080
"""


def test_each_program_that_starts_an_engine_is_a_server(tmp_path):
    f = tmp_path / "qwen.conf"
    f.write_text(PROGRAMS)
    r = scan_file(str(f))
    [site] = r.sites
    assert (site.engine, site.name, site.line) == ("vllm", "supervisor/qwen-vl", 2)
    assert [t.text for t in site.argv] == ["vllm", "serve", "Qwen/Qwen2.5-VL-7B-Instruct", "--limit-mm-per-prompt",
                                           '{"images": 4}', "--max_model_len", "32768"]
    n = site.argv[-1].span
    assert (n.line, n.col, n.end_col) == (2, 104, 109)
    home = site.env["HF_HOME"]
    assert home.text == "/data/hf cache" and (home.span.line, home.span.col, home.span.end_col) == (3, 22, 36)
    assert site.env["VLLM_USE_V1"].text == "1"
    assert site.workload.names[0][0] == "qwen-vl"


def test_only_conf_files_that_hold_programs_are_supervisor_files(tmp_path):
    assert file_kind("a/llm.conf", "[program:llm]\ncommand=vllm serve m\n") == "supervisor"
    assert file_kind("a/nginx.conf", "server {\n  listen 80;\n}\n") is None
    assert file_kind("a/llm.conf") is None  # nothing read: not known
    other = tmp_path / "app.conf"
    other.write_text("[server]\ncommand=vllm serve Qwen/Qwen2.5-7B-Instruct\n")
    assert scan_file(str(other)).sites == []


def test_a_program_after_the_supervisord_sections_is_found(tmp_path):
    """A whole supervisord.conf: `[program:` comes after [unix_http_server], [supervisord] and their
    comments, past the 128 bytes that were searched; a commented-out `;[program:` is no program."""
    head = "".join(f"; option {i}: the socket, the log file and the pid file of supervisord\n" for i in range(3))
    text = head + "[supervisord]\nnodaemon=true\n\n[program:llm]\ncommand=vllm serve Qwen/Qwen2.5-7B-Instruct\n"
    assert text.index("[program:") > 128
    f = tmp_path / "supervisord.conf"
    f.write_text(text)
    [site] = scan_file(str(f)).sites
    assert (site.name, site.line, [t.text for t in site.argv]) == (
        "supervisor/llm", 8, ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"])
    assert scan_file("s.conf", text).sites[0].line == 8  # the text given (standard input) is searched as far
    assert file_kind("a/x.conf", ";[program:old]\n[server]\ncommand=vllm serve m\n") is None
