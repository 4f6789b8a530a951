"""The HTML report looks right in a real browser: headless Chromium renders the example repo's
report to a PNG and to a DOM dump. Skipped when Chromium is not installed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")


def test_example_report_renders_in_chromium(tmp_path):
    report = tmp_path / "report.html"
    out = subprocess.run([sys.executable, "-m", "servefit", "lint", str(ROOT / "examples"), "--format", "html",
                          "-o", str(report), "--exit-zero"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    profile = tmp_path / "profile"
    base = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}"]
    dom = subprocess.run([*base, "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "servefit lint" in dom.stdout and dom.stdout.count("<svg") >= 2
    assert "VLLM003" in dom.stdout and "vllm-llama-8b.yaml:21" in dom.stdout
    png = tmp_path / "report.png"
    shot = subprocess.run([*base, f"--screenshot={png}", "--window-size=1200,2000", report.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.returncode == 0 and png.stat().st_size > 20_000  # a real page, not a blank one
