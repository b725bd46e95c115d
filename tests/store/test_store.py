"""The trace store: round trips on a real SQLite file, and clear errors for bad files."""

from __future__ import annotations

import json
import sqlite3

import pytest

from chatkit_trace.adapters import create_adapter
from chatkit_trace.examples.my_protocol import MyProtocol
from chatkit_trace.pipeline import replay
from chatkit_trace.store import SCHEMA_VERSION, TraceFormatError, TraceStore, write_replay
from chatkit_trace.trace import Exchange, frames_from_body

BODY = (
    b'id: e0\ndata: {"type": "started", "run": "r1"}\n\n'
    b'id: e1\ndata: {"type": "text", "text": "Hi \\u00e9"}\n\n'
    b"data: {broken\n\n"
    b'id: e3\ndata: {"type": "done"}\n\n'
)


def make_exchange(index: int = 0) -> Exchange:
    return Exchange(
        index,
        "POST",
        "http://127.0.0.1:8000/sessions/s1/runs?x=1",
        started_at=100.0,
        ended_at=101.0,
        request_headers=[("Content-Type", "application/json"), ("Authorization", "[REDACTED]")],
        request_body=json.dumps({"text": "hello", "runId": "r1"}).encode(),
        status=200,
        response_headers=[("content-type", "text/event-stream")],
        transport="sse",
        frames=frames_from_body(BODY, index, at=100.1, spacing=0.1),
        end="complete",
        capability="run",
        session_id="s1",
        run_id="r1",
        run_id_source="body",
        notes={"dropped_chunks": 0},
    )


@pytest.mark.parametrize("where", ["file", "memory"])
def test_exchange_and_frames_round_trip(tmp_path, where):
    path = tmp_path / "t.db" if where == "file" else ":memory:"
    store = TraceStore(path, create=True)
    ex = make_exchange()
    store.add_exchange(ex)
    store.commit()
    if where == "file":
        store.close()
        store = TraceStore(path, readonly=True)
    (back,) = list(store.exchanges(with_frames=True))
    assert back.frames == ex.frames
    assert back.frames[2].text == "{broken" and back.frames[1].text == "{\"type\": \"text\", \"text\": \"Hi \\u00e9\"}"
    for name in ("method", "url", "status", "request_body", "session_id", "run_id", "end", "notes", "capability"):
        assert getattr(back, name) == getattr(ex, name), name
    assert list(back.request_headers) == list(ex.request_headers)
    assert store.frame_count() == 4 and store.exchange_count() == 1
    assert store.frames(0, start=1, limit=2) == ex.frames[1:3]


def test_derived_tables_from_a_replay(tmp_path):
    store = TraceStore(tmp_path / "t.db", create=True)
    store.add_exchange(make_exchange())
    adapter = create_adapter(MyProtocol(), history=True)
    write_replay(store, replay(store.exchanges(with_frames=True), adapter))
    states = [r["state"] for r in store.rows("frame_results", order="exchange_id, idx")]
    assert states == ["admitted", "admitted", "error", "after-error"]
    (run,) = list(store.rows("runs"))
    assert run["status"] == "running" and run["frames"] == 4 and run["rejected"] == 0
    facts = list(store.rows("facts", order="seq"))
    assert [f["kind"] for f in facts] == ["message"] and facts[0]["accepted"] == 1
    (session,) = list(store.rows("sessions"))
    assert json.loads(session["snapshot"])["messages"][1]["parts"][0]["text"] == "Hi é"
    # Re-deriving replaces, never duplicates.
    write_replay(store, replay(store.exchanges(with_frames=True), adapter))
    assert len(list(store.rows("facts"))) == 1


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="no trace database"):
        TraceStore(tmp_path / "nope.db")
    with pytest.raises(TraceFormatError, match="is a directory"):
        TraceStore(tmp_path)


def test_corrupt_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(TraceFormatError, match="not a SQLite database"):
        TraceStore(bad, readonly=True)


def test_other_sqlite_files_are_refused_and_left_alone(tmp_path):
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(TraceFormatError, match="not a chatkit-trace recording"):
        TraceStore(other)
    with pytest.raises(TraceFormatError, match="refusing"):
        TraceStore(other, create=True)


def test_newer_schema_says_to_upgrade(tmp_path):
    path = tmp_path / "t.db"
    store = TraceStore(path, create=True)
    store.set_meta("schema_version", SCHEMA_VERSION + 1)
    store.close()
    with pytest.raises(TraceFormatError, match="newer chatkit-trace"):
        TraceStore(path, readonly=True)


def test_readable_with_plain_sqlite(tmp_path):
    path = tmp_path / "t.db"
    store = TraceStore(path, create=True)
    store.add_exchange(make_exchange())
    store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM frames WHERE event_id = 'e1'").fetchone() == (1,)
    # a closed trace is one file: rollback-journal mode, no -wal/-shm for readers to leave behind
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.db"]
