"""Every FactRejectReason (SPEC R3.6) with its exact condition and boundary."""

from __future__ import annotations

import pytest

from chatkit_trace.core import (
    ChatCore,
    RuntimeMessage,
    TextPart,
    WorkItem,
)
from chatkit_trace.core import (
    FactRejectReason as R,
)
from chatkit_trace.core._values import ABSENT

from .helpers import running_core, settle, text_msg, tool_msg


def test_all_thirteen_reasons_have_chatkit_strings():
    assert {r.value for r in R} == {
        "duplicate-event",
        "no-change",
        "wrong-session",
        "missing-event-id",
        "run-not-found",
        "source-sequence-regressed",
        "terminal-sealed",
        "output-sealed",
        "active-work",
        "missing-work-item-id",
        "invalid-transition",
        "runtime-disposed",
        "invalid-message",
    }
    assert {r for r in R if r.idempotent} == {R.DUPLICATE_EVENT, R.NO_CHANGE}


# -- duplicate-event (R3.2, R3.6) ----------------------------------------------------------


def test_duplicate_event_same_id_rejected_new_id_accepted():
    core = running_core("r1")
    assert core.emit_message(run_id="r1", event_id="e1", message=text_msg("a")).accepted
    again = core.emit_delta(run_id="r1", event_id="e1", message_id="a", part_id="text:0", delta="x")
    assert again.reason is R.DUPLICATE_EVENT and again.idempotent
    assert core.emit_delta(run_id="r1", event_id="e2", message_id="a", part_id="text:0", delta="x").accepted
    assert core.snapshot.message("a").parts[0].text == "hix"


def test_event_ids_are_scoped_per_run():
    core = running_core("r1")
    core.emit_message(run_id="r1", event_id="e1", message=text_msg("a"))
    core.emit_completed(run_id="r1", event_id="e2")
    assert core.register_run(run_id="r2").accepted
    # The same event id in another run is not a duplicate (R3.2: unique within its run).
    assert core.emit_message(run_id="r2", event_id="e1", message=text_msg("b")).accepted


def test_rejected_fact_does_not_burn_its_event_id():
    core = running_core("r1")
    bad = core.emit_delta(run_id="r1", event_id="e1", message_id="nope", part_id="p", delta="x")
    assert bad.reason is R.INVALID_TRANSITION
    assert core.emit_message(run_id="r1", event_id="e1", message=text_msg("a")).accepted


# -- no-change -------------------------------------------------------------------------------


def test_no_change_identical_message_vs_changed_message():
    core = running_core("r1")
    core.emit_message(run_id="r1", event_id="e1", message=text_msg("a", "hi"))
    same = core.emit_message(run_id="r1", event_id="e2", message=text_msg("a", "hi"))
    assert same.reason is R.NO_CHANGE
    assert core.emit_message(run_id="r1", event_id="e3", message=text_msg("a", "hi!")).accepted


def test_no_change_same_phase_and_empty_delta():
    core = running_core("r1")
    assert core.emit_phase(run_id="r1", event_id="p1", phase="thinking").accepted
    assert core.emit_phase(run_id="r1", event_id="p2", phase="thinking").reason is R.NO_CHANGE
    assert core.emit_phase(run_id="r1", event_id="p3", phase="generating").accepted
    core.emit_message(run_id="r1", event_id="e1", message=text_msg("a"))
    assert core.emit_delta(run_id="r1", event_id="d1", message_id="a", part_id="text:0", delta="").reason is R.NO_CHANGE


def test_no_change_message_that_equals_after_run_id_normalisation():
    core = running_core("r1")
    core.emit_message(run_id="r1", event_id="e1", message=text_msg("a"))
    # R13.2: the Core normalises runId to the fact's run, so this is the same message.
    again = core.emit_message(run_id="r1", event_id="e2", message=text_msg("a", run_id="other"))
    assert again.reason is R.NO_CHANGE
    assert core.snapshot.message("a").run_id == "r1"


# -- wrong-session (R10.1) ---------------------------------------------------------------


def test_wrong_session_vs_own_session():
    core = running_core("r1")
    assert core.emit_message(session_id="s2", run_id="r1", event_id="e1", message=text_msg("a")).reason is R.WRONG_SESSION
    assert core.emit_message(session_id="s1", run_id="r1", event_id="e1", message=text_msg("a")).accepted


