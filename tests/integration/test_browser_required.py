"""Without Chromium the browser tests skip with the reason, and fail with a
clear message under CHATKIT_REQUIRE_BROWSER=1 (what .ci/run sets)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST = "tests/integration/test_subscription_resume.py::test_a_run_id_the_backend_mints_comes_from_the_send_reply"


@pytest.mark.parametrize("require", [False, True])
def test_missing_chromium_skips_or_fails(tmp_path: Path, require: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CHATKIT_REQUIRE_BROWSER"}
    env["CHATKIT_CHROMIUM"] = str(tmp_path / "no-chromium")
    if require:
        env["CHATKIT_REQUIRE_BROWSER"] = "1"
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:randomly", "-p", "no:cacheprovider", TEST],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    out = p.stdout + p.stderr
    if require:
        assert p.returncode == 1, out
        assert "CHATKIT_REQUIRE_BROWSER=1 but Chromium is not installed" in out
    else:
        assert p.returncode == 0, out
        assert "1 skipped" in out and "Chromium is not installed" in out
