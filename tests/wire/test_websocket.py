"""WebSocket messages -> frames, from mitmproxy-shaped messages and HAR entries."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from chatkit_trace.wire import (
    DecodeErrorKind,
    event_json,
    frames_from_har,
    reader_cutoff,
    ws_frame,
    ws_frame_from_message,
)


def test_text_message_from_server() -> None:
    frame = ws_frame(b'{"type": "delta", "text": "h\xc3\xa9"}', True, False, 12.5, 2, 7)
    where = (frame.transport, frame.direction, frame.exchange_index, frame.index, frame.at)
    assert where == ("ws", "in", 2, 7, 12.5)
    assert frame.text == '{"type": "delta", "text": "hé"}'
    assert frame.raw is None and frame.start is None and frame.end is None
    assert event_json(frame) == ({"type": "delta", "text": "hé"}, None)


def test_text_message_from_client_is_out() -> None:
    assert ws_frame(b"{}", True, True, 0.0, 0, 0).direction == "out"


def test_binary_json_message_has_text_too() -> None:
    frame = ws_frame(b'{"a": 1}', False, False, 0.0, 0, 0)
    assert frame.raw == b'{"a": 1}' and frame.text == '{"a": 1}'
    assert event_json(frame) == ({"a": 1}, None)


def test_binary_non_json_message() -> None:
    frame = ws_frame(b"\x00\x01\xff", False, False, 0.0, 0, 0)
    assert frame.text is None and frame.raw == b"\x00\x01\xff"
    value, error = event_json(frame)
    assert value is None and error is not None
    assert error.kind == DecodeErrorKind.BINARY_MESSAGE and error.stops_reader
    assert (error.offset, error.end) == (0, 3)


def test_binary_utf8_text_that_is_not_json_stays_binary() -> None:
    assert ws_frame(b"hello", False, False, 0.0, 0, 0).text is None


def test_invalid_utf8_text_message() -> None:
    frame = ws_frame(b'"a\xffb"', True, False, 0.0, 0, 0)
    assert frame.text == '"a\ufffdb"'
    assert frame.error is not None and frame.error.kind == DecodeErrorKind.INVALID_UTF8
    assert frame.error.offset == 2  # counted from the start of the message
    assert event_json(frame) == ("a\ufffdb", None)


def test_bad_json_offset_counts_from_the_message_start() -> None:
    _, error = event_json(ws_frame(b'{"a": 1,}', True, False, 0.0, 0, 0))
    assert error is not None and error.kind == DecodeErrorKind.BAD_JSON and error.offset == 8


@dataclass
class FakeMessage:  # the attributes of mitmproxy's WebSocketMessage that are read
    content: bytes
    is_text: bool
    from_client: bool
    timestamp: float


def test_from_a_mitmproxy_shaped_message() -> None:
    frame = ws_frame_from_message(FakeMessage(b'{"x": 1}', True, True, 3.0), 4, 1)
    where = (frame.direction, frame.text, frame.at, frame.exchange_index, frame.index)
    assert where == ("out", '{"x": 1}', 3.0, 4, 1)


BINARY_JSON = base64.b64encode(b'{"bin": true}').decode()


def test_from_har_web_socket_messages() -> None:
    messages = [
        {"type": "send", "time": 1796022900.25, "opcode": 1, "data": '{"subscribe": "s1"}'},
        {"type": "receive", "time": 1796022900.5, "opcode": 1, "data": '{"event": "delta"}'},
        {"type": "receive", "time": 1796022900.75, "opcode": 2, "data": BINARY_JSON},
        {"type": "receive", "time": 1796022901.0, "opcode": 9, "data": ""},  # ping: no message
        {"type": "receive", "time": 1796022901.5, "opcode": 2, "data": "not base64 !"},
        {"type": "receive", "time": 1796022902, "opcode": 1, "data": "{"},
    ]
    frames = frames_from_har(messages, 6, first_index=10)
    assert [f.index for f in frames] == [10, 11, 12, 13, 14]
    assert [f.direction for f in frames] == ["out", "in", "in", "in", "in"]
    assert frames[0].at == 1796022900.25 and frames[4].at == 1796022902.0
    assert frames[2].raw == b'{"bin": true}' and frames[2].text == '{"bin": true}'
    assert frames[3].raw == b"not base64 !" and frames[3].text is None
    assert event_json(frames[1]) == ({"event": "delta"}, None)  # no SSE event field to add
    assert reader_cutoff(frames) == 3  # the non-JSON binary message


def test_har_entry_with_missing_fields() -> None:
    [frame] = frames_from_har([{}], 0)
    assert (frame.direction, frame.text, frame.at) == ("in", "", 0.0)
