"""Intel Arc / Arc Pro / Data Center GPU Max in the catalog: every spelling users write resolves,
in --gpu and in the `# servefit: gpu=` directive (where a name with spaces needs no quotes)."""

from __future__ import annotations

import pytest

from servefit.cli import main
from servefit.core import Span
from servefit.hardware import resolve_target
from servefit.sources.hints import directives

MIB = 2**20


@pytest.mark.parametrize(("written", "key", "mib"), [
    ("Intel(R) Arc(TM) Pro B70 Graphics", "arc-pro-b70", 32265),
    ("Arc Pro B70", "arc-pro-b70", 32265),
    ("arc-pro-b60", "arc-pro-b60", 24073),
    ("Intel Arc Pro B50", "arc-pro-b50", 15881),  # llama.cpp SYCL's total for the card
    ("A770", "arc-a770", 15473),  # 16225243136 bytes in llama.cpp's SYCL device list
    ("Intel Arc A750", "arc-a750", 8096),
    ("B580", "arc-b580", 11785),
    ("Intel(R) Data Center GPU Max 1550", "max-1550", 65520),  # one stack, as torch.xpu lists it
    ("Max 1100", "max-1100", 49136),
])
def test_intel_names_resolve(written, key, mib):
    gpu, count = resolve_target(written)
    assert (gpu.key, gpu.memory_bytes // MIB, gpu.vendor, count) == (key, mib, "intel", None)


def test_directive_gpu_name_with_spaces_needs_no_quotes():
    text = ("# servefit: gpu=Arc Pro B70 count=2\n# servefit: gpu=Arc Pro B60\n# servefit: gpu=L4 model=Qwen/Qwen3-8B\n"
            "# servefit: gpu=L4 prod pool\n")
    found = directives(text, lambda a, b: Span("f", 1, a + 1, 1, b + 1, a, b))
    assert [{k: v.value for k, v in d.items()} for d in found] == [
        {"gpu": "Arc Pro B70", "count": "2"}, {"gpu": "Arc Pro B60"}, {"gpu": "L4", "model": "Qwen/Qwen3-8B"},
        {"gpu": "L4"}]
    sp = found[0]["gpu"].span
    assert text[sp.col - 1:sp.end_col - 1] == "Arc Pro B70"  # the span covers the whole name


def test_lint_and_estimate_take_an_arc_directive(tmp_path, capsys):
    f = tmp_path / "serve.sh"
    f.write_text("# servefit: gpu=Arc Pro B70\nllama-server -m /m/Qwen3-8B-Q4_K_M.gguf -ngl 99 -c 8192\n")
    assert main(["lint", str(f)]) == 0
    assert "SF003" not in capsys.readouterr().out
    assert main(["estimate", str(f)]) == 0
    assert "1 × Intel(R) Arc(TM) Pro B70 Graphics (31.51 GiB" in capsys.readouterr().out
