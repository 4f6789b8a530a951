"""Where the build installs FlashInfer, vLLM 0.9.2 - 0.11 profile FlashInfer's top-k / top-p sampler
(v1/sample/ops/topk_topp_sampler.py::TopKTopPSampler.__init__: forward_cuda when `import flashinfer.sampling`
succeeds and its release is 0.2.3 or newer, unless VLLM_USE_FLASHINFER_SAMPLER=0; read in the 0.9.2, 0.10.0,
0.10.2 and 0.11.0 wheels): the pip requirements of the build's install lines decide it (LaunchSite.packages,
from a Dockerfile's `RUN pip install` or an accuracy case's `installed:`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from servefit.engines.vllm.era import era
from servefit.engines.vllm.plan import resolve
from servefit.engines.vllm.profile import flashinfer_installed, flashinfer_sampler
from servefit.pipeline import site_from_argv
from servefit.sources import scan_file

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import ENGINE, L4, LLAMA8B  # noqa: E402

ARGV = "vllm serve m --max-model-len 8192"


@pytest.mark.parametrize("packages,expected", [
    (["flashinfer-python"], True),
    (["vllm", "Flashinfer_Python==0.2.11"], True),  # pip's name normalisation, a release newer than 0.2.3
    (["vllm[flashinfer]==0.10.1.1"], True),  # the extra that pulls flashinfer-python in (0.10.1 - 0.11)
    (["flashinfer==0.2.2"], False),  # older than 0.2.3: vLLM falls back to PyTorch's sampler
    (["flashinfer==0.2.5"], True),  # the name on FlashInfer's own wheel index before 0.2.6
    (["vllm==0.10.1.1", "torch", "ray[default]"], None),  # nothing names FlashInfer: the install is unknown
    ([], None),
])
def test_which_requirements_install_flashinfer(packages, expected):
    assert flashinfer_installed(packages) is expected


@pytest.mark.parametrize("version,env,expected", [
    ("0.10.1.1", {}, True), ("0.11.0", {}, True), ("0.9.2", {}, True),
    ("0.9.1", {}, False),  # before 0.9.2 FlashInfer's sampler is opt-in
    ("0.12.0", {}, False),  # opt-in again from 0.12, installed or not
    ("0.11.1", {}, False),  # already in 0.11.1 (its TopKTopPSampler.__init__: "Users must opt in explicitly")
    ("0.10.1.1", {"VLLM_USE_FLASHINFER_SAMPLER": "0"}, False),  # the variable wins over the install
])
def test_an_installed_flashinfer_decides_the_sampler_between_0_9_2_and_0_11(version, env, expected):
    cfg = ENGINE.parse(site_from_argv(ARGV.split(), env), version)
    r = resolve(cfg, LLAMA8B, L4, era(version))
    assert flashinfer_sampler(r, env, ["flashinfer-python"]) is expected


def _plan(version: str, packages: list[str]):
    site = site_from_argv(ARGV.split(), {})
    site.packages = packages
    cfg = ENGINE.parse(site, version)
    return ENGINE.plan(cfg, LLAMA8B, L4, 1)


def test_the_plan_profiles_flashinfers_sampler_where_the_build_installs_it():
    """256 requests x 128,256 logits on an L4 (2,048 batched tokens): 14 bytes a logit with FlashInfer's
    sampler, 39 with PyTorch's sort; both above the forward."""
    fi = _plan("0.10.1.1", ["vllm==0.10.1.1", "flashinfer-python"])
    unknown = _plan("0.10.1.1", ["vllm==0.10.1.1"])
    assert fi.memory.activation_peak == 256 * 128256 * 14
    assert unknown.memory.activation_peak == 256 * 128256 * 39
    assert fi.memory.kv_cache - unknown.memory.kv_cache >= 256 * 128256 * 25 - fi.detail.block_size * 131072
    assert "FlashInfer's top-k / top-p sampler, which vLLM 0.10.1.1 profiles where FlashInfer is installed, " \
           "as the build does" in fi.assumptions
    assert not [a for a in fi.assumptions if a.startswith("PyTorch's top-k")]
    assert [a for a in unknown.assumptions if a.startswith("PyTorch's top-k")]
    later = _plan("0.12.0", ["flashinfer-python"])  # 0.12 installs FlashInfer anyway and samples natively
    assert later.memory.activation_peak == 256 * 128256 * 39
    assert not [a for a in later.assumptions if "FlashInfer's top-k" in a]


def test_a_dockerfile_pip_install_is_the_sites_packages(tmp_path: Path):
    f = tmp_path / "Dockerfile"
    f.write_text("FROM nvidia/cuda:12.8.0-runtime-ubuntu22.04\n"
                 "RUN pip install --no-cache-dir -r requirements.txt -U 'vllm==0.10.1.1' flashinfer-python && \\\n"
                 "    pip install --index-url https://example.org/simple ray[default]\n"
                 "RUN apt-get install -y git\n"
                 "ENTRYPOINT [\"vllm\", \"serve\", \"Qwen/Qwen2-7B-Instruct\"]\n")
    [site] = scan_file(str(f)).sites
    assert site.packages == ["vllm==0.10.1.1", "flashinfer-python", "ray[default]"]
    assert site.engine_version == "0.10.1.1"


def test_a_compose_service_built_from_a_dockerfile_carries_its_packages(tmp_path: Path):
    (tmp_path / "docker" / "vllm").mkdir(parents=True)
    (tmp_path / "docker" / "vllm" / "Dockerfile").write_text(
        "FROM nvidia/cuda:12.8.0-runtime-ubuntu22.04\n"
        "RUN uv pip install --system \"vllm==0.10.2\" flashinfer-python\nENTRYPOINT []\n")
    f = tmp_path / "docker-compose.yml"
    f.write_text("services:\n  vllm:\n    build:\n      context: ./docker/vllm\n"
                 "    command: [vllm, serve, Qwen/Qwen2.5-7B-Instruct, --max-model-len, '8192']\n")
    [site] = scan_file(str(f)).sites
    assert (site.engine_version, site.packages) == ("0.10.2", ["vllm==0.10.2", "flashinfer-python"])
