"""UI commands and the run state machine (SPEC R4.5, R8, R9, R10.2, R13.4)."""

from __future__ import annotations

from pathlib import Path

from chatkit_trace.core import (
    AbortRequest,
    ChatCore,
    DispatchRequest,
    ResumeRequest,
    _state,
)
from chatkit_trace.core import (
    FactRejectReason as R,
)

from .helpers import running_core, settle, text_msg

ROOT = Path(__file__).resolve().parents[2]


def user(run, text="hi"):
    return {"id": f"user:{run}", "role": "user", "parts": [{"id": "text", "type": "text", "text": text}]}


def test_send_projects_at_dispatch_and_queues_behind_the_running_run():
    core = ChatCore("s1", clock=lambda: 7.0)
    core.send("r1", {"text": "a"}, project=[user("r1")])
    (req,) = core.take_requests()
    assert req == DispatchRequest("r1", "run", {"text": "a"}, (), None)
    assert [m.id for m in core.snapshot.messages] == ["user:r1"]  # R4.5: visible before any answer
    core.dispatch_settled("r1", True)
    core.send("r2", {"text": "b"}, project=[user("r2")])
    assert core.take_requests() == []  # R13.4: one run at a time
    assert core.snapshot.run("r2").status == "queued"
    assert [m.id for m in core.snapshot.messages] == ["user:r1"]  # queued input not projected yet
    core.emit_completed(run_id="r1", event_id="t")
    (req2,) = core.take_requests()
    assert req2.run_id == "r2" and [m.id for m in req2.messages] == ["user:r1"]
    assert core.snapshot.run("r2").status == "running"


def test_refused_dispatch_removes_the_run_and_its_projection_then_dispatches_the_next():
    core = ChatCore("s1")
    core.send("r1", {}, project=[user("r1")])
    core.send("r2", {}, project=[user("r2")])
    core.dispatch_settled("r1", False, "HTTP 500")
    assert core.snapshot.run("r1") is None
    assert [m.id for m in core.snapshot.messages] == ["user:r2"]
    assert [r.run_id for r in core.take_requests()] == ["r1", "r2"]


def test_send_refuses_duplicate_run_ids_and_after_dispose():
    core = running_core("r1")
    assert not core.send("r1", {}).ok
    core.dispose()
    assert not core.send("r2", {}).ok
    assert core.snapshot.disposed


def test_abort_queued_cancels_locally_running_needs_capability():
    core = running_core("r1", "r2", capabilities=())
    assert core.abort("r2").ok  # queued: cancel works without abort capability (R9.2)
    assert core.snapshot.run("r2").status == "interrupted"
    assert core.snapshot.run("r2").interrupt_reason == "cancelled"
    refused = core.abort("r1")
    assert not refused.ok and "R9.2" in refused.error
    assert core.take_requests() == []


def test_abort_running_requests_once_and_keeps_receiving():
    core = running_core("r1")
    assert core.abort("r1").ok
    assert core.abort("r1").ok
    assert core.take_requests() == [AbortRequest("r1")]
    assert core.snapshot.run("r1").status == "running"  # R9.1: only a terminal ends it


def test_observe_connection_never_changes_the_status():
    core = running_core("r1")
    assert core.observe_connection(run_id="r1", state="disconnected").accepted
    view = core.snapshot.run("r1")
    assert view.status == "running" and view.connection == "disconnected"
    assert core.observe_connection(run_id="r1", state="disconnected").reason is R.NO_CHANGE
    assert core.observe_connection(run_id="r1", state="gone").reason is R.INVALID_TRANSITION
    core.emit_completed(run_id="r1", event_id="t")
    assert core.observe_connection(run_id="r1", state="connected").accepted  # still observable


def test_calibrate_run_settles_from_history_once():
    core = running_core("r1")
    core.abort("r1")
    core.abort_settled("r1", True)
    assert core.calibrate_run(run_id="r1", status="running").reason is R.INVALID_TRANSITION
    assert core.calibrate_run(run_id="r1", status="interrupted").accepted
    view = core.snapshot.run("r1")
    assert view.status == "interrupted" and view.abort.remote == "confirmed"
    assert core.calibrate_run(run_id="r1", status="interrupted").reason is R.NO_CHANGE
    assert core.calibrate_run(run_id="r1", status="completed").reason is R.INVALID_TRANSITION
    assert core.calibrate_run(run_id="nope", status="completed").reason is R.RUN_NOT_FOUND


