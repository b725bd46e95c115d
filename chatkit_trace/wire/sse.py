"""Incremental Server-Sent Events parser (WHATWG HTML, "interpreting an event stream").

Theory of operation
-------------------
Bytes go in through :meth:`SSEParser.feed`, dispatched events come out as
:class:`SSEEvent` values, and :meth:`SSEParser.flush` ends the stream. The
parser never does I/O and never raises on bad input: problems come out as
:class:`~chatkit_trace.wire.errors.DecodeError` values on the events (as h11
does for HTTP/1.1, and as httpx's ``decode``/``flush`` decoders do).

The stream is handled as *bytes*, not text. Line ends (CR, LF, CRLF) and the
field separator ``:`` are ASCII and can never occur inside a UTF-8 sequence,
so splitting first and decoding each value afterwards gives the same text as
the WHATWG order (decode, then split), including where invalid bytes turn
into U+FFFD. Splitting uses ``bytes.splitlines(keepends=True)``, which for
bytes breaks exactly at CR, LF and CRLF, so Python only loops once per line.

Rules followed (each is a row in ``tests/wire/test_sse.py``):

- one leading UTF-8 BOM is skipped, once, even when split across chunks;
- a CR at the end of a chunk ends the line; an LF at the start of the next
  chunk is then the second half of a CRLF, not an empty line;
- ``:`` starts a comment (counted in ``SSEEvent.comments``, no event);
- ``field`` without a colon is that field with an empty value; one space
  after the colon is removed, a second one is kept;
- ``data`` lines are joined with LF (so the trailing LF is removed);
  ``event`` sets the type (empty means "message"); ``id`` sets the last
  event ID buffer unless the value contains NUL; ``retry`` only when the
  value is all ASCII digits; other fields are ignored;
- a blank line dispatches: an event whose data buffer is empty (no ``data``
  line) is not dispatched, but its ``id`` still updated the buffer; the
  type and data buffers reset, the last event ID buffer does not;
- at the end of the stream an incomplete event is not dispatched
  (WHATWG); :meth:`SSEParser.flush` reports it as ``truncated-event`` with
  its offsets and bytes, because a recorder must show what was lost.

Offsets
-------
``start``/``end`` are positions in the decoded (un-content-encoded) byte
stream, BOM included: ``start`` is the first byte of the event's first line
(comments included), ``end`` is just after the line end of its last line, so
``body[start:end]`` is the event without its terminating blank line. They
do not depend on how the stream was chunked.

Limits
------
A line longer than ``max_line`` bytes (default 64 MiB) is dropped as soon as
it crosses the limit (memory stays bounded by about ``max_line`` plus one
chunk) and reported as ``line-too-long`` on the event it belonged to, with
its length and the SHA-256 of all its bytes (hashed as they pass); the
parser resynchronises at the next line end and decodes what follows.

SPEC: R2.8 (the ``event`` field and the outer ``id``), R11.7 (only the SSE
``id`` enables deduplication), R2.5 (what happens after a decode error is
decided by :func:`chatkit_trace.wire.frames.reader_cutoff`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

from .errors import DecodeError, DecodeErrorKind, excerpt_at, line_too_long

__all__ = ["DEFAULT_MAX_LINE", "SSEEvent", "SSEParser", "parse_sse"]

DEFAULT_MAX_LINE = 64 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"
_HEAD = 64  # bytes of a dropped line kept to name its field


@dataclass(slots=True, unsafe_hash=True)
class SSEEvent:
    """One event block of an event stream.

    Attributes:
        data: the data buffer, lines joined with LF (U+FFFD for invalid UTF-8).
        event: the ``event`` field, or None when absent or empty.
        id: the ``id`` field given in *this* block (last valid one), or None.
        last_event_id: the WHATWG last event ID buffer at dispatch.
        retry: the valid ``retry`` value given in this block, or None.
        start: offset of the block's first byte in the decoded stream.
        end: offset just after the block's last line end (exclusive).
        comments: comment lines inside this block.
        data_offsets: stream offset of the first byte of each ``data`` value,
            used to turn a position in ``data`` into a stream offset.
        error: the most serious problem of this block, or None.
        dispatched: False for blocks WHATWG does not dispatch (no data line,
            or cut off by the end of the stream); they come out only when
            ``emit_empty`` is set or when they carry an error.
        raw: the block's bytes so far for a ``truncated-event``; the data's
            bytes (its lines joined by LF) when they are not valid UTF-8
            (``text`` then has U+FFFD where they were), else None.

    A value: never changed once made.  Not ``frozen`` only because a frozen
    dataclass costs five times as much to build (one per event, the
    parser's hot path; issue 18); it hashes and compares by value all the same.
    """

    data: str
    event: str | None = None
    id: str | None = None
    last_event_id: str = ""
    retry: int | None = None
    start: int = 0
    end: int = 0
    comments: int = 0
    data_offsets: tuple[int, ...] = ()
    error: DecodeError | None = None
    dispatched: bool = True
    raw: bytes | None = None

    @property
    def type(self) -> str:
        """The WHATWG event type: the ``event`` field, or ``"message"``."""
        return self.event or "message"


class SSEParser:
    """Feed bytes, get :class:`SSEEvent` values; see the module docstring.

    Args:
        max_line: longest line kept, in bytes, without its line end.
        emit_empty: also return blocks WHATWG does not dispatch (keepalive
            comments, a bare ``id:`` or ``retry:``) with ``dispatched=False``.

    Attributes:
        last_event_id: the event source's last event ID string (what a
            browser would send as ``Last-Event-ID`` on reconnection).
        retry: the reconnection time set by the stream, or None.
        comments: comment lines seen so far (keepalives included).
        position: bytes consumed so far (BOM included).
    """

    # the event block being read (see _reset_block)
    _b_start: int | None
    _b_lines: list[bytes]
    _b_data: list[bytes]
    _b_offsets: list[int]
    _b_event: str | None
    _b_id: str | None
    _b_retry: int | None
    _b_comments: int
    _b_fields: bool
    _b_lost_data: bool
    _b_error: DecodeError | None

    def __init__(self, *, max_line: int = DEFAULT_MAX_LINE, emit_empty: bool = False) -> None:
        if max_line < 1:
            raise ValueError("max_line must be positive")
        self.max_line = max_line
        self.emit_empty = emit_empty
        # Bytes kept of a dropped line: the same whether it came whole or in pieces.
        self._head = min(_HEAD, max_line + 1)
        self.last_event_id = ""
        self.retry: int | None = None
        self.comments = 0
        self._id_buffer = ""
        self._pos = 0  # absolute offset just after the last byte fed
        self._tail = bytearray()  # an incomplete line (no line end yet)
        self._cr = False  # the last chunk ended in CR: skip one leading LF
        self._cr_kept = False  # ... and that CR ended a line kept in _b_lines
        self._bom: bytes | None = b""  # BOM prefix seen so far; None once decided
        self._skip: tuple[int, bytes, Any] | None = None  # (start, head, sha256 so far) of a dropped line
        self._closed = False
        self._types: dict[bytes, str] = {}
        self._reset_block()

    @property
    def position(self) -> int:
        return self._pos

    # -- public -------------------------------------------------------------

    def feed(self, chunk: bytes | bytearray | memoryview) -> list[SSEEvent]:
        """Consume ``chunk`` (any split) and return the events it completes.

        Raises:
            RuntimeError: after :meth:`flush` (misuse, not bad input).
        """
        if self._closed:
            raise RuntimeError("SSEParser.feed() after flush()")
        if type(chunk) is not bytes:  # bytearray / memoryview
            chunk = bytes(chunk)
        out: list[SSEEvent] = []
        if chunk and self._bom is not None:
            chunk = self._strip_bom(chunk)
        if chunk and self._cr:
            self._cr = False
            if chunk[0] == 10:
                chunk = chunk[1:]
                self._pos += 1
                if self._cr_kept:  # complete the kept line's CRLF in the raw bytes
                    self._b_lines.append(b"\n")
        if chunk and self._skip is not None:
            chunk = self._skip_line(chunk)
        if chunk:
            self._feed_lines(chunk, out)
        return out

    def flush(self) -> list[SSEEvent]:
        """End of stream: report an incomplete final event (never dispatched).

        Returns a list with at most one event, ``dispatched=False`` and a
        ``truncated-event`` error, when the stream ended inside an event;
        with ``emit_empty``, an unterminated comment-only block comes out
        without error. Calling it again returns ``[]``.
        """
        if self._closed:
            return []
        self._closed = True
        out: list[SSEEvent] = []
        if self._bom:  # the stream was one or two bytes of a BOM prefix
            self._tail += self._bom
            self._pos += len(self._bom)
        self._bom = None
        if self._skip is not None:
            self._drop_line(self._skip[0], self._pos, self._skip[1], self._skip[2].hexdigest())
            self._skip = None
        if self._tail:
            tail = bytes(self._tail)
            self._tail.clear()
            self._process([tail], self._pos - len(tail), out)
        if self._b_start is not None:
            self._truncated(out)
        return out

    # -- chunk handling -----------------------------------------------------

    def _strip_bom(self, chunk: bytes) -> bytes:
        head = self._bom + chunk if self._bom else chunk
        if len(head) < 3 and _BOM.startswith(head):
            self._bom = head
            return b""
        self._bom = None
        if head.startswith(_BOM):
            self._pos += 3
            return head[3:]
        return head

    def _skip_line(self, chunk: bytes) -> bytes:
        """Discard the rest of an over-long line; return what follows its end."""
        assert self._skip is not None
        i = _first_line_end(chunk)
        if i < 0:
            self._skip[2].update(chunk)
            self._pos += len(chunk)
            return b""
        self._skip[2].update(chunk[:i])
        self._drop_line(self._skip[0], self._pos + i, self._skip[1], self._skip[2].hexdigest())
        self._skip = None
        j = i + 1
        if chunk[i] == 13:
            if j == len(chunk):
                self._cr, self._cr_kept = True, False
            elif chunk[j] == 10:
                j += 1
        self._pos += j
        return chunk[j:]

    def _feed_lines(self, chunk: bytes, out: list[SSEEvent]) -> None:
        if self._tail:
            if b"\n" not in chunk and b"\r" not in chunk:
                self._tail += chunk
                self._pos += len(chunk)
                if len(self._tail) > self.max_line:
                    self._start_skip()
                return
            base = self._pos - len(self._tail)
            self._tail += chunk
            data = bytes(self._tail)
            self._tail.clear()
        else:
            base = self._pos
            data = chunk
        self._pos += len(chunk)
        if self._b_start is None and b"\r" not in data:
            self._blocks(data, base, out)
            return
        self._lines(data, base, out)

    def _blocks(self, data: bytes, pos: int, out: list[SSEEvent]) -> None:
        """LF-only bytes that start at a block boundary, split at blank lines
        in one pass: a block that is one ``data:`` line (most events) becomes
        its event here; any other block, and an unfinished last one, goes
        line by line through :meth:`_lines` (same result, same offsets)."""
        blocks = data.split(b"\n\n")
        rest = blocks.pop()  # after the last blank line: an unfinished block, or b""
        max_line = self.max_line
        last_id = self._id_buffer
        add = out.append
        for block in blocks:
            n = len(block)
            if n <= max_line and block.startswith(b"data:") and b"\n" not in block:
                v = 6 if n > 5 and block[5] == 32 else 5  # one space after the colon is dropped
                try:
                    text = block[v:].decode("utf-8")
                except UnicodeDecodeError:
                    pass  # the line-by-line path reports where
                else:
                    self.last_event_id = last_id
                    add(SSEEvent(text, None, None, last_id, None, pos, pos + n + 1, 0, (pos + v,)))
                    pos += n + 2
                    continue
            self._process((block + b"\n").splitlines(True) + [b"\n"], pos, out)
            last_id = self._id_buffer
            pos += n + 2
        if rest:
            self._lines(rest, pos, out)

    def _lines(self, data: bytes, base: int, out: list[SSEEvent]) -> None:
        """Complete lines of ``data`` (from ``base``) through :meth:`_process`;
        an unfinished last line waits in the tail."""
        lines = data.splitlines(True)
        last = data[-1]
        if last == 13:
            final = len(lines[-1]) - 1  # content length of the last line
            self._cr, self._cr_kept = True, 0 < final <= self.max_line
        elif last != 10:
            self._tail += lines.pop()
            if len(self._tail) > self.max_line:
                self._start_skip()
        self._process(lines, base, out)

    def _start_skip(self) -> None:
        """The pending line crossed ``max_line``: drop it, keep only its head."""
        self._skip = (self._pos - len(self._tail), bytes(self._tail[: self._head]), hashlib.sha256(self._tail))
        self._tail = bytearray()

    # -- lines --------------------------------------------------------------

    def _process(self, lines: list[bytes], pos: int, out: list[SSEEvent]) -> None:
        """Interpret complete lines (each with its line end) starting at ``pos``.

        The hot path: a ``data:`` line and the blank line that dispatches
        are handled here with the block's lists in locals; everything else
        (other fields, comments, over-long lines) goes through the methods
        below, which keep the block state on ``self``.
        """
        max_line = self.max_line
        b_lines, b_data, b_offsets = self._b_lines, self._b_data, self._b_offsets
        for line in lines:
            n = len(line)
            content = line.rstrip(b"\r\n")
            if not content:
                if self._b_start is not None:
                    self._dispatch(pos, out)
                    b_lines, b_data, b_offsets = self._b_lines, self._b_data, self._b_offsets
            elif n > max_line and len(content) > max_line:
                self._drop_line(pos, pos + len(content), content[: self._head], hashlib.sha256(content).hexdigest())
            else:
                if self._b_start is None:
                    self._b_start = pos
                b_lines.append(line)
                if content[:5] == b"data:":
                    v = 6 if content[5:6] == b" " else 5
                    b_data.append(content[v:])
                    b_offsets.append(pos + v)
                    self._b_fields = True
                elif content[0] == 58:  # ':' comment
                    self._b_comments += 1
                else:
                    self._field(content, pos)
            pos += n

    def _field(self, content: bytes, pos: int) -> None:
        """Any field line other than ``data:`` (the fast path in ``_process``)."""
        self._b_fields = True
        i = content.find(b":")
        if i < 0:
            name, value, v = content, b"", len(content)
        else:
            v = i + 2 if content.startswith(b" ", i + 1) else i + 1
            name, value = content[:i], content[v:]
        if name == b"data":
            self._b_data.append(value)
            self._b_offsets.append(pos + v)
        elif name == b"event":
            self._b_event = self._event_name(value, pos + v)
        elif name == b"id":
            if b"\x00" not in value:
                self._id_buffer = self._b_id = self._text(value, pos + v)
        elif name == b"retry":
            if value.isdigit():  # bytes.isdigit: ASCII digits only, not empty
                self.retry = self._b_retry = int(value)

    def _text(self, value: bytes, at: int) -> str:
        """Decode a field value; invalid UTF-8 becomes U+FFFD and an error."""
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            self._note(_invalid_utf8(value, exc, at + exc.start, at + exc.end))
            return value.decode("utf-8", "replace")

    def _drop_line(self, start: int, end: int, head: bytes, sha256: str) -> None:
        if self._b_start is None:
            self._b_start = start
        self._b_fields = True
        if head.startswith(b"data:"):
            self._b_lost_data = True
        name = head.split(b":", 1)[0][:32].decode("utf-8", "replace")
        self._note(line_too_long(start, end, head, self.max_line, sha256, name))

    def _note(self, error: DecodeError) -> None:
        """Keep the block's worst error: content lost first, then the earliest."""
        current = self._b_error
        if current is None or (error.content_lost, -(error.offset or 0)) > (
            current.content_lost,
            -(current.offset or 0),
        ):
            self._b_error = error

    # -- events -------------------------------------------------------------

    def _reset_block(self) -> None:
        self._b_start = None
        self._b_lines = []
        self._b_data = []
        self._b_offsets = []
        self._b_event = None
        self._b_id = None
        self._b_retry = None
        self._b_comments = 0
        self._b_fields = False
        self._b_lost_data = False
        self._b_error = None

    def _dispatch(self, end: int, out: list[SSEEvent]) -> None:
        """A blank line at ``end`` (WHATWG "dispatch the event")."""
        self.last_event_id = self._id_buffer
        if self._b_comments:
            self.comments += self._b_comments
        if self._b_data or self._b_error is not None or self.emit_empty:
            out.append(self._event(end, bool(self._b_data) or self._b_lost_data))
        # _reset_block, inlined: once per event
        self._b_start = self._b_event = self._b_id = self._b_retry = self._b_error = None
        self._b_lines, self._b_data, self._b_offsets = [], [], []
        self._b_comments = 0
        self._b_fields = self._b_lost_data = False

    def _truncated(self, out: list[SSEEvent]) -> None:
        self.comments += self._b_comments
        if not self._b_fields:  # only comments: nothing was lost
            if self.emit_empty:
                out.append(self._event(self._pos, False))
            return
        raw = b"".join(self._b_lines)
        start = self._b_start if self._b_start is not None else self._pos
        what = "in an event" if self._b_data else "in an event block"
        error = DecodeError(
            DecodeErrorKind.TRUNCATED_EVENT,
            f"the stream ended {what} (no blank line after it): never dispatched",
            start,
            self._pos,
            excerpt_at(raw, 0),
        )
        self._b_error = error
        out.append(replace(self._event(self._pos, False), raw=raw))

    def _event(self, end: int, dispatched: bool) -> SSEEvent:
        data = self._b_data
        raw = None
        if not data:
            text = ""
        else:
            joined = data[0] if len(data) == 1 else b"\n".join(data)
            try:
                text = joined.decode("utf-8")
            except UnicodeDecodeError as exc:
                text = joined.decode("utf-8", "replace")
                raw = joined  # the bytes received: the text alone cannot say what they were
                at, to = self._locate(exc.start), self._locate(exc.end)
                self._note(_invalid_utf8(joined, exc, at, to))
        event = SSEEvent(
            text,
            self._b_event,
            self._b_id,
            self._id_buffer,
            self._b_retry,
            self._b_start if self._b_start is not None else end,
            end,
            self._b_comments,
            tuple(self._b_offsets),
            self._b_error,
            dispatched,
        )
        return event if raw is None else replace(event, raw=raw)

    def _event_name(self, value: bytes, at: int) -> str | None:
        """The ``event`` value (empty means the default type), decoded once per name."""
        if not value:
            return None
        name = self._types.get(value)
        if name is None:
            name = self._text(value, at)
            if len(self._types) < 256 and "\ufffd" not in name:
                self._types[value] = name
        return name

    def _locate(self, index: int) -> int:
        """Stream offset of byte ``index`` of the LF-joined data buffer."""
        for value, offset in zip(self._b_data, self._b_offsets, strict=False):
            if index <= len(value):
                return offset + index
            index -= len(value) + 1
        return self._b_offsets[-1] + len(self._b_data[-1])


def _first_line_end(chunk: bytes) -> int:
    i, j = chunk.find(b"\n"), chunk.find(b"\r")
    if i < 0:
        return j
    return i if j < 0 else min(i, j)


def _invalid_utf8(value: bytes, exc: UnicodeDecodeError, at: int, to: int) -> DecodeError:
    return DecodeError(
        DecodeErrorKind.INVALID_UTF8,
        f"invalid UTF-8 ({exc.reason}); decoded as U+FFFD like a browser would",
        at,
        to,
        excerpt_at(value, exc.start),
    )


def parse_sse(
    body: bytes, *, max_line: int = DEFAULT_MAX_LINE, emit_empty: bool = False
) -> list[SSEEvent]:
    """Parse a whole event stream at once (``feed`` then ``flush``)."""
    parser = SSEParser(max_line=max_line, emit_empty=emit_empty)
    return parser.feed(body) + parser.flush()
