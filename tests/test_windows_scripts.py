"""Windows batch (.bat, .cmd) and PowerShell (.ps1) scripts: the servers they start, with each setting
where it is written (sources/winbatch.py, sources/powershell.py); lint, estimate and tune --write
read and edit them like any other file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.engines.base import program
from servefit.sources import scan_file

GGUF = r"C:\models\Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"
LLAMA_BAT = rf"""@echo off
REM was: llama-server -m old.gguf -c 2048
setlocal
set MODEL={GGUF}
set "CTX=8192"
if not defined NGL set NGL=99
:: the server: llama-server.exe
"C:\llama.cpp\llama-server.exe" -m "%MODEL%" -c %CTX% ^
  -ngl %NGL% --port 8080 ^
  --host 0.0.0.0 > server.log 2>&1
"""
OLLAMA_CMD = ("@echo off\r\nset OLLAMA_CONTEXT_LENGTH=4096\r\nstart \"ollama\" /b ollama serve\r\n"
              "ollama pull qwen2.5:7b\r\n")
LLAMA_PS1 = rf"""# was: llama-server -m old.gguf -c 2048
<# an old one:
   llama-server -m x.gguf -c 1 #>
$model = "{GGUF}"
$ctx = 8192
$llama = "C:\llama.cpp\llama-server.exe"
$env:CUDA_VISIBLE_DEVICES = '0'
$extra = @(
  "-ngl", "99"
  "--port", "8080"
)
& $llama -m $model `
  -c $ctx `
  @extra
"""
OLLAMA_PS1 = """$env:OLLAMA_CONTEXT_LENGTH = "4096"
Start-Process -FilePath "ollama.exe" -ArgumentList "serve" -NoNewWindow
ollama pull qwen2.5:7b
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / ".git").mkdir(exist_ok=True)
    p = tmp_path / name
    p.write_bytes(text.encode())
    return p


def at(tok) -> tuple[int, int, str]:
    s = tok.span
    text = Path(s.file).read_bytes().decode()
    return s.line, s.col, text[s.start:s.end]


def texts(site) -> list[str]:
    return [t.text for t in site.argv]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    rc = main(list(argv))
    return rc, capsys.readouterr().out


def test_exe_names_the_same_program() -> None:
    assert [program(w) for w in ("llama-server.exe", r"C:\llama\Llama-Server.EXE", "ollama.exe", "ollama",
                                 "/usr/bin/vllm")] == ["llama-server", "llama-server", "ollama", "ollama", "vllm"]


def test_batch_llamacpp_settings_and_where_each_is_written(tmp_path: Path) -> None:
    r = scan_file(str(write(tmp_path, "start.bat", LLAMA_BAT)))
    [site] = r.sites
    assert (site.engine, site.name, site.line, r.findings) == ("llamacpp", "script:8", 8, [])
    assert texts(site) == [r"C:\llama.cpp\llama-server.exe", "-m", GGUF, "-c", "8192", "-ngl", "99", "--port",
                           "8080", "--host", "0.0.0.0"]
    assert at(site.argv[0]) == (8, 2, r"C:\llama.cpp\llama-server.exe")
    assert at(site.argv[2]) == (4, 11, GGUF)  # "%MODEL%": the value in its set line
    assert at(site.argv[4]) == (5, 10, "8192")  # set "CTX=8192"
    assert at(site.argv[5]) == (9, 3, "-ngl")  # after a ^ continuation
    assert at(site.argv[6]) == (6, 28, "99")  # if not defined NGL set NGL=99
    assert at(site.argv[10]) == (10, 10, "0.0.0.0")  # the redirection is not a word
    assert {k: at(v) for k, v in site.env.items()} == {
        "MODEL": (4, 11, GGUF), "CTX": (5, 10, "8192"), "NGL": (6, 28, "99")}


def test_batch_ollama_environment_in_a_crlf_file(tmp_path: Path) -> None:
    r = scan_file(str(write(tmp_path, "ollama.cmd", OLLAMA_CMD)))
    [site] = r.sites
    assert (site.engine, site.line, texts(site), r.findings) == ("ollama", 3, ["ollama", "serve"], [])
    assert at(site.argv[0]) == (3, 19, "ollama")  # after `start "title" /b`
    assert {k: at(v) for k, v in site.env.items()} == {"OLLAMA_CONTEXT_LENGTH": (2, 27, "4096")}
    assert [t.text for t in site.inputs.pulled] == ["qwen2.5:7b"]


