"""A2A adapter: captured real-server streams (a2a-sdk 1.3, v1.0 and v0.3), fed whole
and split at random byte boundaries, decoded through wire + adapter + ChatCore."""

from __future__ import annotations

from typing import Any

import pytest

from chatkit_trace.adapters import (
    CompletedUpdate,
    DeltaUpdate,
    FailedUpdate,
    InterruptedUpdate,
    MessageUpdate,
)
from chatkit_trace.adapters.a2a import A2AProtocol, unwrap
from chatkit_trace.core import RunError, ToolCallPart

from .test_a2a_helpers import context_of, events, load, random_cuts, replay, request

VERSIONS = ["v10", "v03"]
CUTS = [None, 1, 2]  # whole, then two random splits


def run(v: str, scenario: str, seed: int | None, step: str = "stream"):
    raw = load(f"{v}-{scenario}.{step}.sse")
    values = events(raw, None if seed is None else random_cuts(raw, seed))
    body = request(f"{v}-{scenario}.{step}")
    return values, replay(values, context_of(values), input=A2AProtocol().decode_input(body))


def ids(values: list[Any]) -> tuple[str, list[str]]:
    """(taskId, status message ids in frame order) of a stream."""
    task, msgs = None, []
    for v in values:
        kind, obj = unwrap(v)
        if kind in ("task", "status"):
            task = task or obj.get("id") or obj.get("taskId")
            msg = (obj.get("status") or {}).get("message")
            if msg:
                msgs.append(msg["messageId"])
    return task, msgs


def shape(messages) -> list[tuple[str, str, list[tuple[str, str, Any]]]]:
    out = []
    for m in messages:
        parts = [
            (
                p.id,
                p.type,
                getattr(p, "text", None)
                if p.type in ("text", "reasoning")
                else p.to_json().get("data"),
            )
            for p in m.parts
        ]
        out.append((m.id, m.role, parts))
    return out


def kinds(rep) -> list[str]:
    return [type(u).__name__.removesuffix("Update").lower() for ups in rep.updates for u in ups]


@pytest.mark.parametrize("seed", CUTS)
@pytest.mark.parametrize("v", VERSIONS)
def test_text(v: str, seed: int | None) -> None:
    values, rep = run(v, "text", seed)
    task, (working,) = ids(values)
    user = request(f"{v}-text.stream")["params"]["message"]["messageId"]
    assert shape(rep.messages()) == [
        (user, "user", [("text:0", "text", "hello")]),
        (working, "assistant", [("text:0", "text", "Working on it...")]),
        (f"artifact:{task}:answer", "assistant", [("text:0", "text", "Hello from the A2A peer.")]),
    ]
    # the Task frame's echo of the projected user message changes nothing (no-change)
    assert kinds(rep) == ["message", "message", "phase", "message", "delta", "delta", "completed"]
    assert [str(r.reason) for _, r in rep.log if not r.accepted] == ["no-change"]
    assert rep.violations == [] and rep.status == "completed" and rep.after == []


@pytest.mark.parametrize("seed", CUTS)
@pytest.mark.parametrize("v", VERSIONS)
def test_tool_of_the_a2a_peer_is_untyped_data(v: str, seed: int | None) -> None:
    values, rep = run(v, "tool", seed)
    task, (working, call, done) = ids(values)
    assert shape(rep.messages())[1:] == [
        (working, "assistant", [("text:0", "text", "Working on it...")]),
        (
            call,
            "assistant",
            [("data:0", "data", {"toolCall": {"name": "get_weather", "args": {"city": "Paris"}}})],
        ),
        (
            f"artifact:{task}:tool-result-1",
            "assistant",
            [("data:0", "data", {"city": "Paris", "condition": "sunny", "temperature_c": 22.0})],
        ),
        (
            f"artifact:{task}:answer",
            "assistant",
            [("text:0", "text", "It is sunny in Paris, 22 degrees C.")],
        ),
        (done, "assistant", [("text:0", "text", "Done.")]),
    ]
    # A2A has no tool call type: the peer's call is a data part, never a ToolCallPart
    assert not [p for m in rep.messages() for p in m.parts if isinstance(p, ToolCallPart)]
    assert rep.core.snapshot.message(call).metadata == {"kind": "tool_call"}
    assert rep.violations == [] and rep.status == "completed"


@pytest.mark.parametrize("seed", CUTS)
@pytest.mark.parametrize("v", VERSIONS)
def test_adk_bridge_tool_call_and_thought(v: str, seed: int | None) -> None:
    raw = load(f"adk-bridge-{v}-tool.stream.sse")
    values = events(raw, None if seed is None else random_cuts(raw, seed))
    rep = replay(values, context_of(values))
    task, (call_msg, response_msg, answer) = ids(values)
    got = {m.id: m for m in rep.messages()}
    reasoning, text, tool = got[call_msg].parts
    assert (reasoning.type, reasoning.id, reasoning.text) == (
        "reasoning",
        "reasoning:0",
        "User wants weather; call the tool.",
    )
    assert (text.id, text.text) == ("text:1", "Let me check the weather.")
    assert isinstance(tool, ToolCallPart) and tool.id == f"tool:{tool.tool_call_id}"
    assert (tool.tool_name, tool.args, tool.effective_status) == (
        "get_weather",
        {"city": "Paris"},
        "completed",
    )
    assert tool.result == {"condition": "sunny", "city": "Paris", "temperature_c": 22.0}
    assert response_msg not in got  # the function_response is shown as the call's result only
    # ADK sends the answer twice: as a status message and as an artifact (a real duplicate)
    arts = [m for m in got.values() if m.id.startswith(f"artifact:{task}:")]
    assert (
        len(arts) == 1 and arts[0].text == got[answer].text == "It is sunny in Paris, 22 degrees C."
    )
    phases = [u.phase for ups in rep.updates for u in ups if type(u).__name__ == "PhaseUpdate"]
    assert phases == ["generating", "tool", "generating"]
    assert rep.violations == [] and rep.status == "completed"


