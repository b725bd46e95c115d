"""Frames, event_json (R2.8), reader_cutoff (R2.5), NDJSON and body frames."""

from __future__ import annotations

import gzip
import hashlib
import json
import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatkit_trace.wire import (
    DONE,
    DecodeError,
    DecodeErrorKind,
    Frame,
    NDJSONSplitter,
    SSEParser,
    WireDecodeError,
    admitted,
    body_frame,
    byte_offset,
    error_frame,
    event_json,
    frame_from_sse,
    make_decoder,
    parse_sse,
    reader_cutoff,
)

DATA = Path(__file__).parent / "data"


def sse_frames(body: bytes, **options: object) -> list[Frame]:
    events = parse_sse(body, **options)  # type: ignore[arg-type]
    return [frame_from_sse(e, 3, i, 1000.0 + i) for i, e in enumerate(events)]


def one(body: bytes) -> Frame:
    [frame] = sse_frames(body)
    return frame


# -- frame_from_sse -----------------------------------------------------------


def test_frame_from_sse_carries_the_event_fields() -> None:
    body = b"id: 7\nevent: delta\ndata: {\"a\": 1}\n\n"
    frame = one(body)
    where = (frame.exchange_index, frame.index, frame.transport, frame.direction)
    assert where == (3, 0, "sse", "in")
    assert (frame.text, frame.event, frame.event_id, frame.at) == ('{"a": 1}', "delta", "7", 1000.0)
    assert body[frame.start : frame.end] == body[:-1]
    assert frame.error is None and frame.raw is None


def test_keepalive_block_becomes_a_frame_with_nothing_to_decode() -> None:
    [keepalive, event] = sse_frames(b": ping\n\ndata: 1\n\n", emit_empty=True)
    assert keepalive.text is None
    assert event_json(keepalive) == (None, None)
    assert event_json(event) == (1, None)
    assert reader_cutoff([keepalive, event]) is None


# -- event_json ---------------------------------------------------------------


def test_event_field_is_written_into_the_object() -> None:
    value, error = event_json(one(b"event: run.started\ndata: {\"run_id\": \"r\"}\n\n"))
    assert error is None
    assert value == {"run_id": "r", "event": "run.started"}


def test_json_event_key_is_kept_unless_overwrite() -> None:
    frame = one(b"event: outer\ndata: {\"event\": \"inner\"}\n\n")
    assert event_json(frame) == ({"event": "inner"}, None)
    assert event_json(frame, overwrite_event=True) == ({"event": "outer"}, None)


def test_event_field_not_written_into_non_objects() -> None:
    assert event_json(one(b"event: x\ndata: [1, 2]\n\n")) == ([1, 2], None)
    assert event_json(one(b"event: x\ndata: \"s\"\n\n")) == ("s", None)


def test_no_event_field_no_event_key() -> None:
    assert event_json(one(b"data: {\"a\": 1}\n\n")) == ({"a": 1}, None)


def test_each_call_returns_a_fresh_value() -> None:
    frame = one(b"event: e\ndata: {}\n\n")
    first, _ = event_json(frame)
    assert isinstance(first, dict)
    first["mutated"] = True
    assert event_json(frame) == ({"event": "e"}, None)


def test_done_sentinel() -> None:
    value, error = event_json(one(b"data: [DONE]\n\n"))
    assert value is DONE and error is None
    assert repr(DONE) == "DONE"
    assert pickle.loads(pickle.dumps(DONE)) is DONE


@pytest.mark.parametrize("body", [b"data:\n\n", b"data\n\n"])
def test_empty_data_is_bad_json(body: bytes) -> None:
    value, error = event_json(one(body))
    assert value is None
    assert error is not None and error.kind == DecodeErrorKind.BAD_JSON
    assert "empty" in error.message
    assert error.stops_reader