def test_wrong_session_precedes_every_later_check():
    core = running_core("r1")
    # No event id and an unknown run: wrong-session still wins (R3.6a order).
    assert core.emit_completed(session_id="elsewhere", run_id="zzz", event_id=None).reason is R.WRONG_SESSION


def test_session_router_rejects_facts_for_unopened_sessions():
    from chatkit_trace.core import DeltaFact, SessionRouter

    router = SessionRouter()
    router.open("s1")
    fact = DeltaFact(session_id="s9", run_id="r1", event_id="e", message_id="m", part_id="p", delta="x")
    assert router.admit(fact).reason is R.WRONG_SESSION
    assert router.admit(DeltaFact(session_id="s1", run_id="r1", event_id="e", message_id="m", part_id="p", delta="x")).reason is R.RUN_NOT_FOUND


# -- missing-event-id (R3.2) -------------------------------------------------------------


@pytest.mark.parametrize("event_id", [None, ""])
def test_missing_event_id(event_id):
    core = running_core("r1")
    assert core.emit_message(run_id="r1", event_id=event_id, message=text_msg("a")).reason is R.MISSING_EVENT_ID
    assert core.emit_completed(run_id="r1", event_id=event_id).reason is R.MISSING_EVENT_ID
    assert core.emit_message(run_id="r1", event_id="0", message=text_msg("a")).accepted  # "0" is an id


def test_missing_event_id_precedes_run_not_found():
    core = running_core("r1")
    assert core.emit_phase(run_id="unknown", event_id=None, phase="idle").reason is R.MISSING_EVENT_ID


# -- run-not-found -----------------------------------------------------------------------


def test_run_not_found_until_registered():
    core = ChatCore("s1")
    assert core.emit_message(run_id="r9", event_id="e1", message=text_msg("a")).reason is R.RUN_NOT_FOUND
    assert core.annotate_run(run_id="r9", attributes={"model": "m"}).reason is R.RUN_NOT_FOUND
    assert core.observe_connection(run_id="r9", state="disconnected").reason is R.RUN_NOT_FOUND
    assert core.register_run(run_id="r9").accepted
    assert core.emit_message(run_id="r9", event_id="e1", message=text_msg("a")).accepted
    assert core.snapshot.run("r9").origin == "remote"


# -- source-sequence-regressed (R3.2; equal is allowed, docs/decisions.md) ----------------


def test_source_sequence_lower_is_regressed_equal_and_higher_are_not():
    core = running_core("r1")
    core.emit_message(run_id="r1", event_id="e1", message=text_msg("a"), source_sequence=5)
    lower = core.emit_delta(run_id="r1", event_id="e2", message_id="a", part_id="text:0", delta="x", source_sequence=4)
    assert lower.reason is R.SOURCE_SEQUENCE_REGRESSED
    assert core.emit_delta(run_id="r1", event_id="e3", message_id="a", part_id="text:0", delta="x", source_sequence=5).accepted
    assert core.emit_delta(run_id="r1", event_id="e4", message_id="a", part_id="text:0", delta="y", source_sequence=6).accepted
    # A fact without a sequence does not reset the high-water mark.
    assert core.emit_delta(run_id="r1", event_id="e5", message_id="a", part_id="text:0", delta="z").accepted
    assert core.emit_delta(run_id="r1", event_id="e6", message_id="a", part_id="text:0", delta="w", source_sequence=5).reason is R.SOURCE_SEQUENCE_REGRESSED


def test_source_sequence_is_per_run():
    core = running_core("r1")
    core.register_run(run_id="r2")
    core.emit_message(run_id="r1", event_id="e1", message=text_msg("a"), source_sequence=10)
    assert core.emit_message(run_id="r2", event_id="e1", message=text_msg("b"), source_sequence=1).accepted


def test_duplicate_is_decided_before_sequence():
    core = running_core("r1")
    core.emit_message(run_id="r1", event_id="e1", message=text_msg("a"), source_sequence=5)
    assert core.emit_message(run_id="r1", event_id="e1", message=text_msg("a"), source_sequence=1).reason is R.DUPLICATE_EVENT


# -- terminal-sealed (R3.5) ------------------------------------------------------------


