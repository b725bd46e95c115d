"""Replaying recorded exchanges through the example adapter and the Core."""

from __future__ import annotations

import json

from chatkit_trace.adapters import create_adapter
from chatkit_trace.core import FactRejectReason as R
from chatkit_trace.examples.my_protocol import MyProtocol
from chatkit_trace.pipeline import replay
from chatkit_trace.trace import Exchange, frames_from_body

ADAPTER = create_adapter(MyProtocol(), abort=True, history=True, resume=True)


def sse(*events, ids=True) -> bytes:
    out = b""
    for i, ev in enumerate(events):
        if ids:
            out += f"id: e{i}\n".encode()
        out += b"data: " + json.dumps(ev).encode() + b"\n\n"
    return out


def run_exchange(index, run, events, *, t=0.0, end="complete", status=200, ids=True, session="s1"):
    body = sse(*events, ids=ids)
    return Exchange(
        index,
        "POST",
        f"http://backend/sessions/{session}/runs",
        started_at=t,
        ended_at=t + 1,
        request_body=json.dumps({"runId": run, "text": "hello"}).encode(),
        status=status,
        transport="sse",
        frames=frames_from_body(body, index, at=t + 0.01, spacing=0.01),
        end=end,
        capability="run",
        session_id=session,
        run_id=run,
    )


TEXT = [{"type": "started", "run": "r1"}, {"type": "text", "text": "Hi"}, {"type": "text", "text": " there"}, {"type": "done"}]


def test_clean_run_has_no_violation_and_projects_the_user_message():
    r = replay([run_exchange(0, "r1", TEXT)], ADAPTER)
    assert not r.violations
    snap = r.sessions["s1"].core.snapshot
    assert [m.id for m in snap.messages] == ["user:r1", "assistant:r1"]
    assert snap.message("assistant:r1").parts[0].text == "Hi there"
    assert snap.run("r1").status == "completed"
    assert r.sessions["s1"].runs["r1"].settled is not None
    assert [f.state for f in r.exchanges[0].frames] == ["admitted"] * 4


def test_output_after_the_terminal_is_shadowed_not_admitted():
    events = TEXT + [{"type": "text", "text": " late"}]
    r = replay([run_exchange(0, "r1", events)], ADAPTER)
    last = r.exchanges[0].frames[-1]
    assert last.state == "after-terminal" and last.shadow and not last.facts
    assert r.exchanges[0].reader_stop == ("terminal", 3)
    assert r.sessions["s1"].core.snapshot.message("assistant:r1").parts[0].text == "Hi there"


def test_bad_json_stops_the_reader_and_later_frames_are_kept():
    ex = run_exchange(0, "r1", TEXT)
    body = sse(*TEXT[:2]) + b"data: {not json\n\n" + sse(*TEXT[2:])
    ex.frames = frames_from_body(body, 0, at=0.01, spacing=0.01)
    r = replay([ex], ADAPTER)
    states = [f.state for f in r.exchanges[0].frames]
    assert states == ["admitted", "admitted", "error", "after-error", "after-error"]
    assert r.sessions["s1"].core.snapshot.run("r1").status == "running"  # never invented (R3.4)


def test_a_stream_without_conclusion_leaves_the_run_running_and_disconnected():
    r = replay([run_exchange(0, "r1", TEXT[:3], end="reset")], ADAPTER)
    view = r.sessions["s1"].core.snapshot.run("r1")
    assert view.status == "running" and view.connection == "disconnected"
    assert not r.exchanges[0].concluded


def test_duplicate_outer_ids_are_dropped_by_the_factory():
    ex = run_exchange(0, "r1", TEXT)
    body = sse(*TEXT[:2]) + b"id: e1\ndata: " + json.dumps(TEXT[1]).encode() + b"\n\n"
    ex.frames = frames_from_body(body, 0, at=0.01, spacing=0.01)
    r = replay([ex], ADAPTER)
    assert [f.state for f in r.exchanges[0].frames] == ["admitted", "admitted", "duplicate"]


def test_failed_request_refuses_the_dispatch():
    ex = run_exchange(0, "r1", [], status=500)
    ex.frames = []
    r = replay([ex], ADAPTER)
    assert r.exchanges[0].dispatch == "refused"
    assert r.sessions["s1"].core.snapshot.run("r1") is None


def test_second_send_while_a_run_is_still_active_is_dispatched_anyway():
    first = run_exchange(0, "r1", TEXT[:2], t=0.0)  # never concludes
    second = run_exchange(1, "r2", [{"type": "text", "text": "B"}, {"type": "done"}], t=5.0)
    r = replay([second, first], ADAPTER)  # any order: sorted by time
    snap = r.sessions["s1"].core.snapshot
    assert snap.run("r1").status == "running" and snap.run("r2").status == "completed"
    assert not r.violations


def test_history_read_after_a_run_is_recorded_with_snapshots():
    hist = {
        "runs": [{"id": "r1", "status": "completed", "input": "hello", "created_at": 1, "frames": [{"id": f"e{i}", "event": e} for i, e in enumerate(TEXT)]}]
    }
    h = Exchange(1, "GET", "http://backend/sessions/s1/runs", started_at=10, ended_at=10.1, status=200,
                 response_body=json.dumps(hist).encode(), capability="history", session_id="s1")
    r = replay([run_exchange(0, "r1", TEXT), h], ADAPTER)
    (read,) = r.sessions["s1"].history
    assert read.command.ok and read.result is not None
    assert [m.id for m in read.after.messages] == ["user:r1", "assistant:r1"]
    assert read.before.message("assistant:r1") == read.after.message("assistant:r1")


