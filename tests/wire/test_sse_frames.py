"""sse_frames (the one-pass path from a simple SSE body to frames) makes the
same frames as the SSE parser and frame_from_sse, or declines (None)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from chatkit_trace.wire import SSEParser, frame_from_sse
from chatkit_trace.wire.frames import sse_frames

CAPTURES = Path(__file__).resolve().parents[2] / "recordings" / "captures"


def parsed(data: bytes, at: float = 5.0, spacing: float = 0.25) -> list:
    parser = SSEParser()
    events = parser.feed(data) + parser.flush()
    return [frame_from_sse(ev, 3, i, at + i * spacing) for i, ev in enumerate(events)]


def test_every_recorded_stream_that_it_takes_gives_the_parsers_frames() -> None:
    taken = 0
    for path in sorted(CAPTURES.rglob("*.sse")):
        data = path.read_bytes()
        fast = sse_frames(data, 3, 5.0, 0.25)
        if fast is not None:
            taken += 1
            assert fast == parsed(data), path
    assert taken >= 10  # most recorded streams are simple


def test_simple_blocks() -> None:
    data = 'data: {"a": 1}\n\ndata:{"b":"é"}\n\ndata:\n\ndata:  two spaces\n\n'.encode()
    frames = sse_frames(data, 3, 5.0, 0.25)
    assert frames is not None and [f.text for f in frames] == ['{"a": 1}', '{"b":"é"}', "", " two spaces"]
    assert frames == parsed(data)


def test_declines_what_the_parser_must_decide() -> None:
    for data in (
        b"",
        b"data: x\n\n\xef\xbb\xbf",  # not simple at the end
        b"\xef\xbb\xbfdata: x\n\n",  # byte order mark
        b"data: x\r\n\r\n",  # CR line ends
        b"data: x\n\ndata: y\n",  # unfinished last block
        b"data: a\ndata: b\n\n",  # two data lines
        b"id: 1\ndata: x\n\n",  # another field
        b": keepalive\n\ndata: x\n\n",  # a comment block
        b"data: x\n\n\ndata: y\n\n",  # an extra line end
        b"data: \xff\n\n",  # invalid UTF-8: the parser reports where
        b"event: e\ndata: x\n\n",
    ):
        assert sse_frames(data, 3, 5.0, 0.25) is None, data


_line = st.sampled_from(["data: x", "data:{}", "data:", "data: é", "id: 7", ": c", "event: e", "data: a b", "retry: 5", "", "data: \r"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_line, max_size=12), st.sampled_from(["\n", "\n\n", ""]))
def test_same_frames_as_the_parser_or_none(lines: list[str], end: str) -> None:
    data = ("\n".join(lines) + end).encode()
    fast = sse_frames(data, 3, 5.0, 0.25)
    if fast is not None:
        assert fast == parsed(data)


def test_non_ascii_bodies_keep_byte_offsets() -> None:
    data = 'data: {"a": "é"}\n\ndata: x\n\n'.encode()
    frames = sse_frames(data, 3, 5.0, 0.25)
    assert frames is not None and frames[1].start == len('data: {"a": "é"}\n\n'.encode())
    assert frames == parsed(data)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=8), min_size=1, max_size=10))
def test_a_body_of_spaced_data_lines_only_is_taken_whole(values: list[str]) -> None:
    """The commonest body (every block ``data: `` and one line) takes the
    split-at-``\\n\\ndata: `` path: the parser's frames, never None."""
    data = "".join(f"data: {v}\n\n" for v in values).encode()
    fast = sse_frames(data, 3, 5.0, 0.25)
    assert fast is not None and fast == parsed(data)


def test_a_block_of_another_shape_among_spaced_data_lines_goes_the_general_way() -> None:
    for data in (
        b"data: a\n\ndata:b\n\ndata: c\n\n",  # no space after the colon: taken, by the general path
        b"data: a\n\nid: 1\ndata: b\n\n",  # another field: declined
        b"data: a\n\ndata: b\ndata: c\n\n",  # two data lines: declined
        b"data: a\n\n: ping\n\ndata: b\n\n",  # a comment block: declined
    ):
        fast = sse_frames(data, 3, 5.0, 0.25)
        assert fast is None or fast == parsed(data), data
    assert sse_frames(b"data: a\n\ndata:b\n\ndata: c\n\n", 3, 5.0, 0.25) is not None
