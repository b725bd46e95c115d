"""The documentation's screenshots of the report (docs/img/report-run.png and its siblings),
made by the test run in the real Chromium: the run list with the findings,
a run at a finding's decisive frame (light and dark), live vs history.

A screenshot is rewritten only when it changed (the report is generated
with a fixed time, SOURCE_DATE_EPOCH, so an unchanged page gives the same
bytes on the same machine).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import EPOCH, combined_trace, make_report

pytestmark = pytest.mark.browser

IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
CASES = ["CK101-direct", "CK102", "CK202-renamed-run", "CK404", "CK106", "clean-myproto"]


def keep(name: str, png: bytes) -> None:
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    path = IMG / name
    if not path.exists() or path.read_bytes() != png:
        path.write_bytes(png)


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    trace = combined_trace(tmp_path / "example.db", CASES)
    return make_report(trace, tmp_path / "report.html")


def test_screenshots_of_the_main_states(example: Path, open_report: Any) -> None:
    page = open_report(example, viewport=(1280, 860))
    assert "2026-01-01T00:00:00Z" in page.inner_text("header")
    keep("report-runs.png", page.screenshot(full_page=True))

    page.click("#findings-table tr[data-code='CK101'] a.frame-link")
    page.wait_for_function("() => document.documentElement.dataset.frame === '0:4'")
    page.focus("#timeline")
    keep("report-run.png", page.screenshot())

    dark = open_report(example, dark=True, viewport=(1280, 860))
    dark.click("#findings-table tr[data-code='CK404'] a.frame-link")  # the resume that skipped an event
    dark.wait_for_function("() => document.documentElement.dataset.frame === '5:1'")
    keep("report-run-dark.png", dark.screenshot())

    page.click("#back")
    page.wait_for_selector("#runs-view:not([hidden])")
    page.click("#findings-table tr[data-code='CK201'] a.frame-link")
    page.wait_for_function("() => document.documentElement.dataset.run === 'ck202-renamed-run/r1'")
    assert page.locator("#cmp-body td.diff").count() >= 1
    keep("report-history.png", page.locator("#compare").screenshot())
