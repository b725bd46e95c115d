"""JSON-RPC 2.0 envelopes: classification and validation, on A2A's real shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatkit_trace.wire import (
    DecodeErrorKind,
    RPCKind,
    classify,
    envelope_error,
    event_json,
    frame_from_sse,
    parse_sse,
)

DATA = Path(__file__).parent / "data"

# Shapes copied from a2a-sdk 1.3.0 captures (recordings/captures/a2a).
A2A_MESSAGE = {
    "kind": "message",
    "messageId": "m-text-1",
    "role": "user",
    "parts": [{"kind": "text", "text": "hello"}],
}
A2A_REQUEST = {
    "jsonrpc": "2.0",
    "id": "req-text",
    "method": "message/stream",
    "params": {"message": A2A_MESSAGE},
}
ERROR_INFO = {
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    "reason": "TASK_NOT_FOUND",
    "domain": "a2a-protocol.org",
    "metadata": {},
}
A2A_V10_ERROR = {
    "error": {"code": -32001, "message": "Task not found", "data": [ERROR_INFO]},
    "id": "err-1",
    "jsonrpc": "2.0",
}
A2A_V03_ERROR = {
    "jsonrpc": "2.0",
    "id": "err-1",
    "error": {"code": -32001, "data": None, "message": "Task not found"},
}


def rpc(**members: object) -> dict[str, object]:
    """A JSON-RPC object: jsonrpc "2.0" and id 1 unless given (ABSENT removes one)."""
    value: dict[str, object] = {"jsonrpc": "2.0", "id": 1}
    value.update(members)
    return {k: v for k, v in value.items() if v is not ABSENT}


ABSENT = object()



def test_request() -> None:
    msg = classify(A2A_REQUEST)
    assert msg.kind is RPCKind.REQUEST and msg.valid
    assert (msg.id, msg.has_id, msg.method) == ("req-text", True, "message/stream")
    assert msg.payload == A2A_REQUEST["params"]
    assert not msg.is_response


def test_notification() -> None:
    msg = classify({"jsonrpc": "2.0", "method": "ping"})
    assert msg.kind is RPCKind.NOTIFICATION and msg.valid
    assert (msg.id, msg.has_id, msg.params) == (None, False, None)


def test_error_responses_v10_and_v03() -> None:
    for value in (A2A_V10_ERROR, A2A_V03_ERROR):
        msg = classify(value)
        assert msg.kind is RPCKind.ERROR and msg.valid and msg.is_response
        assert msg.error is not None
        assert (msg.error.code, msg.error.message) == (-32001, "Task not found")
        assert msg.error.has_data
    assert classify(A2A_V03_ERROR).error.data is None  # type: ignore[union-attr]
    bare = classify(rpc(error={"code": 1, "message": "m"})).error
    assert bare is not None and bare.has_data is False


@pytest.mark.parametrize("path", ["a2a_v03_text.sse", "a2a_v10_crash.sse"])
def test_every_a2a_stream_frame_is_a_valid_response(path: str) -> None:
    events = parse_sse((DATA / path).read_bytes())
    kinds = []
    for i, event in enumerate(events):
        value, error = event_json(frame_from_sse(event, 0, i, 0.0))
        assert error is None
        msg = classify(value, expected=True)
        # the v1.0 error frame carries an SSE "event: error", written in as "event"
        assert msg.valid, msg.problems
        assert envelope_error(msg) is None
        kinds.append(msg.kind)
    assert kinds[0] is RPCKind.RESULT
    if path == "a2a_v10_crash.sse":
        assert kinds[-1] is RPCKind.ERROR
        assert all(k is RPCKind.RESULT for k in kinds[:-1])


def test_result_may_be_null() -> None:
    msg = classify({"jsonrpc": "2.0", "id": 3, "result": None})
    assert msg.kind is RPCKind.RESULT and msg.valid and msg.payload is None


def test_response_to_an_unreadable_request_has_null_id() -> None:
    msg = classify(rpc(id=None, error={"code": -32700, "message": "Parse error"}))
    assert msg.valid and msg.has_id and msg.id is None


@pytest.mark.parametrize(
    ("value", "kind", "problem"),
    [
        (rpc(jsonrpc="1.0", result=1), RPCKind.RESULT, 'jsonrpc must be "2.0"'),
        (rpc(jsonrpc=2.0, result=1), RPCKind.RESULT, 'jsonrpc must be "2.0"'),
        (rpc(id=ABSENT, result=1), RPCKind.RESULT, "must have an id"),
        (rpc(result=1, error={"code": 1, "message": "m"}), RPCKind.ERROR, "both result and error"),
        (rpc(error="boom"), RPCKind.ERROR, "error must be an object"),
        (rpc(error={"message": "m"}), RPCKind.ERROR, "error has no code"),
        (rpc(error={"code": "-32603", "message": "m"}), RPCKind.ERROR, "must be an integer"),
        (rpc(error={"code": 1.5, "message": "m"}), RPCKind.ERROR, "must be an integer"),
        (rpc(error={"code": True, "message": "m"}), RPCKind.ERROR, "must be an integer"),
        (rpc(error={"code": 1}), RPCKind.ERROR, "error has no message"),
        (rpc(error={"code": 1, "message": 2}), RPCKind.ERROR, "message must be a string"),
        (rpc(id=[1], result=1), RPCKind.RESULT, "id must be a string, a number or null"),
        (rpc(id=True, result=1), RPCKind.RESULT, "id must be a string, a number or null"),
        (rpc(method=5), RPCKind.REQUEST, "method must be a string"),
        (rpc(method="m", params=5), RPCKind.REQUEST, "params must be an array or an object"),
        (rpc(method="m", result=1), RPCKind.REQUEST, "cannot have result or error"),
        (rpc(), RPCKind.INVALID, "neither method"),
    ],
)
def test_envelope_problems(value: dict[str, object], kind: RPCKind, problem: str) -> None:
    msg = classify(value)
    assert msg.kind is kind
    assert not msg.valid
    assert any(problem in p for p in msg.problems), msg.problems
    error = envelope_error(msg, offset=12)
    assert error is not None and error.kind == DecodeErrorKind.BAD_ENVELOPE
    assert problem in error.message and error.offset == 12
    assert not error.stops_reader


def test_integral_float_code_is_an_integer() -> None:
    # JSON cannot tell -32603 from -32603.0 in JavaScript, so neither do we.
    assert classify({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603.0, "message": "m"}}).valid


@pytest.mark.parametrize(
    "value",
    [
        {"error": {"message": "Rate limit", "type": "rate_limit_error"}},  # OpenAI error body
        {"result": "x"},
        {"id": "c8e8829e", "invocationId": "e-1"},  # ADK event
        {"choices": []},
        [1, 2],
        "text",
        None,
        3,
    ],
)
def test_other_protocols_are_not_jsonrpc(value: object) -> None:
    msg = classify(value)
    assert msg.kind is RPCKind.NOT_JSONRPC
    if not isinstance(value, list):
        assert msg.problems == () and envelope_error(msg) is None


def test_batch_is_reported() -> None:
    msg = classify([A2A_REQUEST])
    assert msg.kind is RPCKind.NOT_JSONRPC and "batch" in msg.problems[0]


def test_expected_jsonrpc_without_the_jsonrpc_member() -> None:
    msg = classify({"id": "r", "result": {"task": {}}}, expected=True)
    assert msg.kind is RPCKind.RESULT and not msg.valid
    assert 'jsonrpc must be "2.0" (got absent)' in msg.problems
    msg = classify({"choices": []}, expected=True)
    assert msg.kind is RPCKind.INVALID
    msg = classify("text", expected=True)
    assert msg.kind is RPCKind.INVALID and "object" in msg.problems[0]


def test_classify_never_raises_on_json_values() -> None:
    texts = [
        '{"jsonrpc": null}',
        '{"jsonrpc": "2.0", "error": null, "id": 1}',
        '{"jsonrpc": "2.0", "method": null}',
        "{}",
    ]
    values = [json.loads(s) for s in texts]
    for value in values:
        classify(value)
        classify(value, expected=True)
