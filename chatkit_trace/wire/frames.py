"""Frames: the one shape every transport is normalised into, and their JSON.

A *frame* is one unit the chat protocol sends: an SSE event, a WebSocket
message, a line of an NDJSON body, or a whole JSON body. Frames are the
recorder's source of truth (docs/architecture.md, "Raw frames are the source of
truth"): adapters decode them, and everything else can be recomputed from
them. A frame that could not be decoded is still a frame, with its
:class:`~chatkit_trace.wire.errors.DecodeError` in ``error``, so the viewer
can show it where it arrived.

:func:`event_json` is the step chatkit's SSE reader takes before
``decodeEvent`` (SPEC R2.8): parse the data as JSON and write the SSE
``event:`` field into the object as ``event``; OpenAI's ``[DONE]`` sentinel
comes back as :data:`DONE` instead of a JSON error.

:func:`reader_cutoff` answers SPEC R2.5 for one response: "a parse or
decode error ends that read: later frames of that response never reach the
Core". chatkit-trace still stores and shows those later frames; adapters
and analyzers use the cutoff to know which ones chatkit would have decoded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Final

import msgspec
import msgspec.structs

from .errors import DecodeError, DecodeErrorKind, WireDecodeError, excerpt_at, line_too_long
from .sse import DEFAULT_MAX_LINE, SSEEvent

__all__ = [
    "DONE",
    "DecodeError",
    "DoneType",
    "Frame",
    "NDJSONSplitter",
    "WireDecodeError",
    "admitted",
    "body_frame",
    "byte_offset",
    "error_frame",
    "event_json",
    "frame_from_sse",
    "replace_frame",
    "loads",
    "parse_json",
    "reader_cutoff",
    "sse_frames",
    "NDJSON_CONTENT_TYPES",
    "content_transport",
]

TRANSPORTS = ("sse", "ws", "body", "ndjson")
DIRECTIONS = ("in", "out")


class Frame(msgspec.Struct, frozen=True, gc=False):
    """One frame of one exchange (see the module docstring).

    Attributes:
        exchange_index: the HTTP exchange (flow) it belongs to.
        index: position within its exchange, from 0.
        transport: ``'sse'``, ``'ws'``, ``'body'`` or ``'ndjson'``.
        direction: ``'in'`` (server to client) or ``'out'`` (client to server).
        text: the text (SSE data, a text message, a line, a body), or None.
        raw: the bytes of a binary WebSocket message, or of a truncated SSE
            event (what had arrived), else None.
        event: the SSE ``event:`` field, or None.
        event_id: the SSE ``id:`` field of this event (the outer eventId of
            R2.8/R11.7), or None.
        start: first byte in the exchange's decoded body (None for ws).
        end: byte after the frame (exclusive; None for ws).
        at: arrival time, seconds since the epoch.
        error: what went wrong decoding this frame, or None.
        data_offsets: for SSE, the stream offset of each ``data`` line's
            value, so a JSON error position maps to an exact byte; None when
            ``text`` is contiguous from ``start``.

    A value: never changed once made; it hashes and compares by value.  A
    frozen ``msgspec.Struct``, not a dataclass, because every recorded event
    is one frame and a Struct is built in 72 ns where a slots dataclass takes
    188 (issue 18); it never refers back to anything that refers to it, so
    the cyclic GC need not track it (``gc=False``).  A changed copy:
    :func:`replace_frame`.
    """

    exchange_index: int
    index: int
    transport: str
    direction: str
    text: str | None
    raw: bytes | None = None
    event: str | None = None
    event_id: str | None = None
    start: int | None = None
    end: int | None = None
    at: float = 0.0
    error: DecodeError | None = None
    data_offsets: tuple[int, ...] | None = None


def replace_frame(frame: Frame, **changes: Any) -> Frame:
    """A copy of ``frame`` with ``changes`` (``dataclasses.replace`` for a Frame)."""
    return msgspec.structs.replace(frame, **changes)


class DoneType:
    """The type of :data:`DONE`; there is one instance."""

    _instance: DoneType | None = None

    def __new__(cls) -> DoneType:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "DONE"

    def __reduce__(self) -> str:
        return "DONE"


DONE: Final = DoneType()
"""OpenAI's ``data: [DONE]`` end-of-stream sentinel, as :func:`event_json` returns it."""


