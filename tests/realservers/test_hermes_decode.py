"""The hermes adapter on the REAL hermes-agent API server (both event surfaces).

Raw bytes from the server go SSEParser -> frame_from_sse -> event_json ->
SessionDecoder.decode -> ChatCore.admit; the Core's reader stops at the first
terminal (R2.5a) and the later frames are still decoded to prove they carry
nothing.  Live and history are compared where the protocol allows; where it
cannot (server-minted row ids, tool events without call ids) the test states
exactly what differs.  Run: CHATKIT_REQUIRE_PEERS=1 pytest tests/realservers -m realserver
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from chatkit_trace.adapters import EncodeContext, create_adapter
from chatkit_trace.adapters.hermes import HermesProtocol
from chatkit_trace.core import ChatCore, RunError, check_history
from chatkit_trace.wire import SSEParser, event_json, frame_from_sse

from .harness import HermesServer

pytestmark = pytest.mark.realserver
PROTO = HermesProtocol()
TOOL_TEXT = 'The tool said: {"todos": [{"id": "1", "content": "check the fake model", "s'


@dataclass
class Run:
    core: ChatCore
    run_id: str
    events: list[Any]
    violations: list[str] = field(default_factory=list)
    after_terminal: list[Any] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.core.snapshot.run(self.run_id).status

    def messages(self) -> list[dict]:
        return [m.to_json() for m in self.core.snapshot.messages]


def decode(body: bytes, input: str, run_id: str | None = None, session: str = "s") -> Run:
    parser = SSEParser()
    events = []
    for i, ev in enumerate(parser.feed(body) + parser.flush()):
        value, error = event_json(frame_from_sse(ev, 0, i, 0.0))
        assert error is None, error
        if value is not None:
            events.append(value)
    run_id = run_id or events[0]["run_id"]
    dec = create_adapter(PROTO).decoder(session)
    core = ChatCore(session)
    core.send(run_id, input, project=dec.project(input, run_id))
    core.dispatch_settled(run_id, True)
    run, ended = Run(core, run_id, events), False
    for i, value in enumerate(events):
        d = dec.decode(value, run_id=run_id, fallback_id=f"0:{i}")
        assert d.error is None, d.error
        if ended:
            run.after_terminal += d.facts
            continue
        for fact in d.facts:
            if (r := core.admit(fact)).violation:
                run.violations.append(f"{type(fact).__name__}: {r.reason} {r.detail}")
        ended = d.terminal
    assert run.violations == [] and run.after_terminal == []
    return run


def tool_part(run_id: str) -> dict:
    return {
        "id": "tool:0",
        "type": "tool-call",
        "toolCallId": f"{run_id}:t0",
        "toolName": "todo",
        "status": "completed",
    }


@pytest.mark.parametrize("what", ["text", "tool", "fail", "reasoning", "midstream"])
def test_runs_surface(hermes_peer: HermesServer, what: str) -> None:
    ex = hermes_peer.scenario(f"runs_{what}")
    rid = ex.ids["run_id"]
    run = decode(ex["events"].body, HermesServer.TEXTS[what], rid)
    idents = [PROTO.identify_event(e) for e in run.events]
    assert {i.run_id for i in idents} == {rid} and not any(
        i.starts_run for i in idents
    )  # no run.started
    assert [i.ends_response for i in idents] == [False] * (len(idents) - 1) + [True]
    assert {PROTO.event_sequence(e) for e in run.events} == {None}  # no seq on /v1/runs
    status = ex["status"].json()
    snap = PROTO.decode_status(status)
    assert snap.id == rid and snap.status == run.status
    answer = [m["parts"] for m in run.messages() if m["role"] == "assistant"]
    if what == "fail":
        assert run.status == "failed" and answer == []
        assert (
            run.core.snapshot.run(rid).error
            == snap.error
            == RunError("run.failed", "HTTP 400: fake bad request")
        )
        return
    assert run.status == "completed"
    expected = {
        "text": [{"id": "text:0", "type": "text", "text": "Hello from the fake model."}],
        "tool": [
            {**tool_part(rid), "result": None},  # tool.completed has no result: completed, empty (CK306)
            {"id": "text:1", "type": "text", "text": TOOL_TEXT},
        ],  # "\n\n" dropped
        "reasoning": [
            {"id": "text:0", "type": "text", "text": "Here is a short answer."}
        ],  # reasoning never streamed
        "midstream": [
            {"id": "text:0", "type": "text", "text": status["output"]}
        ],  # output wins over the deltas
    }[what]
    assert answer == [expected]
    assert answer[0][-1]["text"] == status["output"]


def test_runs_stop(hermes_peer: HermesServer) -> None:
    ex = hermes_peer.scenario("runs_stop")
    rid = ex.ids["run_id"]
    assert ex["stop"].json() == {"run_id": rid, "status": "stopping"}
    run = decode(ex["events"].body, HermesServer.TEXTS["stop"], rid)
    assert run.events[-1]["event"] == "run.cancelled" and run.status == "interrupted"
    assert run.messages()[1]["parts"][0]["text"].startswith("tick0 ")
    assert PROTO.decode_status(ex["status"].json()).status == "interrupted"
    assert hermes_peer.stop_run(rid).status == 404  # a finished run cannot be stopped again


@pytest.mark.parametrize("what", ["text", "tool", "fail"])
def test_session_stream_and_history(hermes_peer: HermesServer, what: str) -> None:
    ex = hermes_peer.scenario(f"session_{what}")
    run = decode(ex["stream"].body, HermesServer.TEXTS[what])
    names = [e["event"] for e in run.events]
    assert names[0] == "run.started" and names[-2:] == ["run.completed", "done"]
    assert [PROTO.event_sequence(e) for e in run.events] == list(range(1, len(names) + 1))
    assert PROTO.identify_event(run.events[0]).starts_run
    assert run.status == "completed"  # also for the model failure: the session stream says so
    history = PROTO.decode_history(ex["history"].json(), ex.ids["session_id"])
    assert check_history(history) is None
    live, hist = run.messages(), [m.to_json() for m in history.messages]
    assert live[1]["id"].startswith("msg_") and hist[0]["id"].startswith("user:")  # ids never match
    if what == "fail":
        assert live[1]["parts"] == [
            {"id": "text:0", "type": "text", "text": "HTTP 400: fake bad request"}
        ]
        assert [m["role"] for m in hist] == ["user"]  # the failed answer is not stored
        return
    strip = [{k: v for k, v in m.items() if k not in ("id", "runId")} for m in live]
    assert strip == [{k: v for k, v in m.items() if k != "id"} for m in hist]


def test_session_stream_cut_by_the_client(hermes_peer: HermesServer) -> None:
    sid = hermes_peer.create_session().json()["session"]["id"]
    resp = hermes_peer.session_chat_stream(
        sid, HermesServer.TEXTS["stop"], max_events=4, timeout=30
    )
    assert resp.ended_by == "client"
    run = decode(resp.body, HermesServer.TEXTS["stop"])
    assert run.status == "running"  # no stop endpoint, no conclusion (R3.4)


@pytest.mark.parametrize("what", ["text", "tool", "reasoning"])
def test_runs_with_encoded_input_and_history(hermes_peer: HermesServer, what: str) -> None:
    """encode_input's body on the real server; history of a /v1/runs session."""
    sid = f"chatkit-{what}"
    body = PROTO.encode_input(HermesServer.TEXTS[what], EncodeContext(sid, "pending"))
    rid = hermes_peer.request("POST", "/v1/runs", body).json()["run_id"]
    run = decode(hermes_peer.run_events(rid).body, HermesServer.TEXTS[what], rid, sid)
    assert PROTO.decode_input(body) == HermesServer.TEXTS[what]
    history = PROTO.decode_history(hermes_peer.session_messages(sid).json(), sid)
    live, hist = run.messages(), [m.to_json() for m in history.messages]
    assert [m["id"] for m in live] == [f"user:{rid}", f"assistant:{rid}"]
    assert [m["id"].split(":")[0] for m in hist] == ["user", "assistant"] and hist[0][
        "parts"
    ] == live[0]["parts"]
    l_parts, h_parts = live[1]["parts"], hist[1]["parts"]
    if what == "text":
        assert l_parts == h_parts
    elif what == "reasoning":  # stored, never streamed on /v1/runs
        assert [p["id"] for p in h_parts] == ["reasoning:0", "text:0"] and h_parts[1:] == l_parts
    else:
        assert l_parts[1] == h_parts[1] and h_parts[0]["toolCallId"].startswith("call_")
        assert {k: v for k, v in h_parts[0].items() if k not in ("args", "result")} == {
            **tool_part(rid),
            "toolCallId": h_parts[0]["toolCallId"],
        }
    # a second turn: the model's context goes in conversation_history; nothing is stored twice
    prior = tuple(run.core.snapshot.messages)
    body2 = PROTO.encode_input("Again. scenario:text", EncodeContext(sid, "pending", prior))
    assert [h["role"] for h in body2["conversation_history"]] == ["user", "assistant"]
    rid2 = hermes_peer.request("POST", "/v1/runs", body2).json()["run_id"]
    decode(hermes_peer.run_events(rid2).body, "Again. scenario:text", rid2, sid)
    rows = hermes_peer.session_messages(sid).json()["data"]
    assert [r["role"] for r in rows if r["role"] == "user"] == ["user", "user"]


def test_runs_two_subscribers(hermes_peer: HermesServer) -> None:
    """Two subscribers split one run's events; exactly one sees the conclusion,
    the other stays running (R3.4) until the status read settles it."""
    ex = hermes_peer.scenario("runs_two_subscribers")
    rid = ex.ids["run_id"]
    runs = [
        decode(ex[s].body, HermesServer.TEXTS["two_subscribers"], rid)
        for s in ("events_a", "events_b")
    ]
    assert sorted(r.status for r in runs) == ["interrupted", "running"]
    ticks = [e["delta"] for r in runs for e in r.events if e["event"] == "message.delta"]
    assert sorted(ticks, key=lambda t: int(t[4:])) == [f"tick{i} " for i in range(len(ticks))]
    snap = PROTO.decode_status(ex["status"].json(), "s", rid)
    assert snap.status == "interrupted"
    lagging = next(r for r in runs if r.status == "running")
    assert lagging.core.calibrate_run(run_id=rid, status=snap.status).accepted
