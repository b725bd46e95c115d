"""A2A adapter: requests (encode/project/decode input), identity, contextId, odd frames."""

from __future__ import annotations

import pytest

from chatkit_trace.adapters import (
    DecodeContext,
    EncodeContext,
    FailedUpdate,
    create_adapter,
    fallback_error,
    load_protocol,
)
from chatkit_trace.adapters.a2a import A2AProtocol, ContextMismatch, state_name
from chatkit_trace.core import ChatCore, RunError, TextPart, freeze
from chatkit_trace.wire import DONE

from .test_a2a_helpers import context_of, events, load, request

CTX = EncodeContext("sess-1", "run-1")


def test_registry_name() -> None:
    proto = load_protocol("a2a")
    assert isinstance(proto, A2AProtocol) and proto.name == "a2a" and proto.version == "1.0"
    with pytest.raises(ValueError):
        A2AProtocol("2.0")


@pytest.mark.parametrize(
    "version,method,role",
    [("1.0", "SendStreamingMessage", "ROLE_USER"), ("0.3", "message/stream", "user")],
)
def test_encode_project_decode_input_round_trip(version: str, method: str, role: str) -> None:
    proto = A2AProtocol(version)
    body = proto.encode_input("hello", CTX)
    assert body["jsonrpc"] == "2.0" and body["id"] == "run-1" and body["method"] == method
    msg = body["params"]["message"]
    # the client chooses the messageId (from the run id) and sends the session as contextId
    assert (msg["messageId"], msg["role"], msg["contextId"]) == ("run-1:user", role, "sess-1")
    assert ("kind" in msg) == (version == "0.3")
    (user,) = proto.project_input("hello", CTX)
    assert (user.id, user.role, user.parts, user.run_id) == (
        "run-1:user",
        "user",
        (TextPart("text:0", "hello"),),
        "run-1",
    )
    back = proto.decode_input(body)
    assert (
        back["text"] == "hello"
        and back["messageId"] == "run-1:user"
        and back["contextId"] == "sess-1"
    )
    assert proto.encode_input(back, CTX) == body  # decode_input inverts encode_input
    assert proto.headers == ({"A2A-Version": "1.0"} if version == "1.0" else {})


def test_input_fields_and_other_requests() -> None:
    proto = A2AProtocol()
    msg = proto.user_message(
        {"text": "Paris", "messageId": "m-2", "taskId": "t-1", "metadata": {"a": 1}}, CTX
    )
    assert (msg["messageId"], msg["taskId"], msg["metadata"]) == ("m-2", "t-1", {"a": 1})
    assert (
        proto.decode_input(b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}')
        is None
    )
    assert proto.decode_input(b"not json") is None
    assert proto.request("cancel", {"id": "t"}, 5)["method"] == "CancelTask"
    assert A2AProtocol("0.3").request("get", {"id": "t"}, 5)["method"] == "tasks/get"


@pytest.mark.parametrize("v", ["v10", "v03"])
def test_recorded_request_projects_the_echoed_user_message(v: str) -> None:
    values = events(load(f"{v}-text.stream.sse"))
    proto = A2AProtocol()
    sid = context_of(values)
    (projected,) = proto.project_input(
        proto.decode_input(request(f"{v}-text.stream")), EncodeContext(sid, "run-1")
    )
    echoed = proto.decode_event(values[0], DecodeContext(sid, "run-1"))[0].message
    assert echoed == projected


@pytest.mark.parametrize("v", ["v10", "v03"])
def test_identify_event(v: str) -> None:
    proto = A2AProtocol()
    values = events(load(f"{v}-input.stream.sse"))
    got = [proto.identify_event(e) for e in values]
    task, cid = got[0].run_id, context_of(values)
    assert all(i.run_id == task and i.session_id == cid for i in got)
    assert [i.starts_run for i in got] == [True, True, False]  # submitted, working, input-required
    # v0.3 sends final:false with input-required; the state still ends this reader
    assert [i.ends_response for i in got] == [False, False, True]
    text = [proto.identify_event(e) for e in events(load(f"{v}-text.stream.sse"))]
    assert [i.ends_response for i in text] == [False] * (len(text) - 1) + [True]
    crash = events(load(f"{v}-crash.stream.sse"))
    assert proto.identify_event(crash[-1]) is None  # an error frame names no task (R11.7)
    assert proto.identify_event(DONE) is None and proto.identify_event({"result": 3}) is None


