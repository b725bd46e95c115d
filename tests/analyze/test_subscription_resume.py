"""A subscription that starts with a cursor is judged as a resume of the
session's event sequence (chatkit_trace.analyze.resume): where the evidence
comes from, and where there is none (no finding rather than a guess)."""

from __future__ import annotations

from typing import Any

from chatkit_trace.adapters import create_adapter, load_protocol
from chatkit_trace.analyze import analyze
from chatkit_trace.analyze.resume import session_resumes

from .corpus import build_exchange

CAPS = ["abort", "history", "resume", "subscribe", "regenerate", "edit"]


def ev(i: Any, run: str, kind: str, **kw: Any) -> dict[str, Any]:
    return {"id": str(i), "data": {"type": kind, "run": run, **kw}}


def run_events(run: str, ids: list[Any], texts: tuple[str, ...] = ("One ", "two ", "three")) -> list[dict[str, Any]]:
    kinds = [("started", {})] + [("text", {"text": t}) for t in texts] + [("done", {})]
    assert len(ids) == len(kinds)
    return [ev(i, run, k, **kw) for i, (k, kw) in zip(ids, kinds, strict=False)]


def sub(t: float, events: list[dict[str, Any]], cursor: str | None = None, **kw: Any) -> dict[str, Any]:
    d = {"capability": "subscribe", "session": "s1", "t": t, "sse": events, **kw}
    if cursor is not None:
        d["cursor"] = cursor
    return d


def send(run: str, t: float) -> dict[str, Any]:
    return {"capability": "run", "session": "s1", "run": run, "t": t, "status": 202,
            "request": {"sessionId": "s1", "runId": run, "text": f"hi {run}"}}