def test_register_run_passive_idempotent_and_sealed():
    core = ChatCore("s1")
    assert core.register_run(run_id="p1").accepted
    assert core.register_run(run_id="p1").reason is R.NO_CHANGE
    core.emit_completed(run_id="p1", event_id="t")
    assert core.register_run(run_id="p1").reason is R.TERMINAL_SEALED
    assert core.snapshot.run("p1").origin == "remote"


def test_regenerate_replaces_target_and_everything_after():
    core = running_core("r1")
    core.emit_message(run_id="r1", event_id="a", message=text_msg("assistant:r1"))
    core.emit_completed(run_id="r1", event_id="t")
    core.send("r2", {"text": "second"}, project=[user("r2")])
    settle(core)
    core.emit_message(run_id="r2", event_id="a", message=text_msg("assistant:r2"))
    core.emit_completed(run_id="r2", event_id="t")
    assert core.regenerate("r3", target="r1").ok
    (req,) = core.take_requests()
    assert req.via == "regenerate" and req.target_run_id == "r1" and req.input == {"text": "input of r1"}
    assert req.messages == ()
    assert [r.id for r in core.snapshot.runs] == ["r3"]
    assert [m.id for m in core.snapshot.messages] == []


def test_regenerate_refusals():
    core = running_core("r1")
    assert "active" in core.regenerate("r2").error  # a run is active
    core.emit_completed(run_id="r1", event_id="t")
    assert "unknown target" in core.regenerate("r2", target="zzz").error
    assert "already used" in core.regenerate("r1").error
    bare = ChatCore("s1")
    assert "capability" in bare.regenerate("r2").error
    hist = ChatCore("s1", capabilities={"regenerate", "history"})
    hist.apply_history({"messages": [], "hasMore": False, "runSnapshots": [{"id": "h1", "status": "completed"}]})
    assert "input" in hist.regenerate("r2", target="h1").error  # R10.2: input of a history run is unknown


def test_refused_regenerate_puts_removed_content_back():
    core = running_core("r1")
    core.emit_message(run_id="r1", event_id="a", message=text_msg("assistant:r1"))
    core.emit_completed(run_id="r1", event_id="t")
    before = [m.id for m in core.snapshot.messages]
    assert core.regenerate("r2").ok
    core.dispatch_settled("r2", False)
    assert [m.id for m in core.snapshot.messages] == before
    assert [r.id for r in core.snapshot.runs] == ["r1"]
    assert core.snapshot.run("r1").status == "completed"


def test_edit_uses_the_new_input():
    core = running_core("r1")
    core.emit_completed(run_id="r1", event_id="t")
    assert core.edit("r2", target="r1", input={"text": "edited"}, project=[user("r2", "edited")]).ok
    (req,) = core.take_requests()
    assert req.via == "edit" and req.input == {"text": "edited"}
    assert core.snapshot.message("user:r2").parts[0].text == "edited"


def test_history_replaces_the_baseline_keeps_active_runs_and_calibrates():
    core = running_core("r1", capabilities={"history", "abort"})
    core.emit_message(run_id="r1", event_id="a", message=text_msg("assistant:r1", "live"))
    core.emit_completed(run_id="r1", event_id="t")
    assert core.snapshot.history.reconciliation_required  # R8.4
    core.send("r2", {}, project=[user("r2")])
    settle(core)
    core.emit_message(run_id="r2", event_id="a", message=text_msg("assistant:r2", "streaming"))
    history = {
        "messages": [
            {"id": "user:r1", "role": "user", "runId": "r1", "parts": [{"id": "text", "type": "text", "text": "x"}]},
            {"id": "assistant:r1", "role": "assistant", "runId": "r1", "parts": [{"id": "text:0", "type": "text", "text": "from history"}]},
        ],
        "runSnapshots": [
            {"id": "r0", "status": "failed", "error": {"code": "E", "message": "m"}},
            {"id": "r1", "status": "completed"},
        ],
        "session": {"id": "s1", "status": "running"},
        "hasMore": True,
        "cursor": "older",
    }
    assert core.apply_history(history).ok
    snap = core.snapshot
    assert [m.id for m in snap.messages] == ["user:r1", "assistant:r1", "user:r2", "assistant:r2"]
    assert snap.message("assistant:r1").parts[0].text == "from history"
    assert snap.run("r0").status == "failed" and snap.run("r0").error.code == "E" and snap.run("r0").origin == "remote"
    assert snap.run("r2").status == "running"
    assert snap.session.status == "running" and snap.history.has_more and snap.history.cursor == "older"
    assert not snap.history.reconciliation_required
    # Deltas keep flowing into the active run after the refresh.
    assert core.emit_delta(run_id="r2", event_id="d", message_id="assistant:r2", part_id="text:0", delta="!").accepted