def test_bad_json_offset_points_at_the_byte_in_the_stream() -> None:
    body = b"data: {\"ok\": 1}\n\nevent: e\ndata: {\"text\": \"\xc3\xa9t\xc3\xa9\" oops}\n\n"
    first, bad = sse_frames(body)
    value, error = event_json(bad)
    assert value is None and error is not None
    assert error.kind == DecodeErrorKind.BAD_JSON
    assert error.offset == body.index(b"oops")
    assert "oops" in error.excerpt
    assert event_json(first) == ({"ok": 1}, None)


def test_bad_json_offset_across_data_lines() -> None:
    body = b"data: {\"a\":\r\ndata:  1,\r\ndata: \xe2\x82\xac}\r\n\r\n"
    frame = one(body)
    assert frame.text == '{"a":\n 1,\n€}'
    value, error = event_json(frame)
    assert value is None and error is not None
    assert error.offset == body.index(b"\xe2\x82\xac")
    assert byte_offset(frame, 0) == body.index(b"{")
    assert byte_offset(frame, frame.text.index("1")) == body.index(b"1")


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", "-Infinity"])
def test_python_only_json_is_rejected_like_json_parse(text: str) -> None:
    value, error = event_json(one(b"data: " + text.encode() + b"\n\n"))
    assert value is None and error is not None and error.kind == DecodeErrorKind.BAD_JSON


def test_truncated_event_returns_its_own_error() -> None:
    frame = sse_frames(b"data: {\"a\": 1}\n\ndata: {\"b\"")[1]
    assert frame.raw == b'data: {"b"'
    value, error = event_json(frame)
    assert value is None and error is frame.error
    assert error is not None and error.kind == DecodeErrorKind.TRUNCATED_EVENT


def test_invalid_utf8_stays_on_the_frame_when_json_parses() -> None:
    frame = one(b"data: {\"t\": \"a\xffb\"}\n\n")
    assert frame.error is not None and frame.error.kind == DecodeErrorKind.INVALID_UTF8
    assert event_json(frame) == ({"t": "a\ufffdb"}, None)


def test_line_too_long_frame_returns_its_error() -> None:
    frame = sse_frames(b"data: " + b"1" * 100 + b"\n\n", max_line=50)[0]
    value, error = event_json(frame)
    assert value is None and error is frame.error
    assert error is not None and not error.stops_reader


# -- reader_cutoff (R2.5) -----------------------------------------------------


def test_real_streams_have_no_cutoff() -> None:
    for path in sorted(DATA.glob("*.sse")):
        if path.name.startswith("synthetic"):
            continue
        frames = sse_frames(path.read_bytes())
        assert reader_cutoff(frames) is None, path.name
        assert list(admitted(frames)) == frames
        for frame in frames:
            value, error = event_json(frame)
            assert error is None and value is not None, (path.name, frame.index)


def test_synthetic_stream_stops_at_its_empty_data_event() -> None:
    frames = sse_frames((DATA / "synthetic_ids_keepalives.sse").read_bytes())
    assert reader_cutoff(frames) == 3
    assert frames[3].text == "" and frames[3].event_id == ""
    value, _ = event_json(frames[-1])
    assert value is DONE


def test_bad_json_ends_the_read_but_later_frames_are_kept() -> None:
    body = b"data: {\"n\": 1}\n\ndata: {\"n\": 2\n\ndata: {\"n\": 3}\n\n"
    frames = sse_frames(body)
    assert len(frames) == 3
    assert reader_cutoff(frames) == 1
    assert list(admitted(frames)) == frames[:1]
    assert event_json(frames[2]) == ({"n": 3}, None)  # still stored and decodable


def test_non_fatal_errors_do_not_cut_the_read() -> None:
    body = b"data: \"\xff\"\n\ndata: " + b"x" * 100 + b"\n\ndata: 3\n\n"
    frames = sse_frames(body, max_line=50)
    assert [f.error.kind if f.error else None for f in frames] == [
        DecodeErrorKind.INVALID_UTF8,
        DecodeErrorKind.LINE_TOO_LONG,
        None,
    ]
    assert reader_cutoff(frames) is None


