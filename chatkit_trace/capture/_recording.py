"""What the writer's parts share: the recording's state, and the flow record.

The writer process (:mod:`.writer`) is split by concern, each part a class
of its own module that reads and writes this one :class:`Recording`:

    Traffic  (:mod:`._traffic`)   the proxy's messages -> exchanges and frames
    Identity (:mod:`._identity`)  routes and ids, in request order
    Scrub    (:mod:`._scrub`)     learned secrets masked before any write
    Losses   (:mod:`._losses`)    errors, a full disk, the gaps the trace marks
    Caps     (:mod:`._caps`)      the size and age caps
    Rows     (:mod:`._rows`)      the store-side writes: one transaction per batch
    Writer   (:mod:`.writer`)     the thread: lock, open, the batch loop, the stop

A :class:`Recording` holds data and the few steps every part takes (a log
line, a session queued for the deriver); it decides nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..route import Router
from ..trace import Exchange
from ..wire import Frame
from ._lines import install
from ._messages import Log, ToProxy

if TYPE_CHECKING:
    from ._config import WriterConfig

__all__ = ["Flow", "Recording", "Tuning"]

logger = install(logging.getLogger("chatkit_trace.capture"))  # lines masked, control characters shown


@dataclass(frozen=True)
class Tuning:
    """The writer's module constants as this process has them when the
    writer starts (the proxy sends them with the options: ``WriterConfig.tuning``)."""

    max_body_bytes: int
    parse_lag: float
    parse_bytes: int
    cap_interval: float
    event_id_tries: int


@dataclass(eq=False)
class Flow:
    """The writer's state of one flow (one exchange)."""

    fid: str
    ex: Exchange
    raw_url: str = ""  # unredacted, for the profile
    raw_headers: list[tuple[str, str]] = field(default_factory=list)  # unredacted, for the profile
    request_body: bytes | None = None  # unredacted, for the profile
    match: Any = None  # identity.Match, provisional until assigned
    matched: bool = False
    resolved: bool = False  # ids from the response looked up
    assigned: bool = False  # final ids written (IdentityTracker, request order)
    event_tries: int = 0
    response_headers: list[tuple[str, str]] = field(default_factory=list)  # unredacted
    decoder: Any = None
    parser: Any = None  # SSEParser | NDJSONSplitter | None
    base: int = 0  # stream offset where the current parser started (after a gap)
    copy: bytearray | None = None  # decoded copy of a 'body' stream (capped)
    copy_lost: int = 0
    next_frame: int = 0
    pending: list[tuple[float, bytes]] = field(default_factory=list)  # (arrival time, chunk) not parsed yet
    pending_since: float = 0.0
    pending_bytes: int = 0
    chunks: int = 0
    encoded: int = 0
    decoded: int = 0
    decoder_error_stored: bool = False
    lost: bool = False  # the decoder cannot go on after a gap (compressed body)
    ended: bool = False
    dirty: bool = True
    frame_count: int = 0


class Recording:
    """One recording's state, shared by the writer's parts (module docstring)."""

    def __init__(self, config: WriterConfig, tuning: Tuning, emit: Callable[[ToProxy], None] | None) -> None:
        self.config = config
        self.tuning = tuning
        self.emit = emit
        self.redactor: Any = config.make_redactor()
        self.router = Router(config.profile)  # matching and identity, in request order
        self.store: Any = None
        self.next_index = 0
        self.flows: dict[str, Flow] = {}
        self.flow_of: dict[int, str] = {}  # exchange index -> flow id (for marks)
        self.open_indexes: set[int] = set()
        #: the batch's frames, written with its transaction
        self.frames: list[Frame] = []
        #: sessions changed in this batch -> frames added (the deriver's queue)
        self.touched: dict[str | None, int] = {}
        self.seq = 0  # grows with every batch that queues sessions
        #: chunks the proxy could not hand off (``End.dropped``): meta ``dropped``, the stop's line
        self.drops = {"chunks": 0, "bytes": 0, "flows": 0}

    def flow_of_index(self, index: int) -> Flow | None:
        return self.flows.get(self.flow_of.get(index, ""))

    def touch(self, session_id: str | None, frames: int = 0) -> None:
        """The session's rows changed (``frames`` more frames): queued for the
        deriver with this batch (``derive_queue``)."""
        self.touched[session_id] = self.touched.get(session_id, 0) + frames

    def queue_touched(self) -> None:
        """Queue the touched sessions for the deriver now (outside a batch)."""
        if self.touched and self.config.derive != "off":
            self.seq += 1
            self.store.queue_derivation(self.touched, self.seq)
            self.store.commit()
        self.touched = {}

    def log(self, level: int, message: str) -> None:
        """A log line for the proxy's log (masked here: it may quote traffic)."""
        if self.redactor is not None:
            message = self.redactor.scrub_text(message)
        if self.emit is not None:
            self.send(Log(level, message))
            return
        logger.log(level, message)

    def send(self, message: ToProxy) -> None:
        emit = self.emit
        if emit is None:
            return
        try:
            emit(message)
        except Exception:  # noqa: BLE001, S110 - the proxy is gone: nobody to tell
            pass
