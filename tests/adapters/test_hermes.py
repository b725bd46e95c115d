"""The hermes adapter on captured real frames (SPEC R2, R3.4, R4.3/R4.4, R6, R11.4).

Every capture is fed through the wire layer whole and split at random byte
boundaries; the decoded facts are admitted into a ChatCore, whose reader
stops at the first terminal (R2.5a) while the later frames are still decoded
to prove they carry nothing.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chatkit_trace.adapters import (
    CompletedUpdate,
    DeltaUpdate,
    EncodeContext,
    FailedUpdate,
    InterruptedUpdate,
    MessageUpdate,
    PhaseUpdate,
    create_adapter,
    fallback_error,
    fallback_sent,
    load_protocol,
    notes_of,
)
from chatkit_trace.adapters.hermes import HermesProtocol
from chatkit_trace.core import ChatCore, RunError, RuntimeMessage, TextPart
from chatkit_trace.wire import DONE, SSEParser, event_json, frame_from_sse

DATA = Path(__file__).parent / "data" / "hermes"
SESSION = "api_test"


def load(name: str) -> bytes:
    return (DATA / name).read_bytes()


def sse_values(data: bytes, seed: int | None = None) -> list[Any]:
    """Raw SSE bytes -> event values, whole or cut at random byte offsets."""
    cuts: list[int] = []
    if seed is not None:
        rnd = random.Random(seed)
        cuts = sorted(rnd.sample(range(1, len(data)), min(len(data) - 1, rnd.randint(1, 40))))
    parser, events = SSEParser(), []
    for a, b in zip([0, *cuts], [*cuts, len(data)], strict=False):
        events += parser.feed(data[a:b])
    events += parser.flush()
    values = []
    for i, ev in enumerate(events):
        value, error = event_json(frame_from_sse(ev, 0, i, 0.0))
        assert error is None, error
        if value is not None:
            values.append(value)
    return values


@dataclass
class Decoded:
    core: ChatCore
    run_id: str
    violations: list[str] = field(default_factory=list)
    after_terminal: list[Any] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.core.snapshot.run(self.run_id).status

    def messages(self) -> list[dict[str, Any]]:
        return [m.to_json() for m in self.core.snapshot.messages]


def decode(values: list[Any], *, input: str = "hi", run_id: str | None = None) -> Decoded:
    run_id = run_id or next(v["run_id"] for v in values if isinstance(v, dict) and "run_id" in v)
    adapter = create_adapter(HermesProtocol())
    dec = adapter.decoder(SESSION)
    core = ChatCore(SESSION, capabilities=adapter.capabilities)
    core.send(run_id, input, project=dec.project(input, run_id))
    core.dispatch_settled(run_id, True)
    out = Decoded(core, run_id)
    ended = False
    for i, value in enumerate(values):
        d = dec.decode(value, run_id=run_id, fallback_id=f"0:{i}")
        assert d.error is None, d.error
        if ended:  # R2.5a: the reader stopped; later frames must carry nothing
            out.after_terminal += d.facts
            continue
        for fact in d.facts:
            r = core.admit(fact)
            if r.violation:
                out.violations.append(f"{type(fact).__name__} {r.reason} {r.detail}")
        ended = d.terminal
    return out


def user(run_id: str, text: str) -> dict[str, Any]:
    return {
        "id": f"user:{run_id}",
        "role": "user",
        "parts": [{"id": "text", "type": "text", "text": text}],
        "runId": run_id,
    }


def assistant(mid: str, run_id: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"id": mid, "role": "assistant", "parts": list(parts), "runId": run_id}


def text(pid: str, t: str) -> dict[str, Any]:
    return {"id": pid, "type": "text", "text": t}


TOOL_TEXT = 'The tool said: {"todos": [{"id": "1", "content": "check the fake model", "s'
TODO_ARGS = {"todos": [{"id": "1", "content": "check the fake model", "status": "pending"}]}
TODO_RESULT = (
    '{"todos": [{"id": "1", "content": "check the fake model", "status": "pending"}], '
    '"summary": {"total": 1, "pending": 1, "in_progress": 0, "completed": 0, "cancelled": 0}}'
)
R_TEXT = "run_d47c230ff315437aba07c68d1c0dbd79"
R_TOOL = "run_ef6966e7217c42dd836a3159f52b451c"
R_STOP = "run_1c86efc1e37f450dbce613bd675c0f36"
R_MID = "run_078c694ea6d44b9fa8953a9a6ff1d33c"
S_TEXT, M_TEXT = "run_aa44ed5c308d4b9ea4381cb8ae60c3e9", "msg_f83a3a43f4eb4bfa8c5175938d89fe3a"
S_TOOL, M_TOOL = "run_33af71aa169b4da4984a1ffe7fcf5fe0", "msg_4253cc020f99479287b0c3f0023501fe"
S_FAIL, M_FAIL = "run_366750b9f099426a9745fc22c053769a", "msg_247c6ff7d2774df48c8cda4713f5bf03"
S_REASON, M_REASON = "run_fba4c5d371ad4f3a8235ac5b261e0f83", "msg_c5d2bf24b8034186a672f5e20a66ad19"

EXPECTED = {
    "runs_text.events.sse": (
        "completed",
        [
            user(R_TEXT, "hi"),
            assistant(f"assistant:{R_TEXT}", R_TEXT, text("text:0", "Hello from the fake model.")),
        ],
    ),
    "runs_tool.events.sse": (
        "completed",
        [
            user(R_TOOL, "hi"),
            assistant(
                f"assistant:{R_TOOL}",
                R_TOOL,
                {
                    "id": "tool:0",
                    "type": "tool-call",
                    "toolCallId": f"{R_TOOL}:t0",
                    "toolName": "todo",
                    "status": "completed",
                    "result": None,  # the wire has none: completed, empty (CK306 says why)
                },
                text("text:1", TOOL_TEXT),
            ),
        ],
    ),
    "runs_fail.events.sse": ("failed", [user("run_7d98e881117441828fbeb4318d11edf2", "hi")]),
    "runs_stop.events.sse": (
        "interrupted",
        [
            user(R_STOP, "hi"),
            assistant(f"assistant:{R_STOP}", R_STOP, text("text:0", "tick0 tick1 tick2 ")),
        ],
    ),
    # the deltas say "Partial answer " four times; run.completed.output is authoritative
    "runs_midstream.events.sse": (
        "completed",
        [
            user(R_MID, "hi"),
            assistant(f"assistant:{R_MID}", R_MID, text("text:0", "Partial answer" * 4)),
        ],
    ),
    "session_text.stream.sse": (
        "completed",
        [
            user(S_TEXT, "Say hello. scenario:text"),
            assistant(M_TEXT, S_TEXT, text("text:0", "Hello from the fake model.")),
        ],
    ),
    "session_tool.stream.sse": (
        "completed",
        [
            user(S_TOOL, "Plan one task with a tool. scenario:tool"),
            assistant(
                M_TOOL,
                S_TOOL,
                {
                    "id": "tool:0",
                    "type": "tool-call",
                    "toolCallId": "call_fake1b1f6de68ce9",
                    "toolName": "todo",
                    "args": TODO_ARGS,
                    "status": "completed",
                    "result": TODO_RESULT,
                },
                text("text:1", TOOL_TEXT),
            ),
        ],
    ),
    # the session stream reports an LLM failure as an answer (the truth of the wire),
    # which the adapter notes for CK120 (decisions.md 253)
    "session_fail.stream.sse": (
        "completed",
        [
            user(S_FAIL, "Fail at once. scenario:http400"),
            {
                **assistant(M_FAIL, S_FAIL, text("text:0", "HTTP 400: fake bad request")),
                "metadata": {"chatkit_trace.note": {"reported-failure": "HTTP 400: fake bad request"}},
            },
        ],
    ),
    "session_reason.stream.sse": (
        "completed",
        [
            user(S_REASON, "Think, then answer. scenario:reason"),
            assistant(
                M_REASON,
                S_REASON,
                {
                    "id": "reasoning:0",
                    "type": "reasoning",
                    "text": "The user wants a short answer.",
                },
                text("text:0", "Here is a short answer."),
            ),
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("seed", [None, 1, 2, 3, 4, 5])
def test_captured_stream_decodes_exactly(name: str, seed: int | None) -> None:
    status, messages = EXPECTED[name]
    got = decode(sse_values(load(name), seed))
    assert got.violations == []  # R3.8: only idempotent rejections
    assert got.status == status
    assert got.messages() == messages
    assert got.after_terminal == []  # `done` after the end carries nothing


def test_fail_is_a_well_formed_run_error() -> None:
    got = decode(sse_values(load("runs_fail.events.sse")))
    assert got.core.snapshot.run(got.run_id).error == RunError(
        "run.failed", "HTTP 400: fake bad request"
    )


def test_stream_cut_by_the_client_concludes_nothing() -> None:
    """R3.4: the session stream has no stop; a closed connection is no outcome."""
    got = decode(sse_values(load("session_slow.stream.sse")))
    assert got.violations == [] and got.status == "running"
    assert got.messages()[1]["parts"] == [text("text:0", "tick0 tick1 ")]


def test_update_kinds_per_frame() -> None:
    proto, ctx = HermesProtocol(), _ctx()
    values = sse_values(load("runs_tool.events.sse"))
    kinds = [[type(u).__name__ for u in proto.decode_event(v, ctx)] for v in values]
    assert kinds == [
        ["MessageUpdate", "PhaseUpdate"],  # tool.started
        ["MessageUpdate"],  # tool.completed
        ["MessageUpdate", "PhaseUpdate"],  # first delta of segment 1 ("\n\n" dropped)
        ["DeltaUpdate"],
        ["DeltaUpdate"],
        [],  # reasoning.available: never a reasoning part
        ["CompletedUpdate"],  # output equals what streamed: no message update
    ]


def _ctx(run_id: str = "r1") -> Any:
    from chatkit_trace.adapters import DecodeContext

    return DecodeContext(SESSION, run_id)


def test_turn_separator_is_dropped_only_after_a_tool() -> None:
    proto, ctx = HermesProtocol(), _ctx()

    def ev(**kw: Any) -> dict[str, Any]:
        return {"run_id": "r1", **kw}

    proto.decode_event(ev(event="message.delta", delta="\n\nkept"), ctx)
    proto.decode_event(ev(event="tool.started", tool="t"), ctx)
    proto.decode_event(ev(event="tool.completed", tool="t", error=True), ctx)
    proto.decode_event(ev(event="message.delta", delta="\n\nafter\n\n"), ctx)
    (more,) = proto.decode_event(ev(event="message.delta", delta="\n\nmore"), ctx)
    assert more == DeltaUpdate("assistant:r1", "text:1", "\n\nmore")
    parts = ctx.state["answer"].message().parts
    assert [p.id for p in parts] == ["text:0", "tool:0", "text:1"]
    assert parts[0].text == "\n\nkept" and parts[2].text == "after\n\n\n\nmore"
    assert parts[1].status == "failed" and parts[1].error.code == "tool_error"


def test_extension_frames_and_end_of_reader() -> None:
    """R11.4's table frames, when a backend adds them to /v1/runs; `done` and
    DONE are never conclusions (R3.4)."""
    proto, ctx = HermesProtocol(), _ctx()
    assert proto.decode_event({"event": "done", "run_id": "r1"}, ctx) == []
    assert proto.decode_event(DONE, ctx) == []
    assert proto.decode_event({"event": "run.interrupted", "run_id": "r1"}, ctx) == [
        InterruptedUpdate()
    ]
    assert proto.decode_event({"event": "run.cancelled", "run_id": "r1"}, ctx) == [
        InterruptedUpdate()
    ]
    assert proto.decode_event({"event": "error", "message": "boom"}, ctx) == [
        FailedUpdate(RunError("error", "boom"))
    ]
    started = proto.decode_event(
        {"type": "run.started", "run_id": "r1", "user_message": {"content": "q"}}, ctx
    )
    assert started == [
        MessageUpdate(RuntimeMessage("user:r1", "user", (TextPart("text", "q"),), run_id="r1"))
    ]
    assert proto.decode_event({"event": "approval.request", "run_id": "r1"}, ctx) == [
        PhaseUpdate("awaiting-input")
    ]
    assert proto.decode_event({"event": "run.completed", "run_id": "r1"}, ctx) == [
        CompletedUpdate()
    ]


@pytest.mark.parametrize(
    ("event", "starts", "ends"),
    [
        ("run.started", True, False),
        ("message.delta", False, False),
        ("run.completed", False, True),
        ("run.failed", False, True),
        ("run.cancelled", False, True),
        ("run.interrupted", False, True),
        ("done", False, True),
    ],
)
def test_identify_event(event: str, starts: bool, ends: bool) -> None:
    ident = HermesProtocol().identify_event(
        {"event": event, "run_id": "run_1", "session_id": "other", "seq": 3}
    )
    assert (ident.run_id, ident.session_id, ident.starts_run, ident.ends_response) == (
        "run_1",
        None,
        starts,
        ends,
    )
    assert HermesProtocol().identify_event(DONE) is None
    assert HermesProtocol().identify_event({"event": "done"}) is None


def test_event_sequence_is_seq() -> None:
    proto = HermesProtocol()
    assert [proto.event_sequence(v) for v in sse_values(load("session_fail.stream.sse"))] == [
        1,
        2,
        3,
        4,
        5,
    ]
    assert {proto.event_sequence(v) for v in sse_values(load("runs_text.events.sse"))} == {None}
    assert proto.event_sequence({"seq": True}) is None


def test_sequence_regression_is_reported_by_the_core() -> None:
    values = sse_values(load("session_text.stream.sse"))
    values[3], values[4] = values[4], values[3]  # seq 5 before seq 4
    got = decode(values)
    assert any("source-sequence-regressed" in v for v in got.violations)


def test_input_hooks() -> None:
    proto = HermesProtocol()
    prior = (
        RuntimeMessage("user:a", "user", (TextPart("text", "q1"),)),
        RuntimeMessage("assistant:a", "assistant", (TextPart("text:0", "a1"),)),
    )
    body = proto.encode_input("q2", EncodeContext("api_1", "r2", prior))
    assert body == {
        "input": "q2",
        "session_id": "api_1",
        "conversation_history": [
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "a1"},
        ],
    }
    assert proto.encode_input({"text": "x"}, EncodeContext("", "r")) == {"input": "x"}
    assert proto.decode_input(body) == "q2"
    assert proto.decode_input({"message": "from the session stream"}) == "from the session stream"
    assert (
        proto.decode_input(
            {"input": [{"role": "user", "content": "old"}, {"role": "user", "content": "new"}]}
        )
        == "new"
    )
    assert proto.decode_input({"model": "x"}) is None
    (msg,) = proto.project_input("q2", EncodeContext("api_1", "r2"))
    assert msg.to_json() == user("r2", "q2")


@pytest.mark.parametrize(
    ("name", "status", "error"),
    [
        ("runs_text", "completed", None),
        ("runs_fail", "failed", RunError("run.failed", "HTTP 400: fake bad request")),
        ("runs_stop", "interrupted", None),
        ("runs_running", None, None),
        ("runs_stopping", None, None),
    ],
)
def test_decode_status(name: str, status: str | None, error: RunError | None) -> None:
    value = json.loads(load(f"{name}.status.json"))
    snap = HermesProtocol().decode_status(value)
    if status is None:
        assert snap is None  # running / stopping settle nothing
        return
    assert (snap.id, snap.status, snap.origin, snap.phase) == (
        value["run_id"],
        status,
        "remote",
        "idle",
    )
    assert snap.created_at == value["created_at"] * 1000
    assert (snap.error or None) == error


def test_status_settles_a_run_whose_stream_was_lost() -> None:
    """The pipeline's use of decode_status: calibrate a run from the status read."""
    core = ChatCore(SESSION)
    core.send(R_STOP, "hi")
    core.dispatch_settled(R_STOP, True)
    snap = HermesProtocol().decode_status(json.loads(load("runs_stop.status.json")))
    assert core.calibrate_run(run_id=snap.id, status=snap.status).accepted
    assert core.snapshot.run(R_STOP).status == "interrupted"