def test_truncated_final_event_is_the_cutoff() -> None:
    frames = sse_frames(b"data: 1\n\ndata: 2")
    assert reader_cutoff(frames) == 1


def test_corrupt_content_encoding_is_the_cutoff() -> None:
    decoder = make_decoder("gzip")
    parser = SSEParser()
    body = b"data: 1\n\ndata: 2\n\n"
    encoded = gzip.compress(body)
    events = parser.feed(decoder.decode(encoded[:-12] + b"\x00" * 12))
    events += parser.feed(decoder.flush()) + parser.flush()
    frames = [frame_from_sse(e, 0, i, 0.0) for i, e in enumerate(events)]
    assert decoder.error is not None
    frames.append(error_frame(decoder.error, 0, len(frames), 0.0))
    assert frames[-1].start == decoder.error.offset
    assert reader_cutoff(frames) == len(frames) - 1
    assert event_json(frames[-1]) == (None, decoder.error)


def test_outgoing_frames_are_skipped() -> None:
    out = Frame(0, 0, "ws", "out", "not json")
    inc = Frame(0, 1, "ws", "in", "{}")
    assert reader_cutoff([out, inc]) is None
    assert reader_cutoff([out, inc, Frame(0, 2, "ws", "in", "{")]) == 2


# -- body frames --------------------------------------------------------------


def test_body_frame() -> None:
    frame = body_frame(b'{"messages": []}', 5, 12.5)
    assert (frame.transport, frame.index, frame.start, frame.end) == ("body", 0, 0, 16)
    assert event_json(frame) == ({"messages": []}, None)
    bad = body_frame(b'{"messages": [}', 5, 12.5)
    _, error = event_json(bad)
    assert error is not None and error.offset == 14


def test_body_frame_with_invalid_utf8() -> None:
    frame = body_frame(b'"\xff"', 0, 0.0, direction="out")
    assert frame.direction == "out"
    assert frame.error is not None and frame.error.offset == 1


# -- NDJSON -------------------------------------------------------------------

NDJSON = b'{"a": 1}\n\n{"b": "\xc3\xa9"}\r\n   \n{"c": 3}'


def ndjson(chunks: list[bytes], **options: object) -> list[Frame]:
    splitter = NDJSONSplitter(9, first_index=4, **options)  # type: ignore[arg-type]
    out: list[Frame] = []
    for i, chunk in enumerate(chunks):
        out += splitter.feed(chunk, float(i))
    return out + splitter.flush(99.0)


def test_ndjson_lines() -> None:
    frames = ndjson([NDJSON])
    assert [f.text for f in frames] == ['{"a": 1}', '{"b": "é"}', '{"c": 3}']
    assert [f.index for f in frames] == [4, 5, 6]
    assert all(f.transport == "ndjson" and f.exchange_index == 9 for f in frames)
    assert [NDJSON[f.start : f.end] for f in frames] == [
        b'{"a": 1}',
        b'{"b": "\xc3\xa9"}',
        b'{"c": 3}',
    ]
    assert [f.at for f in frames] == [0.0, 0.0, 99.0]  # the last line ended at flush
    assert [event_json(f)[0] for f in frames] == [{"a": 1}, {"b": "é"}, {"c": 3}]


def strip_at(frames: list[Frame]) -> list[tuple[object, ...]]:
    return [(f.index, f.text, f.start, f.end, f.error) for f in frames]


def test_ndjson_any_split() -> None:
    whole = strip_at(ndjson([NDJSON]))
    for cut in range(len(NDJSON) + 1):
        assert strip_at(ndjson([NDJSON[:cut], NDJSON[cut:]])) == whole
    assert strip_at(ndjson([NDJSON[i : i + 1] for i in range(len(NDJSON))])) == whole


