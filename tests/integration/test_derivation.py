"""The recorder's deriver process under load, with a real mitmdump (issue 21).

The proxy only hands bytes off; a writer process stores the raw frames and
queues the changed sessions; a deriver process derives them.  These tests
kill the deriver with SIGKILL in the middle of a load and stop the proxy in
the middle of one: the user's bytes never change, every frame is stored,
and what was not derived is derived later (the next recording into the
file, or ``redecode``).  Every wait is on a condition, bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chatkit_trace.store import TraceReader, TraceStore

from .backend import run_events
from .client import fetch
from .proxy import BIN

pytestmark = pytest.mark.mitmdump

STREAMS = 12
EVENTS = 40


async def until(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``cond`` until it is truthy (bounded); its value."""
    end = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.05)


def counts(db: Path) -> dict[str, int]:
    reader = TraceReader(db)
    try:
        return dict(reader.counts(), behind=reader.derivation_backlog())
    finally:
        reader.close()


def meta(db: Path, key: str) -> Any:
    with TraceStore(db, readonly=True) as store:
        return store.get_meta(key)


def derived_runs(db: Path) -> int:
    with TraceStore(db, readonly=True) as store:
        return sum(1 for _ in store.rows("runs"))


def runs_by_id(store: TraceStore) -> dict[str, dict[str, Any]]:
    return {r["run_id"]: r for r in store.rows("runs")}


def stored_events(store: TraceStore, rid: str) -> list[dict[str, Any]]:
    [ex] = [e for e in store.exchanges() if e.run_id == rid and e.capability == "run"]
    return [json.loads(f.text) for f in store.frames(ex.index)]


def received_events(raw: bytes) -> list[dict[str, Any]]:
    """The whole events a client received (identity encoding)."""
    out = []
    for block in raw.split(b"\n\n")[:-1]:
        for line in block.split(b"\n"):
            if line.startswith(b"data: "):
                out.append(json.loads(line[6:]))
    return out