def frame_from_sse(event: SSEEvent, exchange_index: int, index: int, at: float) -> Frame:
    """The frame of one SSE event (``direction='in'``).

    A block that WHATWG does not dispatch (a keepalive seen with
    ``emit_empty``, a block whose only line was dropped) becomes a frame with
    ``text=None``, which :func:`event_json` treats as nothing to decode;
    a truncated final event keeps the data that had arrived.
    """
    error = event.error
    keep = event.dispatched or (error is not None and error.kind == DecodeErrorKind.TRUNCATED_EVENT)
    return Frame(
        exchange_index,
        index,
        "sse",
        "in",
        event.data if keep else None,
        event.raw,
        event.event,
        event.id,
        event.start,
        event.end,
        at,
        event.error,
        event.data_offsets,
    )


def sse_frames(data: bytes, exchange_index: int, at: float, spacing: float) -> list[Frame] | None:
    """The frames of a whole SSE body made of simple events only, in one pass
    from bytes to frames; None when the body has anything else.

    Simple: LF line ends, no byte order mark, every block one ``data:`` line
    of valid UTF-8 no longer than :data:`DEFAULT_MAX_LINE`, the body ending
    with the blank line of its last event (most recorded streams).  For such
    a body :class:`~chatkit_trace.wire.sse.SSEParser` takes its one-line path
    for every block and keeps no state between them; this builds the same
    frames ``frame_from_sse`` would make of its events, without the events
    (issue 18).  Anything else (None): the parser decides, and explains.
    """
    if not data or data[0] == 0xEF or b"\r" in data or not data.endswith(b"\n\n"):
        return None
    # An ASCII body is split as text (byte offsets are character offsets);
    # any other as bytes, each event's data decoded as UTF-8.
    body: Any = data.decode("ascii") if data.isascii() else data
    decode = body is data
    marks: tuple[Any, Any, Any, Any] = _BYTE_MARKS if decode else _TEXT_MARKS
    blank, prefix, spaced, newline = marks
    if body.startswith(spaced):
        # Every block ``data: `` and one line, the commonest body: split at each
        # blank line followed by ``data: ``, each piece is an event's data (no
        # prefix to check and cut).  A block of another shape leaves a line end
        # in a piece: then the blocks are split and read one by one.
        frames = _simple_sse_frames(body[6:-2].split(blank + spaced), True, prefix, spaced, newline, decode, exchange_index, at, spacing)
        if frames is not None:
            return frames
    blocks = body.split(blank)
    blocks.pop()  # empty: the body ends with a blank line
    return _simple_sse_frames(blocks, False, prefix, spaced, newline, decode, exchange_index, at, spacing)


_TEXT_MARKS = ("\n\n", "data:", "data: ", "\n")
_BYTE_MARKS = (b"\n\n", b"data:", b"data: ", b"\n")


def _simple_sse_frames(
    blocks: list[Any], values: bool, prefix: Any, spaced: Any, newline: Any, decode: bool,
    exchange_index: int, at: float, spacing: float,
) -> list[Frame] | None:
    """:func:`sse_frames` of a body split into its blocks (``values``: split
    at ``\\n\\ndata: ``, so each block is already an event's data without its
    ``data: ``): of bytes (``decode``: each event's data decoded as UTF-8) or
    of the text of an ASCII body, ``prefix``/``spaced``/``newline`` of the
    same type.  None when a block is not one ``data:`` line."""
    out: list[Frame] = []
    add = out.append
    pos = 0
    i = 0
    for block in blocks:
        if values:
            text, v = block, 6
            n = len(block) + 6  # the block: "data: " and the value
            if n > DEFAULT_MAX_LINE or newline in block:
                return None
        else:
            n = len(block)
            if n > DEFAULT_MAX_LINE or not block.startswith(prefix) or newline in block:
                return None
            v = 6 if block.startswith(spaced) else 5  # one space after the colon is dropped
            text = block[v:]
        if decode:
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                return None
        add(Frame(exchange_index, i, "sse", "in", text, None, None, None, pos, pos + n + 1, at + i * spacing, None, (pos + v,)))
        pos += n + 2
        i += 1
    return out


def _decode_text(data: bytes, start: int) -> tuple[str, DecodeError | None]:
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        error = DecodeError(
            DecodeErrorKind.INVALID_UTF8,
            f"invalid UTF-8 ({exc.reason}); decoded as U+FFFD like a browser would",
            start + exc.start,
            start + exc.end,
            excerpt_at(data, exc.start),
        )
        return data.decode("utf-8", "replace"), error


