"""What the recorder's processes say to each other: one typed message per kind.

Three pipes (:mod:`._pipe`), three unions, each decoded in one place and
dispatched by a table (message type -> handler), never by comparing
strings::

    proxy --ToWriter-->  writer    the traffic, in the order the loop saw it
    proxy --ToDeriver--> deriver   options, learned secrets, the stop
    proxy <--ToProxy---  writer, deriver   log lines, marks, replies

Every message is a :class:`msgspec.Struct` tagged with its kind (the strings
the pipe's tuples used to start with) and encoded as a MessagePack array
(``array_like``: ``["c", fid, t, chunk]``), so the proxy's loop builds a
small object per chunk and one ``encode`` per batch, about ten times cheaper
than pickling tuples (``bench/pipe_codec.py``).  The options are the one
exception: they hold Python objects only pickle carries (a profile with its
adapter class, the live spans' settings), so :class:`Configure` carries them
pickled, between two processes of the same code (never a file).

A message the other side cannot decode (a type the union does not allow)
becomes :class:`Undecodable` there, alone: the rest of its batch is handled
(``decode``).
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any, TypeAlias

import msgspec

if TYPE_CHECKING:
    from ._config import WriterConfig

__all__ = [
    "Chunk",
    "Configure",
    "DeriverStopped",
    "Done",
    "End",
    "Final",
    "Gap",
    "Hello",
    "Learn",
    "Learned",
    "Log",
    "Mark",
    "OpenError",
    "Ready",
    "Request",
    "RequestBody",
    "ResponseHead",
    "SocketMessage",
    "Stop",
    "Stopped",
    "Sync",
    "Synced",
    "ToDeriver",
    "ToProxy",
    "ToWriter",
    "TrapError",
    "Undecodable",
    "kind_of",
]

class _Message(msgspec.Struct, array_like=True, gc=False):
    """A message on one of the recorder's pipes (module docstring)."""


def kind_of(message: msgspec.Struct) -> str:
    """A message's kind: its tag on the wire (``"c"`` for a :class:`Chunk`)."""
    return str(message.__struct_config__.tag)


# ---------------------------------------------------------------------------- proxy -> writer: the traffic


class Request(_Message, tag="req"):
    """A request's line and headers (its first byte: ``requestheaders``)."""

    fid: str
    t: float
    method: str
    url: str
    headers: tuple[tuple[bytes, bytes], ...]


class RequestBody(_Message, tag="body"):
    """The request's body, still content-encoded; ``streamed``: another addon streamed it (not recorded)."""

    fid: str
    raw: bytes | None
    encoding: str | None
    streamed: bool


class ResponseHead(_Message, tag="head"):
    """The response's status and headers, and how its body is recorded (``sse``, ``ndjson``, ``body`` or None)."""

    fid: str
    t: float
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    transport: str | None


class Chunk(_Message, tag="c"):
    """A response chunk as the client got it (still content-encoded), with its arrival time."""

    fid: str
    t: float
    data: bytes


class Gap(_Message, tag="gap"):
    """The loop dropped ``chunks`` chunks (``nbytes`` bytes) of this flow: what follows is not contiguous."""

    fid: str
    chunks: int
    nbytes: int


class SocketMessage(_Message, tag="ws"):
    """A WebSocket message."""

    fid: str
    t: float
    content: bytes
    is_text: bool
    from_client: bool


class End(_Message, tag="end"):
    """The flow ended (``complete``, ``reset``, ``client-gone``, ``proxy-error`` ...): a whole
    body not streamed, other addons' notes, and the chunks the loop dropped ``(chunks, bytes)``."""

    fid: str
    t: float
    end: str
    error: str | None
    body: bytes | None
    notes: dict[str, Any] | None
    dropped: tuple[int, int] | None


class TrapError(_Message, tag="err"):
    """A capture error caught on the loop: stored (``message``; None when stored already for
    this kind and flow) and logged (``log``: the loop's line, masked by the writer)."""

    fid: str | None
    where: str
    message: str | None
    log: str | None


class DeriverStopped(_Message, tag="derivation"):
    """The proxy saw the deriver die: its state for meta ``derivation`` and a capture error."""

    state: dict[str, Any]
    message: str


class Sync(_Message, tag="sync"):
    """Commit everything before this, then answer :class:`Synced` (tests, a clean stop)."""

    token: int


class Stop(_Message, tag="stop"):
    """Store what came before and stop (the proxy stops recording)."""


# ---------------------------------------------------------------------------- proxy -> both processes


class Hello(_Message, tag="hello"):
    """The first message: the proxy's import paths (an adapter it imports imports here too)."""

    path: list[str]


class Configure(_Message, tag="cfg"):
    """The recorder's options (:class:`~.writer.WriterConfig`), pickled (module docstring)."""

    pickled: bytes

    @classmethod
    def of(cls, config: WriterConfig) -> Configure:
        return cls(pickle.dumps(config, protocol=pickle.HIGHEST_PROTOCOL))

    @property
    def config(self) -> WriterConfig:
        config: WriterConfig = pickle.loads(self.pickled)
        return config


# ---------------------------------------------------------------------------- proxy -> deriver


class Learn(_Message, tag="learn"):
    """Secret values the writer learned: the deriver masks what it derives with them."""

    values: list[str]


class Final(_Message, tag="final"):
    """Derive everything queued, then stop."""


# ---------------------------------------------------------------------------- writer, deriver -> proxy


class Log(_Message, tag="log"):
    """A line for the proxy's log (masked by the process that says it)."""

    level: int
    text: str


class Mark(_Message, tag="mark"):
    """Mark a finished run's flows in mitmweb and comment them."""

    fids: list[str]
    marker: str
    comment: str


class Synced(_Message, tag="synced"):
    """The writer committed everything before :class:`Sync` ``token``."""

    token: int


class Ready(_Message, tag="ready"):
    """The writer opened the trace: the next exchange index, and the (sessions, frames)
    an earlier recording left underived."""

    pid: int
    next_index: int
    backlog: tuple[int, int]


class OpenError(_Message, tag="open_error"):
    """The writer could not open the trace (the line says why)."""

    text: str


class Stopped(_Message, tag="stopped"):
    """The writer's last word: what it dropped, orphan messages, internal errors."""

    stats: dict[str, Any]


class Done(_Message, tag="done"):
    """The deriver's last word: its state (meta ``derivation``)."""

    state: dict[str, Any]


class Learned(_Message, tag="learned"):
    """Secret values the writer learned (the proxy masks its lines and tells the deriver)."""

    values: list[str]


class Undecodable(_Message, tag="undecodable"):
    """Stands in for a message its receiver could not decode (never sent)."""

    error: str


ToWriter: TypeAlias = (
    Request | RequestBody | ResponseHead | Chunk | Gap | SocketMessage | End | TrapError | Hello | Configure
    | DeriverStopped | Sync | Stop
)
ToDeriver: TypeAlias = Hello | Configure | Learn | Final
ToProxy: TypeAlias = Log | Mark | Synced | Ready | OpenError | Stopped | Done | Learned