def test_batch_expansion_rules(tmp_path: Path) -> None:
    """`%%` is `%`, `%~dp0` the script's folder, `^&` an escaped `&`, `&&` two commands; a variable is
    expanded with the value it had when the line was read; a conditional `set` keeps a value already set;
    the script's arguments and unset variables give SF001 where they are written; `!X!` under delayed
    expansion."""
    text = ("@echo off\nsetlocal EnableDelayedExpansion\nset NP=2\nif \"%1\"==\"big\" set NP=8\n"
            "set C=4096& set C=8192& echo %C%\n"
            "cd /d %~dp0 && %~dp0llama-server.exe -m %MODELS%\\x.gguf -c !C! -np %NP% --alias a^&b --api-key 100%% %2\n")
    r = scan_file(str(write(tmp_path, "run.bat", text)))
    [site] = r.sites
    assert texts(site) == [r".\llama-server.exe", "-m", r"%MODELS%\x.gguf", "-c", "8192", "-np", "2", "--alias",
                           "a&b", "--api-key", "100%", "%2"]
    assert at(site.argv[4]) == (5, 19, "8192") and at(site.argv[6]) == (3, 8, "2")
    assert [(f.code, f.span.line, f.span.col, f.message.split(":")[0]) for f in r.findings] == [
        ("SF001", 6, 41, "%MODELS% is not set in this repository"),
        ("SF001", 6, 102, "%2")]


def test_batch_wsl_docker_and_what_is_not_run(tmp_path: Path) -> None:
    """`wsl` runs its command in Linux, which sees only the variables WSLENV names; `docker run` is read as
    anywhere; `taskkill`, `echo`, `title` start nothing; a `for` loop is said not read (SF108)."""
    text = ("set HF_HOME=C:\\hf\nset OLLAMA_HOST=0.0.0.0\nset WSLENV=OLLAMA_HOST/u\n"
            "wsl -d Ubuntu -- python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --context-length 8192\n"
            "docker run --gpus all -e HF_TOKEN=x vllm/vllm-openai:v0.10.1 --model Qwen/Qwen2.5-7B-Instruct ^\n"
            "  --max-model-len 16384\n"
            "taskkill /im llama-server.exe /f\necho llama-server -m x\ntitle llama-server\n"
            "for %%m in (a b) do llama-server -m %%m.gguf\ncmd /c \"ollama serve\"\n"
            "start \"llama-server\" /min /d C:\\llama llama-server.exe -m C:\\m\\x.gguf\n")
    r = scan_file(str(write(tmp_path, "many.bat", text)))
    sg, vl, ll = r.sites
    assert (ll.line, texts(ll)) == (12, ["llama-server.exe", "-m", r"C:\m\x.gguf"])  # not the window's title
    assert (sg.engine, sg.line, texts(sg)[-1], list(sg.env)) == ("sglang", 4, "8192", ["OLLAMA_HOST"])
    assert (vl.engine, vl.image, vl.line, at(vl.argv[-1])) == ("vllm", "vllm/vllm-openai:v0.10.1", 5, (6, 19, "16384"))
    assert [(f.code, f.span.line, f.message.split(":")[0]) for f in r.findings] == [
        ("SF108", 10, "a `for` loop"), ("SF108", 11, "`cmd /c`")]


def test_powershell_llamacpp_settings_and_where_each_is_written(tmp_path: Path) -> None:
    r = scan_file(str(write(tmp_path, "llama.ps1", LLAMA_PS1)))
    [site] = r.sites  # the server in the <# #> comment is not one
    assert (site.engine, site.name, site.line, r.findings) == ("llamacpp", "script:12", 12, [])
    assert texts(site) == [r"C:\llama.cpp\llama-server.exe", "-m", GGUF, "-c", "8192", "-ngl", "99", "--port", "8080"]
    assert at(site.argv[0]) == (6, 11, r"C:\llama.cpp\llama-server.exe")  # & $llama
    assert at(site.argv[2]) == (4, 11, GGUF)
    assert at(site.argv[4]) == (5, 8, "8192")  # -c $ctx, after a backtick continuation
    assert [at(t) for t in site.argv[5:]] == [(9, 4, "-ngl"), (9, 12, "99"), (10, 4, "--port"), (10, 14, "8080")]
    assert {k: at(v) for k, v in site.env.items()} == {"CUDA_VISIBLE_DEVICES": (7, 30, "0")}  # $model etc. are not
    assert site.gpu is not None and site.gpu.count == 1