def body_frame(
    content: bytes,
    exchange_index: int,
    at: float,
    *,
    index: int = 0,
    direction: str = "in",
    start: int = 0,
) -> Frame:
    """A whole (decoded) JSON body as one frame, ``transport='body'``."""
    text, error = _decode_text(content, start)
    return Frame(
        exchange_index, index, "body", direction, text, None, None, None,
        start, start + len(content), at, error,
    )


def error_frame(
    error: DecodeError,
    exchange_index: int,
    index: int,
    at: float,
    *,
    transport: str = "sse",
    direction: str = "in",
) -> Frame:
    """A frame that stands for a problem below the frame level.

    For example a ``bad-encoding`` error from a Content-Encoding decoder:
    stored in order with the other frames, it makes :func:`reader_cutoff`
    stop where the browser's body read would have failed. ``start`` and
    ``end`` are the error's offsets.
    """
    return Frame(
        exchange_index, index, transport, direction, None, None, None, None,
        error.offset, error.end, at, error,
    )


# -- JSON ---------------------------------------------------------------------


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON (JavaScript's JSON.parse rejects it)")


# JSON.parse, not Python: NaN / Infinity are errors. A decoder instance keeps
# the C scanner, unlike json.loads with keyword arguments.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)

# msgspec's decoder, ten times faster than the standard library's on event
# sized JSON, returns the same values for every text both accept (the same
# types, integers of any size, correctly rounded floats, the last of
# duplicate keys).  Where it refuses a text (bad JSON, NaN, 1e400, a lone
# surrogate escape, too deep) the standard library decides, so values and
# error messages stay exactly the standard library's (docs/decisions.md).
_FAST = msgspec.json.Decoder().decode
_DEEP = 1600  # a text this long may nest deeper than either parser allows


def parse_json(text: str) -> object:
    """``JSON.parse``: a value, or ``json.JSONDecodeError`` / ``ValueError``
    / ``RecursionError`` exactly as ``json.JSONDecoder`` raises them."""
    if len(text) < _DEEP or text.count("[") + text.count("{") < _DEEP // 2:
        try:
            return _FAST(text)
        except Exception:  # noqa: BLE001 - the standard library decides (and explains)
            pass
    return _DECODER.decode(text)


def loads(data: str | bytes) -> object:
    """``json.loads(data)``, exactly (NaN allowed, a bytes body's encoding
    detected), through msgspec when it accepts the text (recorded bodies:
    history reads, requests, stored columns)."""
    if len(data) < _DEEP or (
        data.count("[") + data.count("{") if isinstance(data, str) else data.count(b"[") + data.count(b"{")
    ) < _DEEP // 2:
        try:
            return _FAST(data)
        except Exception:  # noqa: BLE001 - the standard library decides (and explains)
            pass
    return json.loads(data)


def event_json(
    frame: Frame, *, overwrite_event: bool = False
) -> tuple[object | None, DecodeError | None]:
    """Parse a frame's text as JSON, as chatkit's SSE reader does (SPEC R2.8).

    Returns ``(value, None)``, ``(DONE, None)`` for ``[DONE]``, ``(None,
    None)`` for a frame with nothing to decode (a keepalive block), or
    ``(None, error)``. The error is a ``bad-json`` DecodeError whose offset
    is the byte in the stream where parsing failed, or the frame's own error
    when its content was lost (truncated event, dropped line, corrupt
    encoding), or ``binary-message`` for a binary WebSocket message that is
    not UTF-8 JSON. A frame's non-fatal ``invalid-utf8`` stays on the frame.

    The SSE ``event:`` field: when the value is an object, it is written
    into it as ``"event"``. chatkit-trace's decision: an ``"event"`` key the
    JSON already has is kept (the backend's own field is more specific than
    the SSE type), unless ``overwrite_event=True``. A new dict is returned;
    nothing is shared with the frame.
    """
    error = frame.error
    if error is not None and error.content_lost:
        return None, error
    text = frame.text
    if text is None:
        if frame.raw is None:
            return None, None
        return None, _binary_error(frame.raw)
    if text == "[DONE]":
        return DONE, None
    try:
        # parse_json, inlined (once per frame)
        if len(text) < _DEEP or text.count("[") + text.count("{") < _DEEP // 2:
            try:
                value = _FAST(text)
            except Exception:  # noqa: BLE001 - the standard library decides (and explains)
                value = _DECODER.decode(text)
        else:
            value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        why = f"{exc.msg} (line {exc.lineno} column {exc.colno})"
        return None, _bad_json(frame, text, exc.pos, why)
    except (ValueError, RecursionError) as exc:
        return None, _bad_json(frame, text, 0, str(exc) or type(exc).__name__)
    if frame.event is not None and frame.transport == "sse" and type(value) is dict:
        if overwrite_event or "event" not in value:
            value["event"] = frame.event
    return value, None


def _bad_json(frame: Frame, text: str, pos: int, why: str) -> DecodeError:
    at = byte_offset(frame, pos)
    if not text:
        message = "the data is empty, not JSON"
    elif not text.strip():
        message = "the data is only whitespace, not JSON"
    else:
        message = f"not JSON: {why}"
    encoded = text.encode("utf-8", "surrogatepass")
    local = len(text[:pos].encode("utf-8", "surrogatepass"))
    end = at + 1 if text else at
    return DecodeError(DecodeErrorKind.BAD_JSON, message, at, end, excerpt_at(encoded, local))


def _binary_error(raw: bytes) -> DecodeError:
    return DecodeError(
        DecodeErrorKind.BINARY_MESSAGE,
        f"a {len(raw)}-byte binary message that is not UTF-8 JSON",
        0,
        len(raw),
        excerpt_at(raw, 0),
    )


def byte_offset(frame: Frame, pos: int) -> int:
    """The stream offset of character ``pos`` of ``frame.text``.

    Exact for valid UTF-8 (for SSE it walks the data lines with
    ``data_offsets``); where the text holds U+FFFD from invalid bytes the
    offset can be off by a few bytes. For a WebSocket frame (no ``start``)
    it counts from the start of the message.
    """
    text = frame.text or ""
    pos = max(0, min(pos, len(text)))
    offsets = frame.data_offsets
    if offsets:
        line_start = 0
        for k, offset in enumerate(offsets):
            newline = text.find("\n", line_start)
            if newline < 0 or pos <= newline or k == len(offsets) - 1:
                return offset + len(text[line_start:pos].encode("utf-8", "surrogatepass"))
            line_start = newline + 1
    base = frame.start or 0
    return base + len(text[:pos].encode("utf-8", "surrogatepass"))


# -- R2.5: where chatkit's reader stops ---------------------------------------


def reader_cutoff(frames: Sequence[Frame]) -> int | None:
    """Position in ``frames`` where chatkit's reader stops, or None (SPEC R2.5).

    ``frames`` are one exchange's frames in order. The frame at the returned
    position is the first incoming frame whose decoding fails in a way that
    ends chatkit's read (``DecodeError.stops_reader``: bad JSON, a
    truncated event, corrupt Content-Encoding, a non-JSON binary message);
    it and every frame after it never reach ``decodeEvent``. Outgoing frames
    and frames with nothing to decode are skipped. The terminal-update stop
    of R2.5a is the adapter's to decide, not this function's.
    """
    for position, frame in enumerate(frames):
        if frame.direction != "in":
            continue
        _, error = event_json(frame)
        if error is not None and error.stops_reader:
            return position
        if frame.error is not None and frame.error.stops_reader:
            return position
    return None


def admitted(frames: Sequence[Frame]) -> Sequence[Frame]:
    """The frames chatkit's reader decodes: those before :func:`reader_cutoff`."""
    cut = reader_cutoff(frames)
    return frames if cut is None else frames[:cut]


# -- NDJSON -------------------------------------------------------------------


#: Content types of a body of one JSON value per line (NDJSON, JSON Lines,
#: RFC 7464 JSON text sequences): defined once for the recorder, the importer,
#: redrive and the fault relay.
NDJSON_CONTENT_TYPES = frozenset(
    {
        "application/x-ndjson",
        "application/ndjson",
        "application/jsonl",
        "application/x-jsonlines",
        "application/jsonlines",
        "application/json-seq",
    }
)



def content_transport(content_type: str | None) -> str | None:
    """``sse`` / ``ndjson`` for a streaming Content-Type (parameters and case
    ignored), else None: the one reading of a Content-Type the recorder
    (``capture.recorder.stream_transport``) and the importer share."""
    ct = (content_type or "").split(";", 1)[0].strip().lower()
    if ct == "text/event-stream":
        return "sse"
    if ct in NDJSON_CONTENT_TYPES:
        return "ndjson"
    return None


class NDJSONSplitter:
    """Incremental splitter of ``application/x-ndjson`` / ``application/jsonl`` bodies.

    Each non-blank line (LF-terminated, a CR before the LF is dropped)
    becomes one ``transport='ndjson'`` frame; the last line may lack its LF
    (many servers omit it), so :meth:`flush` turns it into a frame too.
    Lines longer than ``max_line`` (counting a CR before the LF) are dropped
    as soon as they cross the limit and come out as a frame with
    ``text=None`` and a ``line-too-long`` error (its ``end`` is the LF).
    Offsets are in the decoded body, as for SSE.

    Args:
        exchange_index: the exchange the frames belong to.
        first_index: index of the first frame produced.
        direction: ``'in'`` for a response body, ``'out'`` for a request.
        max_line: longest line kept, in bytes.
    """

    def __init__(
        self,
        exchange_index: int,
        *,
        first_index: int = 0,
        direction: str = "in",
        max_line: int = DEFAULT_MAX_LINE,
    ) -> None:
        self.exchange_index = exchange_index
        self.next_index = first_index
        self.direction = direction
        self.max_line = max_line
        self._head = min(64, max_line + 1)  # bytes kept of a dropped line
        self._buf = bytearray()
        self._pos = 0  # offset just after the last byte fed
        self._skip: tuple[int, bytes, Any] | None = None  # (start, head, sha256 so far) of a dropped line

    def feed(self, chunk: bytes | bytearray | memoryview, at: float) -> list[Frame]:
        """Consume ``chunk``; return the frames of the lines it completes."""
        if type(chunk) is not bytes:  # bytearray / memoryview
            chunk = bytes(chunk)
        out: list[Frame] = []
        if self._skip is not None and chunk:
            chunk = self._skip_line(chunk, at, out)
        if not chunk:
            return out
        last = chunk.rfind(b"\n")
        if last < 0:
            self._buf += chunk
            self._pos += len(chunk)
            if len(self._buf) > self.max_line:
                self._start_skip()
            return out
        base = self._pos - len(self._buf)
        self._buf += chunk[: last + 1]
        data = bytes(self._buf)
        self._buf = bytearray(chunk[last + 1 :])
        self._pos += len(chunk)
        for line in data.split(b"\n")[:-1]:
            self._line(line, base, at, out)
            base += len(line) + 1
        if len(self._buf) > self.max_line:
            self._start_skip()
        return out

    def flush(self, at: float) -> list[Frame]:
        """End of body: the last line, even without its LF."""
        out: list[Frame] = []
        if self._skip is not None:
            self._dropped(self._skip[0], self._pos, self._skip[1], at, out, self._skip[2].hexdigest())
            self._skip = None
        if self._buf:
            line = bytes(self._buf)
            self._buf = bytearray()
            self._line(line, self._pos - len(line), at, out)
        return out

    def _start_skip(self) -> None:
        self._skip = (self._pos - len(self._buf), bytes(self._buf[: self._head]), hashlib.sha256(self._buf))
        self._buf = bytearray()

    def _skip_line(self, chunk: bytes, at: float, out: list[Frame]) -> bytes:
        assert self._skip is not None
        i = chunk.find(b"\n")
        if i < 0:
            self._skip[2].update(chunk)
            self._pos += len(chunk)
            return b""
        self._skip[2].update(chunk[:i])
        self._dropped(self._skip[0], self._pos + i, self._skip[1], at, out, self._skip[2].hexdigest())
        self._skip = None
        self._pos += i + 1
        return chunk[i + 1 :]

    def _line(self, line: bytes, start: int, at: float, out: list[Frame]) -> None:
        if len(line) > self.max_line:  # measured with a CR, as the buffer is
            self._dropped(start, start + len(line), line[: self._head], at, out, hashlib.sha256(line).hexdigest())
            return
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip():
            return
        text, error = _decode_text(line, start)
        out.append(self._frame(text, start, start + len(line), at, error))

    def _dropped(self, start: int, end: int, head: bytes, at: float, out: list[Frame], sha256: str) -> None:
        out.append(self._frame(None, start, end, at, line_too_long(start, end, head, self.max_line, sha256)))

    def _frame(
        self, text: str | None, start: int, end: int, at: float, error: DecodeError | None
    ) -> Frame:
        frame = Frame(
            self.exchange_index, self.next_index, "ndjson", self.direction, text,
            None, None, None, start, end, at, error,
        )
        self.next_index += 1
        return frame
