"""The a2a adapter on the REAL a2a-sdk 1.3 server (peers/a2a), protocol v1.0 and v0.3.

Requests are built by the adapter itself (``encode_input``: the client-chosen
messageId, the session id as contextId); the raw response bytes go through
the wire parser (split at random byte boundaries), the adapter and a ChatCore,
the reader stopping at the first terminal (R2.5a) while later frames are still
decoded to check they carry no output.  Then ``tasks/get`` / ``GetTask`` is
decoded as history and compared with the live decode (R8.4).

    .ci/peers.sh
    CHATKIT_REQUIRE_PEERS=1 pytest tests/realservers/test_a2a_decode.py -m realserver
"""

from __future__ import annotations

import uuid

import pytest

from chatkit_trace.adapters import EncodeContext
from chatkit_trace.adapters.a2a import A2AProtocol
from chatkit_trace.core import RunError, ToolCallPart

from ..adapters.test_a2a_helpers import events, random_cuts, replay, visible

pytestmark = pytest.mark.realserver
VERSIONS = ["1.0", "0.3"]


def send(peer, version: str, text: str):
    """One message/stream | SendStreamingMessage in a fresh session; returns
    (protocol, session id, run id, the replayed run, the stream's values)."""
    proto = A2AProtocol(version)
    sid, run_id = f"ctx-{uuid.uuid4().hex[:10]}", f"run-{uuid.uuid4().hex[:8]}"
    body = proto.encode_input(text, EncodeContext(sid, run_id))
    resp = peer.stream("POST", "/", body, proto.headers, timeout=30)
    assert resp.status == 200 and resp.is_sse, resp.body[:300]
    values = events(resp.body, random_cuts(resp.body, 7))
    rep = replay(values, sid, run_id=run_id, input=text, version=version)
    assert rep.errors == [], rep.errors  # every event carries our contextId (R11.5)
    return proto, sid, rep, values


def get_task(peer, proto: A2AProtocol, task_id: str) -> dict:
    resp = peer.request("POST", "/", proto.request("get", {"id": task_id}, "h-1"), proto.headers)
    assert resp.status == 200
    return resp.json()


def task_of(rep) -> str:
    return next(m.id for m in rep.messages() if m.id.startswith("artifact:")).split(":")[1]


def assert_isomorphic(live, hist) -> None:
    assert [m.id for m in hist] == [m.id for m in live]
    for a, b in zip(live, hist, strict=False):
        assert (a.role, visible(a)) == (b.role, visible(b)), a.id


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("text", ["hello", "use the tool please"])
def test_text_and_tool_live_equals_history(a2a_peer, version: str, text: str) -> None:
    proto, sid, rep, _ = send(a2a_peer, version, text)
    assert rep.status == "completed" and rep.violations == [] and rep.after == []
    messages = rep.messages()
    assert messages[0].id == f"{rep.run_id}:user" and messages[0].text == text  # projected = echoed
    # the real server exposes tool activity as untyped data parts only
    assert not [p for m in messages for p in m.parts if isinstance(p, ToolCallPart)]
    if "tool" in text:
        assert [p.kind for m in messages for p in m.parts if p.type == "data"] == [
            "a2a.data",
            "a2a.data",
        ]
    hist = proto.decode_history(get_task(a2a_peer, proto, task_of(rep)), sid)
    assert_isomorphic(messages, hist.messages)
    assert [s.status for s in hist.run_snapshots] == ["completed"]


@pytest.mark.parametrize("version", VERSIONS)
def test_fail_live_and_history_agree_on_the_error(a2a_peer, version: str) -> None:
    proto, sid, rep, _ = send(a2a_peer, version, "please fail")
    view = rep.core.snapshot.run(rep.run_id)
    state = "TASK_STATE_FAILED" if version == "1.0" else "failed"
    assert view.status == "failed" and view.error == RunError(
        state, "scripted failure: upstream unavailable"
    )
    hist = proto.decode_history(get_task(a2a_peer, proto, task_of(rep)), sid)
    assert_isomorphic(rep.messages(), hist.messages)
    assert hist.run_snapshots[0].error == view.error and rep.violations == []


