"""``TraceReader``: the viewer's read-only access (its queries live in the store)."""

from __future__ import annotations

import threading

from chatkit_trace.store import TraceReader, TraceStore
from chatkit_trace.trace import Exchange
from chatkit_trace.wire import Frame


def _trace(path):
    # frames 0 and 3 carry no time (they sort at the exchange's start); 1 and 2 share one
    times = [0.0, 10.5, 10.5, 0.0, 10.2]
    with TraceStore(path, create=True) as store:
        store.set_meta("protocol", "myproto")
        store.add_exchange(
            Exchange(0, "POST", "http://h/run", started_at=10.0, ended_at=11.0, transport="sse", capability="run",
                     session_id=None, run_id="r1",
                     frames=[Frame(0, i, "sse", "in", f'{{"n": {i}}}', None, None, None, None, None, t) for i, t in enumerate(times)])
        )
        store.add_exchange(Exchange(1, "GET", "http://h/history", started_at=12.0, capability="history", session_id="default"))
        store.add_exchange(Exchange(2, "GET", "http://h/other", started_at=13.0, session_id="s2"))
    return path


def test_frames_in_replay_order_and_after_a_key(tmp_path):
    reader = TraceReader(_trace(tmp_path / "t.db"))
    assert list(reader.frame_times(0, 10.0)) == [(0, 10.0), (3, 10.0), (4, 10.2), (1, 10.5), (2, 10.5)]
    def after(key):
        return [f.index for _, f in reader.frames_by_time(0, 10.0, after=key, batch=2)]

    assert after(None) == [0, 3, 4, 1, 2]
    assert after((10.5, -1)) == [1, 2]  # from t on
    assert after((10.5, 1)) == [2]  # after that frame
    assert after((10.2, 1 << 30)) == [1, 2]  # after t
    assert reader.last_frame_at(0) == 10.5 and reader.frame_count(0) == 5
    assert [f.index for f in reader.frames(0, start=3, limit=10)] == [3, 4]


def test_sessions_as_the_core_names_them(tmp_path):
    reader = TraceReader(_trace(tmp_path / "t.db"))
    # "default" holds the exchanges without a session id too; only classified ones replay
    assert [e.index for e in reader.session_exchanges("default", "default")] == [0, 1]
    assert [r[0] for r in reader.exchange_summaries(session="default", default_session="default")] == [0, 1]
    assert [r[0] for r in reader.exchange_summaries(classified=True)] == [0, 1]
    assert [r[0] for r in reader.exchange_summaries(run=(None, "r1"))] == [0]
    assert reader.session_exchanges("s2", "default") == []  # not classified
    assert reader.search('"n": 3') == {0} and reader.broken_frames([0, 1]) == set()


def test_derived_reads_say_nothing_before_an_analysis(tmp_path):
    path = _trace(tmp_path / "t.db")
    reader = TraceReader(path, tmp_path / "missing.db")
    assert not reader.has_derived() and not reader.has_findings()
    assert reader.findings() == [] and reader.finding_counts() == {} and reader.history_reads("s1") == []
    assert reader.routed_frames(0, None, "r1") is None and reader.frame_results(0, 0, 4) is None
    assert reader.settled_snapshot("s1", "r1") is None and reader.problem_refs("s1", "r1") == set()
    assert reader.meta()["protocol"] == "myproto" and reader.counts() == {"frames": 5, "exchanges": 3}


def test_each_thread_reads_through_its_own_connection(tmp_path):
    reader = TraceReader(_trace(tmp_path / "t.db"))
    seen = []
    t = threading.Thread(target=lambda: seen.append((reader.counts(), reader._conn())))
    t.start()
    t.join()
    assert seen[0][0] == reader.counts() and seen[0][1] is not reader._conn()
    reader.close()


def test_the_last_frame_time_follows_a_growing_exchange(tmp_path):
    """Remembered per exchange, read again once the exchange has another frame."""
    path = _trace(tmp_path / "t.db")
    reader = TraceReader(path)
    assert reader.last_frame_at(0) == 10.5 and reader.last_frame_at(1) is None
    assert reader.last_frame_at(0) == 10.5  # remembered
    with TraceStore(path) as store:
        store.add_frames([Frame(0, 5, "sse", "in", "{}", None, None, None, None, None, 12.5)])
        store.add_frames([Frame(1, 0, "sse", "in", "{}", None, None, None, None, None, 13.0)])
    assert reader.last_frame_at(0) == 12.5 and reader.last_frame_at(1) == 13.0
    with TraceStore(path) as store:
        store.add_frames([Frame(0, 6, "sse", "in", "{}", None, None, None, None, None, 11.0)])  # earlier than the last
    assert reader.last_frame_at(0) == 12.5