def test_registry_name() -> None:
    assert isinstance(load_protocol("hermes"), HermesProtocol)
    assert HermesProtocol.name == "hermes"


def test_decode_status_checks_the_run() -> None:
    """The pipeline passes (value, session_id, run_id): another run's status settles nothing."""
    proto, value = HermesProtocol(), json.loads(load("runs_text.status.json"))
    assert proto.decode_status(value, SESSION, R_TEXT).id == R_TEXT
    assert proto.decode_status(value, SESSION, "run_other") is None
    assert proto.decode_status({"status": "failed"}, SESSION, "r9").error == fallback_error(
        "run.failed", "agent run failed", sent=None
    )


@pytest.mark.parametrize("sent", ["", "   ", None])
def test_a_failure_without_text_shows_a_fallback_that_keeps_what_was_sent(sent) -> None:
    """``run.failed`` with ``"error": ""`` (``str(exc)`` of a bare exception):
    the UI shows "agent run failed", and the error still says the backend sent
    nothing (CK302 reports it)."""
    event = {"event": "run.failed", "run_id": "r1"}
    if sent is not None:
        event["error"] = sent
    [update] = HermesProtocol().decode_event(event, _ctx())
    assert update.error.message == "agent run failed" and update.error.code == "run.failed"
    assert fallback_sent(update.error) == (True, sent)
    [real] = HermesProtocol().decode_event({**event, "error": "HTTP 400: bad"}, _ctx())
    assert real.error == RunError("run.failed", "HTTP 400: bad") and fallback_sent(real.error) == (False, None)