async def test_kill_9_of_the_deriver_mid_load_loses_nothing_and_the_next_run_derives(server, proxy, tmp_path):
    db = tmp_path / "trace.db"
    p = proxy()
    base = f"http://127.0.0.1:{p.port}"
    rids = [f"k{i}" for i in range(STREAMS)]
    # Every stream sends its first event, then waits until released: the load is
    # in flight when the deriver is killed, and the rest of it comes after.
    tasks = [
        asyncio.create_task(fetch("POST", f"{base}/sessions/s{i}/runs?n={EVENTS}&hold=1&delay=0.005", json={"runId": rid}, timeout=60))
        for i, rid in enumerate(rids)
    ]
    await until(lambda: counts(db)["frames"] >= STREAMS, 30, "the first frame of every stream")
    # the deriver is working: it derived a held (open) session at least once
    await until(lambda: derived_runs(db), 30, "a first derived run")
    [rec] = (meta(db, "recordings") or [])[-1:]
    deriver = rec["deriver_pid"]
    os.kill(deriver, signal.SIGKILL)
    assert p.wait_for("the deriver process killed by SIGKILL", 15), p.output
    assert p.proc.poll() is None  # the proxy goes on
    for rid in rids:
        await fetch("POST", f"{server.url}/release/{rid}")
    got = await asyncio.gather(*tasks)
    for rid, g in zip(rids, got, strict=False):
        assert g.status == 200 and g.error is None
        assert g.raw == bytes(server.sent[rid])  # the user's bytes, unchanged
    # every raw frame is stored while nothing derives them: the backlog says so
    await until(lambda: counts(db)["frames"] == STREAMS * EVENTS, 30, "every frame stored")
    await until(lambda: counts(db)["behind"] > 0, 10, "the backlog")
    state = await until(lambda: (meta(db, "derivation") or {}).get("state") == "stopped" and meta(db, "derivation"), 10, "meta derivation")
    assert state["reason"] == "killed by SIGKILL"
    assert p.stop(signal.SIGINT) == 0, p.output

    with TraceStore(db, readonly=True) as store:
        for rid in rids:
            assert stored_events(store, rid) == run_events(rid, EVENTS)
        sessions, frames = store.derivation_backlog()
        assert sessions == STREAMS and frames > 0, (sessions, frames)  # every session changed after the kill
        runs = runs_by_id(store)
        assert not all(runs.get(rid, {}).get("status") == "completed" for rid in rids)
    killed = tmp_path / "killed.db"
    shutil.copy(db, killed)

    # The next recording into the file derives what was left, first.
    p2 = proxy()
    assert p2.wait_for(f"{frames} frame(s) of {sessions} session(s) were left underived", 15), p2.output
    await until(lambda: counts(db)["behind"] == 0, 60, "the backlog derived by the next recording")
    assert p2.stop(signal.SIGINT) == 0, p2.output
    with TraceStore(db, readonly=True) as store:
        assert store.derivation_backlog() == (0, 0)
        runs = runs_by_id(store)
        assert {runs[rid]["status"] for rid in rids} == {"completed"}
        assert store.get_meta("derivation")["state"] == "complete"

    # So does `redecode`, on the file as the killed recording left it.
    out = subprocess.run([str(BIN / "chatkit-trace"), "redecode", str(killed)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    with TraceStore(killed, readonly=True) as store:
        assert store.derivation_backlog() == (0, 0)
        assert {runs_by_id(store)[rid]["status"] for rid in rids} == {"completed"}
        # meta says so too, and what the killed recording had said
        state = store.get_meta("derivation")
        assert state["state"] == "complete" and state["by"] == "redecode" and state["was"] != "complete", state


async def test_a_stop_during_load_waits_for_the_deriver_and_loses_nothing(server, proxy, tmp_path):
    db = tmp_path / "trace.db"
    p = proxy()
    base = f"http://127.0.0.1:{p.port}"
    rids = [f"t{i}" for i in range(STREAMS)]
    events = 400  # 8 s per stream at 20 ms: still streaming when the proxy stops
    tasks = [
        asyncio.create_task(fetch("POST", f"{base}/sessions/s{i}/runs?n={events}&delay=0.02", json={"runId": rid}, timeout=60))
        for i, rid in enumerate(rids)
    ]
    await until(lambda: counts(db)["frames"] >= STREAMS * 20, 30, "frames of every stream")
    started = time.monotonic()
    assert p.stop(signal.SIGINT, timeout=90) == 0, p.output
    took = time.monotonic() - started
    got = await asyncio.gather(*tasks)
    assert any(g.error is not None or len(received_events(g.raw)) < events for g in got)  # stopped mid-load
    with TraceStore(db, readonly=True) as store:
        for rid, g in zip(rids, got, strict=False):
            received = received_events(g.raw)
            stored = stored_events(store, rid)
            assert stored[: len(received)] == received  # everything the client got is stored
            assert stored == run_events(rid, events)[: len(stored)]
        # the stop waited for the deriver: every stored frame is derived
        assert store.derivation_backlog() == (0, 0)
        assert store.get_meta("derivation")["state"] == "complete"
        runs = runs_by_id(store)
        assert set(rids) <= set(runs)
        ends = {e.run_id: e.end for e in store.exchanges() if e.capability == "run"}
        assert all(ends[rid] is not None for rid in rids)
    assert took < 90


async def test_a_stop_that_cannot_wait_leaves_the_rest_queued_and_says_so(server, proxy, tmp_path):
    """chatkit_derive_wait=0 with derivation at the end: the stop does not wait;
    whatever was not derived stays queued (never lost) and the log says how to
    derive it."""
    db = tmp_path / "trace.db"
    p = proxy(options={"chatkit_derive": "end", "chatkit_derive_wait": "0"})
    base = f"http://127.0.0.1:{p.port}"
    rids = [f"w{i}" for i in range(STREAMS)]
    got = await asyncio.gather(
        *(fetch("POST", f"{base}/sessions/s{i}/runs?n={EVENTS}", json={"runId": rid}, timeout=60) for i, rid in enumerate(rids))
    )
    assert all(g.error is None for g in got)
    await until(lambda: counts(db)["behind"] == STREAMS * EVENTS, 30, "every frame queued for the end")
    assert p.stop(signal.SIGINT) == 0, p.output
    with TraceStore(db, readonly=True) as store:
        sessions, frames = store.derivation_backlog()
        derived = set(runs_by_id(store))
        state = store.get_meta("derivation")
        for rid in rids:
            assert stored_events(store, rid) == run_events(rid, EVENTS)  # every frame stored
    # each session is derived or still queued, never neither
    assert len(derived & set(rids)) + sessions == STREAMS, (derived, sessions)
    # the trace says what is left whether the deriver stopped itself or was
    # stopped before it had started (a busy machine starts it slowly)
    assert state is not None, p.output
    if sessions:
        assert state["state"] == "incomplete" and state["frames"] == frames, (state, p.output)
        assert "stopped waiting for the deriver after 0 s" in p.output
        assert "chatkit-trace redecode" in p.output
    else:
        assert state["state"] == "complete"
    out = subprocess.run([str(BIN / "chatkit-trace"), "redecode", str(db)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    with TraceStore(db, readonly=True) as store:
        assert store.derivation_backlog() == (0, 0)
        assert {runs_by_id(store)[rid]["status"] for rid in rids} == {"completed"}


async def test_a_deriver_that_cannot_answer_the_stop_is_killed_and_the_trace_says_what_is_left(server, proxy, tmp_path):
    """The deriver frozen (SIGSTOP) when the proxy stops: it never says its
    last word, so the proxy kills it after DERIVER_TERM and records the
    backlog in meta ``derivation`` itself (nothing derived, nothing lost)."""
    db = tmp_path / "trace.db"
    p = proxy(options={"chatkit_derive": "end", "chatkit_derive_wait": "0"})
    base = f"http://127.0.0.1:{p.port}"
    got = await fetch("POST", f"{base}/sessions/s0/runs?n={EVENTS}", json={"runId": "f0"}, timeout=60)
    assert got.error is None
    await until(lambda: counts(db)["behind"] == EVENTS, 30, "every frame queued for the end")
    [rec] = (meta(db, "recordings") or [])[-1:]
    os.kill(rec["deriver_pid"], signal.SIGSTOP)
    assert p.stop(signal.SIGINT) == 0, p.output
    with TraceStore(db, readonly=True) as store:
        assert store.derivation_backlog() == (1, EVENTS)
        state = store.get_meta("derivation")
        assert stored_events(store, "f0") == run_events("f0", EVENTS)
    assert state is not None and state["state"] == "incomplete" and state["frames"] == EVENTS, (state, p.output)
    assert state["reason"] == "the deriver killed by SIGKILL", state
    assert "chatkit-trace redecode" in p.output


async def test_a_file_kept_busy_longer_than_sqlites_wait_loses_no_frame(server, proxy, tmp_path):
    """Another connection holds the trace's write lock for longer than the
    recorder's busy timeout (5 s) while a stream is recorded: the writer's
    batch fails with "database is locked", is tried again with the same rows
    and lands when the lock is released; nothing is dropped and no capture
    error is stored."""
    import sqlite3

    db = tmp_path / "trace.db"
    p = proxy()
    base = f"http://127.0.0.1:{p.port}"
    await until(lambda: db.exists() and meta(db, "recordings"), 30, "the trace opened by the writer")
    hog = sqlite3.connect(db, isolation_level=None)
    hog.execute("BEGIN IMMEDIATE")
    try:
        got = await fetch("POST", f"{base}/sessions/s0/runs?n={EVENTS}", json={"runId": "b0"}, timeout=60)
        assert got.error is None
        await asyncio.sleep(6.5)  # past the writer's 5 s busy timeout: its batch failed at least once
    finally:
        hog.execute("COMMIT")
        hog.close()
    await until(lambda: counts(db)["frames"] == EVENTS, 60, "every frame stored after the lock")
    assert p.stop(signal.SIGINT) == 0, p.output
    with TraceStore(db, readonly=True) as store:
        assert stored_events(store, "b0") == run_events("b0", EVENTS)
        assert store.capture_errors() == []
        assert runs_by_id(store)["b0"]["status"] == "completed"
