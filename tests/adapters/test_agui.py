"""The ``agui`` adapter against the real ``ag-ui-protocol`` library: events
built with its classes and encoded by its SSE encoder, requests validated as
its ``RunAgentInput``; the R12 suite on a scripted AG-UI backend built on the
same library, with and without history; and the three deliberate bugs of
issue 19, each caught by the suite under the rule it breaks."""

from __future__ import annotations

import dataclasses

import pytest
from ag_ui.core import (
    EventType,
    Interrupt,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
)
from ag_ui.encoder import EventEncoder

from chatkit_trace.adapters import (
    CompletedUpdate,
    DeltaUpdate,
    FailedUpdate,
    InterruptedUpdate,
    MessageUpdate,
    create_adapter,
    load_protocol,
)
from chatkit_trace.adapters.agui import EVENT_TYPES, AGUIProtocol
from chatkit_trace.core import ChatCore, ToolCallPart, to_run_error
from chatkit_trace.examples import agui_backend
from chatkit_trace.testing import ConformanceHarness, run_adapter_conformance, run_scenario
from chatkit_trace.wire import SSEParser, event_json, frame_from_sse

from .agui_broken import LateDelta, NoTerminal, TimeIds


def wire(events) -> list[dict]:
    """Events through the library's SSE encoder and back through our SSE reader."""
    enc = EventEncoder()
    data = "".join(enc.encode(e) for e in events).encode()
    parser = SSEParser()
    out = []
    for i, ev in enumerate(parser.feed(data)):
        value, err = event_json(frame_from_sse(ev, 0, i, 0.0))
        assert err is None
        out.append(value)
    return out


def decode_all(events, run_id="r1", session="t1", protocol=None):
    adapter = create_adapter(protocol or AGUIProtocol())
    dec = adapter.decoder(session)
    updates = []
    for i, ev in enumerate(wire(events)):
        d = dec.decode(ev, run_id=run_id, fallback_id=f"0:{i}")
        assert d.error is None, d.error
        updates.extend(d.updates)
    return updates


def test_every_library_event_type_is_known():
    assert {t.value for t in EventType} <= EVENT_TYPES
    assert AGUIProtocol().event_known({"type": "STATE_SNAPSHOT", "snapshot": {}})
    assert not AGUIProtocol().event_known({"type": "MY_OWN_EVENT"})
    assert load_protocol("agui").name == "agui"


def test_text_is_one_message_under_the_backends_id_with_deltas():
    updates = decode_all(agui_backend.script("text", "t1", "r1"))
    assert isinstance(updates[0], MessageUpdate) and updates[0].message.id == "r1:m1"
    assert [p.id for p in updates[0].message.parts] == ["text"]
    assert [u.delta for u in updates if isinstance(u, DeltaUpdate)] == ["This is ", "the answer"]
    assert isinstance(updates[-1], CompletedUpdate)


def test_a_tool_call_gets_its_parsed_args_and_the_result_folded_in():
    updates = decode_all(agui_backend.script("tool", "t1", "r1"))
    last_m1 = [u.message for u in updates if isinstance(u, MessageUpdate) and u.message.id == "r1:m1"][-1]
    tool = next(p for p in last_m1.parts if isinstance(p, ToolCallPart))
    assert (tool.id, tool.tool_call_id, tool.tool_name) == ("tool:call-1", "call-1", "lookup")
    assert tool.to_json()["args"] == {"q": "a"} and tool.to_json()["result"] == '{"hits": 1}'
    assert any(isinstance(u, MessageUpdate) and u.message.id == "r1:m2" for u in updates)  # a second answer message
    assert isinstance(updates[-1], CompletedUpdate)


def test_run_error_keeps_the_code_and_a_missing_code_is_the_cores_unknown():
    [*_, failed] = decode_all(agui_backend.script("fail", "t1", "r1"))
    assert isinstance(failed, FailedUpdate) and to_run_error(failed.error).code == "RATE_LIMITED"
    [*_, bare] = decode_all([RunStartedEvent(thread_id="t1", run_id="r1"), RunErrorEvent(message="boom")])
    assert to_run_error(bare.error).code == "UNKNOWN"  # what the UI would show; CK302 reports it


def test_pending_frontend_tools_and_interrupts_end_the_run_interrupted():
    [*_, end] = decode_all(agui_backend.script("frontend", "t1", "r1"))
    assert end == InterruptedUpdate("pending-tool-calls")
    interrupt = RunFinishedEvent(
        thread_id="t1", run_id="r1", outcome=RunFinishedInterruptOutcome(interrupts=[Interrupt(id="i1", reason="approve")])
    )
    assert decode_all([RunStartedEvent(thread_id="t1", run_id="r1"), interrupt])[-1] == InterruptedUpdate("interrupt")


