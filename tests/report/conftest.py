"""The HTML report's test fixtures: reports of corpus traces, and a real
headless Chromium (Debian's ``chromium`` package) driven by Playwright.

Chromium is found at ``/usr/bin/chromium`` (``CHATKIT_CHROMIUM`` overrides);
``playwright install`` is never used.  Without it the browser tests skip
with the reason, and fail under ``CHATKIT_REQUIRE_BROWSER=1`` (``.ci/run``).

Every page opened through :func:`open_report` fails its test on any request
other than the report file itself (intercepted and aborted) and on any
console error or uncaught exception.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chatkit_trace.report import write_report

from ..integration.browser import ARGS, CHROMIUM, chromium
from ..viewer.conftest import combined_trace, corpus_trace

#: reports made for screenshots carry this generation time (SOURCE_DATE_EPOCH)
EPOCH = "1767225600"  # 2026-01-01T00:00:00Z

__all__ = ["ARGS", "CHROMIUM", "combined_trace", "corpus_trace", "make_report"]


def make_report(trace: Path, out: Path | None = None, **kw: Any) -> Path:
    out = out or trace.with_suffix(".html")
    write_report(trace, out, **kw)
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium for one test module: Playwright's sync API runs an event loop in
    this thread while it is open, so it must be closed before another module's
    tests call ``asyncio.run`` (pytest-randomly keeps a module's tests together)."""
    with chromium() as b:
        yield b


class Guard:
    """What a page did that a report must never do."""

    def __init__(self, allowed: str) -> None:
        self.allowed = allowed
        self.requests: list[str] = []
        self.blocked: list[str] = []
        self.errors: list[str] = []

    def check(self) -> None:
        others = [u for u in self.requests if u != self.allowed]
        assert not others and not self.blocked, f"the page made network requests: {others + self.blocked}"
        assert not self.errors, f"console errors: {self.errors}"


@pytest.fixture
def open_report(browser: Any) -> Iterator[Callable[..., Any]]:
    """``open_report(path, hash="", dark=False)`` -> a Playwright page, ready (``html[data-ready]``)."""
    contexts: list[Any] = []
    guards: list[Guard] = []

    def open_(path: Path, hash: str = "", *, dark: bool = False, viewport: tuple[int, int] = (1400, 900), wait: bool = True) -> Any:
        url = path.resolve().as_uri()
        ctx = browser.new_context(
            viewport={"width": viewport[0], "height": viewport[1]},
            color_scheme="dark" if dark else "light",
            reduced_motion="reduce",
        )
        contexts.append(ctx)
        guard = Guard(url)
        guards.append(guard)

        def route(r: Any) -> None:
            if r.request.url.split("#")[0] == url:
                r.continue_()
            else:
                guard.blocked.append(r.request.url)
                r.abort()

        ctx.route("**/*", route)
        page = ctx.new_page()
        page.on("request", lambda req: guard.requests.append(req.url.split("#")[0]))
        page.on("console", lambda m: guard.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: guard.errors.append(f"uncaught: {e}"))
        page.guard = guard  # type: ignore[attr-defined]
        page.goto(url + hash)
        if wait:
            page.wait_for_selector("html[data-ready='1']", state="attached", timeout=15_000)
        return page

    yield open_
    try:
        for g in guards:
            g.check()
    finally:
        for c in contexts:
            c.close()


@pytest.fixture
def corpus_report(tmp_path: Path) -> Callable[..., Path]:
    """``corpus_report(name)``: a report of one analyzer corpus case."""

    def make(name: str, **kw: Any) -> Path:
        return make_report(corpus_trace(tmp_path, name), **kw)

    return make
