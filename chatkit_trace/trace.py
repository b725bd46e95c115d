"""The recorded trace in memory: HTTP exchanges with their frames.

A proxy sees exchanges, not chatkit commands.  The routing layer (route
profiles, docs/architecture.md "Identity") classifies each exchange as a
capability (``run``, ``subscribe``, ``resume``, ``history``, ``status``,
``abort``, ``steer``, ``regenerate``, ``edit``) and finds its session and run
ids; :mod:`chatkit_trace.pipeline` then replays the exchanges through the
adapter and the Core.  Raw frames are the source of truth: everything
derived from them can be recomputed (``chatkit-trace redecode``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from .core import PROFILE_CAPABILITIES
from .wire import Frame

__all__ = [
    "Exchange",
    "CAPABILITY_KINDS",
    "EndKind",
    "STREAM_ENDS",
    "replay_order",
    "frames_from_body",
    "stream_state",
    "STREAM_STATES",
    "RECORDING_INCOMPLETE",
    "RUN_STATUSES",
    "run_status",
]

#: What an exchange can be, from the route profile.
#: What a route can be: every capability name (chatkit_trace.core.Capability).
CAPABILITY_KINDS = PROFILE_CAPABILITIES

class EndKind(StrEnum):
    """How an exchange's response stream ended (``Exchange.end``): the one
    vocabulary; :func:`chatkit_trace.route.classify_end` is the one reading of
    what the proxy or a recorded file reports."""

    COMPLETE = "complete"  # a clean end of the body (or a close frame 1000/1001)
    RESET = "reset"  # the upstream dropped the connection mid-body
    CLIENT_GONE = "client-gone"  # the client went away
    TIMEOUT = "timeout"
    ERROR = "error"  # any other transport error (see ``Exchange.error``)
    OPEN = "open"  # still streaming when the recording stopped


def replay_order(exchange: Any) -> tuple[float, int]:
    """The one key that orders exchanges for replay: when each started, then
    its exchange index (the order the store reads them in, by start and id; the
    replay's events sort by it and then by frame, :func:`chatkit_trace.pipeline.replay`).
    ``exchange`` is anything with ``started_at`` and ``index``."""
    return (exchange.started_at, exchange.index)


#: How a response stream ended: :class:`EndKind`'s values as plain strings, in order.
STREAM_ENDS = tuple(str(k) for k in EndKind)


@dataclass
class Exchange:
    """One HTTP exchange (or WebSocket connection) and what it carried."""

    index: int
    method: str = "GET"
    url: str = ""
    started_at: float = 0.0
    ended_at: float | None = None
    request_headers: Sequence[tuple[str, str]] = ()
    request_body: bytes | None = None
    status: int | None = None
    response_headers: Sequence[tuple[str, str]] = ()
    #: The whole response body when it was not a stream (history JSON …).
    response_body: bytes | None = None
    #: ``sse``, ``ws``, ``ndjson``, ``body`` or ``None`` (no stream).
    transport: str | None = None
    frames: list[Frame] = field(default_factory=list)
    #: How the response stream ended (:data:`STREAM_ENDS`), ``None`` for no stream.
    end: str | None = None
    error: str | None = None
    # -- identity, from the route profile (docs/architecture.md "Identity") -------
    capability: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    #: Where the run id came from: ``path``, ``query``, ``header``, ``body``,
    #: ``response``, ``events`` (the stream's own events) or ``derived`` (from the exchange).
    run_id_source: str | None = None
    #: A resume's cursor (the event id it resumes after).
    cursor: str | None = None
    #: The run a regenerate/edit replaces.
    target_run_id: str | None = None
    flow_id: str | None = None
    #: Capture notes (dropped chunks, redaction applied …), free-form.
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return urlsplit(self.url).path or "/"

    def header(self, name: str, response: bool = False) -> str | None:
        lname = name.lower()
        for k, v in self.response_headers if response else self.request_headers:
            if k.lower() == lname:
                return v
        return None

    @property
    def resume_cursor(self) -> str | None:
        """The event id this stream resumes after: the route's cursor, else,
        on a subscription, the ``Last-Event-ID`` header an ``EventSource``
        sends when it reconnects (a recording classified before subscription
        routes had cursors still resumes; docs/decisions.md)."""
        if self.cursor:
            return self.cursor
        if self.capability == "subscribe":
            return self.header("Last-Event-ID") or None
        return None

    def request_json(self) -> Any:
        """The request body as JSON, or ``None`` when it is empty or not JSON."""
        return _json(self.request_body)

    def response_json(self) -> Any:
        return _json(self.response_body)

    @property
    def failed(self) -> bool:
        """The call did not complete at the HTTP level (R2.2, CK110)."""
        return self.status is None or self.status >= 400


#: The ``connection`` column of ``chatkit-trace runs`` and the viewer's run list.
STREAM_STATES = {
    "open": "the run's stream was still open when the recording stopped",
    "closed": "its last stream ended cleanly (whether or not a conclusion came first)",
    "reset": "its last stream broke: the upstream dropped the connection",
    "timeout": "its last stream timed out",
    "client-gone": "the client left its last stream",
    "error": "its last stream failed at the transport level",
    "-": "no stream of its own (a run only a history or status read names)",
}


#: How a run stands, in the words every output uses (``runs``, the viewer,
#: the report, the demo's table, findings such as CK105): defined here once
#: (decisions.md 277).  The Core's five statuses, less ``running`` where the
#: run's connection is gone, plus the run the Core never started.
RUN_STATUSES = {
    "queued": "sent while another run held the session; not dispatched yet",
    "running": "dispatched and still streaming: no conclusion yet",
    "outcome unknown": "the Core still has it running but its stream ended or broke without a conclusion and "
    "nothing settled it: the UI keeps spinning (R3.4)",
    "completed": "concluded as completed (a terminal event, or a history or status read)",
    "failed": "concluded as failed: the UI shows a failure card",
    "interrupted": "concluded as interrupted (a stop, a cancelled send, or the protocol's own interruption)",
    "not started": "the Core never started it: its request failed or was refused, so the UI removed the user's "
    "message (R2.2)",
    "not shown": "the UI does not show it (any more): a refresh that does not name the settled run dropped it, or "
    "history names it differently",
    "recording incomplete": "the recorder lost part of it (CK702: its writer died, the disk was full …; CK703: an event "
    "over its limit): it cannot be judged; record it again",
}

#: Codes that say the recorder lost part of a run (docs/rules.md CK7xx).
RECORDING_INCOMPLETE = frozenset({"CK702", "CK703"})


def run_status(status: str | None, connection: str | None = None, codes: Any = ()) -> str:
    """A run's status in the one vocabulary (:data:`RUN_STATUSES`): the Core's
    ``status`` and ``connection`` (a run the Core does not know: None), and
    the codes of its findings (one of :data:`RECORDING_INCOMPLETE`: the
    recording of the run is incomplete, whatever the Core says)."""
    if RECORDING_INCOMPLETE.intersection(codes):
        return "recording incomplete"
    if status is None:
        return "not started"
    if status == "running" and connection == "disconnected":
        return "outcome unknown"
    return status


def stream_state(exchanges: Any) -> str:
    """What the ``connection`` column says, one meaning for every protocol: how
    the run's last response stream (run, resume, regenerate, edit or the
    subscription that carried it) ended in the recording (:data:`STREAM_STATES`).
    ``exchanges`` are the run's: objects with ``capability``, ``transport``,
    ``end``, ``started_at`` and ``ended_at``."""
    streams = [
        e for e in exchanges
        if e.capability in ("run", "regenerate", "edit", "resume", "subscribe") and e.transport is not None
    ]
    if not streams:
        return "-"
    last = max(streams, key=lambda e: (e.ended_at if e.ended_at is not None else float("inf"), e.started_at))
    end = last.end or ("open" if last.ended_at is None else "complete")
    return "closed" if end == "complete" else end if end in STREAM_STATES else "error"


def _json(body: bytes | None) -> Any:
    if not body:
        return None
    from .wire.frames import loads

    try:
        return loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def frames_from_body(
    body: bytes,
    exchange_index: int,
    *,
    transport: str = "sse",
    content_encoding: str | None = None,
    at: float = 0.0,
    spacing: float = 0.0,
) -> list[Frame]:
    """Frames of a whole recorded body (HAR import, fixtures, tests).

    ``at`` is the first frame's time and ``spacing`` the gap between frames
    (a HAR file has no per-event times).  Content-encoded bodies are decoded
    first; decode problems come out as frames' errors, never as exceptions.
    """
    from .core._gc import paused_gc
    from .wire import NDJSONSplitter, SSEParser, body_frame, frame_from_sse, make_decoder
    from .wire.frames import sse_frames

    decoder = make_decoder(content_encoding)
    data = decoder.decode(body) + decoder.flush()
    if transport == "sse":
        parser = SSEParser()
        with paused_gc():  # a frame per event, all kept: nothing for the cyclic GC to find
            simple = sse_frames(data, exchange_index, at, spacing)
            if simple is not None:
                return simple
            events = parser.feed(data) + parser.flush()
            return [frame_from_sse(ev, exchange_index, i, at + i * spacing) for i, ev in enumerate(events)]
    if transport == "ndjson":
        splitter = NDJSONSplitter(exchange_index)
        frames = splitter.feed(data, at) + splitter.flush(at)
        return frames
    return [body_frame(data, exchange_index, at)]
