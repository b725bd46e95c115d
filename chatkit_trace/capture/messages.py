"""The recorder -> writer queue's messages, typed.

The mitmproxy loop (:mod:`.recorder`) hands the writer thread (:mod:`.writer`)
what it saw, in order, through one queue.  Each message is a ``NamedTuple``
whose first field is its tag, so it stays the cheap tuple the hot path
(``Chunk``, one per piece of a response body) needs, the writer dispatches on
the tag and unpacks it as before, and mypy checks both ends.  ``None`` on the
queue stops the writer.
"""

from __future__ import annotations

import threading
from typing import Any, Literal, NamedTuple

__all__ = [
    "CaptureErrorMessage",
    "Chunk",
    "Configure",
    "End",
    "Gap",
    "Message",
    "Request",
    "RequestBody",
    "ResponseHead",
    "Sync",
    "WsMessage",
]


class Request(NamedTuple):
    """A request's line and headers (``requestheaders``)."""

    tag: Literal["req"]
    flow_id: str
    at: float
    method: str
    url: str
    fields: Any  # mitmproxy's header fields: ((name, value) bytes pairs)


class RequestBody(NamedTuple):
    """A request's body, as received (``request``)."""

    tag: Literal["body"]
    flow_id: str
    raw: bytes | None
    encoding: str | None
    streamed: bool


class ResponseHead(NamedTuple):
    """A response's status and headers; ``transport`` when already known."""

    tag: Literal["head"]
    flow_id: str
    at: float
    status: int
    fields: Any
    transport: str | None


class Chunk(NamedTuple):
    """A piece of a streamed response body, as it arrived."""

    tag: Literal["c"]
    flow_id: str
    at: float
    data: bytes


class Gap(NamedTuple):
    """Pieces the tap dropped (the queue was full): how many, how many bytes."""

    tag: Literal["gap"]
    flow_id: str
    chunks: int
    nbytes: int


class WsMessage(NamedTuple):
    """One WebSocket message."""

    tag: Literal["ws"]
    flow_id: str
    at: float
    content: bytes
    is_text: bool
    from_client: bool


class End(NamedTuple):
    """A flow ended: how (``complete``, ``reset``, ...), its body when not streamed."""

    tag: Literal["end"]
    flow_id: str
    at: float
    end: str
    error: str | None
    body: bytes | None
    notes: Any
    dropped: Any


class CaptureErrorMessage(NamedTuple):
    """An error on the loop: stored (``message``; None once per key) and logged (``log``)."""

    tag: Literal["err"]
    flow_id: str | None
    where: str
    message: str | None
    log: str | None


class Configure(NamedTuple):
    """New writer settings (mitmproxy options changed)."""

    tag: Literal["cfg"]
    config: Any  # writer.WriterConfig


class Sync(NamedTuple):
    """Commit everything queued before this, then set ``done``."""

    tag: Literal["sync"]
    done: threading.Event


Message = Request | RequestBody | ResponseHead | Chunk | Gap | WsMessage | End | CaptureErrorMessage | Configure | Sync