def test_chunks_and_events_without_output():
    updates = decode_all(
        [
            RunStartedEvent(thread_id="t1", run_id="r1"),
            StateSnapshotEvent(snapshot={"step": 1}),
            TextMessageChunkEvent(message_id="m9", delta="Hi"),
            TextMessageChunkEvent(delta=" there"),
            TextMessageStartEvent(message_id="m10"),
            TextMessageContentEvent(message_id="m10", delta="x"),
            RunFinishedEvent(thread_id="t1", run_id="r1"),
        ]
    )
    assert [type(u).__name__ for u in updates] == ["MessageUpdate", "DeltaUpdate", "MessageUpdate", "DeltaUpdate", "CompletedUpdate"]
    assert updates[1] == DeltaUpdate("m9", "text", " there")


def test_encode_input_is_a_valid_run_agent_input_and_decode_input_inverts_it():
    protocol = AGUIProtocol()
    core = ChatCore("t1", capabilities={"run"})
    from chatkit_trace.adapters import EncodeContext

    body = protocol.encode_input({"text": "hello"}, EncodeContext("t1", "r1", tuple(core.snapshot.messages)))
    parsed = RunAgentInput.model_validate(body)  # the real library accepts it
    assert (parsed.thread_id, parsed.run_id, parsed.messages[-1].id) == ("t1", "r1", "user:r1")
    assert protocol.decode_input(body) == {"text": "hello"}
    tool_result = {**body, "messages": [*body["messages"], {"id": "x", "role": "tool", "toolCallId": "c", "content": "ok"}]}
    assert protocol.decode_input(tool_result) is None  # a continuation carries no new user input


# -- the R12 suite on the scripted AG-UI backend --------------------------------------------


def harness(protocol=AGUIProtocol, *, history=True, **kw) -> ConformanceHarness:
    def make(kind):
        caps = agui_backend.create_backend(kind)
        if not history:
            caps.pop("history")
        return create_adapter(protocol(), **caps)

    options = {"stop": "close", "multi_message_answers": True, "timeout": 2.0, **kw}
    return ConformanceHarness(make, lambda t: {"text": t}, capabilities={"regenerate": True, "history": history}, **options)


NAMES = run_adapter_conformance("agui", harness())
NAMES_NO_HISTORY = run_adapter_conformance("agui without history", harness(history=False), undeclared="omit")


def test_the_suite_runs_every_scenario_with_and_without_history():
    assert NAMES == [f"test_conformance_agui_{k}" for k in ("text", "tool", "fail", "slow", "regenerate", "history")]
    assert NAMES_NO_HISTORY == [f"test_conformance_agui_without_history_{k}" for k in ("text", "tool", "fail", "slow", "regenerate")]


def test_stop_by_closing_the_stream_without_history_says_what_it_costs():
    report = run_scenario(harness(history=False), "slow")
    assert not report.failures and report.notes
    assert "stays unknown" in report.notes[0]


@pytest.mark.parametrize("history", [True, False], ids=["with-history", "without-history"])
@pytest.mark.parametrize(
    ("bug", "scenario", "rule"),
    [(TimeIds, "text", "R4.3"), (LateDelta, "text", "R3.5"), (NoTerminal, "text", "R3.4"), (NoTerminal, "tool", "R3.4")],
    ids=["time-ids", "late-delta", "no-terminal", "no-terminal-tool"],
)
def test_each_deliberate_bug_is_caught_under_its_rule(bug, scenario, rule, history):
    report = run_scenario(harness(bug, history=history), scenario)
    assert rule in report.failed_rules, str(report)
    assert not any(c.rule == "R12" for c in report.checks), str(report)  # a check, never an exception
    assert not run_scenario(harness(history=history), scenario).failures  # the intact adapter passes the same


def test_no_terminal_fails_regenerate_with_a_check_not_an_exception():
    report = run_scenario(harness(NoTerminal, history=False), "regenerate")
    assert {"R3.4", "R10.2"} <= report.failed_rules, str(report)
    assert any("never settled" in c.message for c in report.failures)


def test_a_late_delta_is_named_r35_not_only_r38():
    report = run_scenario(harness(LateDelta, history=False), "text")
    r35 = next(c for c in report.failures if c.rule == "R3.5")
    assert "terminal-sealed" in r35.message
    assert "R3.8" not in report.failed_rules  # the rejection is reported once, under the rule it breaks


def test_multi_message_answers_need_declaring():
    def make(kind):
        caps = agui_backend.create_backend("tool" if kind == "regenerate" else kind)
        return create_adapter(AGUIProtocol(), **caps)

    strict = ConformanceHarness(make, lambda t: {"text": t}, capabilities={"regenerate": True}, stop="close", timeout=2.0)
    report = run_scenario(strict, "regenerate")
    assert report.failed_rules == {"R10.2"}, str(report)
    assert "multi_message_answers" in report.failures[0].message
    assert not run_scenario(dataclasses.replace(strict, multi_message_answers=True), "regenerate").failures
