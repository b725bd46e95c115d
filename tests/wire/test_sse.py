"""SSEParser: the WHATWG rules one by one, any chunking, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatkit_trace.wire import DecodeErrorKind, SSEEvent, SSEParser, parse_sse

from .sse_reference import reference_events

DATA = Path(__file__).parent / "data"
STREAMS = sorted(DATA.glob("*.sse"))
BOM = b"\xef\xbb\xbf"


def fields(events: list[SSEEvent]) -> list[tuple[object, ...]]:
    """(data, event, id, last_event_id, retry) of the dispatched events."""
    return [(e.data, e.event, e.id, e.last_event_id, e.retry) for e in events if e.dispatched]


def with_offsets(events: list[SSEEvent]) -> list[tuple[object, ...]]:
    """What the reference interpreter gives: the fields plus start and end."""
    return [
        (e.data, e.event, e.id, e.last_event_id, e.retry, e.start, e.end)
        for e in events
        if e.dispatched
    ]


def feed_all(chunks: list[bytes], **options: object) -> list[SSEEvent]:
    parser = SSEParser(**options)  # type: ignore[arg-type]
    out: list[SSEEvent] = []
    for chunk in chunks:
        out += parser.feed(chunk)
    return out + parser.flush()


# -- the WHATWG rules, one row each -------------------------------------------

M = None  # no event / id / retry

WHATWG_RULES = [
    ("LF line ends", b"data: a\n\n", [("a", M, M, "", M)]),
    ("CR line ends", b"data: a\r\r", [("a", M, M, "", M)]),
    ("CRLF line ends", b"data: a\r\n\r\n", [("a", M, M, "", M)]),
    ("mixed line ends", b"data: a\rdata: b\ndata: c\r\n\n", [("a\nb\nc", M, M, "", M)]),
    ("CRLF is one line end", b"data: a\r\ndata: b\r\n\r\n", [("a\nb", M, M, "", M)]),
    ("LF CR is two line ends", b"data: a\n\rdata: b\n\n", [("a", M, M, "", M), ("b", M, M, "", M)]),
    ("leading BOM skipped", BOM + b"data: a\n\n", [("a", M, M, "", M)]),
    ("only one BOM skipped", BOM + BOM + b"data: a\n\ndata: b\n\n", [("b", M, M, "", M)]),
    ("BOM later is data", b"data: " + BOM + b"a\n\n", [("\ufeffa", M, M, "", M)]),
    ("comment ignored", b": hello\ndata: a\n\n", [("a", M, M, "", M)]),
    ("comment-only block not dispatched", b": keepalive\n\n", []),
    ("colon-only line is a comment", b":\ndata: a\n\n", [("a", M, M, "", M)]),
    ("field without colon has empty value", b"data\n\n", [("", M, M, "", M)]),
    ("two empty data lines", b"data\ndata\n\n", [("\n", M, M, "", M)]),
    ("no space after colon", b"data:x\n\n", [("x", M, M, "", M)]),
    ("one space removed", b"data: x\n\n", [("x", M, M, "", M)]),
    ("only one space removed", b"data:  x\n\n", [(" x", M, M, "", M)]),
    ("tab is not a space", b"data:\tx\n\n", [("\tx", M, M, "", M)]),
    ("trailing spaces kept", b"data: x  \n\n", [("x  ", M, M, "", M)]),
    ("colon inside the value", b"data: a:b: c\n\n", [("a:b: c", M, M, "", M)]),
    ("multi-line data joined with LF", b"data: a\ndata: b\n\n", [("a\nb", M, M, "", M)]),
    ("only the last LF removed", b"data: a\ndata:\n\n", [("a\n", M, M, "", M)]),
    ("empty data line is dispatched", b"data:\n\n", [("", M, M, "", M)]),
    ("no data line: not dispatched", b"event: x\n\n", []),
    ("event sets the type", b"event: add\ndata: a\n\n", [("a", "add", M, "", M)]),
    ("last event field wins", b"event: a\nevent: b\ndata: x\n\n", [("x", "b", M, "", M)]),
    ("empty event means message", b"event:\ndata: a\n\n", [("a", M, M, "", M)]),
    (
        "event type reset after dispatch",
        b"event: add\ndata: a\n\ndata: b\n\n",
        [("a", "add", M, "", M), ("b", M, M, "", M)],
    ),
    (
        "event type reset even when not dispatched",
        b"event: add\n\ndata: b\n\n",
        [("b", M, M, "", M)],
    ),
    ("id sets the last event id", b"id: 1\ndata: a\n\n", [("a", M, "1", "1", M)]),
    (
        "last event id persists across events",
        b"id: 1\ndata: a\n\ndata: b\n\n",
        [("a", M, "1", "1", M), ("b", M, M, "1", M)],
    ),
    (
        "id containing NUL is ignored",
        b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n",
        [("a", M, "1", "1", M), ("b", M, M, "1", M)],
    ),
    (
        "empty id resets the buffer",
        b"id: 1\ndata: a\n\nid\ndata: b\n\n",
        [("a", M, "1", "1", M), ("b", M, "", "", M)],
    ),
    ("id of an undispatched block still counts", b"id: 7\n\ndata: b\n\n", [("b", M, M, "7", M)]),
    ("last id field wins", b"id: 1\nid: 2\ndata: a\n\n", [("a", M, "2", "2", M)]),
    ("retry with digits", b"retry: 3000\ndata: a\n\n", [("a", M, M, "", 3000)]),
    ("retry with non-digits ignored", b"retry: 30s\ndata: a\n\n", [("a", M, M, "", M)]),
    ("retry empty ignored", b"retry:\ndata: a\n\n", [("a", M, M, "", M)]),
    ("retry negative ignored", b"retry: -1\ndata: a\n\n", [("a", M, M, "", M)]),
    ("retry with space inside ignored", b"retry: 1 0\ndata: a\n\n", [("a", M, M, "", M)]),
    ("retry non-ASCII digits ignored", "retry: \u0661\ndata: a\n\n".encode(), [("a", M, M, "", M)]),
    ("unknown field ignored", b"foo: bar\ndata: a\n\n", [("a", M, M, "", M)]),
    ("field names are case-sensitive", b"Data: a\n\n", []),
    ("space before the colon is part of the name", b"data : a\n\n", []),
    (
        "blank lines between events",
        b"\n\n\ndata: a\n\n\n\ndata: b\n\n",
        [("a", M, M, "", M), ("b", M, M, "", M)],
    ),
    ("no blank line at the end: not dispatched", b"data: a\n", []),
    ("incomplete last line: not dispatched", b"data: a\n\ndata: b", [("a", M, M, "", M)]),
    ("UTF-8 text", "data: héllo €\n\n".encode(), [("héllo €", M, M, "", M)]),
    ("invalid UTF-8 becomes U+FFFD", b"data: a\xffb\n\n", [("a\ufffdb", M, M, "", M)]),
    ("truncated UTF-8 sequence", b"data: \xe2\x82\n\n", [("\ufffd", M, M, "", M)]),
]


@pytest.mark.parametrize(
    ("body", "expected"),
    [pytest.param(body, expected, id=name) for name, body, expected in WHATWG_RULES],
)
def test_whatwg_rule(body: bytes, expected: list[tuple[object, ...]]) -> None:
    assert fields(parse_sse(body)) == expected
    assert fields(feed_all([body[i : i + 1] for i in range(len(body))])) == expected
    assert [t[:5] for t in reference_events(body)] == expected


def test_type_property_defaults_to_message() -> None:
    plain, typed = parse_sse(b"data: a\n\nevent: add\ndata: b\n\n")
    assert (plain.event, plain.type) == (None, "message")
    assert (typed.event, typed.type) == ("add", "add")


def test_retry_sets_the_reconnection_time_without_an_event() -> None:
    parser = SSEParser()
    assert parser.feed(b"retry: 5000\n\n") == []
    assert parser.retry == 5000
    parser.feed(b"retry: soon\n\n")
    assert parser.retry == 5000


def test_parser_last_event_id_is_what_a_browser_would_resend() -> None:
    parser = SSEParser()
    parser.feed(b"id: a\ndata: 1\n\nid: b\n\n")
    assert parser.last_event_id == "b"
    parser.feed(b"id: c\ndata: 2\n")  # not yet dispatched
    assert parser.last_event_id == "b"
    [truncated] = parser.flush()
    assert parser.last_event_id == "b"  # an undispatched event never set it
    assert truncated.last_event_id == "c"


def test_cr_at_chunk_end_then_lf_in_next_chunk() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    [event] = parser.feed(b"\n\r")
    assert (event.data, event.start, event.end) == ("a", 0, 9)
    assert parser.feed(b"\n") == []  # the LF of the blank line's CRLF, not another blank line
    [event] = parser.feed(b"data: b\r\n\r\n")
    assert (event.data, event.start) == ("b", 11)
    assert parser.flush() == []


def test_bom_split_across_chunks() -> None:
    parser = SSEParser()
    assert parser.feed(BOM[:1]) == []
    assert parser.feed(BOM[1:2]) == []
    [event] = parser.feed(BOM[2:] + b"data: a\n\n")
    assert (event.data, event.start, event.end, event.data_offsets) == ("a", 3, 11, (9,))


def test_partial_bom_at_end_is_a_truncated_line() -> None:
    parser = SSEParser()
    assert parser.feed(b"\xef\xbb") == []
    [event] = parser.flush()
    assert event.error is not None and event.error.kind == DecodeErrorKind.TRUNCATED_EVENT


def test_comments_are_counted() -> None:
    parser = SSEParser()
    [event] = parser.feed(b": a\n: b\ndata: x\n\n: keepalive\n\n")
    assert event.comments == 2
    assert parser.comments == 3


def test_emit_empty_returns_undispatched_blocks() -> None:
    body = b": keepalive\n\nid: 5\n\nretry: 10\n\ndata: a\n\n"
    events = parse_sse(body, emit_empty=True)
    assert [(e.dispatched, e.id, e.retry, e.comments, e.data) for e in events] == [
        (False, None, None, 1, ""),
        (False, "5", None, 0, ""),
        (False, None, 10, 0, ""),
        (True, None, None, 0, "a"),
    ]
    blocks = [body[e.start : e.end] for e in events]
    assert blocks == [b": keepalive\n", b"id: 5\n", b"retry: 10\n", b"data: a\n"]
    assert fields(parse_sse(body)) == [("a", None, None, "5", None)]


# -- offsets ------------------------------------------------------------------


def test_offsets_cover_the_event_lines() -> None:
    body = b": c\r\nevent: e\r\ndata: a\r\ndata: b\r\n\r\n\n\ndata:x\n\n"
    first, second = parse_sse(body)
    assert body[first.start : first.end] == b": c\r\nevent: e\r\ndata: a\r\ndata: b\r\n"
    assert [body[o : o + 1] for o in first.data_offsets] == [b"a", b"b"]
    assert body[second.start : second.end] == b"data:x\n"
    assert second.data_offsets == (len(body) - 3,)


@pytest.mark.parametrize("path", STREAMS, ids=lambda p: p.name)
def test_real_streams_match_the_reference(path: Path) -> None:
    body = path.read_bytes()
    events = parse_sse(body)
    got = with_offsets(events)
    assert got == reference_events(body)
    assert got, "a capture with no events"
    for e in events:
        assert e.error is None
        for offset in e.data_offsets:
            prefix = body[:offset].rsplit(b"\n", 1)[-1].rsplit(b"\r", 1)[-1]
            assert prefix in (b"data", b"data:", b"data: ")


def test_synthetic_stream_contents() -> None:
    body = (DATA / "synthetic_ids_keepalives.sse").read_bytes()
    parser = SSEParser()
    events = parser.feed(body) + parser.flush()
    assert [(e.event, e.id, e.last_event_id) for e in events] == [
        ("run.started", "evt-1", "evt-1"),
        ("message.delta", "evt-2", "evt-2"),
        (None, None, "evt-2"),
        (None, "", ""),
        ("run.completed", None, ""),
        (None, None, ""),
    ]
    assert events[1].data == '{"run_id": "r1",\n "delta": "héllo €"}'
    assert events[3].data == ""
    assert events[-1].data == "[DONE]"
    assert parser.retry == 2500
    assert parser.comments == 2
    assert events[0].start == 3 + len(b": welcome\r\nretry: 2500\r\n\r\n")


# -- any chunking gives the same events and offsets ---------------------------


@pytest.mark.parametrize("path", STREAMS, ids=lambda p: p.name)
def test_every_two_piece_split_and_byte_by_byte(path: Path) -> None:
    body = path.read_bytes()
    whole = parse_sse(body)
    for cut in range(len(body) + 1):
        assert feed_all([body[:cut], body[cut:]]) == whole, cut
    assert feed_all([body[i : i + 1] for i in range(len(body))]) == whole


def _random_chunks(data: st.DataObject, body: bytes) -> list[bytes]:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=40)))
    bounds = [0, *cuts, len(body)]
    return [body[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_random_splits_of_real_streams(data: st.DataObject) -> None:
    body = data.draw(st.sampled_from(STREAMS)).read_bytes()
    assert feed_all(_random_chunks(data, body)) == parse_sse(body)


TOKENS = [
    b"data", b"data:", b"data: ", b"event:", b"event: t", b"id:", b"id: 1", b"id: \x00",
    b"retry:", b"retry: 10", b"10", b"x", b" ", b":", b": c", b"{}", b"\r", b"\n", b"\r\n",
    b"\n\n", BOM, b"\xe2\x82\xac", b"\xe2\x82", b"\xff", b"\x00",
]
sse_like = st.lists(st.sampled_from(TOKENS), max_size=60).map(b"".join)


@settings(max_examples=200, deadline=None)
@given(sse_like, st.data())
def test_generated_streams_match_the_reference_under_any_split(
    body: bytes, data: st.DataObject
) -> None:
    events = feed_all(_random_chunks(data, body))
    assert with_offsets(events) == reference_events(body)
    assert events == parse_sse(body)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=2000), sse_like), st.data(), st.integers(1, 64))
def test_fuzz_arbitrary_bytes_never_raise(body: bytes, data: st.DataObject, max_line: int) -> None:
    events = feed_all(_random_chunks(data, body), max_line=max_line)
    assert events == parse_sse(body, max_line=max_line)
    for e in events:
        assert 0 <= e.start <= e.end <= len(body)
        assert all(e.start <= o <= e.end for o in e.data_offsets)
        if e.error is not None:
            assert e.error.kind in set(DecodeErrorKind)
            assert e.error.offset is not None and 0 <= e.error.offset <= len(body)


# -- bad input ----------------------------------------------------------------


def test_truncated_final_event_is_reported_with_its_bytes() -> None:
    body = b"data: a\n\nevent: e\ndata: {\"par"
    parser = SSEParser()
    [first] = parser.feed(body)
    [last] = parser.flush()
    assert first.data == "a" and first.dispatched
    assert not last.dispatched
    assert last.error is not None and last.error.kind == DecodeErrorKind.TRUNCATED_EVENT
    assert (last.error.offset, last.error.end) == (9, len(body))
    assert (last.start, last.end) == (9, len(body))
    assert last.raw == b'event: e\ndata: {"par'
    assert last.data == '{"par' and last.event == "e"
    assert last.error.stops_reader
    assert parser.flush() == []


def test_truncated_after_a_complete_line() -> None:
    [event] = parse_sse(b"data: a\n")
    assert event.error is not None and event.error.kind == DecodeErrorKind.TRUNCATED_EVENT
    assert event.raw == b"data: a\n"


def test_unterminated_comment_is_not_a_truncated_event() -> None:
    assert parse_sse(b"data: a\n\n: stream closed\n") == parse_sse(b"data: a\n\n")
    assert parse_sse(b": bye") == []


def test_feed_after_flush_is_misuse() -> None:
    parser = SSEParser()
    parser.flush()
    with pytest.raises(RuntimeError):
        parser.feed(b"data: a\n\n")


def test_invalid_utf8_is_flagged_with_its_stream_offset() -> None:
    body = b"data: ok\n\ndata: one\ndata: t\xc3w\xffo\n\ndata: after\n\n"
    first, bad, after = parse_sse(body)
    assert first.error is None and after.error is None and after.data == "after"
    assert bad.data == "one\nt\ufffdw\ufffdo"
    assert bad.error is not None and bad.error.kind == DecodeErrorKind.INVALID_UTF8
    assert bad.error.offset == body.index(b"\xc3")
    assert bad.error.end == body.index(b"\xc3") + 1
    assert not bad.error.stops_reader
    assert bad.dispatched


def test_invalid_utf8_in_event_and_id_fields() -> None:
    body = b"event: a\xff\nid: \xfe\ndata: x\n\n"
    [event] = parse_sse(body)
    assert (event.event, event.id, event.data) == ("a\ufffd", "\ufffd", "x")
    assert event.error is not None and event.error.kind == DecodeErrorKind.INVALID_UTF8
    assert event.error.offset == body.index(b"\xff")


def test_line_too_long_is_dropped_and_the_stream_resyncs() -> None:
    big = b"data: " + b"x" * 100 + b"\n"
    body = b"data: before\n\n" + big + b"\ndata: after\n\n"
    sevens = [body[i : i + 7] for i in range(0, len(body), 7)]
    for chunks in ([body], sevens, [body[i : i + 1] for i in range(len(body))]):
        before, dropped, after = feed_all(chunks, max_line=50)
        assert before.data == "before" and after.data == "after"
        assert after.error is None
        assert dropped.error is not None and dropped.error.kind == DecodeErrorKind.LINE_TOO_LONG
        assert (dropped.error.offset, dropped.error.end) == (14, 14 + len(big) - 1)
        assert dropped.dispatched and dropped.data == ""
        assert "'data'" in dropped.error.message
        assert not dropped.error.stops_reader


def test_a_line_too_long_keeps_its_length_and_sha256_however_it_is_chunked() -> None:
    """Recorder-side loss is never silent: the dropped line's head, length and
    SHA-256 (of the line as sent, line end excluded) stay with the event, the
    same for any chunking; what follows decodes."""
    import hashlib

    line = b"data: " + bytes(b for b in range(256) if b not in (10, 13)) * 3
    body = b"data: before\n\n" + line + b"\r\n\ndata: after\n\n"
    digest = hashlib.sha256(line).hexdigest()
    for size in (len(body), 64, 7, 1):
        before, dropped, after = feed_all([body[i : i + size] for i in range(0, len(body), size)], max_line=100)
        assert (before.data, after.data) == ("before", "after")
        err = dropped.error
        assert err is not None and err.kind == DecodeErrorKind.LINE_TOO_LONG
        assert (err.offset, err.end) == (14, 14 + len(line))
        assert f"a {len(line)}-byte line (field 'data')" in err.message and f"sha256:{digest}" in err.message
        assert err.excerpt.startswith("data: ")


def test_line_too_long_keeps_the_other_lines_of_its_event() -> None:
    body = b"event: e\n: " + b"c" * 60 + b"\r\ndata: kept\n\n"
    [event] = feed_all([body[:20], body[20:50], body[50:]], max_line=50)
    assert (event.event, event.data) == ("e", "kept")
    assert event.error is not None and event.error.kind == DecodeErrorKind.LINE_TOO_LONG
    assert event.error.offset == 9 and event.error.end == 9 + 62


def test_line_too_long_without_data_is_reported_undispatched() -> None:
    [event] = parse_sse(b": " + b"c" * 60 + b"\n\ndata: b\n\n", max_line=50)[:1]
    assert not event.dispatched and event.error is not None


def test_line_too_long_at_end_of_stream() -> None:
    body = b"data: a\n\ndata: " + b"x" * 100
    parser = SSEParser(max_line=50)
    first = parser.feed(body[:30]) + parser.feed(body[30:])
    [last] = parser.flush()
    assert first[0].data == "a"
    assert last.error is not None and last.error.kind == DecodeErrorKind.TRUNCATED_EVENT
    assert (last.start, last.end) == (9, len(body))


def test_ten_megabyte_line() -> None:
    payload = b'{"text": "' + b"y" * (10 * 1024 * 1024) + b'"}'
    body = b"data: " + payload + b"\n\ndata: next\n\n"
    chunks = [body[i : i + 65536] for i in range(0, len(body), 65536)]
    # Over a 1 MiB limit: dropped with its location, memory stays bounded, next event fine.
    parser = SSEParser(max_line=1024 * 1024)
    events = []
    for chunk in chunks:
        events += parser.feed(chunk)
        assert len(parser._tail) <= parser.max_line + 65536
    events += parser.flush()
    dropped, nxt = events
    assert dropped.error is not None and dropped.error.kind == DecodeErrorKind.LINE_TOO_LONG
    assert (dropped.error.offset, dropped.error.end) == (0, len(payload) + 6)
    assert nxt.data == "next" and nxt.error is None
    # Under the default 64 MiB limit it is an ordinary event.
    big, nxt = feed_all(chunks)
    assert big.error is None and big.data == payload.decode()
    assert nxt.data == "next"


def test_bytearray_and_memoryview_chunks() -> None:
    body = b"event: e\ndata: a\n\n"
    parser = SSEParser()
    events = parser.feed(bytearray(body[:5])) + parser.feed(memoryview(body)[5:]) + parser.flush()
    assert events == parse_sse(body)


def test_the_earliest_error_of_an_event_is_kept() -> None:
    body = b"data: \xff\nid: \xfe\ndata: x\n\n"
    [event] = parse_sse(body)
    assert event.error is not None and event.error.offset == 6
