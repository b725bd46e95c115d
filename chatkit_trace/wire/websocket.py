"""WebSocket messages as frames, from mitmproxy or from a HAR file.

One complete WebSocket message is one frame (``transport='ws'``): mitmproxy
calls ``websocket_message`` once per *assembled* message (mitmproxy.md
section 2), and a HAR's ``_webSocketMessages`` lists messages, not wire
fragments. The message's JSON is the event, so a shared-WebSocket
subscription is analysed exactly like an SSE stream (:func:`event_json`,
:func:`reader_cutoff`).

- A text message: ``text`` is its content. RFC 6455 requires UTF-8 (a
  browser would fail the connection); invalid bytes become U+FFFD and an
  ``invalid-utf8`` error on the frame, recorded rather than raised.
- A binary message: ``raw`` is its bytes, and ``text`` too when they are
  UTF-8 JSON; otherwise ``text=None`` and :func:`event_json` says
  ``binary-message``.
- Direction: ``from_client`` is ``'out'``, otherwise ``'in'``.
- ``start``/``end`` are None (a message has no position in a body); error
  offsets count from the start of the message.

Everything here is a pure function of plain values, so it is fed from a
mitmproxy ``WebSocketMessage`` (:func:`ws_frame_from_message`, duck-typed, no
mitmproxy import) or from HAR entries (:func:`frames_from_har`).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from typing import Protocol

from .frames import _DECODER as _JSON
from .frames import Frame, _decode_text

__all__ = ["WebSocketMessageLike", "frames_from_har", "ws_frame", "ws_frame_from_message"]


class WebSocketMessageLike(Protocol):
    """The attributes of mitmproxy's ``WebSocketMessage`` that are used."""

    content: bytes
    is_text: bool
    from_client: bool
    timestamp: float


def _json_text(content: bytes) -> str | None:
    """The text of a binary message if it is UTF-8 JSON, else None."""
    try:
        text = content.decode("utf-8")
        _JSON.decode(text)
    except (ValueError, RecursionError):  # UnicodeDecodeError, JSONDecodeError, NaN
        return None
    return text


def ws_frame(
    content: bytes,
    is_text: bool,
    from_client: bool,
    timestamp: float,
    exchange_index: int,
    index: int,
) -> Frame:
    """The frame of one WebSocket message (see the module docstring)."""
    direction = "out" if from_client else "in"
    if is_text:
        text, error = _decode_text(content, 0)
        return Frame(exchange_index, index, "ws", direction, text, None, at=timestamp, error=error)
    return Frame(
        exchange_index, index, "ws", direction, _json_text(content), content, at=timestamp
    )


def ws_frame_from_message(message: WebSocketMessageLike, exchange_index: int, index: int) -> Frame:
    """:func:`ws_frame` for a mitmproxy ``WebSocketMessage`` (or anything shaped like one)."""
    return ws_frame(
        message.content, message.is_text, message.from_client, message.timestamp,
        exchange_index, index,
    )


def _har_content(entry: Mapping[str, object], is_text: bool) -> bytes:
    data = entry.get("data", "")
    if isinstance(data, bytes):
        return data
    text = data if isinstance(data, str) else json.dumps(data)
    if not is_text:  # browsers export binary payloads as base64
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            pass
    return text.encode("utf-8", "surrogatepass")


def frames_from_har(
    messages: Iterable[Mapping[str, object]], exchange_index: int, first_index: int = 0
) -> list[Frame]:
    """Frames from a HAR entry's ``_webSocketMessages`` list.

    Each entry is ``{"type": "send"|"receive", "time": <epoch seconds>,
    "opcode": 1|2, "data": <str>}`` (Chrome and Firefox). Opcode 1 is text,
    2 is binary with ``data`` in base64 (taken as text if it is not base64);
    control opcodes (8, 9, 10) are skipped, as they carry no message.
    Indices are consecutive from ``first_index`` over the kept messages.
    """
    frames: list[Frame] = []
    for entry in messages:
        opcode = entry.get("opcode", 1)
        if opcode not in (1, 2):
            continue
        is_text = opcode == 1
        time = entry.get("time", 0.0)
        frames.append(
            ws_frame(
                _har_content(entry, is_text),
                is_text,
                entry.get("type") == "send",
                float(time) if isinstance(time, int | float) else 0.0,
                exchange_index,
                first_index + len(frames),
            )
        )
    return frames