def test_powershell_start_process_and_what_is_not_read(tmp_path: Path) -> None:
    text = OLLAMA_PS1 + (
        "$p = Start-Process llama-server.exe -ArgumentList \"-m C:\\m\\x.gguf -c 4096\",\"--port 8081\" -PassThru\n"
        "Start-Process \"C:\\llama\\llama-server.exe\" @('-m', 'C:\\m\\y.gguf', \"-c\", \"2048\")\n"
        "Invoke-Expression \"llama-server -m z.gguf\"\n"
        "if ($big) { $env:OLLAMA_CONTEXT_LENGTH = \"32768\" }\n"
        "Write-Host \"ollama serve on $env:OLLAMA_HOST\"\n"
        "wsl vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len $env:LEN\n")
    r = scan_file(str(write(tmp_path, "all.ps1", text)))
    ol, l1, l2, vl = r.sites
    assert (ol.engine, ol.line, texts(ol)) == ("ollama", 2, ["ollama.exe", "serve"])
    assert {k: at(v) for k, v in ol.env.items()} == {"OLLAMA_CONTEXT_LENGTH": (1, 31, "4096")}
    assert texts(l1) == ["llama-server.exe", "-m", r"C:\m\x.gguf", "-c", "4096", "--port", "8081"]
    assert at(l1.argv[4]) == (4, 70, "4096") and at(l1.argv[6]) == (4, 84, "8081")  # split out of the strings
    assert texts(l2) == [r"C:\llama\llama-server.exe", "-m", r"C:\m\y.gguf", "-c", "2048"]
    assert at(l2.argv[2]) == (5, 52, r"C:\m\y.gguf")
    assert (vl.engine, texts(vl)[-1], vl.env) == ("vllm", "$env:LEN", {})  # WSL sees no Windows variable
    assert [(f.code, f.span.line, f.span.col, f.message.split(":")[0]) for f in r.findings] == [
        ("SF108", 6, 1, "`Invoke-Expression`"), ("SF001", 9, 57, "$env"),
    ]
    assert r.findings[1].message.startswith("$env:LEN is not set in this repository")


def test_powershell_quoting_and_conditions(tmp_path: Path) -> None:
    """Single quotes are literal, `""` and backtick escapes in double quotes, `$null`, `$PSScriptRoot`;
    inside `{ }` a variable already set keeps its value; `+=` appends to an array; `$(...)` is not known."""
    text = ('$a = @("-c", "4096")\n$a += "-np", "2"\nif ($x) {\n  $a = @("-c", "1")\n}\n'
            "$name = 'my $name'\n"
            '& "$PSScriptRoot\\llama-server.exe" @a --alias "say ""hi"" `$x $name" --api-key $null --seed $(Get-Random)\n')
    r = scan_file(str(write(tmp_path, "q.ps1", text)))
    [site] = r.sites
    assert texts(site) == [r".\llama-server.exe", "-c", "4096", "-np", "2", "--alias", 'say "hi" $x my $name',
                           "--api-key", "", "--seed", "$(Get-Random)"]
    assert [(f.code, f.span.line, f.message.split(" is ")[0]) for f in r.findings] == [("SF001", 7, "$(Get-Random)")]


def test_lint_points_at_the_line_and_estimate_agrees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bat = write(tmp_path, "start.bat", LLAMA_BAT)
    ps1 = write(tmp_path, "llama.ps1", LLAMA_PS1.replace('"8080"', '"8080", "--host", "0.0.0.0"'))
    _, out = run(capsys, "lint", str(bat), str(ps1), "--gpu", "RTX4090", "--output-format", "json", "--fail-on", "never")
    assert sorted((Path(f["location"]["file"]).name, f["code"], f["location"]["line"], f["location"]["column"])
                  for f in json.loads(out) if f["code"] == "SEC003") == [("llama.ps1", "SEC003", 10, 32),
                                                                         ("start.bat", "SEC003", 10, 10)]
    _, out = run(capsys, "estimate", "--gpu", "RTX4090", "--format", "json", "--", "llama-server", "-m", GGUF,
                 "-c", "8192", "-ngl", "99")
    want = json.loads(out)
    for f in (bat, ps1):
        for cmd in ("estimate", "explain"):
            _, out = run(capsys, cmd, str(f), "--gpu", "RTX4090", "--output-format", "json")
            [got] = json.loads(out)
            assert (got["memory"], got["kv_cache_tokens"], got["n_ctx"]) == (
                want["memory"], want["kv_cache_tokens"], 8192), (cmd, f.name)


