"""The ``adk`` adapter on hand-made frames: the cases the captures do not show
(extension frames, turnComplete, artifact copies, orphan responses …)."""

from __future__ import annotations

from typing import Any

import pytest

from chatkit_trace.adapters import (
    CompletedUpdate,
    DecodeContext,
    DeltaUpdate,
    FailedUpdate,
    InterruptedUpdate,
    MessageUpdate,
    PhaseUpdate,
)
from chatkit_trace.adapters.adk import ADKProtocol
from chatkit_trace.core import ABSENT, RunError
from chatkit_trace.wire import DONE

P = ADKProtocol()


def ev(
    eid: str = "m1", *parts: dict, partial: bool | None = None, role: str = "model", **kw: Any
) -> dict:
    out: dict[str, Any] = {"id": eid, "invocationId": "e-1", "author": "agent", **kw}
    if parts:
        out["content"] = {"role": role, "parts": list(parts)}
    if partial is not None:
        out["partial"] = partial
    return out


def decode(*events: Any) -> list[list[Any]]:
    ctx = DecodeContext("s1", "r1")
    return [P.decode_event(e, ctx) for e in events]


def messages(updates: list[Any]) -> list[list[dict]]:
    return [[p.to_json() for p in u.message.parts] for u in updates if isinstance(u, MessageUpdate)]


def test_nothing_to_decode():
    assert decode(DONE, None, 3, "x", [], {}, {"foo": 1}, ev("m1")) == [[]] * 8


@pytest.mark.parametrize(
    "frame, update",
    [
        ({"type": "run.started", "invocationId": "e-1"}, None),
        ({"type": "run.completed", "invocationId": "e-1"}, CompletedUpdate()),
        ({"event": "run.completed"}, CompletedUpdate()),  # SSE `event:` name (R2.8)
        (
            {"type": "run.completed", "errorCode": "X", "errorMessage": "m"},
            FailedUpdate(RunError("X", "m")),
        ),
        ({"type": "run.completed", "interrupted": True}, InterruptedUpdate()),
        (ev("m2", errorCode="INVOCATION_ABORTED"), InterruptedUpdate()),
        (ev("m2", errorCode="E"), FailedUpdate(RunError("E", "E"))),
        ({"error": "Boom: bad"}, FailedUpdate(RunError("Boom", "Boom: bad"))),
        ({"error": {"x": 1}}, FailedUpdate(RunError("ERROR", '{"x": 1}'))),
    ],
)
def test_conclusions(frame, update):
    assert decode(frame)[0] == ([update] if update else [])


def test_turn_complete_concludes_only_a_turn_without_calls():
    call = {"functionCall": {"id": "c1", "name": "f", "args": {}}}
    [with_call] = decode(ev("m1", call, turnComplete=True))
    assert not any(
        isinstance(u, CompletedUpdate) for u in with_call
    )  # interactions API: requires_action
    [done] = decode(ev("m1", {"text": "ok"}, turnComplete=True))
    assert isinstance(done[-1], CompletedUpdate)
    [partial_err] = decode(ev("m1", {"text": "a"}, partial=True, errorCode="SAFETY"))
    assert not any(isinstance(u, FailedUpdate) for u in partial_err)  # the aggregate follows
    [err_call] = decode(ev("m1", call, errorCode="MAX_TOKENS"))
    assert not any(isinstance(u, FailedUpdate) for u in err_call)  # the tools still run


def test_identify_event():
    assert P.identify_event(ev("m1")).run_id == "e-1"
    assert P.identify_event({"type": "run.started", "invocationId": "e-1"}).starts_run
    assert P.identify_event({"type": "run.completed", "invocationId": "e-1"}).ends_response
    assert P.identify_event(ev("m1", errorCode="E")).ends_response
    assert not P.identify_event(ev("m1", {"text": "a"}, partial=True)).ends_response
    assert P.identify_event({"error": "x"}) is None and P.identify_event(DONE) is None


def test_final_replaces_fragments_and_repacks_like_adk():
    frames = decode(
        ev("m1", {"text": "th", "thought": True}, partial=True),
        ev("m1", {"text": "ink", "thought": True}, {"text": "Hel"}, partial=True),
        ev("m1", {"text": "lo"}, partial=True),
        ev("m1", {"text": "!!"}, {"thought": True, "text": "more"}, partial=True),
        ev(
            "m1",
            {"text": "think", "thought": True},
            {"text": "Hello!!"},
            {"text": "more", "thought": True},
            partial=False,
        ),
        ev("m1", {"text": "Replaced"}, partial=False),
    )
    assert frames[2] == [DeltaUpdate("m1", "text:1", "lo")]
    built = messages(frames[3])[-1]
    assert (
        built
        == messages(frames[4])[-1]
        == [
            {"id": "reasoning:0", "type": "reasoning", "text": "think"},
            {"id": "text:1", "type": "text", "text": "Hello!!"},
            {"id": "reasoning:2", "type": "reasoning", "text": "more"},
        ]
    )
    assert messages(frames[5]) == [[{"id": "text:0", "type": "text", "text": "Replaced"}]]


def test_streamed_call_fragments_keep_one_part():
    frames = decode(
        ev("m1", {"functionCall": {"id": "c1", "name": "f", "willContinue": True}}, partial=True),
        ev("m1", {"functionCall": {"id": "c1", "args": {"q": 1}}}, partial=True),
    )
    [part] = messages(frames[1])[-1]
    assert (part["id"], part["toolName"], part["args"]) == ("tool:c1", "f", {"q": 1})


def test_function_response_result_and_orphans():
    call = {"functionCall": {"id": "c1", "name": "f", "args": {}}}
    frames = decode(
        ev("m1", call, partial=False),
        ev(
            "m2", {"functionResponse": {"id": "c1", "name": "f"}}, role="user"
        ),  # no response: empty result
        ev(
            "m3",
            {"functionResponse": {"id": "zz", "name": "g", "response": {"ok": 1}}},
            role="user",
        ),
    )
    [[tool]] = messages(frames[1])
    assert frames[1][-1].message.id == "m1" and "result" in tool and tool["result"] is None
    [orphan] = [u.message for u in frames[2] if isinstance(u, MessageUpdate)]
    assert orphan.id == "m3" and orphan.role == "tool"
    assert orphan.parts[0].result == {"ok": 1} and orphan.parts[0].tool_call_id == "zz"
    [first] = [u.message for u in frames[0] if isinstance(u, MessageUpdate)]
    assert first.parts[0].result is ABSENT  # running until its response (R6.4)


def test_content_less_events_change_nothing():
    # ADK streams an artifact-only copy of a content event under the same id.
    frames = decode(
        ev("m1", {"text": "a"}, partial=False),
        ev("m1", actions={"artifactDelta": {"f.txt": 0}}),
        ev("m9", actions={"stateDelta": {"k": 1}}),
    )
    assert frames[1:] == [[], []]


def test_awaiting_input_phase_and_user_events():
    [frame] = decode(
        ev("m1", {"functionCall": {"id": "c1", "name": "f"}}, longRunningToolIds=["c1"])
    )
    assert frame[0] == PhaseUpdate("awaiting-input")
    [user] = decode(
        {
            "id": "u1",
            "invocationId": "e-1",
            "author": "user",
            "content": {"role": "user", "parts": [{"text": "hi"}]},
        }
    )
    assert user[-1].message.id == "user:e-1" and user[-1].message.role == "user"