def test_tool_completed_is_a_limit_of_the_protocol() -> None:
    """tool.completed carries no result (completed or failed): the part is
    completed with an empty result (not absent, which reads as running) and
    the event names the limit; /v1/runs tool.started carries no arguments."""
    proto = HermesProtocol()
    assert proto.event_limits({"event": "tool.completed", "run_id": "r", "tool": "todo", "error": False}) == ("tool-result",)
    assert proto.event_limits({"event": "tool.completed", "run_id": "r", "tool": "todo", "error": True}) == ("tool-result",)
    assert proto.event_limits({"event": "tool.started", "run_id": "r", "tool": "todo", "preview": "p"}) == ("tool-args",)
    # the session chat stream's tool.started has the arguments
    assert proto.event_limits({"event": "tool.started", "run_id": "r", "tool_name": "todo", "args": {"a": 1}}) == ()
    assert proto.event_limits({"event": "message.delta", "run_id": "r", "delta": "x"}) == ()


@pytest.mark.parametrize(
    "name, result, failed",
    [
        ("read_file", '{"content": "", "error": "File not found: /x"}', True),
        ("todo", '{"todos": [], "summary": {"total": 0}}', False),
        ("memory", '{"success": false, "error": "Memory at 2200/2200 chars, would exceed the limit"}', True),
        ("terminal", '{"output": "", "exit_code": 2}', True),
        ("terminal", '{"output": "ok", "exit_code": 0, "error": null}', False),
        ("write_file", '{"bytes_written": 10, "path": "a"}', False),
        ("web_search", "Error: rate limited", True),
        ("web_search", "plain text answer", False),
    ],
)
def test_history_tool_rows_fail_by_hermes_own_rule(name, result, failed) -> None:
    """History rows carry no error flag: a tool row is failed when Hermes' own
    rule (the one behind tool.completed's ``error``) calls its result a failure."""
    from chatkit_trace.adapters.hermes import tool_failed

    assert tool_failed(name, result) is failed
    rows = [
        {"id": 1, "role": "user", "content": "go"},
        {"id": 2, "role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": name, "arguments": "{}"}}]},
        {"id": 3, "role": "tool", "content": result, "tool_call_id": "call_1", "tool_name": name},
    ]
    [_, answer] = HermesProtocol().decode_history({"object": "list", "data": rows}, "s").messages
    [part] = answer.parts
    assert part.status == ("failed" if failed else "completed") and part.result == result
    assert (part.error == RunError("tool_error", f"tool {name} reported an error")) is failed


