"""The ``adk`` adapter on captured frames of a real ``adk api_server``
(tests/adapters/data/adk): wire -> adapter -> ChatCore, live vs history."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chatkit_trace.adapters import EncodeContext, FailedUpdate, create_adapter, load_protocol
from chatkit_trace.adapters._factory import SessionDecoder
from chatkit_trace.adapters.adk import ADKProtocol
from chatkit_trace.core import ABSENT, ChatCore, HistoryFormatError, RunError
from chatkit_trace.wire import SSEParser, event_json, frame_from_sse

DATA = Path(__file__).parent / "data" / "adk"
# Ids of the captured text+tool run (data/adk/text_tool.*).
INV = "e-a07c68dd-1a27-4618-954a-c2a9b4a3f92d"
CALL_MSG, CALL = "7e9633f5-c278-458f-9b53-e6772d5cfa5b", "adk-6b816f2e-997b-43aa-b8c6-a36d22403cb6"
ANSWER_MSG = "5801f4ff-89d6-42f5-b3cc-24e6455af9ac"
WEATHER = {"city": "Paris", "condition": "sunny", "temperature_c": 22}


def sse_values(raw: bytes, cuts: list[int] | tuple[int, ...] = ()) -> list[Any]:
    """Raw SSE bytes, fed in pieces cut at ``cuts``, -> JSON values (R2.8)."""
    parser, events, pos = SSEParser(), [], 0
    for cut in [*sorted(cuts), len(raw)]:
        events += parser.feed(raw[pos:cut])
        pos = cut
    events += parser.flush()
    out = []
    for i, ev in enumerate(events):
        value, error = event_json(frame_from_sse(ev, 0, i, 0.0))
        assert error is None, error
        if value is not None:
            out.append(value)
    return out


@dataclass
class Replay:
    core: ChatCore
    decoder: SessionDecoder
    log: list[tuple[Any, Any]] = field(default_factory=list)
    terminal: int | None = None  # index of the frame that concluded the run
    after: list[Any] = field(default_factory=list)  # updates of frames after it (R2.5a)

    @property
    def violations(self) -> list[str]:
        return [f"{type(f).__name__} {f.event_id}: {r.reason}" for f, r in self.log if r.violation]

    def messages(self, run_id: str | None = None) -> dict[str, dict]:
        return {
            m.id: m.to_json()
            for m in self.core.snapshot.messages
            if run_id is None or m.run_id == run_id
        }

    def status(self, run_id: str) -> str | None:
        view = self.core.snapshot.run(run_id)
        return view.status if view else None


def replay(
    values: list[Any],
    *,
    run_id: str = "r1",
    input: Any = "hi",
    session: str = "s1",
    protocol: ADKProtocol | None = None,
    into: Replay | None = None,
    stream: int = 0,
) -> Replay:
    """Decode one run's frames and admit them like a direct run reader: stop
    admitting at the first terminal, but keep decoding to see what follows."""
    if into is None:
        adapter = create_adapter(protocol or ADKProtocol(), history=True)
        into = Replay(
            ChatCore(session, capabilities=adapter.capabilities), adapter.decoder(session)
        )
    core, dec = into.core, into.decoder
    assert core.send(run_id, input, project=dec.project(input, run_id)).ok
    for req in core.take_requests():
        core.dispatch_settled(req.run_id, True)
    into.terminal = None
    for i, value in enumerate(values):
        d = dec.decode(value, run_id=run_id, fallback_id=f"{stream}:{i}")
        assert d.error is None, d.error
        if into.terminal is not None:
            into.after.extend(d.updates)
            continue
        into.log.extend((f, core.admit(f)) for f in d.facts)
        if d.terminal:
            into.terminal = i
    return into


def load(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def raw(name: str) -> bytes:
    return (DATA / name).read_bytes()


def without_run(messages: dict[str, dict]) -> dict[str, dict]:
    return {k: {**m, "runId": None} for k, m in messages.items()}


def cuts_for(data: bytes, seed: int) -> list[int]:
    rng = random.Random(seed)
    return sorted(rng.sample(range(1, len(data)), rng.randint(1, 40)))


TEXT_TOOL_ASSISTANT = {
    CALL_MSG: [
        {"id": "reasoning:0", "type": "reasoning", "text": "User wants weather; call the tool."},
        {"id": "text:1", "type": "text", "text": "Let me check the weather."},
        {
            "id": f"tool:{CALL}",
            "type": "tool-call",
            "toolCallId": CALL,
            "toolName": "get_weather",
            "args": {"city": "Paris"},
            "result": WEATHER,
        },
    ],
    ANSWER_MSG: [{"id": "text:0", "type": "text", "text": "It is sunny in Paris, 22 degrees C."}],
}


def test_registry_name_loads_the_class():
    assert isinstance(load_protocol("adk"), ADKProtocol)


@pytest.mark.parametrize("seed", [None, 1, 2, 3, 4, 5])
def test_text_tool_live(seed):
    data = raw("text_tool.sse")
    r = replay(
        sse_values(data, cuts_for(data, seed) if seed else ()),
        input="What is the weather in Paris?",
    )
    assert r.violations == []
    # idempotent only: each aggregate equals what the fragments built (R3.8)
    assert [str(res.reason) for _, res in r.log if not res.accepted] == ["no-change", "no-change"]
    msgs = r.messages("r1")
    assert list(msgs) == ["user:r1", CALL_MSG, ANSWER_MSG]
    assert {k: msgs[k]["parts"] for k in TEXT_TOOL_ASSISTANT} == TEXT_TOOL_ASSISTANT
    # stock ADK sends no conclusion: the run stays running (R3.4)
    assert r.terminal is None and r.status("r1") == "running"
    phases = [f.phase for f, _ in r.log if type(f).__name__ == "PhaseFact"]
    assert phases == ["thinking", "generating", "tool", "thinking", "generating"]
    deltas = [
        (f.message_id, f.part_id, f.delta) for f, _ in r.log if type(f).__name__ == "DeltaFact"
    ]
    assert deltas == [
        (CALL_MSG, "text:1", "the weather."),
        (ANSWER_MSG, "text:0", "in Paris, "),
        (ANSWER_MSG, "text:0", "22 degrees C."),
    ]


def test_text_tool_history_is_isomorphic_but_for_the_user_message():
    live = replay(sse_values(raw("text_tool.sse")), input="What is the weather in Paris?")
    hist = ADKProtocol().decode_history(load("text_tool.history.json"), "s1")
    h = {m.id: m.to_json() for m in hist.messages}
    assert list(h) == [f"user:{INV}", CALL_MSG, ANSWER_MSG]
    lm = without_run(live.messages())
    assert {k: lm[k] for k in TEXT_TOOL_ASSISTANT} == {
        k: without_run(h)[k] for k in TEXT_TOOL_ASSISTANT
    }
    # What differs: ADK never streams the user message; the projection's id
    # names the local run, history's the invocation (same parts).
    assert lm["user:r1"]["parts"] == h[f"user:{INV}"]["parts"]
    assert set(lm) ^ set(h) == {"user:r1", f"user:{INV}"}
    assert all(m.run_id == INV for m in hist.messages)
    assert [(s.id, s.status) for s in hist.run_snapshots] == [(INV, "completed")]
    assert hist.active_run is ABSENT  # ADK does not say whether a run is active


def test_nostream_decodes_to_the_same_shapes():
    r = replay(sse_values(raw("nostream.sse")))
    assert r.violations == [] and [str(res.reason) for _, res in r.log if not res.accepted] == []
    assistant = [m for m in r.messages().values() if m["role"] == "assistant"]
    strip = [
        [{k: v for k, v in p.items() if k not in ("id", "toolCallId")} for p in m["parts"]]
        for m in assistant
    ]
    expected = [
        [{k: v for k, v in p.items() if k not in ("id", "toolCallId")} for p in ps]
        for ps in TEXT_TOOL_ASSISTANT.values()
    ]
    assert strip == expected
    hist = ADKProtocol().decode_history(load("nostream.history.json"), "s1")
    h = without_run({m.id: m.to_json() for m in hist.messages if m.role == "assistant"})
    assert h == without_run({m["id"]: m for m in assistant})


@pytest.mark.parametrize("seed", [None, 7, 8])
def test_error_code_safety_fails_with_the_aggregate(seed):
    data = raw("error.sse")
    r = replay(sse_values(data, cuts_for(data, seed) if seed else ()))
    assert r.violations == [] and r.terminal == 2
    mid = "82c9f32e-eb37-4eb8-8c19-dec537cdc8f2"
    assert r.messages()[mid]["parts"] == [
        {"id": "text:0", "type": "text", "text": "I can start, but then I must stop"}
    ]
    view = r.core.snapshot.run("r1")
    assert view.status == "failed" and view.error == RunError("SAFETY", "scripted safety block")
    hist = ADKProtocol().decode_history(load("error.history.json"), "s1")
    assert (
        without_run({m.id: m.to_json() for m in hist.messages})[mid]
        == without_run(r.messages())[mid]
    )
    [snap] = hist.run_snapshots
    assert snap.status == "failed" and snap.error == view.error


def test_exception_fails_and_history_loses_the_partial_text():
    r = replay(sse_values(raw("fail.sse")))
    assert r.violations == [] and r.terminal == 2  # the errorCode event, not the {"error"} frame
    partial = "3586b389-e569-4ebb-af3b-0592fabe3cac"
    assert r.messages()[partial]["parts"] == [
        {"id": "text:0", "type": "text", "text": "Starting to answer..."}
    ]
    error = RunError(
        "UNAVAILABLE",
        "503 UNAVAILABLE. {'error': {'code': 503, 'message': 'scripted upstream "
        "outage', 'status': 'UNAVAILABLE'}}",
    )
    assert r.core.snapshot.run("r1").error == error
    # the {"error"} frame after the terminal carries no output (R2.5a)
    assert r.after == [FailedUpdate(RunError("ServerError", error.message))]
    hist = ADKProtocol().decode_history(load("fail.history.json"), "s1")
    # What differs: ADK persisted only the errorCode event (no content), so the
    # streamed partial text is not in history.
    assert [m.role for m in hist.messages] == ["user"]
    assert [(s.status, s.error) for s in hist.run_snapshots] == [("failed", error)]


def test_slow_run_cut_by_the_client():
    r = replay(sse_values(raw("slow.sse")))
    assert r.violations == [] and r.terminal is None and r.status("r1") == "running"
    mid = "475cf4ec-fb8a-40b9-987e-67b32aba0f30"
    assert r.messages()[mid]["parts"] == [
        {"id": "text:0", "type": "text", "text": "tick 0 tick 1 tick 2 tick 3 "}
    ]
    hist = ADKProtocol().decode_history(load("slow.history.json"), "s1")
    # What differs: history has ADK's INVOCATION_ABORTED event, never streamed,
    # and not the partial text.
    assert [m.role for m in hist.messages] == ["user"]
    [snap] = hist.run_snapshots
    assert (snap.status, snap.interrupt_reason) == ("interrupted", "abort")


def test_pinned_invocation_ids_make_the_user_message_isomorphic_and_settle_runs():
    proto = ADKProtocol("chatkit_peer", "u1", pin_invocation_id=True)
    session, run1, run2 = "s-pinned", "s-pinned:run-1", "s-pinned:run-2"
    full = load("pinned.history.json")
    r = replay(
        sse_values(raw("pinned.run-1.sse")),
        run_id=run1,
        session=session,
        protocol=proto,
        input=proto.decode_input(raw("pinned.run-1.request.json")),
    )
    live1 = r.messages(run1)
    # history as it was after run 1: its own events
    first = {**full, "events": [e for e in full["events"] if e["invocationId"] == run1]}
    assert r.core.apply_history(r.decoder.history(first)).ok
    assert r.status(run1) == "completed"  # settled by history calibration
    assert r.messages(run1) == live1  # same ids, parts and content, user message included (R8.4)
    replay(
        sse_values(raw("pinned.run-2.sse")),
        run_id=run2,
        into=r,
        stream=1,
        input=proto.decode_input(raw("pinned.run-2.request.json")),
    )
    partial = [k for k, m in r.messages(run2).items() if m["role"] == "assistant"]
    assert r.violations == [] and r.status(run2) == "running"
    assert r.core.apply_history(r.decoder.history(full)).ok
    snap = r.core.snapshot.run(run2)
    assert (snap.status, snap.interrupt_reason) == ("interrupted", "abort")
    # The read that settles the aborted run shows what history stored of it
    # (decisions.md 98: "history 可补齐最终内容"): ADK did not store the streamed
    # partial answer, so the UI drops it at this very refresh, not the next.
    assert partial and list(r.messages(run2)) == [f"user:{run2}"]
    assert r.core.apply_history(r.decoder.history(full)).ok
    assert list(r.messages(run2)) == [f"user:{run2}"]
    assert r.messages(run1) == live1


def test_encode_project_and_decode_input():
    proto = ADKProtocol("chatkit_peer", "u1")
    ctx = EncodeContext("s1", "r1")
    body = proto.encode_input("Hi there", ctx)
    assert body == {
        "appName": "chatkit_peer",
        "userId": "u1",
        "sessionId": "s1",
        "newMessage": {"role": "user", "parts": [{"text": "Hi there"}]},
        "streaming": True,
    }
    assert (
        ADKProtocol(pin_invocation_id=True).encode_input({"text": "x"}, ctx)["invocationId"] == "r1"
    )
    assert "appName" not in ADKProtocol().encode_input("x", ctx)
    assert proto.decode_input(json.dumps(body)) == {"text": "Hi there"}
    assert (
        proto.decode_input(b"not json") is None
        and proto.decode_input({"invocationId": "e-1"}) is None
    )
    parts = [{"text": "a"}, {"inlineData": {"mimeType": "image/png", "data": "AA=="}}]
    assert proto.decode_input({"newMessage": {"parts": parts}}) == {"parts": parts}
    [user] = proto.project_input({"parts": parts}, ctx)
    assert [p.to_json() for p in user.parts] == [
        {"id": "text:0", "type": "text", "text": "a"},
        {
            "id": "media:1",
            "type": "media",
            "placement": "inline",
            "mimeType": "image/png",
            "source": {"data": "AA=="},
        },
    ]
    assert proto.decode_input(load("pinned.run-1.request.json")) == {
        "text": "What is the weather in Paris?"
    }


def test_history_needs_a_session():
    with pytest.raises(HistoryFormatError):
        ADKProtocol().decode_history({"detail": "Session not found"}, "s1")
    assert ADKProtocol().decode_history([], "s1").messages == ()


def test_the_call_a_stop_cut_is_cancelled_not_a_result():
    """ADK's response for a call the client's stop cut (its event has
    errorCode INVOCATION_ABORTED) is no result: the call is cancelled, with
    ADK's reason; the invocation is interrupted (decisions.md 250)."""
    fc = {"functionCall": {"id": "adk-1", "args": {"country": "Peru"}, "name": "check_visa"}}
    events = [
        {"invocationId": "e-1", "author": "user", "id": "u", "content": {"role": "user", "parts": [{"text": "visa?"}]}},
        {"invocationId": "e-1", "author": "a", "id": "m", "partial": False, "content": {"role": "model", "parts": [fc]}},
        {"invocationId": "e-1", "author": "a", "id": "x", "errorCode": "INVOCATION_ABORTED",
         "errorMessage": "Invocation was aborted by client.",
         "content": {"role": "user", "parts": [{"functionResponse": {
             "id": "adk-1", "name": "check_visa", "response": {"error": "Invocation was aborted by client."}}}]}},
    ]
    hist = ADKProtocol().decode_history({"events": events}, "s1")
    [call] = [p for m in hist.messages for p in m.parts if p.type == "tool-call"]
    assert (call.status, call.result) == ("cancelled", ABSENT)
    assert call.error == RunError("INVOCATION_ABORTED", "Invocation was aborted by client.")
    [snap] = hist.run_snapshots
    assert (snap.status, snap.interrupt_reason) == ("interrupted", "abort")
    # any other response is the call's result, as before
    events[2] = {**events[2], "errorCode": None}
    hist = ADKProtocol().decode_history({"events": events}, "s1")
    [call] = [p for m in hist.messages for p in m.parts if p.type == "tool-call"]
    assert call.status is ABSENT and call.result == {"error": "Invocation was aborted by client."}
