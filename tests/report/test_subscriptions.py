"""The report's run timeline shows what the viewer's does for a subscription:
the cursor a reconnect resumed after, and the end of a subscription that
ended while the run went on (the timeline is ``viewer.timeline``'s)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.browser


def _row(page: Any, ref: str) -> str:
    return page.inner_text(f"#timeline [data-ref='{ref}']")


def test_a_reconnect_row_names_its_cursor_and_the_first_stream_its_end(corpus_report: Any, open_report: Any) -> None:
    page = open_report(corpus_report("CK404-subscription-skip"), "#session=s1&run=r1")
    page.wait_for_selector("#run-view:not([hidden])")
    page.wait_for_selector("#timeline [data-ref='2']")
    assert "subscribe after 3" in _row(page, "2")
    assert "subscribe ·" in _row(page, "0") and "after" not in _row(page, "0")
    assert "end of subscription: complete" in _row(page, "0:end")
    assert page.locator("#timeline [data-ref='2:end']").count() == 0  # it outlived the finished run
    assert "CK404" in page.inner_text("#run-findings")