def test_history_settles_a_running_run_it_reports_finished():
    core = running_core("r1")
    core.abort("r1")
    core.abort_settled("r1", True)
    core.apply_history({"messages": [], "hasMore": False, "runSnapshots": [{"id": "r1", "status": "interrupted"}]})
    view = core.snapshot.run("r1")
    assert view.status == "interrupted" and view.abort.remote == "confirmed"


def test_load_more_prepends_and_rejects_repeated_ids():
    core = ChatCore("s1", capabilities={"history"})
    core.apply_history({"messages": [user("r2")], "hasMore": True, "cursor": "c1"})
    assert core.load_more({"messages": [user("r1")], "hasMore": False}).ok
    assert [m.id for m in core.snapshot.messages] == ["user:r1", "user:r2"]
    bad = core.load_more({"messages": [user("r0"), user("r2")], "hasMore": False})
    assert bad.reason == "invalid-message" and bad.rule == "message-id-unique"
    assert [m.id for m in core.snapshot.messages] == ["user:r1", "user:r2"]


def test_resume_active_run_conditions():
    base = {"messages": [text_msg("assistant:r7").to_json() | {"runId": "r7"}], "hasMore": False}
    no_resume = ChatCore("s1", capabilities={"history"})
    no_resume.apply_history(base | {"activeRun": {"runId": "r7", "eventId": "e9"}})
    assert no_resume.resume_active_run().ok and no_resume.take_requests() == []
    no_event = ChatCore("s1", capabilities={"history", "resume"})
    no_event.apply_history(base | {"activeRun": {"runId": "r7"}})
    no_event.resume_active_run()
    assert no_event.take_requests() == [] and no_event.snapshot.run("r7") is None  # decision 9
    core = ChatCore("s1", capabilities={"history", "resume"})
    core.apply_history(base | {"activeRun": {"runId": "r7", "eventId": "e9"}})
    assert core.resume_active_run().ok
    assert core.take_requests() == [ResumeRequest("r7", "e9")]
    view = core.snapshot.run("r7")
    assert view.status == "running" and view.origin == "remote" and view.resumed_from == "e9"
    # R8.3: resumed content continues the history message with the same ids.
    assert core.emit_delta(run_id="r7", event_id="e10", message_id="assistant:r7", part_id="text:0", delta="+").accepted
    assert core.snapshot.message("assistant:r7").parts[0].text == "hi+"
    assert "already known" in core.resume_active_run().error


def test_old_snapshots_never_change():
    core = running_core("r1")
    core.emit_message(run_id="r1", event_id="e0", message=text_msg("a", ""))
    snaps = []
    for i in range(100):
        core.emit_delta(run_id="r1", event_id=f"d{i}", message_id="a", part_id="text:0", delta=str(i % 10))
        snaps.append(core.snapshot)
    texts = [s.message("a").parts[0].text for s in snaps]
    assert texts == ["".join(str(j % 10) for j in range(i + 1)) for i in range(100)]
    assert [s.version for s in snaps] == sorted({s.version for s in snaps})


def test_listeners_and_events_carry_annotations():
    events = []
    core = ChatCore("s1", on_event=events.append)
    published = []
    unsubscribe = core.subscribe(published.append)
    core.send("r1", {})
    settle(core)
    core.annotate_run(run_id="r1", attributes={"model": "m1", "agent": "main"})
    core.annotate_run(run_id="r1", attributes={"model": "m2"})
    core.emit_completed(run_id="r1", event_id="t")
    settled = [e for e in events if e.type == "run_settled"]
    assert settled and settled[0].attributes == {"model": "m2", "agent": "main"}
    assert published and published[-1].run("r1").status == "completed"
    unsubscribe()
    n = len(published)
    core.register_run(run_id="r2")
    assert len(published) == n


