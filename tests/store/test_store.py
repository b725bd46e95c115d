"""The trace store: round trips on a real SQLite file, and clear errors for bad files."""

from __future__ import annotations

import json
import sqlite3

import pytest

from chatkit_trace.adapters import create_adapter
from chatkit_trace.examples.my_protocol import MyProtocol
from chatkit_trace.store import SCHEMA_VERSION, TraceFormatError, TraceStore
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


def test_derived_rows_are_plain_rows_replaced_a_session_at_a_time(tmp_path):
    store = TraceStore(tmp_path / "t.db", create=True)

    def rows(session, exchange, kind):
        return {
            "facts": [{"exchange_id": exchange, "frame_idx": 0, "session_id": session, "run_id": "r", "kind": kind, "accepted": 1}],
            "sessions": [{"session_id": session, "status": "idle", "runs": 1, "messages": 0, "snapshot": "{}"}],
        }

    store.write_derived(rows("s1", 0, "started"))
    store.write_derived(rows("s2", 1, "started"))
    # the recorder re-derives s1: its rows (and its exchanges') are replaced in one transaction, s2's stay
    store.write_derived(rows("s1", 0, "completed"), sessions={"s1"}, exchanges=[0])
    facts = sorted((r["session_id"], r["kind"]) for r in store.rows("facts"))
    assert facts == [("s1", "completed"), ("s2", "started")]
    assert sorted(r["session_id"] for r in store.rows("sessions")) == ["s1", "s2"]
    store.replace_findings([{"code": "CK101", "severity": "error", "session_id": "s1", "frames": "[]"}])
    store.replace_findings([{"code": "CK102", "severity": "error", "session_id": "s2", "frames": "[]"}])
    assert [r["code"] for r in store.rows("findings")] == ["CK102"]
    store.clear_derived()
    assert [list(store.rows(t)) for t in ("facts", "sessions", "findings")] == [[], [], []]
    with pytest.raises(ValueError, match="not a derived table"):
        store.write_derived({"exchanges": [{"id": 9}]})
    with pytest.raises(ValueError, match="no column"):
        store.write_derived({"facts": [{"nope": 1}]})


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
