"""Fuzz: odd-but-valid JSON never makes the ``adk`` adapter raise; it returns
ProtocolUpdates (live) or a HistoryResult (history)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from chatkit_trace.adapters import DecodeContext, ProtocolUpdate
from chatkit_trace.adapters._updates import TERMINAL_UPDATES
from chatkit_trace.adapters.adk import ADKProtocol
from chatkit_trace.core import HistoryFormatError, HistoryResult
from chatkit_trace.wire import DONE

UPDATE_TYPES = tuple(ProtocolUpdate.__args__)  # type: ignore[attr-defined]

scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
ids = st.sampled_from(["m1", "m2", "c1", "e-1", "", 7, None])
part = st.one_of(
    st.fixed_dictionaries(
        {"text": json_values | st.text(max_size=5)}, optional={"thought": json_values}
    ),
    st.fixed_dictionaries(
        {
            "functionCall": st.fixed_dictionaries(
                {},
                optional={
                    "id": ids,
                    "name": json_values,
                    "args": json_values,
                    "willContinue": json_values,
                },
            )
        }
    ),
    st.fixed_dictionaries(
        {
            "functionResponse": st.fixed_dictionaries(
                {}, optional={"id": ids, "name": json_values, "response": json_values}
            )
        }
    ),
    st.fixed_dictionaries(
        {"inlineData": json_values | st.fixed_dictionaries({"mimeType": json_values})}
    ),
    st.fixed_dictionaries({"executableCode": json_values, "codeExecutionResult": json_values}),
    json_values,
)
adk_event = st.fixed_dictionaries(
    {},
    optional={
        "id": ids,
        "invocationId": ids,
        "author": st.sampled_from(["agent", "user", None, 3]),
        "partial": json_values,
        "content": st.fixed_dictionaries(
            {}, optional={"role": json_values, "parts": st.lists(part, max_size=4) | json_values}
        ),
        "errorCode": json_values,
        "errorMessage": json_values,
        "turnComplete": json_values,
        "longRunningToolIds": json_values,
        "actions": json_values,
        "type": st.sampled_from(["run.started", "run.completed", "x"]) | json_values,
        "event": json_values,
        "error": json_values,
        "error_details": json_values,
        "timestamp": json_values,
    },
)
events = st.lists(adk_event | json_values | st.just(DONE), max_size=12)


@settings(max_examples=200, deadline=None)
@given(events)
def test_decode_event_only_returns_updates(evs):
    proto = ADKProtocol()
    ctx = DecodeContext("s1", "r1")
    for event in evs:
        out = proto.decode_event(event, ctx)
        assert isinstance(out, list) and all(isinstance(u, UPDATE_TYPES) for u in out)
        assert sum(isinstance(u, TERMINAL_UPDATES) for u in out) <= 1
        proto.identify_event(event)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.fixed_dictionaries({"events": events}), json_values))
@example({"events": [{"invocationId": "e-1", "timestamp": float("inf")}]})
def test_decode_history_returns_a_result_or_a_format_error(value):
    try:
        result = ADKProtocol().decode_history(value, "s1")
    except HistoryFormatError:
        return
    assert isinstance(result, HistoryResult)