def test_final_alone_is_never_a_conclusion() -> None:
    event = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "kind": "status-update",
            "taskId": "t",
            "contextId": "s",
            "final": True,
            "status": {"state": "working"},
        },
    }
    proto = A2AProtocol()
    assert proto.identify_event(event).ends_response
    assert [u.type for u in proto.decode_event(event, DecodeContext("s", "r"))] == ["phase"]


def test_context_mismatch_is_not_admitted() -> None:
    """The pipeline checks identify_event's contextId and admits a foreign
    event under its own session (the Core says wrong-session, CK501), so the
    adapter decodes leniently by default; check_context=True makes a direct
    stream's decoder refuse it instead (a decode error ends the read, R2.5)."""
    values = events(load("v10-text.stream.sse"))
    adapter = create_adapter(A2AProtocol(), subscribe=True)
    routed = adapter.decoder("other-session").route(values[1], fallback_id="0:1")
    assert routed.facts == [] and routed.identity.session_id == context_of(values)
    assert A2AProtocol().decode_event(values[1], DecodeContext("other-session", "r"))
    strict = A2AProtocol()
    strict.check_context = True
    direct = create_adapter(strict).decoder("other-session").decode(values[1], run_id="r", fallback_id="0:1")
    assert direct.facts == [] and "ContextMismatch" in direct.error
    with pytest.raises(ContextMismatch):
        strict.decode_event(values[1], DecodeContext("other-session", "r"))


def test_odd_frames() -> None:
    proto, ctx = A2AProtocol(), DecodeContext("s", "r")
    for event in (
        DONE,
        None,
        3,
        "x",
        [],
        {},
        {"result": None},
        {"result": {"kind": "nope"}},
        {"jsonrpc": "2.0"},
    ):
        assert proto.decode_event(event, ctx) == []
    (failed,) = proto.decode_event(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {
                "code": -32001,
                "message": "Task not found",
                "data": [{"reason": "TASK_NOT_FOUND"}],
            },
        },
        ctx,
    )
    assert failed.error == RunError(
        "-32001", "Task not found", cause=freeze([{"reason": "TASK_NOT_FOUND"}])
    )
    (raw,) = proto.decode_event({"error": {"message": "no code"}}, ctx)
    assert isinstance(raw, FailedUpdate) and not isinstance(raw.error, RunError)
    core = ChatCore("s", capabilities={"abort"})
    core.send("r", {"text": ""})
    core.take_requests()
    core.dispatch_settled("r", True)
    from chatkit_trace.core import FailedFact

    assert core.admit(
        FailedFact(session_id="s", run_id="r", event_id="e", error=raw.error)
    ).accepted
    assert (
        core.snapshot.run("r").error.code == "UNKNOWN"
    )  # the Core's to_run_error, not the adapter, judges


def test_state_names() -> None:
    assert [
        state_name(s)
        for s in ("TASK_STATE_INPUT_REQUIRED", "input-required", "canceled", "cancelled", "", None)
    ] == ["input-required", "input-required", "canceled", "canceled", None, None]


def test_artifact_replace_and_append_to_unknown() -> None:
    proto, ctx = A2AProtocol(), DecodeContext("s", "r")

    def art(parts, append=None, aid="a"):
        body = {"taskId": "t", "contextId": "s", "artifact": {"artifactId": aid, "parts": parts}}
        if append is not None:
            body["append"] = append
        return {"result": {"artifactUpdate": body}}

    (first,) = proto.decode_event(
        art([{"text": "x"}], append=True), ctx
    )  # unknown artifact: starts it
    assert first.message.parts == (TextPart("text:0", "x"),)
    (mixed,) = proto.decode_event(art([{"data": {"k": 1}}, {"text": "y"}], append=True), ctx)
    assert [p.id for p in mixed.message.parts] == ["text:0", "data:1", "text:2"]
    (replaced,) = proto.decode_event(art([{"text": "new"}]), ctx)  # append false: replaces whole
    assert replaced.message.parts == (TextPart("text:0", "new"),)
    assert proto.decode_event(art([{"text": ""}], append=True), ctx) == []  # nothing grew


