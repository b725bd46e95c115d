"""The ``adk`` adapter on a REAL ``adk api_server`` (google-adk, scripted model):
raw /run_sse bytes -> wire -> adapter -> ChatCore, then the session history.

Run with ``CHATKIT_REQUIRE_PEERS=1 pytest tests/realservers/test_adk_decode.py -m realserver``.
Where live and history cannot agree, the test asserts exactly what differs.
"""

from __future__ import annotations

import uuid

import pytest

from chatkit_trace.adapters import EncodeContext, FailedUpdate
from chatkit_trace.adapters.adk import ADKProtocol
from chatkit_trace.core import RunError
from tests.adapters.test_adk import replay, sse_values, without_run

pytestmark = pytest.mark.realserver


def _frames(resp):
    assert resp.status == 200, resp.summary()
    return sse_values(resp.body)


def _assistant(messages: dict) -> dict:
    return {k: m for k, m in without_run(messages).items() if m["role"] == "assistant"}


@pytest.mark.parametrize("scenario", ["text_tool", "nostream"])
def test_text_tool_live_history_and_the_unpinned_run_id(adk_peer, scenario):
    ex = adk_peer.scenario(scenario)
    frames, inv = _frames(ex["stream"]), ex.ids["invocation_id"]
    r = replay(frames, input=adk_peer.TEXTS[scenario])
    assert (
        r.violations == [] and r.terminal is None and r.status("r1") == "running"
    )  # no conclusion (R3.4)
    finals = [
        f["id"]
        for f in frames
        if f.get("partial") is not True and f.get("content", {}).get("role") == "model"
    ]
    live = r.messages("r1")
    assert list(live) == ["user:r1", *finals]
    call = live[finals[0]]["parts"]
    assert [p["id"].split(":")[0] for p in call] == ["reasoning", "text", "tool"]
    assert call[2]["result"] == {"city": "Paris", "condition": "sunny", "temperature_c": 22}
    hist = r.decoder.history(ex["history"].json())
    h = {m.id: m.to_json() for m in hist.messages}
    assert _assistant(h) == _assistant(live)  # same ids, parts and content (R8.4)
    assert set(live) ^ set(h) == {"user:r1", f"user:{inv}"}  # ADK never streams the user message
    assert live["user:r1"]["parts"] == h[f"user:{inv}"]["parts"]
    assert [(s.id, s.status) for s in hist.run_snapshots] == [(inv, "completed")]
    # Unpinned, history's run id is the invocation id: it cannot settle r1.
    assert r.core.apply_history(hist).ok
    assert r.status("r1") == "running" and r.status(inv) == "completed"


def test_pinned_runs_are_isomorphic_and_settled_by_history(adk_peer):
    proto = ADKProtocol(adk_peer.app, adk_peer.user, pin_invocation_id=True)
    sid = f"s-pin-{uuid.uuid4().hex[:8]}"
    run1, run2 = f"{sid}:run-1", f"{sid}:run-2"
    assert adk_peer.create_session(sid).status == 200
    body = proto.encode_input(adk_peer.TEXTS["text_tool"], EncodeContext(sid, run1))
    r = replay(
        _frames(adk_peer.stream("POST", "/run_sse", body)),
        run_id=run1,
        session=sid,
        protocol=proto,
        input=proto.decode_input(body),
    )
    live1 = r.messages(run1)
    assert r.core.apply_history(r.decoder.history(adk_peer.get_session(sid).json())).ok
    assert r.status(run1) == "completed" and r.messages(run1) == live1  # user message included
    body = proto.encode_input(adk_peer.TEXTS["slow"], EncodeContext(sid, run2))
    cut = adk_peer.stream("POST", "/run_sse", body, max_events=3, timeout=30)
    assert cut.ended_by == "client"
    replay(_frames(cut), run_id=run2, into=r, stream=1, input=proto.decode_input(body))
    history = adk_peer._wait_history(
        sid, lambda evs: any(e.get("errorCode") == "INVOCATION_ABORTED" for e in evs)
    )
    assert r.core.apply_history(r.decoder.history(history.json())).ok
    view = r.core.snapshot.run(run2)
    assert (view.status, view.interrupt_reason) == ("interrupted", "abort")
    assert r.core.apply_history(r.decoder.history(history.json())).ok
    assert list(r.messages(run2)) == [f"user:{run2}"]  # the streamed partial text is not in history
    assert r.violations == [] and r.messages(run1) == live1


def test_error_code_fails_and_history_agrees(adk_peer):
    ex = adk_peer.scenario("error")
    r = replay(_frames(ex["stream"]))
    view = r.core.snapshot.run("r1")
    assert r.violations == [] and view.status == "failed"
    assert view.error == RunError("SAFETY", "scripted safety block")
    hist = r.decoder.history(ex["history"].json())
    assert _assistant({m.id: m.to_json() for m in hist.messages}) == _assistant(r.messages())
    assert [(s.status, s.error) for s in hist.run_snapshots] == [("failed", view.error)]


def test_exception_fails_and_history_drops_the_partial_text(adk_peer):
    ex = adk_peer.scenario("fail")
    frames = _frames(ex["stream"])
    r = replay(frames)
    view = r.core.snapshot.run("r1")
    assert r.violations == [] and view.status == "failed" and view.error.code == "UNAVAILABLE"
    assert r.terminal == len(frames) - 2  # the errorCode event; the {"error"} frame follows
    assert r.after == [
        FailedUpdate(RunError("ServerError", frames[-1]["error_details"]["error_message"]))
    ]
    hist = r.decoder.history(ex["history"].json())
    assert (
        len(_assistant(r.messages())) == 1
        and _assistant({m.id: m.to_json() for m in hist.messages}) == {}
    )
    assert [(s.status, s.error) for s in hist.run_snapshots] == [("failed", view.error)]


def test_slow_cut_by_the_client_is_interrupted_only_in_history(adk_peer):
    ex = adk_peer.scenario("slow")
    assert ex["stream"].ended_by == "client"
    r = replay(_frames(ex["stream"]))
    assert r.violations == [] and r.terminal is None and len(_assistant(r.messages())) == 1
    hist = r.decoder.history(ex["history"].json())
    assert [m.role for m in hist.messages] == ["user"]
    assert [(s.id, s.status) for s in hist.run_snapshots] == [
        (ex.ids["invocation_id"], "interrupted")
    ]
