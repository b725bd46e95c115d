"""A2A adapter fuzz: arbitrary JSON-ish frames never make the adapter raise
(other than ContextMismatch for another context), and always give updates."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chatkit_trace.adapters import TERMINAL_UPDATES, DecodeContext, EncodeContext, create_adapter
from chatkit_trace.adapters._updates import ProtocolUpdate
from chatkit_trace.adapters.a2a import A2AProtocol
from chatkit_trace.core import ChatCore, HistoryFormatError

SESSION = "s"
leaf = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False)
    | st.sampled_from(
        [
            "",
            "x",
            "s",
            "t",
            "working",
            "TASK_STATE_COMPLETED",
            "failed",
            "input-required",
            "canceled",
            "ROLE_USER",
            "agent",
            "function_call",
            "function_response",
            "text",
            "data",
            "file",
            "status-update",
            "artifact-update",
        ]
    )
)
json_ish = st.recursive(
    leaf,
    lambda kids: (
        st.lists(kids, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "text",
                    "data",
                    "kind",
                    "id",
                    "name",
                    "args",
                    "response",
                    "metadata",
                    "adk_type",
                    "adk_thought",
                    "file",
                    "uri",
                    "bytes",
                    "raw",
                    "url",
                    "mimeType",
                    "code",
                    "message",
                    "state",
                ]
            ),
            kids,
            max_size=4,
        )
    ),
    max_leaves=12,
)
part = st.fixed_dictionaries(
    {},
    optional={
        "text": st.text(max_size=5) | json_ish,
        "kind": st.sampled_from(["text", "data", "file", "x"]),
        "data": json_ish
        | st.fixed_dictionaries(
            {
                "id": st.sampled_from(["c1", "c2"]),
                "name": st.just("f"),
                "args": json_ish,
                "response": json_ish,
            }
        ),
        "metadata": st.fixed_dictionaries(
            {},
            optional={
                "adk_type": st.sampled_from(["function_call", "function_response"]),
                "adk_thought": st.booleans(),
            },
        ),
        "file": json_ish,
        "url": json_ish,
        "raw": json_ish,
    },
)
message = st.fixed_dictionaries(
    {
        "messageId": st.sampled_from(["m1", "m2", "m3"]) | json_ish,
        "parts": st.lists(part, max_size=4) | json_ish,
    },
    optional={
        "role": st.sampled_from(["user", "agent", "ROLE_USER", "ROLE_AGENT"]) | json_ish,
        "kind": st.just("message"),
        "metadata": json_ish,
    },
)
status = st.fixed_dictionaries(
    {}, optional={"state": leaf, "message": message | json_ish, "timestamp": leaf}
)
ids = {"taskId": st.sampled_from(["t", "u"]) | json_ish, "contextId": st.just(SESSION) | st.none()}
artifact = st.fixed_dictionaries(
    {
        "artifactId": st.sampled_from(["a", "b"]) | json_ish,
        "parts": st.lists(part, max_size=3) | json_ish,
    }
)
results = st.one_of(
    st.fixed_dictionaries(
        {"statusUpdate": st.fixed_dictionaries({**ids, "status": status | json_ish})}
    ),
    st.fixed_dictionaries(
        {
            "artifactUpdate": st.fixed_dictionaries(
                {**ids, "artifact": artifact | json_ish},
                optional={"append": leaf, "lastChunk": leaf},
            )
        }
    ),
    st.fixed_dictionaries(
        {
            "kind": st.sampled_from(["status-update", "artifact-update", "task", "message"]),
            **ids,
            "status": status,
            "artifact": artifact,
            "final": leaf,
            "append": leaf,
        }
    ),
    st.fixed_dictionaries(
        {
            "task": st.fixed_dictionaries(
                {
                    "id": st.sampled_from(["t", "u"]) | json_ish,
                    "contextId": st.just(SESSION),
                    "status": status,
                },
                optional={
                    "history": st.lists(message, max_size=3) | json_ish,
                    "artifacts": st.lists(artifact, max_size=2) | json_ish,
                },
            )
        }
    ),
    st.fixed_dictionaries({"message": message}),
    json_ish,
)
frame = st.one_of(
    st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": leaf, "result": results}),
    st.fixed_dictionaries(
        {"jsonrpc": st.just("2.0"), "id": leaf, "error": json_ish}, optional={"event": leaf}
    ),
    results,
    json_ish,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(frame, max_size=8))
def test_decode_event_returns_updates_and_the_core_takes_them(frames: list[Any]) -> None:
    proto = A2AProtocol()
    adapter = create_adapter(proto, history=True)
    decoder = adapter.decoder(SESSION)
    core = ChatCore(SESSION, capabilities=adapter.capabilities)
    core.send("r", {"text": "hi"}, project=decoder.project({"text": "hi"}, "r"))
    core.take_requests()
    core.dispatch_settled("r", True)
    for i, event in enumerate(frames):
        updates = proto.decode_event(event, DecodeContext(SESSION, "r", state={}))
        assert isinstance(updates, list) and all(
            isinstance(u, ProtocolUpdate.__args__) for u in updates
        )
        assert sum(isinstance(u, TERMINAL_UPDATES) for u in updates) <= 1
        proto.identify_event(event)
        decoded = decoder.decode(event, run_id="r", fallback_id=f"0:{i}")
        assert decoded.error is None, decoded.error
        for fact in decoded.facts:
            core.admit(fact)  # any rejection is a result, never an exception
        try:
            proto.decode_history(
                {"result": event.get("result")} if isinstance(event, dict) else event, SESSION
            )
        except HistoryFormatError:
            pass
        proto.decode_status(event, SESSION, "r")
        proto.decode_input(event)


@settings(max_examples=100, deadline=None)
@given(json_ish | st.text(max_size=5))
def test_any_input_encodes_and_projects(value: Any) -> None:
    proto = A2AProtocol("0.3")
    ctx = EncodeContext(SESSION, "r")
    body = proto.encode_input(value, ctx)
    projected = [m.id for m in proto.project_input(value, ctx)]
    assert projected in ([], [body["params"]["message"]["messageId"]])
    proto.decode_input(body)