def test_event_known() -> None:
    """Every frame of both surfaces is a known event (no CK406), odd ones are not."""
    proto = HermesProtocol()
    names = ("session_tool.stream.sse", "session_reason.stream.sse", "runs_tool.events.sse")
    assert all(proto.event_known(v) for n in names for v in sse_values(load(n)))
    assert not proto.event_known({"event": "response.created"})
    assert not proto.event_known(DONE)


def test_two_subscribers_split_the_run() -> None:
    """Hermes' event queue is not a broadcast: each subscriber sees part of the
    text, only one sees the conclusion; the other ends at `: stream closed`
    with the run still running (R3.4) until the status read settles it."""
    a = decode(sse_values(load("runs_two_subscribers.events_a.sse")))
    b = decode(sse_values(load("runs_two_subscribers.events_b.sse")))
    assert a.violations == b.violations == []
    assert (a.status, b.status) == ("running", "interrupted")
    assert a.messages()[1]["parts"] == [text("text:0", "tick0 tick1 tick3 ")]
    assert b.messages()[1]["parts"] == [text("text:0", "tick2 ")]
    snap = HermesProtocol().decode_status(json.loads(load("runs_two_subscribers.status.json")))
    assert a.core.calibrate_run(run_id=a.run_id, status=snap.status).accepted
    assert a.status == "interrupted"