@pytest.mark.parametrize("v,code", [("v10", "TASK_STATE_FAILED"), ("v03", "failed")])
@pytest.mark.parametrize("seed", CUTS)
def test_fail(v: str, code: str, seed: int | None) -> None:
    values, rep = run(v, "fail", seed)
    task, (_working, failure) = ids(values)
    assert shape(rep.messages())[2:] == [
        (f"artifact:{task}:answer", "assistant", [("text:0", "text", "Starting to answer...")]),
        (failure, "assistant", [("text:0", "text", "scripted failure: upstream unavailable")]),
    ]
    view = rep.core.snapshot.run(rep.run_id)
    assert view.status == "failed" and view.error == RunError(
        code, "scripted failure: upstream unavailable"
    )
    assert rep.violations == []


@pytest.mark.parametrize("seed", CUTS)
@pytest.mark.parametrize("v", VERSIONS)
def test_crash_error_frame_is_a_failure(v: str, seed: int | None) -> None:
    values, rep = run(v, "crash", seed)
    assert values[-1].get("event") == ("error" if v == "v10" else None)  # v1.0 names the SSE event
    assert isinstance(rep.updates[-1][0], FailedUpdate)
    view = rep.core.snapshot.run(rep.run_id)
    assert view.status == "failed" and (view.error.code, view.error.message) == (
        "-32603",
        "scripted executor crash",
    )
    assert rep.violations == []


@pytest.mark.parametrize("seed", CUTS)
@pytest.mark.parametrize("v", VERSIONS)
def test_slow_cancel_main_and_resubscribe_streams_agree(v: str, seed: int | None) -> None:
    values, rep = run(v, "slow_cancel", seed)
    task, (working, cancelled) = ids(values)
    art = f"artifact:{task}:answer"
    assert rep.core.snapshot.message(art).text == "tick 0 tick 1 tick 2 "
    assert rep.core.snapshot.message(cancelled).text == "cancelled by request"
    view = rep.core.snapshot.run(rep.run_id)
    assert (view.status, view.interrupt_reason) == (
        "interrupted",
        "canceled",
    ) and rep.violations == []
    # the resubscribe stream: a Task snapshot (ticks so far, merged into one segment), then live
    sub = events(load(f"{v}-slow_cancel.resubscribe.sse"))
    again = replay(sub, context_of(sub), run_id="resumed")
    assert isinstance(again.updates[1][0], DeltaUpdate)  # tick 2 continues text:0
    for mid in (art, cancelled, working):
        assert again.core.snapshot.message(mid).parts == rep.core.snapshot.message(mid).parts
    assert isinstance(again.updates[-1][-1], InterruptedUpdate) and again.violations == []


@pytest.mark.parametrize("v", VERSIONS)
def test_cancel_message_after_an_acknowledged_stop_is_output_sealed(v: str) -> None:
    # The peer's cancel() publishes a canceled status *with* a message.  When the
    # UI saw the stop acknowledged first, that message is output-sealed (CK107);
    # the interrupted conclusion is still admitted.
    values = events(load(f"{v}-slow_cancel.stream.sse"))
    rep = replay(values[:-1], context_of(values), stop=False)
    rep.core.abort(rep.run_id)
    rep.core.abort_settled(rep.run_id, True)
    tail = replay([values[-1]], context_of(values), core=rep.core)
    assert [type(f).__name__ for f in tail.rejected("output-sealed")] == ["MessageFact"]
    assert tail.status == "interrupted"


@pytest.mark.parametrize("v", VERSIONS)
def test_input_required_interrupts_the_run_and_the_follow_up_is_a_new_run(v: str) -> None:
    values, rep = run(v, "input", None)
    task, (_working, question) = ids(values)
    view = rep.core.snapshot.run(rep.run_id)
    assert (view.status, view.interrupt_reason) == ("interrupted", "input-required")
    assert rep.core.snapshot.message(question).text == "Which city do you mean?"
    # turn 2: same taskId, no Task frame and no user echo: only the projection shows the input
    turn2 = events(load(f"{v}-input.stream_turn2.sse"))
    body = request(f"{v}-input.stream_turn2")
    rep2 = replay(
        turn2,
        context_of(turn2),
        run_id="run-2",
        core=rep.core,
        input=A2AProtocol().decode_input(body),
    )
    user2 = body["params"]["message"]["messageId"]
    assert rep2.core.snapshot.message(user2).text == "Paris" and rep2.status == "completed"
    assert rep2.core.snapshot.message(f"artifact:{task}:answer").text == "Thanks, noted: paris"
    assert rep.violations == [] and rep2.violations == []


@pytest.mark.parametrize("v", VERSIONS)
def test_context_second_task_streams_in_the_same_session(v: str) -> None:
    values = events(load(f"{v}-context.stream2.sse"))
    body = request(f"{v}-context.stream2")
    assert context_of(values) == body["params"]["message"]["contextId"]
    rep = replay(values, context_of(values), input=A2AProtocol().decode_input(body))
    assert rep.status == "completed" and rep.violations == []


def test_blocking_send_result_decodes_like_a_snapshot() -> None:
    from .test_a2a_helpers import load_json

    for v in VERSIONS:
        value = load_json(f"{v}-context.send.json")
        kind, task = unwrap(value)
        rep = replay([value], task["contextId"])
        assert kind == "task" and rep.status == "completed" and rep.violations == []
        assert isinstance(rep.updates[0][-1], CompletedUpdate)
        assert all(isinstance(u, MessageUpdate) for u in rep.updates[0][:-1])
