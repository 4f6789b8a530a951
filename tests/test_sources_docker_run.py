"""`docker run IMAGE COMMAND`: what the container runs when the command replaces the engine."""

from __future__ import annotations

from servefit.sources import scan_file


def test_an_engine_image_running_a_python_program_is_no_server() -> None:
    """`docker run lmsysorg/sglang python3 -m sglang.bench_serving ...` is a load generator: the image
    has no entrypoint of its own, so the command replaces the server."""
    text = ("docker run --gpus all --ipc=host lmsysorg/sglang:latest \\\n"
            "  python3 -m sglang.bench_serving --backend sglang --host 10.0.0.5 --port 8000\n"
            "docker run --gpus all --ipc=host lmsysorg/sglang:latest \\\n"
            "  python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --port 8000\n")
    sites = scan_file("bench.sh", text).sites
    assert [(s.engine, s.line, [t.text for t in s.argv][:3]) for s in sites] == [
        ("sglang", 4, ["python3", "-m", "sglang.launch_server"])]