def test_annotations_must_be_flat():
    import pytest

    core = running_core("r1")
    with pytest.raises(TypeError):
        core.annotate_run(run_id="r1", attributes={"nested": {"a": 1}})


def test_state_machine_doc_is_generated_from_the_table():
    doc = (ROOT / "docs" / "core-state-machine.md").read_text()
    assert _state.mermaid() in doc


# -- issue 12: conversation order, history settling, paging ---------------------------


def _hist_turn(run, text):
    return [
        {"id": f"user:{run}", "role": "user", "runId": run, "parts": [{"id": "text", "type": "text", "text": text}]},
        {"id": f"assistant:{run}", "role": "assistant", "runId": run, "parts": [{"id": "text:0", "type": "text", "text": f"re {text}"}]},
    ]


def _refreshed_core():
    """Local run r1 settled, then a refresh naming two older history runs before it."""
    core = running_core("r1", capabilities={"history", "regenerate", "edit"})
    core.emit_message(run_id="r1", event_id="a", message=text_msg("assistant:r1"))
    core.emit_completed(run_id="r1", event_id="t")
    messages = _hist_turn("h1", "one") + _hist_turn("h2", "two") + [
        {"id": "user:r1", "role": "user", "runId": "r1", "parts": [{"id": "text", "type": "text", "text": "input of r1"}]},
        text_msg("assistant:r1").to_json() | {"runId": "r1"},
    ]
    snaps = [{"id": rid, "status": "completed"} for rid in ("h1", "h2", "r1")]
    assert core.apply_history({"messages": messages, "runSnapshots": snaps, "hasMore": False}).ok
    return core


def test_regenerate_after_a_refresh_gets_the_messages_before_its_target():
    """Seed 000 §10.3: "messages 是目标轮之前的会话消息"; the default target is the
    last turn of the conversation, not the last run the Core happened to create."""
    core = _refreshed_core()
    assert [r.id for r in core.snapshot.runs] == ["h1", "h2", "r1"]
    assert core.regenerate("r2").ok
    (req,) = core.take_requests()
    assert isinstance(req, DispatchRequest) and req.target_run_id == "r1" and req.input == {"text": "input of r1"}
    assert [m.id for m in req.messages] == ["user:h1", "assistant:h1", "user:h2", "assistant:h2"]
    assert [r.id for r in core.snapshot.runs] == ["h1", "h2", "r2"]


def test_edit_of_an_older_run_removes_the_later_runs_with_their_messages():
    core = _refreshed_core()
    assert core.edit("r2", target="h2", input={"text": "two, edited"}).ok
    (req,) = core.take_requests()
    assert [m.id for m in req.messages] == ["user:h1", "assistant:h1"]
    assert [r.id for r in core.snapshot.runs] == ["h1", "r2"]
    assert [m.id for m in core.snapshot.messages] == ["user:h1", "assistant:h1"]
    # A refused edit puts everything back where it was.
    core.dispatch_settled("r2", False)
    assert [r.id for r in core.snapshot.runs] == ["h1", "h2", "r1"]
    assert [m.id for m in core.snapshot.messages] == [
        "user:h1", "assistant:h1", "user:h2", "assistant:h2", "user:r1", "assistant:r1",
    ]


def test_history_settling_a_running_run_shows_its_content_and_emits_run_settled():
    events = []
    core = ChatCore("s1", capabilities={"history"}, on_event=events.append, clock=lambda: 5.0)
    core.send("r1", {"text": "hi"}, project=[user("r1")])
    settle(core)
    core.emit_message(run_id="r1", event_id="a", message=text_msg("assistant:r1", "Hel"))
    history = {
        "messages": [user("r1") | {"runId": "r1"}, text_msg("assistant:r1", "Hello, all of it").to_json() | {"runId": "r1"}],
        "runSnapshots": [{"id": "r1", "status": "completed"}],
        "hasMore": False,
    }
    assert core.apply_history(history).ok
    snap = core.snapshot
    assert snap.run("r1").status == "completed" and snap.message("assistant:r1").parts[0].text == "Hello, all of it"
    assert [e.type for e in events] == ["run_settled"] and events[0].payload["status"] == "completed"
    assert not snap.history.reconciliation_required