@pytest.mark.parametrize(("name", "text", "old", "new"), [
    ("start.bat", LLAMA_BAT, ('set "CTX=8192"', "--host 0.0.0.0 >"),
     ('set "CTX=131072"', "--host 0.0.0.0 --parallel 4 >")),
    ("llama.ps1", LLAMA_PS1, ("$ctx = 8192", '"--port", "8080"'),
     ("$ctx = 131072", '"--port", "8080", "--parallel", "4"')),
    ("ollama.cmd", OLLAMA_CMD, ("set OLLAMA_CONTEXT_LENGTH=4096\r\n",),
     ("set OLLAMA_CONTEXT_LENGTH=32768\r\nset OLLAMA_NUM_PARALLEL=4\r\n",)),
    ("ollama.ps1", OLLAMA_PS1, ('$env:OLLAMA_CONTEXT_LENGTH = "4096"\n',),
     ('$env:OLLAMA_CONTEXT_LENGTH = "32768"\n$env:OLLAMA_NUM_PARALLEL = "4"\n',)),
    # PowerShell 5.1 saves a script with a byte-order mark, and Windows editors with CRLF line ends
    ("bom.ps1", "\ufeff" + OLLAMA_PS1.replace("\n", "\r\n"), ('$env:OLLAMA_CONTEXT_LENGTH = "4096"\r\n',),
     ('$env:OLLAMA_CONTEXT_LENGTH = "32768"\r\n$env:OLLAMA_NUM_PARALLEL = "4"\r\n',)),
    # a quoted last word outside an array: the flag goes after its closing quote
    ("quoted.ps1", f'& llama-server.exe -c 8192 -m "{GGUF}"\n', ("-c 8192", '.gguf"\n'),
     ("-c 131072", '.gguf" --parallel 4\n')),
], ids=["start.bat", "llama.ps1", "ollama.cmd", "ollama.ps1", "bom.ps1", "quoted.ps1"])
def test_tune_write_edits_the_values_in_place_once(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                                   text: str, old: tuple[str, ...], new: tuple[str, ...]) -> None:
    f = write(tmp_path, name, text)
    need = "16k" if name.startswith(("ollama", "bom")) else "32k"
    rc, out = run(capsys, "tune", str(f), "--gpu", "RTX4090", "--min-context", need, "--write")
    assert rc == 0 and f"wrote {f}" in out, out
    want = text
    for a, b in zip(old, new, strict=True):
        want = want.replace(a, b)
    assert f.read_bytes() == want.encode()
    rc, out = run(capsys, "tune", str(f), "--gpu", "RTX4090", "--min-context", need, "--write")
    assert rc == 0 and "wrote" not in out and f.read_bytes() == want.encode()


@pytest.mark.parametrize("name", ["x.bat", "x.ps1"])
def test_odd_input_gives_findings_not_tracebacks(tmp_path: Path, name: str) -> None:
    for text in ('llama-server "-m ^\n', "llama-server -m %%%% %~ !! %A:~0,2% ^", "& $ @( ` llama-server $(\n",
                 "$env: = \nStart-Process -ArgumentList @(\"-c\" llama-server", "<# llama-server", "if ( {{ }} ) llama-server }"):
        scan_file(str(write(tmp_path, name, text)))


def test_names_are_case_insensitive_and_windows_own_variables_are_said(tmp_path: Path) -> None:
    text = "set ctx=8192\nllama-server.exe -m %USERPROFILE%\\models\\x.gguf -c %CTX%\n"
    r = scan_file(str(write(tmp_path, "w.bat", text)))
    [site] = r.sites
    assert at(site.argv[4]) == (1, 9, "8192")
    assert [f.message.split(":")[0] for f in r.findings] == [
        "%USERPROFILE% is set by Windows for the user who runs the script"]
    text = "$env:Hf_Home = 'D:\\hf'\n& llama-server -m \"$env:LOCALAPPDATA\\m.gguf\" --alias $env:HF_HOME\n"
    r = scan_file(str(write(tmp_path, "w.ps1", text)))
    [site] = r.sites
    assert at(site.argv[4]) == (1, 17, "D:\\hf")
    assert [f.message.split(":")[0] for f in r.findings] == ["$env"]
    assert r.findings[0].message.startswith("$env:LOCALAPPDATA is set by Windows for the user who runs the script")