def test_subscription_routes_passive_runs_and_rejects_unknown_runs():
    events = [
        {"type": "started", "run": "p1"},
        {"type": "text", "text": "remote", "run": "p1"},
        {"type": "text", "text": "orphan", "run": "p9"},
        {"type": "text", "text": "no identity"},
        {"type": "done", "run": "p1"},
    ]
    ex = Exchange(0, "GET", "http://backend/events?sessionId=s1", started_at=0, ended_at=1, status=200, transport="sse",
                  frames=frames_from_body(sse(*events), 0, at=0.1, spacing=0.1), end="complete",
                  capability="subscribe", session_id="s1")
    r = replay([ex], ADAPTER)
    frames = r.exchanges[0].frames
    assert [f.state for f in frames] == ["admitted", "admitted", "admitted", "unrouted", "admitted"]
    assert frames[2].facts[0].result.reason is R.RUN_NOT_FOUND
    snap = r.sessions["s1"].core.snapshot
    assert snap.run("p1").origin == "remote" and snap.run("p1").status == "completed"


def test_a_direct_stream_event_of_another_session_is_rejected_wrong_session():
    from chatkit_trace.adapters import EventIdentity

    class Foreign(MyProtocol):
        def identify_event(self, event):
            return EventIdentity("r1", session_id=event.get("ctx")) if isinstance(event, dict) and event.get("ctx") else None

    events = TEXT[:2] + [{"type": "text", "text": "elsewhere", "ctx": "s2"}] + TEXT[2:]
    r = replay([run_exchange(0, "r1", events)], create_adapter(Foreign()))
    frame = r.exchanges[0].frames[2]
    assert frame.state == "wrong-session"
    assert [f.result.reason for f in frame.facts] == [R.WRONG_SESSION]
    assert r.sessions["s1"].core.snapshot.message("assistant:r1").parts[0].text == "Hi there"


def test_history_of_a_running_run_primes_the_decoder_so_a_resume_continues_its_answer():
    """The seed's decodeHistory primes its answers map (R8.3): after a reload,
    history's partial answer plus the resumed events make the whole text."""
    frames = [{"id": f"e{i}", "event": e} for i, e in enumerate(TEXT[:3])]
    hist = {"runs": [{"id": "r1", "status": "running", "input": "hello", "created_at": 1, "frames": frames}]}
    h = Exchange(0, "GET", "http://backend/sessions/s1/runs", started_at=1, ended_at=1.1, status=200,
                 response_body=json.dumps(hist).encode(), capability="history", session_id="s1")
    resume = Exchange(1, "GET", "http://backend/sessions/s1/runs/r1/events?after=e2", started_at=2, ended_at=3, status=200,
                      transport="sse", frames=frames_from_body(b'id: e3\ndata: {"type": "text", "text": "!"}\n\nid: e4\ndata: {"type": "done"}\n\n', 1, at=2.1),
                      end="complete", capability="resume", session_id="s1", run_id="r1", cursor="e2")
    r = replay([h, resume], ADAPTER)
    assert not r.violations
    snap = r.sessions["s1"].core.snapshot
    assert snap.message("assistant:r1").parts[0].text == "Hi there!"
    assert snap.run("r1").status == "completed"


def _read(index, t, hist, *, run=None):
    return Exchange(index, "GET", "http://backend/sessions/s1/runs" + (f"/{run}" if run else ""), started_at=t,
                    ended_at=t + 0.1, status=200, response_body=json.dumps(hist).encode(), capability="history",
                    session_id="s1", run_id=run)


def test_a_refresh_that_does_not_name_a_settled_run_drops_it_but_the_trace_keeps_it():
    """decisions.md 272: the Core drops a settled run a whole read does not
    name, with its messages; the replay remembers it (runs, analysis)."""
    other = {"runs": [{"id": "r9", "status": "completed", "input": "hi", "created_at": 1,
                       "frames": [{"id": f"e{i}", "event": e} for i, e in enumerate(TEXT)]}]}
    r = replay([run_exchange(0, "r1", TEXT), _read(1, 10, other)], ADAPTER)
    s = r.sessions["s1"]
    assert [v.id for v in s.core.snapshot.runs] == ["r9"]
    assert [m.run_id for m in s.core.snapshot.messages] == ["r9", "r9"]
    assert s.runs["r1"].dropped is not None and s.runs["r1"].dropped[0] == 1
    assert [(v.id, v.status) for v in s.run_views()] == [("r9", "completed"), ("r1", "completed")]


def test_a_read_covering_one_run_replaces_only_that_run():
    """A run-scope read (A2A tasks/get) covers its run: the other runs and
    their messages stay (docs/history.md scopes, decisions.md 272)."""
    first = run_exchange(0, "r1", TEXT)
    second = run_exchange(1, "r2", [{"type": "started", "run": "r2"}, {"type": "text", "text": "B"}, {"type": "done"}], t=2)
    mine = {"runs": [{"id": "r2", "status": "completed", "input": "hello", "created_at": 2,
                      "frames": [{"id": "e0", "event": {"type": "started", "run": "r2"}}, {"id": "e1", "event": {"type": "text", "text": "B!"}}]}]}
    read = _read(2, 10, mine, run="r2")
    read.notes = {"identity": {"scope": "run"}}
    r = replay([first, second, read], ADAPTER)
    snap = r.sessions["s1"].core.snapshot
    assert [v.id for v in snap.runs] == ["r1", "r2"]
    assert snap.message("assistant:r1").parts[0].text == "Hi there"
    assert snap.message("assistant:r2").parts[0].text == "B!"
    assert r.sessions["s1"].runs["r1"].dropped is None