def test_ndjson_long_line_dropped_and_resynced() -> None:
    body = b'{"a": 1}\n' + b"x" * 100 + b"\r\n" + b'{"b": 2}\n'
    for chunks in ([body], [body[i : i + 1] for i in range(len(body))], [body[:50], body[50:]]):
        first, dropped, last = ndjson(chunks, max_line=50)
        assert first.text == '{"a": 1}' and last.text == '{"b": 2}'
        assert dropped.text is None
        assert dropped.error is not None and dropped.error.kind == DecodeErrorKind.LINE_TOO_LONG
        assert (dropped.start, dropped.end) == (9, 9 + 101)
        # its length and the SHA-256 of the line as sent (a CR before the LF included)
        digest = hashlib.sha256(b"x" * 100 + b"\r").hexdigest()
        assert "a 101-byte line is over the recorder's 50-byte limit" in dropped.error.message
        assert f"sha256:{digest}" in dropped.error.message


def test_ndjson_long_last_line() -> None:
    [frame] = ndjson([b"y" * 60], max_line=50)
    assert frame.error is not None and (frame.start, frame.end) == (0, 60)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.data())
def test_ndjson_fuzz_never_raises_and_ignores_chunking(body: bytes, data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=20)))
    bounds = [0, *cuts, len(body)]
    chunks = [body[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    frames = ndjson(chunks, max_line=16)
    assert strip_at(frames) == strip_at(ndjson([body], max_line=16))
    for f in frames:
        assert f.start is not None and f.end is not None and 0 <= f.start <= f.end <= len(body)
        event_json(f)


# -- errors -------------------------------------------------------------------


def test_decode_error_round_trips_through_json() -> None:
    error = DecodeError(DecodeErrorKind.BAD_JSON, "not JSON", 4, 5, "{x")
    assert DecodeError.from_json(json.loads(json.dumps(error.to_json()))) == error
    bare = DecodeError("bad-json", "m")
    assert bare.to_json() == {"kind": "bad-json", "message": "m"}
    assert DecodeError.from_json(bare.to_json()) == bare
    assert str(error) == "bad-json at byte 4: not JSON"
    assert error.shifted(10) == DecodeError(DecodeErrorKind.BAD_JSON, "not JSON", 14, 15, "{x")


def test_wire_decode_error_is_a_value_error_and_pickles() -> None:
    error = DecodeError(DecodeErrorKind.TRUNCATED_EVENT, "cut", 1, 2)
    exc = WireDecodeError(error)
    assert isinstance(exc, ValueError)
    assert exc.error is error and "cut" in str(exc)
    again = pickle.loads(pickle.dumps(exc))
    assert again.error == error


def test_stops_reader_by_kind() -> None:
    stops = {k for k in DecodeErrorKind if DecodeError(k, "").stops_reader}
    assert stops == {
        DecodeErrorKind.BAD_JSON,
        DecodeErrorKind.TRUNCATED_EVENT,
        DecodeErrorKind.BAD_ENCODING,
        DecodeErrorKind.BINARY_MESSAGE,
    }


def test_parser_errors_feed_frames_and_frames_feed_the_cutoff() -> None:
    # The whole chain on a stream with every kind of SSE problem.
    body = (
        b"data: {\"n\": 1}\n\n"
        b"data: \"\xff\"\n\n"
        b"data: " + b"z" * 80 + b"\n\n"
        b"data: {oops}\n\n"
        b"data: {\"n\": 5}\n\n"
        b"data: {\"n\""
    )
    parser = SSEParser(max_line=64)
    events = []
    for i in range(0, len(body), 3):
        events += parser.feed(body[i : i + 3])
    events += parser.flush()
    frames = [frame_from_sse(e, 0, i, 0.0) for i, e in enumerate(events)]
    kinds = [event_json(f)[1] for f in frames]
    assert [k.kind if k else None for k in kinds] == [
        None,
        None,
        DecodeErrorKind.LINE_TOO_LONG,
        DecodeErrorKind.BAD_JSON,
        None,
        DecodeErrorKind.TRUNCATED_EVENT,
    ]
    assert reader_cutoff(frames) == 3
