"""The recorder's derivation queue (``derive_queue``, schema 2) on a real SQLite file."""

from __future__ import annotations

from chatkit_trace.store import TraceStore
from chatkit_trace.trace import Exchange


def test_changes_accumulate_and_a_change_during_derivation_stays_queued(tmp_path):
    with TraceStore(tmp_path / "q.db", create=True) as store:
        assert store.derivation_backlog() == (0, 0)
        with store.transaction():
            store.queue_derivation({"s1": 5}, 1, at=10.0)
        with store.transaction():
            store.queue_derivation({"s1": 3, None: 2}, 2, at=20.0)
        assert store.derivation_backlog() == (2, 10)
        s1, none = store.derive_pending()  # oldest change first
        assert (s1.session_id, s1.seq, s1.since, s1.frames) == ("s1", 2, 10.0, 8)
        assert (none.session_id, none.frames) == (None, 2)
        # the writer stores 4 more frames of s1 while the deriver derives what it saw
        with store.transaction():
            store.queue_derivation({"s1": 4}, 3, at=30.0)
        store.write_derived({}, done=s1)
        [left] = store.derive_pending(session="s1")
        assert (left.seq, left.frames) == (3, 4) and left.since >= 30.0  # waits for the next pass
        store.write_derived({}, done=left)
        assert store.derive_pending(session="s1") == []
        assert store.derivation_backlog() == (1, 2)
        store.clear_derived()  # redecode derives everything: nothing is left queued
        store.commit()
        assert store.derivation_backlog() == (0, 0)


def test_a_session_with_a_stream_still_open_says_so(tmp_path):
    with TraceStore(tmp_path / "q.db", create=True) as store:
        for i, sid in enumerate(("open", "done")):
            store.add_exchange(
                Exchange(i, "POST", f"http://b/sessions/{sid}/runs", started_at=1.0, status=200, transport="sse",
                         capability="run", session_id=sid, run_id="r", ended_at=None if sid == "open" else 2.0,
                         end=None if sid == "open" else "complete"),
                with_frames=False,
            )
        with store.transaction():
            store.queue_derivation({"open": 1, "done": 1}, 1)
        assert {p.session_id: p.open for p in store.derive_pending()} == {"open": True, "done": False}