@pytest.mark.parametrize("terminal", ["completed", "failed", "interrupted"])
def test_every_fact_after_a_terminal_is_sealed(terminal):
    core = running_core("r1")
    core.emit_message(run_id="r1", event_id="e1", message=text_msg("a"))
    if terminal == "completed":
        assert core.emit_completed(run_id="r1", event_id="t").accepted
    elif terminal == "failed":
        assert core.emit_failed(run_id="r1", event_id="t", error={"code": "X", "message": "x"}).accepted
    else:
        assert core.emit_interrupted(run_id="r1", event_id="t").accepted
    sealed = [
        core.emit_delta(run_id="r1", event_id="n1", message_id="a", part_id="text:0", delta="x"),
        core.emit_message(run_id="r1", event_id="n2", message=text_msg("a", "z")),
        core.emit_phase(run_id="r1", event_id="n3", phase="thinking"),
        core.emit_work_item(run_id="r1", event_id="n4", work_item=WorkItem("w")),
        core.emit_completed(run_id="r1", event_id="n5"),
        core.emit_failed(run_id="r1", event_id="n6", error={"code": "X", "message": "x"}),
        core.emit_interrupted(run_id="r1", event_id="n7"),
        # A replayed terminal frame (same event id) is sealed, not a duplicate (R3.6a, decision 1).
        core.emit_completed(run_id="r1", event_id="t"),
    ]
    assert all(r.reason is R.TERMINAL_SEALED for r in sealed), sealed


def test_terminal_sealed_vs_the_last_fact_before_it():
    core = running_core("r1")
    assert core.emit_message(run_id="r1", event_id="e1", message=text_msg("a")).accepted
    assert core.emit_delta(run_id="r1", event_id="e2", message_id="a", part_id="text:0", delta="!").accepted
    assert core.emit_completed(run_id="r1", event_id="e3").accepted
    assert core.emit_delta(run_id="r1", event_id="e4", message_id="a", part_id="text:0", delta="?").reason is R.TERMINAL_SEALED
    assert core.snapshot.message("a").parts[0].text == "hi!"


# -- output-sealed (R9; sealed when the stop is acknowledged, docs/decisions.md) ---------


def test_output_before_the_stop_ack_is_admitted_after_it_is_sealed():
    core = running_core("r1")
    core.emit_message(run_id="r1", event_id="e1", message=text_msg("a"))
    assert core.abort("r1").ok
    assert [type(r).__name__ for r in core.take_requests()] == ["AbortRequest"]
    # Requested, not yet acknowledged: the reader keeps receiving (R9.1).
    assert core.emit_delta(run_id="r1", event_id="e2", message_id="a", part_id="text:0", delta="1").accepted
    assert core.snapshot.run("r1").abort.remote == "unknown"
    core.abort_settled("r1", True)
    assert core.snapshot.run("r1").abort.output_sealed
    assert core.emit_delta(run_id="r1", event_id="e3", message_id="a", part_id="text:0", delta="2").reason is R.OUTPUT_SEALED
    assert core.emit_message(run_id="r1", event_id="e4", message=text_msg("b")).reason is R.OUTPUT_SEALED
    assert core.emit_work_item(run_id="r1", event_id="e5", work_item=WorkItem("w")).reason is R.OUTPUT_SEALED
    # Phases and the terminal are not output: they still arrive (R9.1, R9.5).
    assert core.emit_phase(run_id="r1", event_id="e6", phase="idle").reason is R.NO_CHANGE
    assert core.emit_interrupted(run_id="r1", event_id="e7").accepted
    view = core.snapshot.run("r1")
    assert view.status == "interrupted" and view.abort.remote == "confirmed" and view.interrupt_reason == "abort"


def test_failed_abort_call_leaves_output_open_and_remote_unknown():
    core = running_core("r1")
    core.emit_message(run_id="r1", event_id="e1", message=text_msg("a"))
    core.abort("r1")
    core.abort_settled("r1", False)
    assert core.snapshot.run("r1").abort.remote == "unknown"
    assert core.emit_delta(run_id="r1", event_id="e2", message_id="a", part_id="text:0", delta="x").accepted