def judge(specs: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    exchanges = [build_exchange(i, s) for i, s in enumerate(specs)]
    adapter = create_adapter(load_protocol("myproto"), **{c: True for c in CAPS})
    rep, findings = analyze(exchanges, adapter)
    from chatkit_trace.analyze import Context

    checks = session_resumes(Context(rep, {e.index: e for e in exchanges}, adapter))
    return findings, checks


R1 = run_events("r1", [1, 2, 3, 4, 5])


def test_a_chain_of_reconnects_knows_everything_before_the_last_cursor():
    # 1 2 3 | reconnect after 3: 4 | reconnect after 4: replays 1 … from the start
    findings, checks = judge([sub(0, R1[:3]), send("r1", 0.005), sub(1, R1[3:4], cursor="3"), sub(2, R1, cursor="4")])
    [f] = findings
    assert f.code == "CK404" and f.frames[0] == "3:0"
    assert f.detail["repeated"] == ["1", "2", "3", "4"] and f.detail["cursor_seen_at"] == "2:0"
    assert [c.problems == [] for c in checks] == [True, False]  # the first reconnect was right


def test_a_cursor_the_trace_never_saw_is_judged_only_by_the_stream_itself():
    # the recording started after the page loaded: no earlier stream holds '3'
    findings, _ = judge([send("r1", -0.5), sub(0, R1, cursor="3")])
    [f] = findings
    assert f.code == "CK404" and f.frames[0] == "1:0" and f.detail["repeated"] == ["1", "2", "3"]
    assert f.detail["cursor_seen_at"] is None and "an id the trace holds nowhere before" in f.message
    # and a stream that does not carry the cursor's own event: nothing to judge
    assert judge([send("r1", -0.5), sub(0, R1[3:], cursor="3")])[0] == []


def test_ids_that_did_not_count_by_one_are_no_evidence_of_a_skip():
    odd = run_events("r1", [1, 3, 5, 7, 9])
    assert judge([sub(0, odd[:3]), send("r1", 0.005), sub(1, odd[4:], cursor="5")])[0] == []
    # two events are one step: too little to read a gap as a skip
    assert judge([sub(0, R1[:2]), send("r1", 0.005), sub(1, R1[3:], cursor="2")])[0] == []
    # the same gap after ids that counted by one twice is a skip
    [f] = judge([sub(0, R1[:3]), send("r1", 0.005), sub(1, R1[4:], cursor="3")])[0]
    assert f.code == "CK404" and f.detail["skipped"] == ["4"]


def test_opaque_ids_need_another_stream_or_history_to_show_a_skip():
    op = run_events("r1", ["k", "q", "x", "m", "z"])
    assert judge([sub(0, op[:3]), send("r1", 0.005), sub(1, op[4:], cursor="x")])[0] == []
    history = {"capability": "history", "session": "s1", "t": 2, "json": {"runs": [
        {"id": "r1", "status": "completed", "input": "hi r1", "created_at": 1,
         "frames": [{"id": e["id"], "event": {k: v for k, v in e["data"].items() if k != "run"}} for e in op]}]}}
    [f] = judge([sub(0, op[:3]), send("r1", 0.005), sub(1, op[4:], cursor="x"), history])[0]
    assert (f.code, f.detail["skipped"], f.frames[0]) == ("CK404", ["m"], "2:0")
    assert "history read 3 holds it after the cursor" in f.message


def test_each_resumed_event_still_goes_to_its_own_run():
    r2 = run_events("r2", [6, 7, 8, 9, 10])
    findings, checks = judge([sub(0, R1 + r2[:2]), send("r1", 0.005), send("r2", 0.055), sub(1, r2[2:], cursor="7")])
    assert findings == [] and checks[0].problems == []
    # the replayed stream pinned to no run: r1 ends, r2 ends, each with its own answer
    exchanges = [build_exchange(i, s) for i, s in enumerate(
        [sub(0, R1 + r2[:2]), send("r1", 0.005), send("r2", 0.055), sub(1, r2[2:], cursor="7")])]
    adapter = create_adapter(load_protocol("myproto"), **{c: True for c in CAPS})
    rep, _ = analyze(exchanges, adapter)
    snap = rep.sessions["s1"].core.snapshot
    assert [(r.id, r.status) for r in snap.runs] == [("r1", "completed"), ("r2", "completed")]
    assert {m.id: m.text for m in snap.messages if m.role == "assistant"} == {
        "assistant:r1": "One two three", "assistant:r2": "One two three"}


def test_a_duplicate_after_the_cursor_is_still_a_duplicate_not_a_resume_problem():
    findings, _ = judge([sub(0, R1[:3]), send("r1", 0.005), sub(1, [R1[3], R1[3], R1[4]], cursor="3")])
    assert [f.code for f in findings] == ["CK403"]


def test_per_run_ids_are_matched_with_their_run():
    # ids that restart per run (the demo backend's e0, e1 …): the cursor is the
    # event the client received last, with its run
    a = run_events("r1", ["e0", "e1", "e2", "e3", "e4"])
    b = run_events("r2", ["e0", "e1", "e2", "e3", "e4"])
    specs = [sub(0, a + b[:2]), send("r1", 0.005), send("r2", 0.065), sub(1, b[2:], cursor="e1")]
    assert judge(specs)[0] == []
    specs[-1] = sub(1, b, cursor="e1")  # r2 again from its start
    [f] = judge(specs)[0]
    assert f.code == "CK404" and f.detail["repeated"] == ["e0", "e1"] and f.run_id == "r2"


def test_what_a_reorder_did_to_the_answer_is_the_resumes_not_a_ck201():
    r = run_events("r1", [1, 2, 3, 4, 5, 6], ("One ", "two ", "three ", "four"))
    history = {"capability": "history", "session": "s1", "t": 2, "json": {"runs": [
        {"id": "r1", "status": "completed", "input": "hi r1", "created_at": 1,
         "frames": [{"id": e["id"], "event": {k: v for k, v in e["data"].items() if k != "run"}} for e in r]}]}}
    specs = [sub(0, r[:3]), send("r1", 0.005), sub(1, [r[4], r[3], r[5]], cursor="3"), history]
    findings, _ = judge(specs)
    assert [f.code for f in findings] == ["CK404"], [(f.code, f.message) for f in findings]
    assert findings[0].detail["first_wrong"] == {"kind": "reorder", "frame": "2:0", "event_id": "5", "run": "r1"}
    # the live answer really is scrambled: history's order differs
    exchanges = [build_exchange(i, s) for i, s in enumerate(specs)]
    adapter = create_adapter(load_protocol("myproto"), **{c: True for c in CAPS})
    rep, _ = analyze(exchanges, adapter)
    live = rep.sessions["s1"].history[0].baselines["r1"].snapshot
    assert [m.text for m in live.messages if m.role == "assistant"] == ["One two fourthree "]
