"""A rebuild of an engine whose image tags count its own releases (nm-vllm v0.1.0, OPEA's
vllm-gaudi 1.2, Red Hat AI Inference Server 3.0.0, NVIDIA's NGC containers 25.09-py3) names no
engine version, except the NGC releases whose notes name the vLLM inside."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.sources import detect, image_release, scan_file


@pytest.mark.parametrize("image, version", [
    ("ghcr.io/neuralmagic/nm-vllm-openai:v0.1.0", None),
    ("neuralmagic/nm-vllm:0.5.0", None),
    ("opea/vllm-gaudi:1.2", None),
    ("registry.redhat.io/rhaiis/vllm-cuda-rhel9:3.0.0", None),
    ("vllm/vllm-openai:v0.9.2", "0.9.2"),
    ("us-docker.pkg.dev/acme/library/vllm-openai:v0.9.2", "0.9.2"),  # a mirror keeps vLLM's tags
    # someone's own image: its tag is not vLLM's release (myorg/vllm-srv:1.0 was read as vLLM 1.0)
    ("ghcr.io/acme/my-vllm:0.8.5", None),
    ("myorg/vllm-srv:1.0", None),
    ("harbor.corp/vllm/vllm-openai:v0.8.5", "0.8.5"),
    ("docker.io/vllm/vllm-openai-cpu:v0.23.0", "0.23.0"),
    # NGC: YY.MM releases (a Helm chart's values had nvcr.io/nvidia/vllm:25.09-py3, read as vLLM 25.09)
    ("nvcr.io/nvidia/vllm:25.09-py3", None),
    ("nvcr.io/nvidia/vllm:25.10-py3", "0.10.2"),
    ("nvcr.io/nvidia/vllm:26.05-py3", "0.20.1"),
    ("nvcr.io/nvidia/vllm:26.10-py3", "0.31.0"),
])
def test_tag_version_of_rebuilds(image: str, version: str | None) -> None:
    assert detect.engine_of_image(image) == "vllm"
    assert image_release.version_of_image(image) == version


DEPLOY = """apiVersion: apps/v1
kind: Deployment
metadata: {name: nm}
spec:
  template:
    spec:
      containers:
      - name: server
        image: ghcr.io/neuralmagic/nm-vllm-openai:v0.1.0
        args: ["--model", "mistralai/Mistral-7B-v0.1", "--host", "0.0.0.0", "--port", "80", "--max-model-len", "4096"]
        resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_an_nm_vllm_deployment_is_not_judged_as_vllm_0_1(tmp_path: Path) -> None:
    from servefit.linter.run import LintOptions, lint_paths

    site = scan_file("deploy.yaml", DEPLOY).sites[0]
    assert (site.engine, site.engine_version) == ("vllm", None)
    f = tmp_path / "deploy.yaml"
    f.write_text(DEPLOY)
    result = lint_paths([str(f)], LintOptions(gpu="a100-80gb"))
    assert [x.code for x in result.findings if x.code == "VLLM001"] == []


def test_the_version_warning_says_the_tag_is_the_rebuilds_own() -> None:
    from servefit import engines

    site = scan_file("deploy.yaml", DEPLOY).sites[0]
    cfg = engines.get("vllm").parse(site, None)
    assert cfg.assumptions[0].endswith(
        "older releases size memory differently, the tag of ghcr.io/neuralmagic/nm-vllm-openai:v0.1.0 counts "
        "that build's own releases, not vLLM's: pass --engine-version)")
    plain = scan_file("d.yaml", DEPLOY.replace("ghcr.io/neuralmagic/nm-vllm-openai:v0.1.0", "vllm/vllm-openai")).sites[0]
    # vLLM's own image with no tag runs the newest release: that is a version given, not a warning
    assert engines.get("vllm").parse(plain, None).assumptions[0] == (
        "vLLM 0.33.0 assumed: the image tag latest runs the newest release, the newest servefit models (pass "
        "--engine-version to check another)")


def test_an_ngc_sglang_release_is_no_sglang_version() -> None:
    assert detect.engine_of_image("nvcr.io/nvidia/sglang:25.11-py3") == "sglang"
    assert image_release.version_of_image("nvcr.io/nvidia/sglang:25.11-py3") is None
    assert image_release.version_of_image("lmsysorg/sglang:v0.5.3-cu126") == "0.5.3"


def test_an_ngc_image_in_a_deployment_is_modelled_as_the_newest_with_the_reason() -> None:
    from servefit import engines

    text = DEPLOY.replace("ghcr.io/neuralmagic/nm-vllm-openai:v0.1.0", "nvcr.io/nvidia/vllm:25.09-py3")
    site = scan_file("deploy.yaml", text).sites[0]
    assert (site.engine, site.engine_version) == ("vllm", None)
    assert engines.get("vllm").parse(site, None).assumptions[0].endswith(
        "the tag of nvcr.io/nvidia/vllm:25.09-py3 counts that build's own releases, not vLLM's: pass --engine-version)")
    mapped = scan_file("deploy.yaml", text.replace("25.09-py3", "25.10-py3")).sites[0]
    assert mapped.engine_version == "0.10.2"
