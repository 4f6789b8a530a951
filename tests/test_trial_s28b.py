"""Found by running servefit as a new user on public deployment repositories (session 28, second
round): each case is a minimal file written for the test, in the shape the repository had."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main


# robbypambudi/ray-vllm-benchmark's case-1/docker-compose.yml runs its own Ray image with vLLM installed
# (`robbypambudi/ray-worker-vllm`) as `ray start --head ... --block`: the image's name made it vLLM's image
# and the command its arguments, a server of model "ray" with `--head` taken for `--headless` and four
# VLLM001/VLLM002 errors, where the container is a Ray node that starts no server.
def test_a_ray_node_in_an_image_named_after_vllm_is_not_a_vllm_server(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "docker-compose.yml"
    f.write_text("services:\n"
                 "  ray-head:\n"
                 "    image: someone/ray-worker-vllm:v1\n"
                 "    command: >\n"
                 "      ray start --head --dashboard-host=0.0.0.0 --block\n")
    assert main(["lint", str(f), "--gpu", "L4"]) == 0
    out = capsys.readouterr().out
    assert out == (f"{f}:3:12: SF116 someone/ray-worker-vllm:v1 runs vLLM, but this container starts a Ray node "
                   "(`ray start`), not the server: a server Ray runs there comes from a Ray Serve application or a "
                   "job servefit does not read, so its settings were not checked\n"
                   "0 errors, 1 warning, 0 info in 1 file (0 servers)\n")
    # the engine's own arguments after the image's entrypoint are still read as before
    f.write_text("services:\n"
                 "  vllm:\n"
                 "    image: vllm/vllm-openai:v0.11.0\n"
                 "    command: --model Qwen/Qwen2.5-7B-Instruct --max-model-len 8192\n")
    main(["models", str(f)])
    assert capsys.readouterr().out.startswith(f"{f}:4  vllm  Qwen/Qwen2.5-7B-Instruct  -> ")
