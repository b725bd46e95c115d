"""Fixtures for the viewer's tests: traces made from the analyzer corpus,
apps driven headless, and a helper to wait for background work."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from chatkit_trace.store import TraceStore
from chatkit_trace.trace import Exchange
from chatkit_trace.wire import Frame

from ..analyze.corpus import CORPUS, load_case

CAPABILITIES = ["abort", "history", "resume", "subscribe", "regenerate", "edit"]


def corpus_trace(folder: Path, name: str, *, check: bool = False) -> Path:
    """A trace database holding corpus case ``name`` (raw: no derived tables
    unless ``check``, which writes them like ``chatkit-trace check``)."""
    case, exchanges, _ = load_case(CORPUS / f"{name}.json")
    path = folder / f"{name}.db"
    with TraceStore(path, create=True) as store:
        store.set_meta("protocol", case.get("protocol", "myproto"))
        store.set_meta("capabilities", case.get("capabilities", CAPABILITIES))
        for ex in exchanges:
            store.add_exchange(ex)
    if check:
        from chatkit_trace.cli.check import run_check

        run_check(str(path), store_results=True)  # the derived tables the viewer reads
    return path


def long_trace(
    path: Path, frames: int, *, session: str = "s1", run: str = "r1", done: bool = True
) -> Path:
    """One myproto run of ``frames`` frames, written straight into a store."""
    rows = []
    t = 100.0
    for i in range(frames):
        data = (
            {"type": "started", "run": run}
            if i == 0
            else {"type": "done"}
            if i == frames - 1 and done
            else {"type": "text", "text": f"w{i} "}
        )
        t += 0.01
        rows.append(Frame(0, i, "sse", "in", json.dumps(data), None, None, f"e{i}", None, None, t))
    with TraceStore(path, create=True) as store:
        store.set_meta("protocol", "myproto")
        store.set_meta("capabilities", CAPABILITIES)
        store.add_exchange(
            Exchange(
                0,
                "POST",
                f"http://backend/sessions/{session}/runs",
                started_at=100.0,
                ended_at=t + 0.01,
                request_body=json.dumps({"text": "go", "runId": run}).encode(),
                status=200,
                transport="sse",
                end="complete",
                capability="run",
                session_id=session,
                run_id=run,
            ),
            with_frames=False,
        )
        store.add_frames(rows)
    return path


def combined_trace(path: Path, names: list[str], *, check: bool = False) -> Path:
    """Several myproto corpus cases in one trace, each in its own session (named after the case)."""
    with TraceStore(path, create=True) as store:
        store.set_meta("protocol", "myproto")
        store.set_meta("capabilities", CAPABILITIES)
        n = 0
        for k, name in enumerate(names):
            _, exchanges, _ = load_case(CORPUS / f"{name}.json")
            shift = 10.0 * k
            first = n
            for ex in exchanges:
                ex.index = n
                ex.session_id = name.lower()
                ex.started_at += shift
                if ex.ended_at is not None:
                    ex.ended_at += shift
                ex.frames = [
                    Frame(
                        n,
                        f.index,
                        f.transport,
                        f.direction,
                        f.text,
                        f.raw,
                        f.event,
                        f.event_id,
                        f.start,
                        f.end,
                        f.at + shift,
                        f.error,
                        f.data_offsets,
                    )
                    for f in ex.frames
                ]
                store.add_exchange(ex)
                n += 1
            assert n > first
    if check:
        from chatkit_trace.cli.check import run_check

        run_check(str(path), store_results=True)  # the derived tables the viewer reads
    return path


@pytest.fixture
def traces(tmp_path: Path) -> Callable[..., Path]:
    def make(name: str, check: bool = False) -> Path:
        return corpus_trace(tmp_path, name, check=check)

    return make


async def wait_for(
    pilot, condition: Callable[[], bool], timeout: float = 10.0, what: str = "condition"
) -> None:  # type: ignore[no-untyped-def]
    """Let the app run until ``condition()`` holds (workers post their results)."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(Exception):  # not mounted yet
            if condition():
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)


async def ready(pilot) -> None:  # type: ignore[no-untyped-def]
    """Analysis finished and, on a run screen, the snapshot shown is the cursor's."""
    from chatkit_trace.viewer.run_screen import RunScreen

    app = pilot.app
    await wait_for(pilot, lambda: app.analysing is None, what="analysis")

    def settled() -> bool:
        s = app.screen
        return not isinstance(s, RunScreen) or s.settled

    await wait_for(pilot, settled, what="the snapshot at the cursor")
    await pilot.pause()