@pytest.mark.parametrize("version", VERSIONS)
def test_crash_live_error_frame_vs_history_failed_state(a2a_peer, version: str) -> None:
    proto, sid, rep, values = send(a2a_peer, version, "please crash")
    assert "error" in values[-1] and rep.violations == []
    view = rep.core.snapshot.run(rep.run_id)
    assert (view.status, view.error.code, view.error.message) == (
        "failed",
        "-32603",
        "scripted executor crash",
    )
    hist = proto.decode_history(get_task(a2a_peer, proto, task_of(rep)), sid)
    assert_isomorphic(rep.messages(), hist.messages)
    # what differs: history only knows the stored state, not the JSON-RPC error
    state = "TASK_STATE_FAILED" if version == "1.0" else "failed"
    assert hist.run_snapshots[0].error == RunError(state, "the task failed")


@pytest.mark.parametrize("version", VERSIONS)
def test_slow_cancel_resubscribe(a2a_peer, version: str) -> None:
    proto = A2AProtocol(version)
    sid, run_id = f"ctx-{uuid.uuid4().hex[:10]}", f"run-{uuid.uuid4().hex[:8]}"
    body = proto.encode_input("be slow", EncodeContext(sid, run_id))
    with a2a_peer.open_stream("POST", "/", body, proto.headers) as main:
        main.read(max_events=4, timeout=20)
        task = proto.identify_event(events(bytes(main.body))[0]).run_id
        with a2a_peer.open_stream(
            "POST", "/", proto.request("resubscribe", {"id": task}, "r"), proto.headers
        ) as sub:
            sub.read(max_events=2, timeout=10)
            cancel = a2a_peer.request(
                "POST", "/", proto.request("cancel", {"id": task}, "c"), proto.headers
            )
            sub.read(timeout=10)
            main.read(timeout=10)
            main_raw, sub_raw = main.result().body, sub.result().body
    rep = replay(
        events(main_raw, random_cuts(main_raw, 3)),
        sid,
        run_id=run_id,
        input="be slow",
        version=version,
    )
    view = rep.core.snapshot.run(run_id)
    assert (view.status, view.interrupt_reason) == ("interrupted", "canceled")
    assert rep.violations == [] and rep.after == []
    art = f"artifact:{task}:answer"
    ticks = rep.core.snapshot.message(art).text
    assert ticks.startswith("tick 0 tick 1 ")
    # resubscribe: a Task snapshot, then live; same ids and the same final content
    again = replay(events(sub_raw), sid, run_id=task, version=version)
    assert again.violations == [] and again.core.snapshot.message(art).text == ticks
    assert proto.decode_status(cancel.json(), sid, run_id).status == "interrupted"
    hist = proto.decode_history(get_task(a2a_peer, proto, task), sid)
    assert_isomorphic(rep.messages(), hist.messages)
    assert (hist.run_snapshots[0].status, hist.run_snapshots[0].interrupt_reason) == (
        "interrupted",
        "canceled",
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_adk_bridge_tool_call_live_equals_history(adk_bridge_peer, version: str) -> None:
    """google-adk's A2A bridge: the one real convention for tool calls over A2A
    (data parts marked ``adk_type``), decoded into a ToolCallPart with its result."""
    proto = A2AProtocol(version)
    sid, run_id = f"ctx-{uuid.uuid4().hex[:10]}", f"run-{uuid.uuid4().hex[:8]}"
    text = "What is the weather in Paris?"
    path = adk_bridge_peer.bridge_path
    resp = adk_bridge_peer.stream(
        "POST", path, proto.encode_input(text, EncodeContext(sid, run_id)), proto.headers
    )
    rep = replay(
        events(resp.body, random_cuts(resp.body, 11)),
        sid,
        run_id=run_id,
        input=text,
        version=version,
    )
    assert (
        rep.errors == [] and rep.status == "completed" and rep.violations == [] and rep.after == []
    )
    (tool,) = [p for m in rep.messages() for p in m.parts if isinstance(p, ToolCallPart)]
    assert (tool.tool_name, tool.effective_status) == ("get_weather", "completed")
    got = adk_bridge_peer.request(
        "POST", path, proto.request("get", {"id": task_of(rep)}, "h"), proto.headers
    )
    assert_isomorphic(rep.messages(), proto.decode_history(got.json(), sid).messages)
