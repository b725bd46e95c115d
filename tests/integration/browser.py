"""A real headless Chromium (Debian's ``chromium`` package) driven by Playwright.

Chromium is found at ``/usr/bin/chromium`` (``CHATKIT_CHROMIUM`` overrides);
``playwright install`` is never used.  Without it a browser test skips with
the reason, and fails under ``CHATKIT_REQUIRE_BROWSER=1`` (``.ci/run``).

Headless Chromium's virtual time does not advance while an ``EventSource``
is open, so nothing here uses virtual time: the tests wait for what the page
received (``page.wait_for_function``), in real time.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("CHATKIT_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def unavailable(reason: str) -> None:
    if os.environ.get("CHATKIT_REQUIRE_BROWSER") == "1":
        pytest.fail(f"CHATKIT_REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched Chromium for the block; Playwright's sync API runs an event
    loop in this thread while it is open, so close it before any asyncio code
    runs here (the block ends before a test's async part)."""
    if not Path(CHROMIUM).exists():
        unavailable(f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()
