"""A2A history (tasks/get, GetTask, ListTasks) against the live decode of the same run (R8.4)."""

from __future__ import annotations

import pytest

from chatkit_trace.adapters.a2a import A2AProtocol
from chatkit_trace.core import ActiveRun, HistoryFormatError, RunError

from .test_a2a_helpers import context_of, events, load, load_json, replay, request, visible

VERSIONS = ["v10", "v03"]
FAILED = {"v10": "TASK_STATE_FAILED", "v03": "failed"}


def live_and_history(name: str, history: str, body_key: str | None = None):
    values = events(load(f"{name}.stream.sse"))
    sid = context_of(values)
    body = A2AProtocol().decode_input(request(body_key)) if body_key else None
    rep = replay(values, sid, input=body)
    result = A2AProtocol().decode_history(load_json(history), sid)
    return rep, result


def assert_isomorphic(live, hist) -> None:
    """Same message ids in the same order, same part ids, types and content (R8.4)."""
    assert [m.id for m in hist] == [m.id for m in live]
    for a, b in zip(live, hist, strict=False):
        assert (a.role, visible(a), a.metadata) == (b.role, visible(b), b.metadata), a.id


@pytest.mark.parametrize("v", VERSIONS)
@pytest.mark.parametrize("scenario", ["text", "tool", "fail", "crash", "slow_cancel"])
def test_history_equals_live(v: str, scenario: str) -> None:
    rep, hist = live_and_history(
        f"{v}-{scenario}", f"{v}-{scenario}.history.json", f"{v}-{scenario}.stream"
    )
    assert_isomorphic(rep.messages(), hist.messages)
    (snap,) = hist.run_snapshots
    task = hist.messages[0].run_id
    assert snap.id == task and all(
        m.run_id == task for m in hist.messages
    )  # history's run id is the taskId
    assert hist.active_run is None and not hist.has_more


@pytest.mark.parametrize("v", VERSIONS)
def test_adk_bridge_history_equals_live(v: str) -> None:
    rep, hist = live_and_history(f"adk-bridge-{v}-tool", f"adk-bridge-{v}-tool.history.json")
    assert_isomorphic(rep.messages(), hist.messages)


@pytest.mark.parametrize("v", VERSIONS)
def test_run_snapshots_from_task_status(v: str) -> None:
    def snap(name: str):
        values = events(load(f"{v}-{name}.stream.sse"))
        return A2AProtocol().decode_history(
            load_json(f"{v}-{name}.history.json"), context_of(values)
        )

    assert snap("text").run_snapshots[0].status == "completed"
    fail = snap("fail")
    assert fail.run_snapshots[0].error == RunError(
        FAILED[v], "scripted failure: upstream unavailable"
    )
    assert fail.session.status == "error"
    cancel = snap("slow_cancel").run_snapshots[0]
    assert (cancel.status, cancel.interrupt_reason) == ("interrupted", "canceled")


@pytest.mark.parametrize("v", VERSIONS)
def test_crash_history_differs_from_live_in_the_error_only(v: str) -> None:
    # Live: the JSON-RPC error frame (-32603, the exception text).  History: the
    # stored task is just `failed`, with no message and no code of its own.
    rep, hist = live_and_history(f"{v}-crash", f"{v}-crash.history.json", f"{v}-crash.stream")
    live_error = rep.core.snapshot.run(rep.run_id).error
    assert (live_error.code, live_error.message) == ("-32603", "scripted executor crash")
    assert hist.run_snapshots[0].error == RunError(FAILED[v], "the task failed")


@pytest.mark.parametrize("v", VERSIONS)
def test_input_required_task_spans_two_live_runs_but_one_history_run(v: str) -> None:
    values = events(load(f"{v}-input.stream.sse"))
    sid = context_of(values)
    proto = A2AProtocol()
    rep = replay(values, sid, input=proto.decode_input(request(f"{v}-input.stream")))
    turn1 = proto.decode_history(load_json(f"{v}-input.history_turn1.json"), sid)
    assert_isomorphic(rep.messages(), turn1.messages)
    assert (turn1.run_snapshots[0].status, turn1.run_snapshots[0].interrupt_reason) == (
        "interrupted",
        "input-required",
    )
    rep2 = replay(
        events(load(f"{v}-input.stream_turn2.sse")),
        sid,
        run_id="run-2",
        core=rep.core,
        input=proto.decode_input(request(f"{v}-input.stream_turn2")),
    )
    final = proto.decode_history(load_json(f"{v}-input.history.json"), sid)
    assert_isomorphic(rep2.messages(), final.messages)
    # live: two runs (interrupted, completed); history: one task, one run snapshot
    assert [r.status for r in rep2.core.snapshot.runs] == ["interrupted", "completed"]
    assert [s.status for s in final.run_snapshots] == ["completed"]


def test_list_tasks_is_reversed_into_conversation_order() -> None:
    value = load_json("v10-context.list.json")
    sid = value["result"]["tasks"][0]["contextId"]
    hist = A2AProtocol().decode_history(value, sid)
    users = [m.text for m in hist.messages if m.role == "user"]
    assert users == ["hello", "hello again"]  # ListTasks answers newest first
    assert len(hist.run_snapshots) == 2 and not hist.has_more
    # the same two tasks as a list of GetTask-like values decode alike
    again = A2AProtocol().decode_history(list(reversed(value["result"]["tasks"])), sid)
    assert again.messages == hist.messages


def test_active_task_other_contexts_and_errors() -> None:
    value = load_json("v10-slow_cancel.history.json")
    task = dict(value["result"], status={"state": "TASK_STATE_WORKING"})
    sid = task["contextId"]
    hist = A2AProtocol().decode_history({"result": task}, sid)
    assert hist.active_run == ActiveRun(task["id"]) and hist.run_snapshots == ()
    assert hist.session.status == "running"
    assert A2AProtocol().decode_history(value, "another-session").messages == ()
    with pytest.raises(HistoryFormatError, match="-32001"):
        A2AProtocol().decode_history(
            {"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "Task not found"}}, sid
        )
    with pytest.raises(HistoryFormatError):
        A2AProtocol().decode_history("nope", sid)


def test_decode_status_reads_cancel_and_get_answers() -> None:
    proto = A2AProtocol()
    for v in VERSIONS:
        snap = proto.decode_status(load_json(f"{v}-slow_cancel.cancel.json"), "s", "run-7")
        assert (snap.id, snap.status, snap.interrupt_reason) == ("run-7", "interrupted", "canceled")
        assert (
            proto.decode_status(load_json(f"{v}-crash.history.json"), "s", "r").status == "failed"
        )
    working = {"result": {"id": "t", "status": {"state": "working"}}}
    assert proto.decode_status(working, "s", "r") is None
    assert (
        proto.decode_status(
            {"error": {"code": -32002, "message": "Task cannot be canceled"}}, "s", "r"
        )
        is None
    )
