"""Odd-but-valid JSON never makes the hermes adapter raise or emit an invalid
message (SPEC R2.4: unknown events decode to ``[]``; R3.7)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from chatkit_trace.adapters import DecodeContext, MessageUpdate, update_from_json
from chatkit_trace.adapters.hermes import HermesProtocol
from chatkit_trace.core import check_message
from chatkit_trace.wire import DONE

NAMES = [
    "message.delta",
    "assistant.delta",
    "tool.started",
    "tool.completed",
    "tool.failed",
    "tool.progress",
    "reasoning.available",
    "approval.request",
    "approval.responded",
    "message.started",
    "run.started",
    "assistant.completed",
    "run.completed",
    "run.failed",
    "run.cancelled",
    "run.interrupted",
    "error",
    "done",
]
FIELDS = [
    "event",
    "type",
    "run_id",
    "delta",
    "tool",
    "tool_name",
    "args",
    "error",
    "output",
    "content",
    "message",
    "message_id",
    "messages",
    "user_message",
    "seq",
    "reason",
    "role",
    "tool_calls",
    "tool_call_id",
    "function",
    "name",
    "arguments",
    "id",
    "call_id",
    "reasoning",
    "reasoning_content",
    "data",
    "status",
    "created_at",
]
WORDS = NAMES + [
    "assistant",
    "tool",
    "user",
    "system",
    "todo",
    '{"a": 1}',
    "\n\n",
    "completed",
    "failed",
    "cancelled",
]
scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
)
json_values = st.recursive(
    scalars | st.sampled_from(WORDS),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(FIELDS), inner, max_size=5)
    ),
    max_leaves=20,
)
events = st.one_of(
    json_values,
    st.just(DONE),
    st.fixed_dictionaries(
        {"event": st.sampled_from(NAMES)}, optional={k: json_values for k in FIELDS[2:]}
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(events, max_size=12))
def test_decode_event_never_raises_and_emits_valid_messages(seq: list) -> None:
    proto = HermesProtocol()
    ctx = DecodeContext("s1", "r1")  # one run's state shared by the whole sequence
    for event in seq:
        for update in proto.decode_event(event, ctx):
            update_from_json(update)  # a ProtocolUpdate
            if isinstance(update, MessageUpdate):
                assert check_message(update.message) is None
        proto.identify_event(event)
        proto.event_sequence(event)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_history_and_status_never_raise_unexpectedly(value: object) -> None:
    proto = HermesProtocol()
    proto.decode_status(value)
    proto.decode_input(value)
    result = proto.decode_history({"data": value if isinstance(value, list) else [value]}, "s1")
    for msg in result.messages:
        assert check_message(msg, "history") is None
