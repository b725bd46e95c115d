"""chatkit's adapter conformance suite (R12) over real HTTP: the demo backend, served by
aiohttp in a thread, and the demo client's capability functions (``createMyAdapter`` with
aiohttp calls).  The suite always sends "hello", so each scenario's session picks its
scenario with ``+scenario=KIND``."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import aiohttp
import pytest

from chatkit_trace.demo_backend import running_backend
from chatkit_trace.demo_client import STREAM_TIMEOUT, HttpChat
from chatkit_trace.testing import ConformanceHarness, run_adapter_conformance


class _ServerThread:
    """The demo backend on its own event loop (each scenario runs ``asyncio.run``)."""

    def __init__(self) -> None:
        self.url = ""
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        async def serve() -> None:
            async with running_backend(pace_ms=1) as (url, _):
                self.url, self._loop, self._stop = url, asyncio.get_running_loop(), asyncio.Event()
                self._ready.set()
                await self._stop.wait()

        self._thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
        self._thread.start()
        assert self._ready.wait(10), "the demo backend did not start"

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)


SERVER = _ServerThread()


@pytest.fixture(scope="module", autouse=True)
def _demo_backend():
    SERVER.start()
    yield
    SERVER.stop()


_CLOSERS: set[asyncio.Task[None]] = set()


def _adapter(kind: str):
    """Called by the suite inside its event loop: one client session per scenario,
    closed when ``asyncio.run`` cancels what is left at the scenario's end."""
    http = aiohttp.ClientSession(timeout=STREAM_TIMEOUT)
    chat = HttpChat(SERVER.url, http, session_suffix=f"+scenario={kind}")

    async def close_at_the_end() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await chat.close()
            with contextlib.suppress(Exception):
                await http.close()

    task = asyncio.get_running_loop().create_task(close_at_the_end())
    _CLOSERS.add(task)  # the loop keeps only a weak reference to a task
    task.add_done_callback(_CLOSERS.discard)
    return chat.adapter()


HARNESS = ConformanceHarness(
    create_adapter=_adapter,
    make_input=lambda text: {"text": text},
    capabilities={"history": True},
)

NAMES = run_adapter_conformance("demo-backend-http", HARNESS, undeclared="omit")  # the demo backend cannot regenerate


def test_the_suite_ran_every_scenario_the_backend_supports():
    assert NAMES == [
        f"test_conformance_demo_backend_http_{k}"
        for k in ("text", "tool", "fail", "slow", "history")
    ]