def test_completed_before_the_stop_ack_is_a_valid_race():
    core = running_core("r1")
    core.abort("r1")
    assert core.emit_completed(run_id="r1", event_id="t").accepted  # R9.5
    assert core.snapshot.run("r1").abort.remote == "confirmed"
    assert core.abort_settled("r1", True).ok
    assert core.snapshot.run("r1").status == "completed"


# -- active-work (R3.2a, R6.5; decision 2: reject) ----------------------------------------


def test_completed_while_a_tool_call_part_runs_vs_after_its_result():
    core = running_core("r1")
    core.emit_message(run_id="r1", event_id="e1", message=tool_msg("a"))
    assert core.emit_completed(run_id="r1", event_id="e2").reason is R.ACTIVE_WORK
    # An empty result (None) is a result: the tool completed (R6.4).
    core.emit_message(run_id="r1", event_id="e3", message=tool_msg("a", result=None))
    assert core.emit_completed(run_id="r1", event_id="e4").accepted


def test_explicit_status_wins_over_result_for_activity():
    core = running_core("r1")
    core.emit_message(run_id="r1", event_id="e1", message=tool_msg("a", result=ABSENT, status="failed"))
    assert core.emit_completed(run_id="r1", event_id="e2").accepted


def test_completed_while_a_work_item_runs_vs_after_it_settled():
    core = running_core("r1")
    core.emit_work_item(run_id="r1", event_id="w1", work_item=WorkItem("job", "running"))
    assert core.emit_completed(run_id="r1", event_id="c1").reason is R.ACTIVE_WORK
    core.emit_work_item(run_id="r1", event_id="w2", work_item=WorkItem("job", "completed"))
    assert core.emit_completed(run_id="r1", event_id="c2").accepted


def test_failed_and_interrupted_are_allowed_with_running_work_and_cancel_it():
    core = running_core("r1")
    core.emit_work_item(run_id="r1", event_id="w1", work_item=WorkItem("job", "running"))
    assert core.emit_failed(run_id="r1", event_id="f", error={"code": "E", "message": "boom"}).accepted
    assert core.snapshot.run("r1").work_items["job"].status == "cancelled"


# -- missing-work-item-id (R3.2a) ------------------------------------------------------


@pytest.mark.parametrize("item", [WorkItem(ABSENT), WorkItem(""), {"status": "running"}, {"id": 3}])
def test_missing_work_item_id(item):
    core = running_core("r1")
    assert core.emit_work_item(run_id="r1", event_id="w", work_item=item).reason is R.MISSING_WORK_ITEM_ID
    assert core.emit_work_item(run_id="r1", event_id="w", work_item={"id": "x", "status": "running"}).accepted


# -- invalid-transition (R3.6, R3.2a) -----------------------------------------------------


def test_delta_to_missing_message_missing_part_or_non_text_part():
    core = running_core("r1")
    core.emit_message(
        run_id="r1",
        event_id="e1",
        message=RuntimeMessage("a", "assistant", (TextPart("text:0", "hi"), tool_msg("x").parts[0])),
    )
    cases = {
        "missing message": ("zzz", "text:0"),
        "missing part": ("a", "text:1"),
        "tool part": ("a", "tool:c1"),
    }
    for name, (mid, pid) in cases.items():
        r = core.emit_delta(run_id="r1", event_id=name, message_id=mid, part_id=pid, delta="x")
        assert r.reason is R.INVALID_TRANSITION, name
        assert r.detail
    assert core.emit_delta(run_id="r1", event_id="ok", message_id="a", part_id="text:0", delta="x").accepted


def test_delta_to_reasoning_part_is_allowed():
    from chatkit_trace.core import ReasoningPart

    core = running_core("r1")
    core.emit_message(run_id="r1", event_id="e1", message=RuntimeMessage("a", "assistant", (ReasoningPart("r:0", "hm"),)))
    assert core.emit_delta(run_id="r1", event_id="e2", message_id="a", part_id="r:0", delta="m").accepted


def test_unknown_phase_and_work_item_going_back_are_invalid():
    core = running_core("r1")
    assert core.emit_phase(run_id="r1", event_id="p", phase="dancing").reason is R.INVALID_TRANSITION
    core.emit_work_item(run_id="r1", event_id="w1", work_item=WorkItem("job", "completed"))
    back = core.emit_work_item(run_id="r1", event_id="w2", work_item=WorkItem("job", "running"))
    assert back.reason is R.INVALID_TRANSITION
    # running -> running with new progress is fine.
    core.emit_work_item(run_id="r1", event_id="w3", work_item=WorkItem("j2", "running"))
    assert core.emit_work_item(run_id="r1", event_id="w4", work_item=WorkItem("j2", "running", title="50%")).accepted


