"""Decode errors of the wire layer: values first, exceptions on request.

A recorder must never stop because the backend sent something broken, so
every decoder in :mod:`chatkit_trace.wire` *returns* a :class:`DecodeError`
value next to whatever it could still decode, and carries on at the next
frame (as h11 returns events and raises only on misuse). A caller that wants
an exception wraps the value::

    ChatkitTraceError                      (chatkit_trace.core)
    └── WireDecodeError(ValueError)        carries one DecodeError as .error

Offsets are byte positions in the *decoded* (un-content-encoded) body of one
HTTP exchange, the same coordinates as ``Frame.start``/``Frame.end``; for a
WebSocket message (which has no stream position) they count from the start
of that message.

Whether an error ends chatkit's read of the response (SPEC R2.5: "a parse or
decode error ends that read") depends on its kind; see
:attr:`DecodeError.stops_reader`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ..core import ChatkitTraceError

__all__ = ["DecodeError", "DecodeErrorKind", "WireDecodeError", "excerpt_at", "line_too_long"]


class DecodeErrorKind(StrEnum):
    """The stable kinds of :class:`DecodeError` (stored in traces; never renamed)."""

    BAD_JSON = "bad-json"
    """The frame's text is not JSON (``JSON.parse`` would throw), or is empty."""
    TRUNCATED_EVENT = "truncated-event"
    """The stream ended inside an SSE event (no blank line): never dispatched."""
    INVALID_UTF8 = "invalid-utf8"
    """Bytes that are not UTF-8; decoded with U+FFFD as a browser would."""
    LINE_TOO_LONG = "line-too-long"
    """A line above the recorder's limit; its field was dropped (recorder-side loss)."""
    BAD_ENCODING = "bad-encoding"
    """The Content-Encoding stream is corrupt or truncated."""
    UNSUPPORTED_ENCODING = "unsupported-encoding"
    """A Content-Encoding the recorder cannot decode; bytes kept as they came."""
    BAD_ENVELOPE = "bad-envelope"
    """A JSON-RPC 2.0 envelope that breaks the JSON-RPC rules."""
    BINARY_MESSAGE = "binary-message"
    """A binary WebSocket message that is not UTF-8 JSON."""


# Kinds after which chatkit's reader no longer decodes this response's
# frames (R2.5). invalid-utf8 is not one: TextDecoder replaces silently and
# JSON.parse may still succeed. line-too-long is a limit of the recorder,
# not of chatkit. bad-envelope is judged by adapters, not by the reader.
_STOPS_READER = frozenset(
    {
        DecodeErrorKind.BAD_JSON,
        DecodeErrorKind.TRUNCATED_EVENT,
        DecodeErrorKind.BAD_ENCODING,
        DecodeErrorKind.BINARY_MESSAGE,
    }
)

# Kinds whose frame content is missing or incomplete, so decoding the text
# again would only produce a second, misleading error.
CONTENT_LOST = frozenset(
    {
        DecodeErrorKind.TRUNCATED_EVENT,
        DecodeErrorKind.LINE_TOO_LONG,
        DecodeErrorKind.BAD_ENCODING,
    }
)


@dataclass(frozen=True, slots=True)
class DecodeError:
    """Something on the wire that could not be decoded as it should.

    Args:
        kind: one of :class:`DecodeErrorKind` (a ``str``).
        message: one sentence for people.
        offset: first byte of the problem (see the module docstring for the
            coordinates), or None when unknown.
        end: byte after the problem (exclusive), or None.
        excerpt: up to about 80 characters of the bytes around ``offset``,
            control characters escaped, for display.
    """

    kind: str
    message: str
    offset: int | None = None
    end: int | None = None
    excerpt: str = ""

    @property
    def stops_reader(self) -> bool:
        """True when chatkit's SSE reader stops at this frame (SPEC R2.5)."""
        return self.kind in _STOPS_READER

    @property
    def content_lost(self) -> bool:
        """True when the frame's text is missing or incomplete because of this error."""
        return self.kind in CONTENT_LOST

    def shifted(self, delta: int) -> DecodeError:
        """The same error with its offsets moved by ``delta`` bytes."""
        return DecodeError(
            self.kind,
            self.message,
            None if self.offset is None else self.offset + delta,
            None if self.end is None else self.end + delta,
            self.excerpt,
        )

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict (keys absent when None), for the store."""
        out: dict[str, object] = {"kind": str(self.kind), "message": self.message}
        if self.offset is not None:
            out["offset"] = self.offset
        if self.end is not None:
            out["end"] = self.end
        if self.excerpt:
            out["excerpt"] = self.excerpt
        return out

    @classmethod
    def from_json(cls, value: dict[str, object]) -> DecodeError:
        """Inverse of :meth:`to_json`."""
        offset, end = value.get("offset"), value.get("end")
        return cls(
            str(value["kind"]),
            str(value["message"]),
            offset if isinstance(offset, int) else None,
            end if isinstance(end, int) else None,
            str(value.get("excerpt", "")),
        )

    def __str__(self) -> str:
        where = "" if self.offset is None else f" at byte {self.offset}"
        return f"{self.kind}{where}: {self.message}"


class WireDecodeError(ChatkitTraceError, ValueError):
    """Raised only by callers that ask for an exception; wraps a :class:`DecodeError`.

    Part of the error tree of :mod:`chatkit_trace.errors` (which re-exports it);
    defined here because the wire layer imports nothing above the Core."""

    def __init__(self, error: DecodeError) -> None:
        self.error = error
        super().__init__(str(error))

    def __reduce__(self) -> tuple[type[WireDecodeError], tuple[DecodeError]]:
        return (WireDecodeError, (self.error,))


def line_too_long(start: int, end: int, head: bytes, limit: int, sha256: str, name: str | None = None) -> DecodeError:
    """The ``line-too-long`` error of a line the recorder did not keep: its
    ``end - start`` bytes are over ``limit``; the frame keeps its first bytes
    (``head``, the excerpt), its length and its SHA-256 (of the line as sent,
    line end excluded), in the message: ``sha256:<hex>``."""
    field = f" (field {name!r})" if name is not None else ""
    return DecodeError(
        DecodeErrorKind.LINE_TOO_LONG,
        f"a {end - start}-byte line{field} is over the recorder's {limit}-byte limit: kept as its first "
        f"{len(head)} bytes, its length and sha256:{sha256}; not decoded",
        start,
        end,
        excerpt_at(head, 0),
    )


_ESCAPES = {i: f"\\x{i:02x}" for i in range(32)} | {9: "\\t", 10: "\\n", 13: "\\r", 127: "\\x7f"}


def excerpt_at(data: bytes, at: int, width: int = 80) -> str:
    """Up to ``width`` characters of ``data`` around index ``at``, one line.

    Starts a quarter of the width before ``at`` so the reader sees some
    context; invalid UTF-8 shows as U+FFFD, control characters as escapes.
    """
    lo = max(0, at - width // 4)
    hi = min(len(data), lo + width)
    # Start and stop on character boundaries (skip UTF-8 continuation bytes).
    for _ in range(3):
        if lo < at and 0x80 <= data[lo] < 0xC0:
            lo += 1
        if lo < hi < len(data) and 0x80 <= data[hi] < 0xC0:
            hi -= 1
    return data[lo:hi].decode("utf-8", "replace").translate(_ESCAPES)[:width]