def test_session_transcript_with_a_tool_the_live_events_never_showed() -> None:
    """A call to a tool that does not exist: Hermes sends no tool events live,
    the answer's text arrives as one segment, and run.completed's transcript
    (the same rows history stores) holds the call: the answer is rebuilt from
    it, so live and history show the same parts (real hermes-agent 0.19)."""
    rid, mid, call = "run_4a22", "msg_1009", "call_fakeb9331b887aa6"
    said = "Got 1 tool result(s). Tool 'no_such_tool' does not exist. Avai"

    def ev(name: str, **kw: Any) -> dict[str, Any]:
        return {"event": name, "session_id": SESSION, "run_id": rid, **kw}

    rows = [
        {"role": "assistant", "content": "Let me look.", "tool_calls": [{"id": call, "type": "function", "function": {
            "name": "no_such_tool", "arguments": '{"path": "/nonexistent/dir/missing.txt"}'}}]},
        {"role": "tool", "content": "Tool 'no_such_tool' does not exist. Available tools: todo", "tool_call_id": call},
        {"role": "assistant", "content": said},
    ]
    values = [
        ev("run.started", user_message={"role": "user", "content": "Bad tool."}),
        ev("message.started", message={"id": mid, "role": "assistant"}),
        ev("assistant.delta", message_id=mid, delta="Let me look."),
        ev("tool.progress", message_id=mid, tool_name="_thinking", delta="Let me look."),
        ev("assistant.delta", message_id=mid, delta=said),
        ev("assistant.completed", message_id=mid, content=said, completed=True),
        ev("run.completed", message_id=mid, completed=True, messages=rows),
        ev("done"),
    ]
    d = decode(values, input="Bad tool.")
    assert d.status == "completed" and not d.violations
    [_, answer] = d.core.snapshot.messages
    assert [(p.id, p.type) for p in answer.parts] == [("text:0", "text"), ("tool:0", "tool-call"), ("text:1", "text")]
    assert answer.parts[0].text == "Let me look." and answer.parts[2].text == said
    hist = HermesProtocol().decode_history(
        {"data": [{"id": 23, "role": "user", "content": "Bad tool."}, *[{"id": 24 + i, **r} for i, r in enumerate(rows)]]}, SESSION
    )
    [_, stored] = hist.messages
    assert [(p.id, p.type) for p in stored.parts] == [(p.id, p.type) for p in answer.parts]
    assert [getattr(p, "status", None) for p in stored.parts] == [getattr(p, "status", None) for p in answer.parts]