def test_message_only_reply_and_file_parts() -> None:
    """A Message result ends a message-only exchange (the SDK finishes it like a
    terminal state); file parts of either version become MediaParts."""
    proto, ctx = A2AProtocol(), DecodeContext("s", "r")
    parts = [
        {
            "kind": "file",
            "file": {"uri": "https://x/a.png", "mimeType": "image/png", "name": "a.png"},
        },
        {"url": "https://x/b.pdf", "mediaType": "application/pdf", "filename": "b.pdf"},
        {"raw": "aGk=", "mediaType": "text/plain"},
    ]
    reply = {"result": {"message": {"messageId": "m9", "role": "ROLE_AGENT", "parts": parts}}}
    message, done = proto.decode_event(reply, ctx)
    assert done.type == "completed" and proto.identify_event(reply) is None  # no taskId
    got = [
        (p.id, p.mime_type, p.to_json()["source"], p.to_json().get("name"))
        for p in message.message.parts
    ]
    assert got == [
        ("file:0", "image/png", {"url": "https://x/a.png"}, "a.png"),
        ("file:1", "application/pdf", {"url": "https://x/b.pdf"}, "b.pdf"),
        ("file:2", "text/plain", {"data": "aGk="}, None),
    ]
    with_task = {
        "result": {"message": {"messageId": "m9", "taskId": "t", "contextId": "s", "parts": []}}
    }
    assert proto.identify_event(with_task).ends_response


@pytest.mark.parametrize(
    "state,outcome",
    [
        (  # no status message: a fallback text that keeps what was sent (CK302)
            "TASK_STATE_REJECTED",
            ("failed", fallback_error("TASK_STATE_REJECTED", "the agent rejected the task", sent=None)),
        ),
        ("rejected", ("failed", fallback_error("rejected", "the agent rejected the task", sent=None))),
        ("TASK_STATE_AUTH_REQUIRED", ("interrupted", "auth-required")),
        ("TASK_STATE_CANCELED", ("interrupted", "canceled")),
        ("TASK_STATE_SUBMITTED", None),
        ("unknown", None),
    ],
)
def test_states_without_a_real_scenario(state: str, outcome) -> None:
    event = {
        "result": {"statusUpdate": {"taskId": "t", "contextId": "s", "status": {"state": state}}}
    }
    updates = A2AProtocol().decode_event(event, DecodeContext("s", "r"))
    got = [(u.type, getattr(u, "error", None) or getattr(u, "reason", None)) for u in updates]
    assert got == ([outcome] if outcome else [])


def test_appended_text_chunks_grow_by_deltas_and_equal_a_full_rebuild() -> None:
    """The streaming fast path (O(chunk) per append) gives what rebuilding
    every segment gives (history decodes the same artifact in one piece)."""
    from chatkit_trace.adapters import DeltaUpdate, MessageUpdate

    def update(i: int, append: bool) -> dict:
        return {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "kind": "artifact-update",
                "taskId": "t",
                "contextId": "s",
                "append": append,
                "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": f"w{i} "}]},
            },
        }

    proto, ctx = A2AProtocol(), DecodeContext("s", "r")
    kinds = []
    for i in range(300):
        kinds += [type(u) for u in proto.decode_event(update(i, i > 0), ctx)]
    assert kinds[0] is MessageUpdate and set(kinds[1:]) == {DeltaUpdate}
    book = ctx.state["book"] if "book" in ctx.state else next(v for v in ctx.state.values() if hasattr(v, "_build"))
    rebuilt = book._build("artifact:t:a", "r")
    assert book.built["artifact:t:a"] == rebuilt
    assert rebuilt.parts[0].text == "".join(f"w{i} " for i in range(300))