def test_facts_for_a_queued_run_are_invalid_transitions():
    core = running_core("r1", "r2")  # r2 waits for r1's slot (R13.4)
    assert core.snapshot.run("r2").status == "queued"
    assert core.emit_message(run_id="r2", event_id="e1", message=text_msg("b")).reason is R.INVALID_TRANSITION
    assert core.emit_completed(run_id="r2", event_id="e2").reason is R.INVALID_TRANSITION
    core.emit_completed(run_id="r1", event_id="t")
    settle(core)
    assert core.snapshot.run("r2").status == "running"
    assert core.emit_message(run_id="r2", event_id="e1", message=text_msg("b")).accepted


def test_message_owned_by_another_run_cannot_be_taken_over():
    core = running_core("r1")
    core.emit_message(run_id="r1", event_id="e1", message=text_msg("shared"))
    core.emit_completed(run_id="r1", event_id="t")
    core.register_run(run_id="r2")
    r = core.emit_message(run_id="r2", event_id="e1", message=text_msg("shared", "new"))
    # Seed 000 §4.1: message ids are unique in the session; the whole message
    # is rejected and reported as an invalid message (decisions.md 97).
    assert r.reason is R.INVALID_MESSAGE and r.detail == "message-id-unique"
    (err,) = core.invalid_messages
    assert err.rule == "message-id-unique" and err.message_id == "shared" and err.source == "live"
    assert core.snapshot.message("shared").parts[0].text == "hi" and core.snapshot.message("shared").run_id == "r1"
    # A delta into another run's message is still a transition the run cannot make.
    d = core.emit_delta(run_id="r2", event_id="e2", message_id="shared", part_id="text:0", delta="x")
    assert d.reason is R.INVALID_TRANSITION and "belongs to run" in d.detail


# -- runtime-disposed ---------------------------------------------------------------------


def test_any_fact_after_dispose_vs_before():
    core = running_core("r1")
    assert core.emit_message(run_id="r1", event_id="e1", message=text_msg("a")).accepted
    core.dispose()
    results = [
        core.emit_message(run_id="r1", event_id="e2", message=text_msg("a")),
        core.emit_delta(run_id="r1", event_id="e3", message_id="a", part_id="text:0", delta="x"),
        core.emit_completed(run_id="r1", event_id="e4"),
        core.emit_message(session_id="other", run_id="nope", event_id=None, message=text_msg("a")),
        core.register_run(run_id="r5"),
        core.observe_connection(run_id="r1", state="disconnected"),
        core.annotate_run(run_id="r1", attributes={}),
    ]
    assert all(r.reason is R.RUNTIME_DISPOSED for r in results)
    assert not core.send("r9", {}).ok


# -- invalid-message (R3.7) -----------------------------------------------------------------


def test_invalid_live_message_is_dropped_alone_and_reported_without_content():
    seen = []
    core = ChatCore("s1", on_invalid_message=seen.append)
    core.send("r1", {})
    settle(core)
    bad = {"id": "m1", "role": "assistant", "parts": [{"id": "d", "type": "data", "kind": "NotNamespaced", "data": 1}]}
    r = core.emit_message(run_id="r1", event_id="e1", message=bad)
    assert r.reason is R.INVALID_MESSAGE and r.detail == "data-kind"
    assert core.snapshot.message("m1") is None
    assert seen and seen[0].rule == "data-kind" and seen[0].message_id == "m1" and seen[0].source == "live"
    assert set(seen[0].to_json()) <= {"rule", "messageId", "partId", "source", "detail"}
    good = dict(bad, parts=[{"id": "d", "type": "data", "kind": "acme.card", "data": 1}])
    assert core.emit_message(run_id="r1", event_id="e1", message=good).accepted


def test_invalid_message_is_checked_after_output_sealed():
    core = running_core("r1")
    core.abort("r1")
    core.abort_settled("r1", True)
    assert core.emit_message(run_id="r1", event_id="e1", message={"id": ""}).reason is R.OUTPUT_SEALED