def test_v1_runs_completion_names_the_reasoning_limit() -> None:
    """/v1/runs has no event for the model's reasoning: its run.completed
    (output, no transcript) says so; the session stream's (a transcript
    with reasoning) does not (decisions.md 251)."""
    proto = HermesProtocol()
    assert proto.event_limits({"event": "run.completed", "run_id": "r", "output": "x"}) == ("reasoning",)
    assert proto.event_limits({"event": "run.completed", "run_id": "r", "messages": [], "output": "x"}) == ()
    assert proto.event_limits({"event": "reasoning.available", "run_id": "r", "text": "x"}) == ()


def _session(*events: tuple[str, dict[str, Any]], start: float = 100.0) -> list[dict[str, Any]]:
    return [{"event": name, "run_id": "r1", "session_id": "s", "seq": k, "ts": start + k, **data}
            for k, (name, data) in enumerate(events, 1)]


def _final(events: list[dict[str, Any]]) -> RuntimeMessage:
    proto, ctx = HermesProtocol(), _ctx()
    last = None
    for ev in events:
        for u in proto.decode_event(ev, ctx):
            if type(u).__name__ == "MessageUpdate" and u.message.role == "assistant":
                last = u.message
    assert last is not None
    return last


def test_transcript_rows_of_earlier_turns_are_left_out_and_noted() -> None:
    """A row stamped before the run began is an earlier turn's (hermes sends
    the whole conversation after a failed turn): not this answer; the note
    counts them (CK121; decisions.md 258)."""
    msg = _final(_session(
        ("run.started", {"user_message": {"role": "user", "content": "again"}}),
        ("message.started", {"message": {"id": "m1", "role": "assistant"}}),
        ("assistant.delta", {"message_id": "m1", "delta": "Hi again."}),
        ("assistant.completed", {"message_id": "m1", "content": "Hi again."}),
        ("run.completed", {"message_id": "m1", "messages": [
            {"role": "assistant", "content": "An earlier answer.", "timestamp": 50.0},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_0", "function": {"name": "todo", "arguments": "{}"}}], "timestamp": 60.0},
            {"role": "tool", "content": "{}", "tool_call_id": "call_0", "timestamp": 61.0},
            {"role": "assistant", "content": "Hi again."}]}),
    ))
    assert [p.text for p in msg.parts] == ["Hi again."]
    assert notes_of(msg) == {"earlier-rows": 3}


