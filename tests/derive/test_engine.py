"""The derive engine: a stored trace a session at a time equals the trace
analysed whole; the derived tables it writes; its ``on_session`` hook."""

from __future__ import annotations

import json

from chatkit_trace.adapters import create_adapter
from chatkit_trace.analyze import analyze
from chatkit_trace.derive import Deriver
from chatkit_trace.examples.my_protocol import MyProtocol
from chatkit_trace.store import TraceStore
from chatkit_trace.wire import replace_frame

from ..analyze.corpus import CORPUS, load_case
from ..store.test_store import make_exchange

CASES = ["CK101-direct", "CK102", "CK401", "CK406", "CK404", "clean-myproto", "CK201"]


def _several_sessions(path):
    store = TraceStore(path, create=True)
    all_exchanges = []
    index = 0
    adapter = None
    for n, name in enumerate(CASES):
        _, exchanges, adapter = load_case(CORPUS / f"{name}.json")
        for ex in exchanges:
            ex.session_id = f"{ex.session_id}-{n}"
            ex.index = index
            ex.started_at += n * 100
            ex.ended_at = (ex.ended_at or ex.started_at) + n * 100
            ex.frames = [replace_frame(f, exchange_index=index, at=f.at + n * 100) for f in ex.frames]
            index += 1
            store.add_exchange(ex)
            all_exchanges.append(ex)
    return store, all_exchanges, adapter


def test_store_analysis_per_session_matches_whole_trace_analysis(tmp_path):
    store, all_exchanges, adapter = _several_sessions(tmp_path / "t.db")
    _, whole = analyze(all_exchanges, adapter)
    seen = []
    result = Deriver(store, adapter).run(write_to=store, on_session=lambda d: seen.append((d.session_id, len(d.replay.frames))))
    per_session, counts = result.findings, result.counts
    def key(f):
        return (f.code, f.session_id, f.run_id, f.frames[0], f.fingerprint)

    assert sorted(map(key, per_session)) == sorted(map(key, whole))
    assert counts["sessions"] == len(CASES) == len(seen)
    assert [s for s, _ in seen] == [f"s1-{n}" for n in range(len(CASES))]  # in the order the sessions started
    assert sum(n for _, n in seen) == counts["frames"]
    # once-per-trace codes are merged across sessions
    assert sum(1 for f in per_session if f.code == "CK406") == 1
    assert len(list(store.rows("facts"))) == counts["facts"] and list(store.rows("runs"))
    assert sorted(r["fingerprint"] for r in store.rows("findings")) == sorted(f.fingerprint for f in per_session)


def test_derived_tables_from_a_replay(tmp_path):
    store = TraceStore(tmp_path / "t.db", create=True)
    store.add_exchange(make_exchange())
    adapter = create_adapter(MyProtocol(), history=True)
    Deriver(store, adapter).run(write_to=store)
    states = [r["state"] for r in store.rows("frame_results", order="exchange_id, idx")]
    assert states == ["admitted", "admitted", "error", "after-error"]
    (run,) = list(store.rows("runs"))
    assert run["status"] == "running" and run["frames"] == 4 and run["rejected"] == 0
    facts = list(store.rows("facts", order="seq"))
    assert [f["kind"] for f in facts] == ["message"] and facts[0]["accepted"] == 1
    (session,) = list(store.rows("sessions"))
    assert json.loads(session["snapshot"])["messages"][1]["parts"][0]["text"] == "Hi é"
    # Re-deriving replaces, never duplicates.
    Deriver(store, adapter).run(write_to=store)
    assert len(list(store.rows("facts"))) == 1


def test_a_session_replays_only_without_analysis_and_is_analysed_later(tmp_path):
    store, _, adapter = _several_sessions(tmp_path / "t.db")
    deriver = Deriver(store, adapter)
    found = 0
    for sid in deriver.sessions():
        derived = deriver.session(sid, analyse=False)
        assert derived.findings == [] and derived.names == {sid}
        later = [f.fingerprint for f in deriver.analyse(derived)]
        assert later == [f.fingerprint for f in deriver.session(sid).findings]
        found += bool(later)
        runs = derived.runs()
        assert all(r.session_id == sid for r in runs)
        assert sum(r.facts for r in runs) <= len(derived.replay.facts)
    assert found >= 3


def test_route_infos_are_one_finding_per_trace_and_route_across_sessions(tmp_path):
    """CK115 (and CK112, CK207, CK306, CK307) are "once per trace and route":
    analysed session by session, two sessions' stops on one route are one
    finding counting both runs, as when the trace is analysed whole."""
    store = TraceStore(tmp_path / "t.db", create=True)
    _, exchanges, adapter = load_case(CORPUS / "CK115-openai-stop-by-close.json")
    assert len({ex.session_id for ex in exchanges}) == 2
    for ex in exchanges:
        store.add_exchange(ex)
    result = Deriver(store, adapter).run()
    per_session, counts = result.findings, result.counts
    _, whole = analyze(exchanges, adapter)
    assert counts["sessions"] == 2
    for found in (per_session, whole):
        [f] = [x for x in found if x.code == "CK115"]
        assert f.detail["count"] == 2 and f.message.startswith("2 run(s) on POST /v1/chat/completions")
        assert f.frames == ["0:2", "1:1"]
