"""What every analysis run adds: the injected fault named next to its effect, replays told from new output."""

from __future__ import annotations

from .corpus import CORPUS, load_case


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