@pytest.mark.parametrize("rows, shown", [
    ([], "HTTP 400: fake bad request"),  # the model call failed: the turn has no row
    ([{"role": "assistant", "content": "(empty)"}], "(empty)"),  # hermes' sentinel for an empty reply
])
def test_a_failure_sent_as_the_answer_is_noted(rows, shown) -> None:
    """Nothing streamed and the turn's transcript holds no model answer equal
    to the final text: the final text is hermes' failure report (CK120)."""
    msg = _final(_session(
        ("run.started", {"user_message": {"role": "user", "content": "q"}}),
        ("message.started", {"message": {"id": "m1", "role": "assistant"}}),
        ("assistant.completed", {"message_id": "m1", "content": "HTTP 400: fake bad request"}),
        ("run.completed", {"message_id": "m1", "messages": rows}),
    ))
    assert msg.text == shown and notes_of(msg) == {"reported-failure": "HTTP 400: fake bad request"}


def test_an_answer_the_transcript_holds_is_no_failure() -> None:
    """A non-streamed answer (no delta) that the transcript holds is an answer."""
    msg = _final(_session(
        ("run.started", {"user_message": {"role": "user", "content": "q"}}),
        ("assistant.completed", {"message_id": "m1", "content": "Fine."}),
        ("run.completed", {"message_id": "m1", "messages": [{"role": "assistant", "content": "Fine."}]}),
    ))
    assert msg.text == "Fine." and notes_of(msg) == {}


def test_history_notes_the_stop_notice_after_a_tool() -> None:
    """hermes appends "Operation interrupted." to a turn a stop cut after a
    tool: a text part the message notes as the stop notice (CK117); the same
    text elsewhere is the model's."""
    call = {"id": "call_1", "function": {"name": "todo", "arguments": "{}"}}
    rows = [
        {"id": 1, "role": "user", "content": "q"},
        {"id": 2, "role": "assistant", "content": "", "tool_calls": [call], "finish_reason": "tool_calls"},
        {"id": 3, "role": "tool", "content": "{}", "tool_call_id": "call_1"},
        {"id": 4, "role": "assistant", "content": "Operation interrupted.", "finish_reason": None},
        {"id": 5, "role": "user", "content": "q2"},
        {"id": 6, "role": "assistant", "content": "Operation interrupted. Said the model.", "finish_reason": "stop"},
    ]
    hist = HermesProtocol().decode_history({"data": rows}, SESSION)
    first, second = [m for m in hist.messages if m.role == "assistant"]
    assert [p.id for p in first.parts] == ["tool:0", "text:1"] and notes_of(first) == {"stop-notice": ("text:1",)}
    assert notes_of(second) == {}
