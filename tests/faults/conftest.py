"""Fixtures for the fault-injection tests: real backends, real mitmdump processes.

A proxy is started once per module with every rule its tests need, each rule
aimed at its own session (``session=cut-reset*`` …), so one test's fault
never touches another's traffic.  Tests read the trace while the proxy
records: :func:`settled_copy` waits until a session's exchanges are final in
the file and hands back a consistent copy (SQLite's backup API), on which
``check`` runs exactly as a user would run it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chatkit_trace.addons import faults_path
from chatkit_trace.store import TraceStore
from tests.integration.backend import free_port
from tests.integration.proxy import Proc, mitmdump

FAULTS = faults_path()
HERE = Path(__file__).parent
UNIT = {"test_rules.py", "test_stream.py", "test_addon.py", "test_recordcmd.py"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath))
        if HERE in path.parents and path.name not in UNIT:
            item.add_marker(pytest.mark.mitmdump)
            item.add_marker(pytest.mark.timeout(120))


class ThreadServer:
    """An aiohttp application served on its own event loop in a thread."""

    def __init__(self, make_app: Callable[[], Any]) -> None:
        self.port = free_port()
        self.make_app = make_app
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="fault-test-server", daemon=True
        )
        self.runner: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ThreadServer:
        from aiohttp import web

        async def _start() -> None:
            self.runner = web.AppRunner(
                self.make_app(), access_log=None, handle_signals=False, shutdown_timeout=0.5
            )
            await self.runner.setup()
            await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

        self.thread.start()
        asyncio.run_coroutine_threadsafe(_start(), self.loop).result(10)
        return self

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the server's loop (its state is not thread-safe)."""

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def stop(self) -> None:
        async def _stop() -> None:
            if self.runner is not None:
                await self.runner.cleanup()

        try:
            asyncio.run_coroutine_threadsafe(_stop(), self.loop).result(10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


@pytest.fixture(scope="module")
def demo() -> Iterator[tuple[ThreadServer, Any]]:
    """The real demo backend (myproto, resume, history, switchable bugs), 5 ms pace."""
    from chatkit_trace.demo.backend import DemoBackend

    holder: dict[str, Any] = {}

    def make() -> Any:
        holder["backend"] = DemoBackend(pace_ms=5.0, hold_ms=300.0, unwatched_s=10.0)
        return holder["backend"].app()

    server = ThreadServer(make).start()
    try:
        yield server, holder["backend"]
    finally:
        server.stop()


def start_proxy(
    upstream: str,
    db: Path,
    rules: list[str],
    *,
    profile: str | None = "myproto",
    seed: int | None = 4242,
    faults_first: bool = False,
    options: dict[str, str] | None = None,
    faults: bool = True,
) -> Proc:
    """mitmdump with the recording addon and the faults addon (reverse mode in front of ``upstream``)."""
    extra: list[str] = []
    if faults:
        extra += ["-s", FAULTS]
        for rule in rules:
            extra += ["--set", f"chatkit_fault={rule}"]
        if seed is not None:
            extra += ["--set", f"chatkit_fault_seed={seed}"]
    if faults_first:
        # -s scripts load in the order given: the faults addon before the recorder
        return _faults_first(upstream, db, profile, extra, options)
    return mitmdump(upstream=upstream, db=db, profile=profile, options=options, extra=extra)


def _faults_first(
    upstream: str, db: Path, profile: str | None, extra: list[str], options: dict[str, str] | None
) -> Proc:
    from tests.integration.proxy import ADDON, MITMDUMP

    port = free_port()
    argv = [
        MITMDUMP,
        "--listen-host",
        "127.0.0.1",
        "-p",
        str(port),
        "--mode",
        f"reverse:{upstream}",
        "--set",
        "connection_strategy=lazy",
        *extra[:2],
        "-s",
        str(ADDON),
        "--set",
        f"chatkit_db={db}",
        *extra[2:],
    ]
    if profile:
        argv += ["--set", f"chatkit_profile={profile}"]
    for k, v in (options or {}).items():
        argv += ["--set", f"{k}={v}"]
    p = Proc(argv, port=port)
    try:
        p.wait_ready()
    except BaseException:
        p.kill()
        raise
    return p


@pytest.fixture(scope="module")
def module_procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for p in started:
        p.kill()


def snapshot(db: Path, dest: Path) -> Path:
    """A consistent copy of a trace that is being recorded."""
    if dest.exists():
        dest.unlink()
    src = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        out = sqlite3.connect(dest)
        try:
            src.backup(out)
        finally:
            out.close()
    finally:
        src.close()
    return dest


def settled_copy(
    db: Path, dest: Path, session_id: str, count: int, timeout: float = 15.0
) -> TraceStore:
    """Wait until ``session_id`` has at least ``count`` exchanges, all ended and
    with their final identity, then open a copy of the trace."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if db.exists():
            try:
                conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
                try:
                    rows = conn.execute(
                        "SELECT ended_at, capability FROM exchanges WHERE session_id = ?",
                        [session_id],
                    ).fetchall()
                finally:
                    conn.close()
                last = rows
                if len(rows) >= count and all(r[0] is not None and r[1] is not None for r in rows):
                    return TraceStore(snapshot(db, dest), readonly=True)
            except sqlite3.OperationalError:
                pass
        time.sleep(0.05)
    raise TimeoutError(
        f"session {session_id}: {count} final exchange(s) not in the trace after {timeout}s (saw {last})"
    )


def findings(
    path: Path | str,
    session_id: str,
    profile: str = "myproto",
    severities: tuple[str, ...] = ("error", "warning"),
) -> list[Any]:
    """``check``'s findings of one session (as ``chatkit-trace check --profile`` reports them)."""
    from chatkit_trace.cli.check import run_check

    result = run_check(str(path), profile=profile, store_results=False)
    return [f for f in result.findings if f.session_id == session_id and f.severity in severities]
