"""The GitHub Action (action.yml) run step by step as the runner would: its shell steps execute
with the runner's expression values and GITHUB_OUTPUT file; the `uses:` steps (setup-python and
the SARIF upload) are the runner's own and are checked by what they are given."""

from __future__ import annotations

import os
import re
import subprocess
import venv
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())


def _expr(text: str, ctx: dict[str, str]) -> str:
    """The `${{ inputs.x }}` / `${{ github.action_path }}` / `${{ steps.lint.outputs.y }}` subset."""
    return re.sub(r"\$\{\{\s*([\w.-]+)\s*\}\}", lambda m: ctx.get(m.group(1), ""), text)


def _condition(cond: str, ctx: dict[str, str]) -> bool:
    body = cond.strip()
    if body.startswith("${{"):
        body = body[3:-2]
    body = body.replace("always()", "True").replace("&&", " and ").replace("||", " or ")
    body = re.sub(r"([\w-]+(?:\.[\w-]+)+)", lambda m: repr(ctx.get(m.group(1), "")), body)
    return bool(eval(body, {"__builtins__": {}}, {"True": True}))  # noqa: S307 - our own action file


def run_action(workdir: Path, inputs: dict[str, str], venv_dir: Path) -> tuple[dict[str, str], list[str], str]:
    ctx = {f"inputs.{k}": str(v.get("default", "")) for k, v in ACTION["inputs"].items()}
    ctx.update({f"inputs.{k}": v for k, v in inputs.items()})
    ctx["github.action_path"] = str(ROOT)
    out_file = workdir / "github_output"
    out_file.write_text("")
    env = {**os.environ, "GITHUB_OUTPUT": str(out_file), "GITHUB_ACTIONS": "true",
           "PATH": f"{venv_dir / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0"}
    env.pop("PYTHONPATH", None)
    ran, log, failed_at = [], "", ""
    for step in ACTION["runs"]["steps"]:
        if "if" in step and not _condition(step["if"], ctx):
            continue
        name = step["name"]
        if "uses" in step:
            ran.append(f"uses {step['uses'].split('@')[0]}")
            with_ = {k: _expr(str(v), ctx) for k, v in (step.get("with") or {}).items()}
            if "upload-sarif" in step["uses"]:
                assert (workdir / with_["sarif_file"]).is_file()
            continue
        step_env = {**env, **{k: _expr(str(v), ctx) for k, v in (step.get("env") or {}).items()}}
        proc = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=workdir, env=step_env,
                              capture_output=True, text=True, timeout=300)
        ran.append(name)
        log += proc.stdout + proc.stderr
        for line in out_file.read_text().splitlines():
            k, _, v = line.partition("=")
            ctx[f"steps.{step.get('id', '')}.outputs.{k}"] = v
        if proc.returncode != 0:
            failed_at = name
            break
    return ctx, ran, log + (f"\nFAILED at {failed_at}" if failed_at else "")


@pytest.fixture(scope="module")
def action_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(d)
    # pip from this interpreter drives the venv's install (the Install step runs `python -m pip`)
    site = subprocess.run([str(d / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "_outer_pip.pth").write_text(str(Path(__import__("pip").__file__).parents[1]) + "\n")
    return d


def test_action_installs_lints_uploads_and_fails_on_errors(tmp_path: Path, action_venv: Path):
    repo = tmp_path / "repo"
    (repo / "k8s").mkdir(parents=True)
    (repo / "k8s" / "serve.sh").write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct\n")
    ctx, ran, log = run_action(repo, {"paths": "k8s", "gpu": "L4"}, action_venv)
    assert ran == ["uses actions/setup-python", "Install servefit", "Lint", "uses github/codeql-action/upload-sarif",
                   "Fail on findings"], log
    assert ctx["steps.lint.outputs.exit-code"] == "1"
    assert "::error file=k8s/serve.sh,line=1" in log and "VLLM003" in log
    sarif = (repo / "servefit.sarif").read_text()
    assert '"ruleId": "VLLM003"' in sarif
    assert (action_venv / "bin" / "servefit").is_file()  # the Install step put servefit in the job's Python


def test_action_passes_a_clean_repo_and_honours_fail_on(tmp_path: Path, action_venv: Path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "serve.sh").write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 "
                                   "--host 127.0.0.1\n")
    ctx, ran, log = run_action(repo, {"gpu": "H100", "fail-on": "error", "upload-sarif": "false"}, action_venv)
    assert ctx["steps.lint.outputs.exit-code"] == "0", log
    assert ran == ["uses actions/setup-python", "Install servefit", "Lint"], log
    assert "FAILED" not in log


def test_action_stops_on_a_usage_error_without_uploading(tmp_path: Path, action_venv: Path):
    repo = tmp_path / "repo"
    repo.mkdir()
    ctx, ran, log = run_action(repo, {"paths": "missing-dir"}, action_venv)
    assert ctx["steps.lint.outputs.exit-code"] == "2"
    assert ran == ["uses actions/setup-python", "Install servefit", "Lint"] and "FAILED at Lint" in log
    assert "missing-dir: no such file or directory" in log