@pytest.mark.parametrize("name", ["serve.bat", "serve.ps1"])
def test_a_variable_with_no_line_to_join_is_shown_not_written_as_a_shell_prefix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    """`OLLAMA_NUM_PARALLEL=4 ollama serve` is a shell's syntax: in cmd or PowerShell it names a program."""
    f = write(tmp_path, name, "ollama serve\nollama pull qwen2.5:7b\n")
    rc, out = run(capsys, "tune", str(f), "--gpu", "RTX4090", "--min-context", "16k", "--write")
    assert "by hand: OLLAMA_NUM_PARALLEL=4" in out and "wrote" not in out
    assert f.read_text() == "ollama serve\nollama pull qwen2.5:7b\n"


def test_a_value_set_outside_the_script_is_shown_as_its_variable(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    text = f"llama-server.exe -m {GGUF} -c %CTX% -ngl 99\n"
    f = write(tmp_path, "unset.bat", text)
    rc, out = run(capsys, "tune", str(f), "--gpu", "RTX4090", "--min-context", "32k", "--write")
    assert "by hand: CTX=131072 where %CTX% is set (it gives --ctx-size)" in out and f.read_text() == text


def test_set_a_and_set_p(tmp_path: Path) -> None:
    """`set /a N=4` is a number; an expression is not computed, and `set /p` asks the user: neither is guessed."""
    text = "set /a NP=4\nset /a C=4096*2\nset /p KEY=API key: \nllama-server -m x.gguf -np %NP% -c %C% --api-key %KEY%\n"
    r = scan_file(str(write(tmp_path, "a.bat", text)))
    [site] = r.sites
    assert texts(site) == ["llama-server", "-m", "x.gguf", "-np", "4", "-c", "4096*2", "--api-key", "%KEY%"]
    assert at(site.argv[4]) == (1, 11, "4")
    assert [(f.span.line, f.message.split(":")[0]) for f in r.findings] == [
        (2, "set /a C=4096*2 is arithmetic the script computes"), (4, "%KEY% is not set in this repository")]


def test_powershell_joins_strings_with_plus(tmp_path: Path) -> None:
    """`"-c " + $ctx` is one string; a parenthesized -ArgumentList runs to its `)`, each value still
    pointing at where it is assigned."""
    text = ('$ctx = 8192\n$model = "C:\\m\\x.gguf"\n'
            'Start-Process llama-server.exe -ArgumentList ("-m " + $model + " -c " + $ctx + " --port 8080") -NoNewWindow\n'
            '$a = "--ctx-size=" + $ctx\n& llama-server -m x.gguf $a\n')
    r = scan_file(str(write(tmp_path, "plus.ps1", text)))
    one, two = r.sites
    assert texts(one) == ["llama-server.exe", "-m", r"C:\m\x.gguf", "-c", "8192", "--port", "8080"]
    assert (at(one.argv[2]), at(one.argv[4]), at(one.argv[6])) == (
        (2, 11, r"C:\m\x.gguf"), (1, 8, "8192"), (3, 89, "8080"))
    assert texts(two) == ["llama-server", "-m", "x.gguf", "--ctx-size=8192"] and r.findings == []


def test_set_environment_variable_for_this_process_only(tmp_path: Path) -> None:
    """The Process target (the default) sets the variable for `ollama serve` below; User and Machine change new
    sessions only, which is said (SF108), not taken."""
    text = ('[Environment]::SetEnvironmentVariable("OLLAMA_CONTEXT_LENGTH", "8192", "Process")\n'
            "[System.Environment]::SetEnvironmentVariable('OLLAMA_HOST', '0.0.0.0', 'User')\n"
            '[Environment]::SetEnvironmentVariable("OLLAMA_NUM_PARALLEL", "2")\nollama serve\n')
    r = scan_file(str(write(tmp_path, "env.ps1", text)))
    [site] = r.sites
    assert {k: at(v) for k, v in site.env.items()} == {
        "OLLAMA_CONTEXT_LENGTH": (1, 65, "8192"), "OLLAMA_NUM_PARALLEL": (3, 63, "2")}
    assert [(f.code, f.span.line, f.message.split(" (")[0]) for f in r.findings] == [
        ("SF108", 2, "a User or Machine variable")]
