"""Session-at-a-time analysis of a stored trace equals analysing it whole."""

from __future__ import annotations

from chatkit_trace.analyze import analyze, analyze_store
from chatkit_trace.store import TraceStore

from .corpus import CORPUS, load_case

CASES = ["CK101-direct", "CK102", "CK401", "CK406", "CK404", "clean-myproto", "CK201"]


def test_store_analysis_per_session_matches_whole_trace_analysis(tmp_path):
    store = TraceStore(tmp_path / "t.db", create=True)
    all_exchanges = []
    index = 0
    adapter = None
    for n, name in enumerate(CASES):
        _, exchanges, adapter = load_case(CORPUS / f"{name}.json")
        for ex in exchanges:
            ex.session_id = f"{ex.session_id}-{n}"
            for f in ex.frames:
                object.__setattr__(f, "exchange_index", index)
            ex.index = index
            ex.started_at += n * 100
            ex.ended_at = (ex.ended_at or ex.started_at) + n * 100
            ex.frames = [type(f)(**{**{k: getattr(f, k) for k in f.__slots__}, "at": f.at + n * 100}) for f in ex.frames]
            index += 1
            store.add_exchange(ex)
            all_exchanges.append(ex)
    _, whole = analyze(all_exchanges, adapter)
    per_session, counts = analyze_store(store, adapter, write=True)
    key = lambda f: (f.code, f.session_id, f.run_id, f.frames[0], f.fingerprint)
    assert sorted(map(key, per_session)) == sorted(map(key, whole))
    assert counts["sessions"] == len(CASES)
    # once-per-trace codes are merged across sessions
    assert sum(1 for f in per_session if f.code == "CK406") == 1
    assert store.db["facts"].count == counts["facts"] and store.db["runs"].count > 0


def test_a_finding_names_the_fault_injected_on_its_exchange():
    """Issue 9: the injected cause is shown next to its effect."""
    from chatkit_trace.analyze import analyze

    _, exchanges, adapter = load_case(CORPUS / "CK103.json")
    exchanges[0].notes = {"fault": {"applied": [{"kind": "cut", "event": 2, "frame": 1}], "seed": 7}}
    _, findings = analyze(exchanges, adapter)
    (f,) = [f for f in findings if f.code == "CK103"]
    assert f.detail["injected_fault"]["applied"][0]["kind"] == "cut"
    assert f.message.endswith("(fault injected on exchange 0: cut)")
    _, plain = analyze(load_case(CORPUS / "CK103.json")[1], adapter)
    assert [x.fingerprint for x in plain] == [x.fingerprint for x in findings]


def test_a_resume_of_a_settled_run_that_only_replays_is_not_lost_output():
    """CK101 tells new events from replays by outer ids (decode state is
    released at the terminal, so content cannot): a resume replaying e2-e3
    of a completed run is not output lost after the terminal; a new id is."""
    from chatkit_trace.analyze import analyze

    from .corpus import build_exchange

    run = {"capability": "run", "session": "s1", "run": "r1", "t": 0, "request": {"text": "hi", "runId": "r1"},
           "sse": [{"id": "e0", "data": {"type": "started", "run": "r1"}}, {"id": "e1", "data": {"type": "text", "text": "A"}},
                   {"id": "e2", "data": {"type": "text", "text": "B"}}, {"id": "e3", "data": {"type": "done"}}]}
    replay_only = {"capability": "resume", "session": "s1", "run": "r1", "t": 5, "cursor": "e1",
                   "sse": [{"id": "e2", "data": {"type": "text", "text": "B"}}, {"id": "e3", "data": {"type": "done"}}]}
    with_new = dict(replay_only, sse=replay_only["sse"] + [{"id": "e4", "data": {"type": "text", "text": "C"}}])
    _, _, adapter = load_case(CORPUS / "clean-myproto.json")
    for resume, expected in ((replay_only, []), (with_new, ["CK101"])):
        exchanges = [build_exchange(0, run), build_exchange(1, resume)]
        _, findings = analyze(exchanges, adapter)
        assert [f.code for f in findings if f.severity != "info"] == expected


def test_route_infos_are_one_finding_per_trace_and_route_across_sessions(tmp_path):
    """CK115 (and CK112, CK207, CK306, CK307) are "once per trace and route":
    analysed session by session, two sessions' stops on one route are one
    finding counting both runs, as when the trace is analysed whole."""
    store = TraceStore(tmp_path / "t.db", create=True)
    _, exchanges, adapter = load_case(CORPUS / "CK115-openai-stop-by-close.json")
    assert len({ex.session_id for ex in exchanges}) == 2
    for ex in exchanges:
        store.add_exchange(ex)
    per_session, counts = analyze_store(store, adapter)
    _, whole = analyze(exchanges, adapter)
    assert counts["sessions"] == 2
    for found in (per_session, whole):
        [f] = [x for x in found if x.code == "CK115"]
        assert f.detail["count"] == 2 and f.message.startswith("2 run(s) on POST /v1/chat/completions")
        assert f.frames == ["0:2", "1:1"]