def test_load_more_creates_and_orders_the_runs_of_an_older_page():
    events = []
    core = ChatCore("s1", capabilities={"history"}, on_event=events.append)
    core.apply_history({"messages": _hist_turn("h3", "three"), "runSnapshots": [{"id": "h3", "status": "completed"}], "hasMore": True, "cursor": "c"})
    page = {
        "messages": _hist_turn("h1", "one") + _hist_turn("h2", "two"),
        "runSnapshots": [{"id": "h1", "status": "completed"}, {"id": "h2", "status": "failed", "error": {"code": "E", "message": "m"}}],
        "hasMore": False,
    }
    assert core.load_more(page).ok
    snap = core.snapshot
    assert [r.id for r in snap.runs] == ["h1", "h2", "h3"]
    assert snap.run("h2").error.code == "E"
    assert core.emit_completed(run_id="h2", event_id="late").reason is R.TERMINAL_SEALED
    assert events == []  # nothing was running: nothing settled here


def test_run_order_across_pages():
    """A whole conversation comes first, then what it does not name; a page
    places its runs among the known ones (decisions.md 98)."""
    snaps = lambda *ids: [{"id": rid, "status": "completed"} for rid in ids]  # noqa: E731
    core = ChatCore("s1", capabilities={"history"})
    core.apply_history({"messages": _hist_turn("h1", "one"), "runSnapshots": snaps("h1"), "hasMore": False})
    # Another client ran h2..h5; the newest page names none of the runs known
    # here: h1 is paged out, its record with its messages (decisions.md 272).
    core.apply_history({"messages": _hist_turn("h4", "4") + _hist_turn("h5", "5"), "runSnapshots": snaps("h4", "h5"), "hasMore": True, "cursor": "c"})
    assert [r.id for r in core.snapshot.runs] == ["h4", "h5"]
    # The older page goes before the first run shown.
    core.load_more({"messages": _hist_turn("h2", "2") + _hist_turn("h3", "3"), "runSnapshots": snaps("h2", "h3"), "hasMore": True, "cursor": "d"})
    assert [r.id for r in core.snapshot.runs] == ["h2", "h3", "h4", "h5"]
    core.load_more({"messages": _hist_turn("h1", "one"), "runSnapshots": snaps("h1"), "hasMore": False})
    assert [r.id for r in core.snapshot.runs] == ["h1", "h2", "h3", "h4", "h5"]
    assert [m.run_id for m in core.snapshot.messages][::2] == ["h1", "h2", "h3", "h4", "h5"]
    # A local run still running stays after a whole conversation that does not
    # name it; the settled runs it does not name (r6: never stored) are gone.
    core.send("r6", {"text": "six"}, project=[user("r6")])
    settle(core)
    core.emit_completed(run_id="r6", event_id="t")
    core.send("r7", {"text": "seven"}, project=[user("r7")])
    settle(core)
    core.apply_history({"messages": _hist_turn("h0", "zero") + _hist_turn("h5", "5"), "runSnapshots": snaps("h0", "h5"), "hasMore": False})
    assert [r.id for r in core.snapshot.runs] == ["h0", "h5", "r7"]
    assert [m.run_id for m in core.snapshot.messages] == ["h0", "h0", "h5", "h5", "r7"]


def test_a_run_registered_as_resumed_continues_history_answer_a_passive_one_does_not():
    """decisions.md 270: the replay's resume (register_run(resume=True)) is
    what resumeActiveRun starts; only it continues a history message of no run."""
    answer = {"id": "a0", "role": "assistant", "parts": [{"id": "t", "type": "text", "text": "Work"}]}
    core = ChatCore("s1", capabilities={"history", "resume"})
    core.apply_history({"messages": [answer], "activeRun": {"runId": "h1", "eventId": "ev-1"}, "hasMore": False})
    assert core.register_run(run_id="p1").accepted
    assert core.emit_delta(run_id="p1", event_id="e1", message_id="a0", part_id="t", delta="!").reason is R.INVALID_TRANSITION
    assert core.register_run(run_id="h1", resume=True).accepted
    view = core.run_view("h1")
    assert view.via == "resume" and view.resumed_from == "ev-1"
    assert core.emit_delta(run_id="h1", event_id="e2", message_id="a0", part_id="t", delta="ing").accepted
    assert core.snapshot.message("a0").parts[0].text == "Working"
