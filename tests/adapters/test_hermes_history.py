"""History (``GET /api/sessions/{id}/messages``) against the live decode of the
same run (SPEC R8.4, R4.3).

Hermes cannot be isomorphic: history rows carry integer ids minted by its
SessionDB and no run id, the live streams carry ``run_<hex>`` / ``msg_<hex>``
ids, so **message ids always differ** (the analyzers report that once per
trace as a protocol limitation).  Everything else is asserted equal where the
wire gives it: part ids, part types and visible text on both surfaces, and on
the session stream (whose ``run.completed.messages`` is the stored
transcript) the whole part content, tool call ids, args and results included.
"""

from __future__ import annotations

import json

import pytest

from chatkit_trace.adapters.hermes import HermesProtocol
from chatkit_trace.core import ChatCore, HistoryFormatError, check_history

from .test_hermes import SESSION, decode, load, sse_values


def live_and_history(stem: str, step: str, input: str = "hi") -> tuple[list[dict], list[dict]]:
    got = decode(sse_values(load(f"{stem}.{step}.sse")), input=input)
    assert got.violations == []
    history = HermesProtocol().decode_history(json.loads(load(f"{stem}.history.json")), SESSION)
    assert check_history(history) is None  # a valid batch (R3.7)
    return got.messages(), [m.to_json() for m in history.messages]


def without_ids(msg: dict) -> dict:
    return {k: v for k, v in msg.items() if k not in ("id", "runId")}


def test_session_stream_history_differs_only_in_message_ids() -> None:
    for stem, rows in (
        ("session_text", (22, 23)),
        ("session_tool", (24, 25)),
        ("session_reason", (1, 2)),
    ):
        live, hist = live_and_history(stem, "stream")
        run_id = live[0]["runId"]
        assert [m["id"] for m in live] == [f"user:{run_id}", live[1]["id"]]
        assert live[1]["id"].startswith("msg_")  # the server's message_id
        assert [m["id"] for m in hist] == [f"user:{rows[0]}", f"assistant:{rows[1]}"]
        assert all("runId" not in m for m in hist)  # history rows have no run id
        assert [without_ids(m) for m in live] == [without_ids(m) for m in hist]


def test_session_reasoning_is_in_history_and_in_the_final_transcript() -> None:
    live, hist = live_and_history("session_reason", "stream")
    assert (
        [p["type"] for p in hist[1]["parts"]]
        == ["reasoning", "text"]
        == [p["type"] for p in live[1]["parts"]]
    )


def test_runs_surface_text_history() -> None:
    live, hist = live_and_history("runs_session", "events", "Say hello. scenario:text")
    run_id = live[1]["runId"]
    assert [m["id"] for m in live] == [f"user:{run_id}", f"assistant:{run_id}"]
    assert [m["id"] for m in hist] == ["user:20", "assistant:21"]
    assert [without_ids(m) for m in live] == [without_ids(m) for m in hist]
    assert hist[1]["parts"] == [
        {"id": "text:0", "type": "text", "text": "Hello from the fake model."}
    ]


def test_runs_surface_tool_history_has_what_the_events_lack() -> None:
    """/v1/runs tool events carry no call id, args or result (the part ids,
    types and visible text still match)."""
    live, hist = live_and_history(
        "runs_session_tool", "events", "Plan one task with a tool. scenario:tool"
    )
    assert live[0]["parts"] == hist[0]["parts"]
    run_id = live[1]["runId"]
    (l_tool, l_text), (h_tool, h_text) = live[1]["parts"], hist[1]["parts"]
    assert l_text == h_text and l_text["id"] == "text:1"
    assert (
        (l_tool["id"], l_tool["type"], l_tool["toolName"], l_tool["status"])
        == (h_tool["id"], h_tool["type"], h_tool["toolName"], h_tool["status"])
        == ("tool:0", "tool-call", "todo", "completed")
    )
    differs = {
        k: (l_tool.get(k), h_tool.get(k))
        for k in set(l_tool) | set(h_tool)
        if l_tool.get(k) != h_tool.get(k)
    }
    assert sorted(differs) == ["args", "result", "toolCallId"]
    assert differs["toolCallId"] == (f"{run_id}:t0", "call_fake1c2d3ae58c9c")
    assert differs["args"][0] is None and differs["result"][0] is None


def test_failed_and_cut_runs_keep_only_the_user_row() -> None:
    """The session stream shows an LLM failure as an answer, and a cut stream
    shows partial text, but neither is stored: history has the user row only."""
    for stem in ("session_fail", "session_slow"):
        live, hist = live_and_history(stem, "stream")
        assert [m["role"] for m in live] == ["user", "assistant"]
        assert [m["role"] for m in hist] == ["user"] and hist[0]["parts"] == live[0]["parts"]


def test_refresh_replaces_the_live_ids_with_the_history_ids() -> None:
    """What R8.4's non-isomorphism costs: after a refresh the UI re-keys every message."""
    got = decode(sse_values(load("session_tool.stream.sse")))
    history = HermesProtocol().decode_history(
        json.loads(load("session_tool.history.json")), SESSION
    )
    core: ChatCore = got.core
    assert core.apply_history(history).ok
    assert [m.id for m in core.snapshot.messages] == ["user:24", "assistant:25"]


def test_history_shapes() -> None:
    proto = HermesProtocol()
    assert proto.decode_history({"object": "list", "data": []}, SESSION).messages == ()
    rows = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": ""},
        {"role": "system", "content": "note"},
    ]
    assert [m.id for m in proto.decode_history(rows, SESSION).messages] == ["user:#0", "system:#2"]
    with pytest.raises(HistoryFormatError):  # a 404 body is not an empty history
        proto.decode_history({"error": "not found"}, SESSION)
