"""Replay recorded exchanges through an adapter and the Core, sans-IO.

This is what chatkit would have done with the recorded traffic: every
exchange's requests become the Core commands the UI issued (send, abort,
history refresh, resume), every frame goes through the adapter's
:class:`~chatkit_trace.adapters.SessionDecoder` into facts, and every fact
through a per-session :class:`~chatkit_trace.core.ChatCore`.  Events of all
exchanges are processed in the order they happened (request start, frames,
end of stream), so a subscription interleaved with a run is seen as the UI
saw it.

Rules applied (each result is recorded, so analysis and the viewer can show
why):

* a direct run/resume stream is read until a terminal update (R2.5a) or the
  first frame that cannot be decoded (R2.5); later frames are still decoded,
  into *shadow* facts that never reach the Core, so output lost after the
  terminal can be reported (CK101);
* a subscription routes each event by ``identify_event`` (R2.6, R11.2):
  ``starts_run`` registers a passive run, an event naming another session
  is admitted under that session id so the Core rejects it ``wrong-session``
  (R11.5), an event with no identity is unrouted (R11.7);
* a stream that ends without a conclusion leaves the run running and marks
  its connection (R3.4); a reset or timeout too, never a failure;
* a run request the client sent while another run was still active is
  dispatched anyway (:meth:`ChatCore.force_dispatch`): the recording is the
  truth about what was sent;
* a request that failed at the HTTP level refuses the dispatch (R2.2).

The result, :class:`Replay`, holds every fact with its admission result, per
frame, plus the live snapshot at the moment each run settled and every
history read with the snapshots around it (for CK201).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, cast

import msgspec

from .adapters import Adapter, EventIdentity, SessionDecoder
from .core import (
    ABSENT,
    TERMINAL_KINDS,
    AbortRequest,
    ChatCore,
    CommandResult,
    DeltaFact,
    DispatchRequest,
    Fact,
    FactResult,
    HistoryResult,
    InvalidMessageError,
    MessageFact,
    ReasoningPart,
    RuntimeMessage,
    RunView,
    Snapshot,
    TextPart,
)
from .core._gc import paused_gc
from .trace import Exchange, replay_order
from .wire import DONE, DecodeError, DecodeErrorKind, Frame, event_json

__all__ = [
    "FactRecord",
    "FrameRecord",
    "FrameState",
    "ReaderStop",
    "READER_STOPPED",
    "PROBLEM_STATES",
    "ExchangeRecord",
    "Baseline",
    "HistoryRecord",
    "RunRecord",
    "SessionReplay",
    "Replay",
    "replay",
    "Replayer",
    "SocketRun",
    "multiplexed",
    "socket_sessions",
    "split_frames",
    "SCOPES",
    "STREAMING",
    "read_scope",
    "stops_by_close",
    "understood_exchanges",
]

STREAMING = ("run", "regenerate", "edit", "resume")
DEFAULT_SESSION = "default"
_SETTLING = frozenset({"completed", "failed", "interrupted"})
_NONE: tuple[()] = ()


class FactRecord(msgspec.Struct, gc=False):
    """One fact and what the Core did with it."""

    seq: int
    fact: Fact
    result: FactResult
    exchange_index: int | None
    frame_index: int | None
    snapshot_version: int


class ReaderStop(StrEnum):
    """Why chatkit's reader stopped reading a stream (``ExchangeRecord.reader_stop``)."""

    TERMINAL = "terminal"  # a terminal event concluded the run
    ERROR = "error"  # a frame it could not decode (R2.5)
    SETTLED = "settled"  # a resumed stream of a run already settled (R8.3)
    CONCURRENT = "concurrent"  # a second reader of a run another stream is reading (R8.3)


class FrameState(StrEnum):
    """What became of a frame (``FrameRecord.state``): the one list of the
    states, which the viewer, the report and the analyzers read."""

    ADMITTED = "admitted"  # decoded and its facts admitted
    ERROR = "error"  # it could not be decoded: the reader stops here (R2.5)
    AFTER_TERMINAL = "after-terminal"  # the reader had stopped (R2.5a): after ReaderStop.TERMINAL ...
    AFTER_ERROR = "after-error"
    AFTER_SETTLED = "after-settled"
    AFTER_CONCURRENT = "after-concurrent"
    DUPLICATE = "duplicate"  # the factory dropped a repeated outer event id
    UNROUTED = "unrouted"  # a subscription event with no run identity (R11.7)
    WRONG_SESSION = "wrong-session"  # an event naming another session (R11.5)
    OUTGOING = "outgoing"  # client to server
    HISTORY = "history"  # a socket's answer to a history command
    EMPTY = "empty"  # nothing to decode (a keepalive)
    IGNORED = "ignored"  # an exchange no profile route matched
    OVER_LIMIT = "over-limit"  # the recorder did not keep its content (CK703); the reader goes on

    @classmethod
    def after(cls, stop: ReaderStop) -> FrameState:
        """The state of a frame read after the reader stopped for ``stop``."""
        return cls("after-" + stop)


#: Frames the reader never read: it had stopped (R2.5a), one per :class:`ReaderStop`.
READER_STOPPED = frozenset(FrameState.after(stop) for stop in ReaderStop)
#: The states a person should look at: the reader could not use the frame, or it never reached the run.
PROBLEM_STATES = frozenset({FrameState.ERROR, *READER_STOPPED, FrameState.UNROUTED, FrameState.WRONG_SESSION})

_ADMITTED = FrameState.ADMITTED


class FrameRecord(msgspec.Struct, gc=False):
    """What became of one frame (``state``: :class:`FrameState`)."""

    exchange_index: int
    frame_index: int
    state: FrameState
    session_id: str | None = None
    run_id: str | None = None
    #: The frame's facts in order (an empty tuple when it has none).
    facts: Sequence[FactRecord] = msgspec.field(default_factory=list)
    #: Facts decoded after the reader stopped (never admitted; CK101).
    shadow: Sequence[Fact] = msgspec.field(default_factory=list)
    error: DecodeError | str | None = None
    #: The event decoded to no update (an unknown event type, R2.4).
    unknown: bool = False
    #: The event's type, for counting unknown ones (CK406).
    event_type: str | None = None
    #: An end-of-reader marker (``[DONE]``, A2A ``final``, Hermes ``done``).
    end_marker: bool = False
    identity: EventIdentity | None = None
    at: float = 0.0
    #: What the event cannot express (``AdapterProtocol.event_limits``; CK306).
    limits: tuple[str, ...] = ()
    #: The event id the pipeline used: the frame's outer id (SSE ``id:``), or
    #: on a WebSocket the id ``identify_event`` found in the message.
    event_id: str | None = None
    #: A client message the route's ``messages`` make a command (route.profiles.Command).
    command: Any = None


#: What a history read covers (the profile route's ``scope``).
SCOPES = ("session", "run", "page")


def stops_by_close(exchange: Exchange) -> bool:
    """Whether closing this run stream is the UI's stop (the route's ``stop =
    "close"``, recorded with the exchange's identity)."""
    note = (exchange.notes or {}).get("identity")
    return isinstance(note, dict) and note.get("stop") == "close"


def read_scope(exchange: Exchange) -> str:
    """What a history read covers: the route's ``scope`` recorded with the
    exchange's identity, else ``page`` for a read with a cursor, ``run`` for
    a read that names a run, ``session`` otherwise."""
    note = (exchange.notes or {}).get("identity")
    scope = note.get("scope") if isinstance(note, dict) else None
    if isinstance(scope, str) and scope in SCOPES:
        return scope
    if exchange.cursor:
        return "page"
    return "run" if exchange.run_id else "session"


@dataclass
class Baseline:
    """What the UI showed of one run from the live stream just before a read."""

    #: The snapshot after the run's last live fact (or its dispatch) before the read.
    snapshot: Snapshot
    #: Where that snapshot was taken: ``(exchange, frame)``, frame None for a request.
    at_frame: tuple[int, int | None]
    #: The run's status in the Core just before the read (None: unknown to the Core).
    status: str | None
    #: How the run was settled before the read: ``fact``, ``history``, ``status`` or None.
    settled_by: str | None


@dataclass
class HistoryRecord:
    exchange_index: int
    session_id: str
    result: HistoryResult | None
    error: str | None
    command: CommandResult | None
    before: Snapshot
    after: Snapshot
    at: float = 0.0
    #: What the read covers: ``session``, ``run`` or ``page`` (:func:`read_scope`).
    scope: str = "session"
    #: The run a ``run`` read names (A2A taskId, Hermes run id).
    run_id: str | None = None
    #: Every run the live traffic carried before the read, as the UI had it.
    baselines: dict[str, Baseline] = field(default_factory=dict)
    #: What the read cannot express (``AdapterProtocol.history_limits``; CK207).
    limits: tuple[str, ...] = ()
    #: On a socket: the frame that answered the history command (None: an HTTP read).
    frame_index: int | None = None


@dataclass
class RunRecord:
    run_id: str
    session_id: str
    exchanges: list[int] = field(default_factory=list)
    #: The live snapshot right after the run settled (None: never settled).
    settled: Snapshot | None = None
    settled_by: str | None = None  # "fact" | "history" | "status"
    settled_at: float | None = None
    #: The snapshot after the run's last live fact (or its dispatch): what the
    #: live stream had shown of it so far, and where.
    live: Snapshot | None = None
    live_at: tuple[int, int | None] | None = None
    #: A history read dropped the run (a settled run it did not name, with
    #: its messages: decisions.md 272): that read's exchange index and the
    #: run's last view.  The trace still lists the run; the UI no longer shows it.
    dropped: tuple[int, RunView] | None = None


@dataclass
class SocketRun:
    """A run a subscription (an SSE subscription or a socket) carried: what
    that stream did for it."""

    session_id: str
    run_id: str
    #: The first and last frame of the stream that belong to the run.
    first_frame: int
    last_frame: int
    #: A terminal fact from this stream was accepted.
    concluded: bool = False
    #: The client's ``run`` command on this socket (frame index): a local run.
    command_frame: int | None = None
    #: How many user messages the adapter projected at that command's dispatch (R4.5).
    projected: int = 0
    #: That command's dispatch: ``accepted`` / ``refused`` (None: no command).
    dispatch: str | None = None


@dataclass
class ExchangeRecord:
    exchange: Exchange
    session_id: str | None
    run_id: str | None
    dispatch: str | None = None  # accepted | refused | continued
    #: How many user messages the adapter projected at dispatch (R4.5).
    projected: int = 0
    #: (reason, frame index) where the Core's reader stopped: terminal or error.
    reader_stop: tuple[ReaderStop, int] | None = None
    concluded: bool = False
    end_marker_frame: int | None = None
    #: The client left this stream mid-run on a route whose stop is closing
    #: the stream (``Route.stop = "close"``): the UI's stop, replayed as one.
    stopped_by_close: bool = False
    history: HistoryRecord | None = None
    frames: list[FrameRecord] = field(default_factory=list)
    #: A subscription: the runs it carried, by (session, run), in order of first frame.
    socket_runs: dict[tuple[str, str], SocketRun] = field(default_factory=dict)


@dataclass
class SessionReplay:
    session_id: str
    core: ChatCore
    decoder: SessionDecoder
    runs: dict[str, RunRecord] = field(default_factory=dict)
    history: list[HistoryRecord] = field(default_factory=list)
    #: The run whose ``live`` snapshot is the Core's current one, taken
    #: (:meth:`Replayer.settle_live`) only before the Core moves on: one
    #: snapshot per change of run or command instead of one per fact.
    pending_live: RunRecord | None = None

    def run_views(self) -> list[RunView]:
        """Every run of the session at the end: the Core's, in its order, then
        the runs a history read dropped with their messages (decisions.md
        272), as they last stood: the trace had them though the UI no longer
        shows them."""
        views = list(self.core.snapshot.runs)
        shown = {v.id for v in views}
        views.extend(
            rec.dropped[1] for rid, rec in self.runs.items() if rec.dropped is not None and rid not in shown
        )
        return views


@dataclass
class Replay:
    sessions: dict[str, SessionReplay] = field(default_factory=dict)
    exchanges: dict[int, ExchangeRecord] = field(default_factory=dict)
    frames: list[FrameRecord] = field(default_factory=list)
    facts: list[FactRecord] = field(default_factory=list)

    def frame(self, exchange_index: int, frame_index: int) -> FrameRecord | None:
        ex = self.exchanges.get(exchange_index)
        if ex is None:
            return None
        if frame_index < len(ex.frames) and ex.frames[frame_index].frame_index == frame_index:
            return ex.frames[frame_index]
        # a socket several sessions share holds only this replay's sessions' frames
        for fr in ex.frames:
            if fr.frame_index == frame_index:
                return fr
        return None

    @property
    def violations(self) -> list[FactRecord]:
        """Facts rejected for a contract violation (not idempotently)."""
        return [f for f in self.facts if f.result.violation]


class Replayer:
    """The incremental replay behind :func:`replay`: call :meth:`start`,
    :meth:`frame` and :meth:`end` for each exchange event in time order; the
    results accumulate in :attr:`out` (a :class:`Replay`).  The viewer drives
    it event by event and keeps checkpoints of it.
    """

    def __init__(self, adapter: Adapter, capabilities: Iterable[str] | None, *, only: Iterable[str] | None = None) -> None:
        self.adapter = adapter
        self.capabilities = frozenset(capabilities) if capabilities is not None else adapter.capabilities
        self.out = Replay()
        #: Record only these sessions' frames of a socket several sessions
        #: share (:func:`multiplexed`); None: every session.
        self.only = frozenset(only) if only is not None else None
        self._seq = 0
        self._foreign: dict[str, SessionDecoder] = {}
        self._sockets: dict[int, _Socket] = {}
        #: Streams of a run still open, by (session, run): chatkit reads a run once.
        self._readers: dict[tuple[str | None, str | None], set[int]] = {}
        protocol = adapter.protocol
        self._has_identity = protocol.implements("identify_event")
        self._has_known = protocol.implements("event_known")
        self._has_limits = protocol.implements("event_limits")
        self._has_history_limits = protocol.implements("history_limits")
        # bound once: _identity and _limits call them per frame
        self._identify_event = protocol.identify_event
        self._event_limits = protocol.event_limits

    # -- sessions ---------------------------------------------------------------------

    def session(self, session_id: str | None) -> SessionReplay:
        sid = session_id or DEFAULT_SESSION
        s = self.out.sessions.get(sid)
        if s is None:
            core = ChatCore(sid, capabilities=self.capabilities, clock=lambda: 0.0)
            s = self.out.sessions[sid] = SessionReplay(sid, core, self.adapter.decoder(sid))
        return s

    def run_record(self, s: SessionReplay, run_id: str) -> RunRecord:
        rec = s.runs.get(run_id)
        if rec is None:
            rec = s.runs[run_id] = RunRecord(run_id, s.session_id)
        return rec

    def _note_settled(self, s: SessionReplay, by: str, at: float) -> None:
        snap = s.core.snapshot
        for view in snap.runs:
            if view.terminal:
                rec = self.run_record(s, view.id)
                if rec.settled is None:
                    rec.settled, rec.settled_by, rec.settled_at = snap, by, at

    def admit(self, s: SessionReplay, fact: Fact, ex: int | None, frame: int | None, *, session_id: str | None = None) -> FactRecord:
        if session_id is not None and session_id != s.session_id:
            fact = type(fact)(**{**_fields(fact), "session_id": session_id})
        core = s.core
        pending = s.pending_live
        if pending is not None and (pending.run_id != fact.run_id or ex is None or fact.session_id != s.session_id):
            # The Core may move on for another run: take the pending run's
            # snapshot now.  (A fact of the pending run itself either replaces
            # it, when accepted, or leaves the Core as it was.)
            self.settle_live(s)
        if type(fact) is DeltaFact:  # the Core's delta emitter, without admit's dispatch
            result = core._delta(
                fact.run_id, fact.event_id, fact.message_id, fact.part_id, fact.delta, fact.session_id, fact.source_sequence
            )
        elif type(fact) is MessageFact:  # the Core's message emitter, without admit's dispatch
            fact = _sharing_text(fact, core)
            result = core._message(fact.run_id, fact.event_id, fact.message, fact.session_id, fact.source_sequence)
        else:
            result = core.admit(fact)
        self._seq += 1
        rec = FactRecord(self._seq, fact, result, ex, frame, core._version)
        self.out.facts.append(rec)
        if result.accepted:
            if fact.run_id and ex is not None and fact.session_id == s.session_id:
                run = s.runs.get(fact.run_id)
                if run is not None:
                    # run.live is the Core's snapshot as of now: taken when the Core moves on
                    run.live_at = (ex, frame)
                    s.pending_live = run
            if fact.kind in _SETTLING:
                self._note_settled(s, "fact", fact.at or 0.0)
        return rec

    @staticmethod
    def settle_live(s: SessionReplay) -> None:
        """Give the run whose live snapshot is pending the Core's snapshot
        (before the Core changes; :meth:`finish` at the end of a replay)."""
        run = s.pending_live
        if run is not None:
            run.live = s.core.snapshot
            s.pending_live = None

    def finish(self) -> Replay:
        """Settle every pending live snapshot; the replay's result."""
        for s in self.out.sessions.values():
            self.settle_live(s)
        return self.out

    def drain(self, s: SessionReplay, exchange: Exchange, *, ok: bool | None = None) -> None:
        for req in s.core.take_requests():
            if isinstance(req, DispatchRequest):
                s.core.dispatch_settled(req.run_id, not exchange.failed if ok is None else ok)
            elif isinstance(req, AbortRequest):
                pass  # settled when the abort exchange's status is known

    # -- exchange start -------------------------------------------------------------

    def start(self, exchange: Exchange) -> None:
        for s in self.out.sessions.values():
            if s.pending_live is not None:
                self.settle_live(s)
        self._start(exchange)
        rec = self.out.exchanges[exchange.index]
        if exchange.capability in STREAMING and rec.run_id is not None and rec.reader_stop is None and exchange.frames:
            self._readers.setdefault((rec.session_id, rec.run_id), set()).add(exchange.index)

    def _start(self, exchange: Exchange) -> None:
        cap = exchange.capability
        rec = ExchangeRecord(exchange, exchange.session_id, exchange.run_id)
        self.out.exchanges[exchange.index] = rec
        if cap is None:
            return
        if cap == "subscribe" and multiplexed(exchange):
            return  # a socket several sessions share: its frames name their sessions
        s = self.session(exchange.session_id)
        rec.session_id = s.session_id
        at = exchange.started_at * 1000.0
        if cap in ("run", "regenerate", "edit"):
            run_id = self._run_id(s, exchange)
            rec.run_id = run_id
            self.run_record(s, run_id).exchanges.append(exchange.index)
            view = s.core.run_view(run_id)
            if view is not None:
                rec.dispatch = "continued"  # e.g. the OpenAI tool loop: same run, another request
                self._request_events(s, exchange, run_id)
                return
            rec.projected, rec.dispatch = self._dispatch(
                s, exchange, cap, run_id, exchange.request_json(), at, frame_index=None,
                target=exchange.target_run_id,
            )
        elif cap == "resume":
            run_id = self._run_id(s, exchange)
            rec.run_id = run_id
            self.run_record(s, run_id).exchanges.append(exchange.index)
            view = s.core.run_view(run_id)
            if view is None and not exchange.failed:
                # What chatkit's resumeActiveRun starts: a resumed run, which
                # may continue history's answer (decisions.md 270).
                s.core.register_run(run_id=run_id, at=at, resume=True)
            elif view is not None and view.terminal:
                # chatkit never resumes a settled run (R8.3): what this stream
                # carries is decoded in the shadow only.
                rec.reader_stop = (ReaderStop.SETTLED, -1)
            elif self._readers.get((s.session_id, run_id)):
                # Another stream of this run is still being read: chatkit reads
                # a run once (it resumes only runs it does not know, R8.3), so a
                # recorded client's second reader is decoded in the shadow.
                rec.reader_stop = (ReaderStop.CONCURRENT, -1)
            elif not exchange.failed:
                s.core.observe_connection(run_id=run_id, state="connected")
        elif cap == "abort":
            aborted = exchange.run_id
            if aborted is not None and s.core.run_view(aborted) is not None:
                s.core.abort(aborted, at=at)
                s.core.take_requests()
                s.core.abort_settled(aborted, not exchange.failed, at=at)
        elif cap == "history":
            self.history(s, exchange, rec)
        elif cap == "status":
            self.status(s, exchange)

    def _dispatch(
        self, s: SessionReplay, exchange: Exchange, cap: str, run_id: str, body: Any, at: float, *,
        frame_index: int | None, target: str | None = None,
    ) -> tuple[int, str]:
        """The UI's send (regenerate, edit) of a run the client started: a run
        request, or a run command on a socket (``frame_index``).  Returns how
        many user messages the adapter projected (R4.5) and the dispatch
        (``accepted`` / ``refused``)."""
        try:
            input = self.adapter.protocol.decode_input(body)
        except Exception:  # noqa: BLE001 - a recorded body we cannot read
            input = None
        project = s.decoder.project(input, run_id, tuple(s.core.snapshot.messages)) if input is not None else []
        if cap == "run":
            res = s.core.send(run_id, input if input is not None else body, project=project, at=at)
        elif cap == "regenerate":
            res = s.core.regenerate(run_id, target=target, project=project, at=at)
        else:
            res = s.core.edit(run_id, target=target or "", input=input, project=project, at=at)
        if not res.ok and cap != "run":
            # The Core would not have sent it; the client did: record as a plain send.
            s.core.send(run_id, input if input is not None else body, project=project, at=at)
        view = s.core.run_view(run_id)
        if view is not None and view.status == "queued":
            s.core.force_dispatch(run_id, at=at)
        # A run request is refused when it failed at the HTTP level (R2.2); a
        # command a socket carried reached the backend.
        self.drain(s, exchange, ok=True if frame_index is not None else None)
        view = s.core.run_view(run_id)
        if view is not None:
            run = self.run_record(s, run_id)
            run.live, run.live_at = s.core.snapshot, (exchange.index, frame_index)
        return len(project), "accepted" if view is not None else "refused"

    def _request_events(self, s: SessionReplay, exchange: Exchange, run_id: str) -> None:
        """Events a continuation request carries (R2.2: the tool loop calls run
        again under the same run id), decoded before its response."""
        try:
            events = self.adapter.protocol.request_events(exchange.request_json(), run_id)
        except Exception:  # noqa: BLE001 - a recorded body the adapter cannot read
            return
        for k, event in enumerate(events or ()):
            decoded = s.decoder.decode(event, run_id=run_id, fallback_id=f"{exchange.index}:req{k}", at=exchange.started_at * 1000.0)
            for fact in decoded.facts:
                self.admit(s, fact, exchange.index, None)

    def _run_id(self, s: SessionReplay, exchange: Exchange) -> str:
        """The exchange's run id: from the profile, else from the first event
        that names its run (``identify_event``: A2A taskId, ADK invocationId,
        Hermes run_id), else derived deterministically from the exchange."""
        if exchange.run_id:
            return exchange.run_id
        for frame in exchange.frames:
            if frame.direction != "in":
                continue
            value, err = event_json(frame)
            if err is not None or value is None:
                continue
            ident = self._identity(value)
            if ident is not None and ident.run_id:
                exchange.run_id, exchange.run_id_source = ident.run_id, "events"
                return ident.run_id
        exchange.run_id, exchange.run_id_source = f"{s.session_id}:x{exchange.index}", "derived"
        return exchange.run_id

    def history(self, s: SessionReplay, exchange: Exchange, rec: ExchangeRecord, *, reply: Any = ABSENT,
                at: float | None = None, frame_index: int | None = None) -> HistoryRecord:
        """A history read: an HTTP exchange, or on a socket the server message
        (``reply``, at ``at``, frame ``frame_index``) answering a history command."""
        socket = frame_index is not None
        started = cast(float, at) if socket else exchange.started_at  # a socket's reply comes with its time
        before = s.core.snapshot
        baselines = {}
        for run_id, run in s.runs.items():
            if run.live is None:
                continue
            view = before.run(run_id)
            baselines[run_id] = Baseline(
                run.live, run.live_at or (exchange.index, None), view.status if view is not None else None,
                run.settled_by if view is not None and view.terminal else None,
            )
        result: HistoryResult | None = None
        error: str | None = None
        command: CommandResult | None = None
        if exchange.failed and not socket:
            error = f"history request failed (HTTP {exchange.status})"
        else:
            value = reply if socket else exchange.response_json()
            try:
                result = s.decoder.history(value)
            except InvalidMessageError as err:
                error = str(err)
                s.core._invalid(err.with_source("history"))  # reported like the Core's own (R3.7)
                command = CommandResult(False, str(err), "invalid-message", err.rule)
            except Exception as err:  # noqa: BLE001 - decode_history raised on this body
                error = f"decode_history failed: {type(err).__name__}: {err}"
            if result is not None:
                scope = "session" if socket else read_scope(exchange)
                # A read covering one run (A2A tasks/get) or one page replaces
                # only what it covers (docs/history.md); a session read is
                # chatkit's refresh, the whole conversation.
                covers = None if scope == "session" else ([exchange.run_id] if exchange.run_id else [])
                command = s.core.apply_history(result, at=started * 1000.0, covers=covers)
                self._note_settled(s, "history", started)
                self._note_dropped(s, before, exchange.index)
        hist = HistoryRecord(
            exchange.index, s.session_id, result, error, command, before, s.core.snapshot, started,
            "session" if socket else read_scope(exchange), None if socket else exchange.run_id, baselines,
            limits=self._history_limits(value, s.session_id) if result is not None else (),
            frame_index=frame_index,
        )
        s.history.append(hist)
        if not socket:
            rec.history = hist
        return hist

    def _note_dropped(self, s: SessionReplay, before: Snapshot, index: int) -> None:
        """Remember the runs a read dropped (decisions.md 272) and forget the
        drop of a run a later read brings back."""
        now = s.core.snapshot
        for view in before.runs:
            if now.run(view.id) is None:
                self.run_record(s, view.id).dropped = (index, view)
        for view in now.runs:
            rec = s.runs.get(view.id)
            if rec is not None and rec.dropped is not None:
                rec.dropped = None

    def status(self, s: SessionReplay, exchange: Exchange) -> None:
        run_id = exchange.run_id
        if run_id is None or exchange.failed:
            return
        try:
            snap = self.adapter.protocol.decode_status(exchange.response_json(), s.session_id, run_id)
        except Exception:  # noqa: BLE001 - adapter code: a status it cannot decode calibrates nothing
            return
        if snap is not None and s.core.run_view(run_id) is not None:
            s.core.calibrate_run(
                run_id=run_id,
                status=snap.status,
                error=None if snap.error is ABSENT else snap.error,
                interrupt_reason=snap.interrupt_reason if isinstance(snap.interrupt_reason, str) else None,
            )
            self._note_settled(s, "status", exchange.started_at)

    # -- frames ---------------------------------------------------------------------

    def frame(self, exchange: Exchange, frame: Frame) -> None:
        """One frame through the adapter and the Core (:meth:`frames` of one)."""
        self.frames(exchange, (frame,))

    def frames(self, exchange: Exchange, frames: Iterable[Frame]) -> None:
        """Frames of one exchange, one after the other, through the adapter and
        the Core: what stays the same from frame to frame (the exchange's
        record, capability, session, run, the adapter's functions) is read
        once (issue 18)."""
        # long-function: each frame through the adapter and the Core in replay order (decode, admit, record)
        index = exchange.index
        rec = self.out.exchanges[index]
        cap = exchange.capability
        if cap == "subscribe":
            for frame in frames:
                self._socket_frame(exchange, frame, rec)
            return
        record, record_all = rec.frames.append, self.out.frames.append
        session_id, rec_session, rec_run = exchange.session_id, rec.session_id, rec.run_id
        streaming = cap in STREAMING
        run_id = rec_run or exchange.run_id or f"x{index}"
        has_identity, has_limits = self._has_identity, self._has_limits
        on_ws = exchange.transport == "ws"
        admit = self.admit
        s: SessionReplay | None = None
        for frame in frames:
            # No lists of its own until the frame has facts: two fewer objects per
            # frame for the cyclic GC to walk (FrameRecord.facts/shadow).
            fr = FrameRecord(
                index, frame.index, _ADMITTED, rec_session, rec_run, _NONE, _NONE, None, False, None, False,
                None, frame.at, (), frame.event_id,
            )
            record(fr)
            record_all(fr)
            if cap is None:
                fr.state = FrameState.IGNORED
                continue
            if frame.direction == "out":
                fr.state = FrameState.OUTGOING
                continue
            if s is None:  # once per exchange (only when a frame needs it: no session for outgoing frames alone)
                s = self.session(session_id)
            stopped = rec.reader_stop is not None
            error = frame.error
            if error is not None and error.stops_reader:
                _reader_error(rec, fr, frame, error, stopped, lost=True)
                continue
            value, err = event_json(frame)
            if err is not None:
                if not stopped and _recorder_lost(fr, err):
                    continue
                _reader_error(rec, fr, frame, err, stopped)
                continue
            if error is not None:
                fr.error = error  # e.g. invalid UTF-8 that JSON still parsed
            if not streaming:
                fr.state = FrameState.EMPTY
                continue
            identity = self._identity(value) if has_identity else None
            fr.identity = identity
            if fr.event_id is None and identity is not None and identity.event_id and on_ws:
                fr.event_id = identity.event_id  # a WebSocket message has no outer id: the event's own (R2.2)
            fr.end_marker = value is DONE or (identity is not None and identity.ends_response)
            if identity is not None and identity.session_id is not None and identity.session_id != s.session_id and not stopped:
                # An event of another session on this run's stream (e.g. an A2A
                # contextId that differs): decoded apart, so it cannot disturb this
                # run's decode state, and rejected wrong-session by the Core (R11.5).
                fr.state = FrameState.WRONG_SESSION
                foreign = self._foreign_decoder(identity.session_id).decode(
                    value, run_id=run_id, event_id=fr.event_id, fallback_id=f"{index}:{frame.index}"
                )
                if foreign.facts:
                    fr.facts = [admit(s, fact, index, frame.index, session_id=identity.session_id) for fact in foreign.facts]
                continue
            event_id = fr.event_id
            decoded = s.decoder.decode_frame(
                value, run_id, event_id, f"{index}:{frame.index}" if event_id is None else None, frame.at * 1000.0
            )
            if stopped:
                fr.state = FrameState.after(rec.reader_stop[0])  # type: ignore[index]  # stopped: the reader stop is set
                if decoded.facts:
                    fr.shadow = list(decoded.facts)
                continue
            if decoded.duplicate:
                fr.state = FrameState.DUPLICATE
                continue
            if decoded.error is not None:
                fr.state = FrameState.ERROR
                fr.error = decoded.error
                rec.reader_stop = (ReaderStop.ERROR, frame.index)
                continue
            if not decoded.updates and value is not DONE and not self._known(value):
                fr.unknown = True
                fr.event_type = _event_type(value)
            if has_limits:
                fr.limits = self._limits(value)
            facts = decoded.facts
            if facts:
                if len(facts) == 1:
                    fr.facts = [admit(s, facts[0], index, frame.index)]
                else:
                    fr.facts = [admit(s, fact, index, frame.index) for fact in facts]
            if decoded.terminal:
                rec.reader_stop = (ReaderStop.TERMINAL, frame.index)
                rec.concluded = True
            elif fr.end_marker and rec.end_marker_frame is None:
                rec.end_marker_frame = frame.index

    # -- subscriptions and sockets ------------------------------------------------------

    def _socket(self, exchange: Exchange) -> _Socket:
        sock = self._sockets.get(exchange.index)
        if sock is None:
            sock = self._sockets[exchange.index] = _Socket(exchange)
        return sock

    def _socket_frame(self, exchange: Exchange, frame: Frame, rec: ExchangeRecord) -> None:
        """One frame of a subscription: a server event routed to its session
        and run, or a client message (a command when the route's ``messages``
        say so).  On a socket several sessions share (:func:`multiplexed`)
        each frame goes to the session it names, so every session is
        replayed with its own messages only."""
        # long-function: a socket frame routed to its session, event or command, in replay order
        sock = self._socket(exchange)
        sid, value, err, command, ident, failed = self._classify(sock, frame)
        parsed = err is None and value is not None and value is not DONE
        if self.only is not None and sid not in self.only:
            return
        fr = FrameRecord(exchange.index, frame.index, _ADMITTED, sid, rec.run_id, at=frame.at, event_id=frame.event_id)
        rec.frames.append(fr)
        self.out.frames.append(fr)
        s = self.session(sid)
        if frame.direction == "out":
            fr.state = FrameState.OUTGOING
            if command is not None:
                fr.command = command
                fr.run_id = command.run_id
                self.settle_live(s)  # a command changes the Core outside admit: the pending live snapshot first
                self._command(s, exchange, frame, rec, sock, command)
            return
        stopped = rec.reader_stop is not None
        if frame.error is not None and frame.error.stops_reader:
            _reader_error(rec, fr, frame, frame.error, stopped, lost=True)
            return
        if err is not None:
            if not stopped and _recorder_lost(fr, err):
                return
            _reader_error(rec, fr, frame, err, stopped)
            return
        if frame.error is not None:
            fr.error = frame.error
        if failed is not None:
            self.adapter.report_error("identify", failed.err)
            fr.state, fr.error = FrameState.ERROR, str(failed)
            return
        if parsed and sock.waiting:
            for k, (rule, wsid, _) in enumerate(sock.waiting):
                if wsid == sid and sock.rules is not None and sock.rules.answers(rule, value):
                    del sock.waiting[k]
                    fr.state = FrameState.HISTORY
                    self.settle_live(s)  # as for a command: history changes the Core outside admit
                    self.history(s, exchange, rec, reply=value, at=frame.at, frame_index=frame.index)
                    return
        if fr.event_id is None and ident is not None and ident.event_id and exchange.transport == "ws":
            fr.event_id = ident.event_id  # a WebSocket message has no outer id: the event's own (R2.2)
        self.route(s, exchange, frame, fr, value, identity=ident)
        if fr.run_id is not None and fr.state not in (FrameState.WRONG_SESSION, FrameState.UNROUTED):
            key = (s.session_id, fr.run_id)
            run = rec.socket_runs.get(key)
            if run is None:
                run = rec.socket_runs[key] = SocketRun(s.session_id, fr.run_id, frame.index, frame.index)
            run.last_frame = frame.index
            if any(f.result.accepted and f.fact.kind in TERMINAL_KINDS for f in fr.facts):
                run.concluded = True

    def _classify(self, sock: _Socket, frame: Frame) -> tuple[str, Any, Any, Any, EventIdentity | None, _IdentifyError | None]:
        """A socket frame's session, JSON (and its error), command (a client
        message) or identity (a server event)."""
        value: Any = None
        err: Any = None
        if frame.error is None or not frame.error.stops_reader:
            value, err = event_json(frame)
        parsed = err is None and value is not None and value is not DONE
        command = None
        ident: EventIdentity | None = None
        failed: _IdentifyError | None = None
        if frame.direction == "out":
            command = sock.rules.command(value) if sock.rules is not None and parsed else None
            sid = sock.session_of_message(value if parsed else None, command)
        else:
            try:
                ident = self._socket_identity(sock, value) if parsed else None
            except _IdentifyError as e:
                failed = e
            sid = sock.session_of_event(value if parsed else None, ident)
        return sid, value, err, command, ident, failed

    def _socket_identity(self, sock: _Socket, value: Any) -> EventIdentity | None:
        """``identify_event``, completed by the route's per-event sources
        (``events:`` pointers for session and run, read on every event)."""
        ident = self._identity(value, strict=True)
        if not sock.session_ptrs and not sock.run_ptrs:
            return ident
        run = _find(value, sock.run_ptrs) if sock.run_ptrs else None
        session = _find(value, sock.session_ptrs) if sock.session_ptrs else None
        if ident is None:
            return EventIdentity(run_id=run, session_id=session) if run is not None else None
        if run is not None and not ident.run_id:
            ident = msgspec.structs.replace(ident, run_id=run)
        if session is not None and (sock.mux or ident.session_id is None):
            ident = msgspec.structs.replace(ident, session_id=session)  # on a shared socket the event's session routes it
        return ident

    def _command(self, s: SessionReplay, exchange: Exchange, frame: Frame, rec: ExchangeRecord, sock: _Socket,
                 command: Any) -> None:
        """A client message on a socket that is a chatkit command."""
        at = frame.at * 1000.0
        cap = command.capability
        if cap == "run":
            run_id = command.run_id or f"{s.session_id}:x{exchange.index}:{frame.index}"
            run = self.run_record(s, run_id)
            if exchange.index not in run.exchanges:
                run.exchanges.append(exchange.index)
            key = (s.session_id, run_id)
            if key not in rec.socket_runs:
                rec.socket_runs[key] = SocketRun(s.session_id, run_id, frame.index, frame.index, command_frame=frame.index)
            if s.core.run_view(run_id) is None:
                run_rec = rec.socket_runs[key]
                run_rec.projected, run_rec.dispatch = self._dispatch(
                    s, exchange, "run", run_id, command.body, at, frame_index=frame.index)
        elif cap == "abort":
            run_id = command.run_id
            if run_id is not None and s.core.run_view(run_id) is not None:
                s.core.abort(run_id, at=at)
                s.core.take_requests()
                # delivered on the open socket: the stop reached the backend (R9.4 accepted)
                s.core.abort_settled(run_id, True, at=at)
        elif cap == "history":
            sock.waiting.append((command.rule, s.session_id, frame.index))

    def _foreign_decoder(self, session_id: str) -> SessionDecoder:
        dec = self._foreign.get(session_id)
        if dec is None:
            dec = self._foreign[session_id] = self.adapter.decoder(session_id)
        return dec

    def _known(self, value: Any) -> bool:
        if not self._has_known:
            return False
        try:
            return bool(self.adapter.protocol.event_known(value))
        except Exception:  # noqa: BLE001 - adapter code: an event it cannot judge is not known
            return False

    def _limits(self, value: Any) -> tuple[str, ...]:
        if value is DONE:
            return ()
        try:
            limits = self._event_limits(value)
            return limits if type(limits) is tuple else tuple(limits or ())
        except Exception:  # noqa: BLE001 - adapter code: an event it cannot judge has no limits
            return ()

    def _history_limits(self, value: Any, session_id: str) -> tuple[str, ...]:
        if not self._has_history_limits:
            return ()
        try:
            return tuple(self.adapter.protocol.history_limits(value, session_id) or ())
        except Exception:  # noqa: BLE001 - adapter code: history it cannot judge has no limits
            return ()

    def _identity(self, value: Any, *, strict: bool = False) -> EventIdentity | None:
        if value is DONE or not self._has_identity:
            return None
        try:
            return self._identify_event(value)
        except Exception as err:  # noqa: BLE001 - adapter code: no identity, or strict says why
            if strict:
                raise _IdentifyError(err) from None
            return None

    def route(self, s: SessionReplay, exchange: Exchange, frame: Frame, fr: FrameRecord, value: Any, *,
              identity: EventIdentity | None = None) -> None:
        decoded = s.decoder.route(value, event_id=fr.event_id, fallback_id=f"{exchange.index}:{frame.index}",
                                  at=frame.at * 1000.0, identity=identity)
        ident = decoded.identity
        fr.identity = ident
        if decoded.error is not None:
            fr.state, fr.error = FrameState.ERROR, decoded.error
            return
        if ident is None:
            fr.event_type = _event_type(value)
            fr.state = FrameState.UNROUTED if value is not DONE else FrameState.EMPTY
            fr.end_marker = value is DONE
            return
        fr.run_id = ident.run_id
        fr.end_marker = ident.ends_response
        run_rec = self.run_record(s, ident.run_id)
        if exchange.index not in run_rec.exchanges:
            run_rec.exchanges.append(exchange.index)
        if ident.session_id is not None and ident.session_id != s.session_id:
            # Decode it apart and let the Core reject it (R11.5, CK501).
            shadow = self._foreign_decoder(ident.session_id).decode(
                value, run_id=ident.run_id, event_id=fr.event_id, fallback_id=f"{exchange.index}:{frame.index}"
            )
            if shadow.facts:
                fr.facts = [self.admit(s, fact, exchange.index, frame.index, session_id=ident.session_id) for fact in shadow.facts]
            if not shadow.facts:
                fr.state = FrameState.WRONG_SESSION
            return
        if decoded.duplicate:
            fr.state = FrameState.DUPLICATE
            return
        if ident.starts_run and s.core.run_view(ident.run_id) is None:
            self.settle_live(s)
            s.core.register_run(run_id=ident.run_id, at=frame.at * 1000.0)
        fr.unknown = not decoded.updates and not self._known(value)
        if fr.unknown:
            fr.event_type = _event_type(value)
        if self._has_limits:
            fr.limits = self._limits(value)
        if decoded.facts:
            fr.facts = [self.admit(s, fact, exchange.index, frame.index) for fact in decoded.facts]

    # -- end of an exchange -----------------------------------------------------------

    def end(self, exchange: Exchange) -> None:
        for live in self.out.sessions.values():
            if live.pending_live is not None:
                self.settle_live(live)
        rec = self.out.exchanges[exchange.index]
        readers = self._readers.get((rec.session_id, rec.run_id))
        if readers is not None:
            readers.discard(exchange.index)
        if exchange.capability == "subscribe" and exchange.end in ("complete", "reset", "client-gone", "timeout", "error"):
            # A subscription (a socket) that ends leaves the runs it carried
            # without a conclusion with an unknown outcome, as a run's own
            # stream does (R3.4).
            for (sid, run_id), run in rec.socket_runs.items():
                s = self.out.sessions.get(sid)
                view = s.core.run_view(run_id) if s is not None else None
                if s is None or view is None or view.terminal or run.concluded:
                    continue
                s.core.observe_connection(run_id=run_id, state="disconnected")
            return
        if exchange.capability not in STREAMING or rec.run_id is None:
            return
        s = self.session(exchange.session_id)
        view = s.core.run_view(rec.run_id)
        if view is None or view.terminal or rec.concluded:
            return
        if exchange.end == "client-gone" and stops_by_close(exchange) and view.status == "running":
            # The client left a stream whose only stop is closing it: the UI's
            # stop, replayed as ChatRuntime(stop="close") does it (the Core
            # gets the abort capability; the close always succeeds and seals
            # the output; only a terminal or history settles the run, R9.1).
            at = (exchange.ended_at or exchange.started_at) * 1000.0
            if "abort" not in s.core.capabilities:
                s.core.capabilities = s.core.capabilities | {"abort"}
            if view.abort is None:
                s.core.abort(rec.run_id, at=at)
                s.core.take_requests()
            s.core.abort_settled(rec.run_id, True, at=at)
            rec.stopped_by_close = True
        if exchange.end in ("complete", "reset", "client-gone", "timeout", "error"):
            # A stream that ends without a conclusion leaves the outcome unknown (R3.4).
            s.core.observe_connection(run_id=rec.run_id, state="disconnected")


def _recorder_lost(fr: FrameRecord, err: Any) -> bool:
    """A frame whose content the recorder did not keep (a line over its
    limit, ``line-too-long``: kept as its head, length and hash): the UI read
    it, so the reader goes on; its facts are unknown (state ``over-limit``, CK703),
    never a decode error of the backend's."""
    if getattr(err, "kind", None) != DecodeErrorKind.LINE_TOO_LONG:
        return False
    fr.state, fr.error = FrameState.OVER_LIMIT, err
    return True


def _reader_error(rec: ExchangeRecord, fr: FrameRecord, frame: Frame, err: Any, stopped: bool, *, lost: bool = False) -> None:
    """A frame the reader cannot use: its content was lost (``lost``: the
    frame's own error stops the reader) or it did not parse (``event_json``'s
    error).  The first such frame stops the reader (R2.5); a frame with no
    text that did not parse is an empty block."""
    fr.error = err
    if not lost and frame.text is None and not stopped:
        fr.state = FrameState.EMPTY
        return
    fr.state = FrameState.after(rec.reader_stop[0]) if stopped else FrameState.ERROR  # type: ignore[index]  # stopped: the reader stop is set
    if not stopped:
        rec.reader_stop = (ReaderStop.ERROR, frame.index)


def _sharing_text(fact: MessageFact, core: ChatCore) -> MessageFact:
    """``fact`` with each text part that extends the same part of the message
    the Core holds under its id re-made as that part plus the new text: the
    same value (equal, the same JSON), but the versions share their chunks.

    A protocol that resends the whole message with every event (the example
    protocol, AG-UI snapshots) would otherwise leave every fact record holding
    its own copy of the text so far: memory quadratic in a run's length.
    """
    message = fact.message
    if type(message) is not RuntimeMessage:
        return fact
    pos = core._index.get(message.id)
    if pos is None:
        return fact
    held_parts = core._messages.get(pos).parts
    if len(held_parts) == 1:  # the common case, without a dict
        h = held_parts[0]
        held = {h.id: h} if type(h) is TextPart or type(h) is ReasoningPart else None
    else:
        held = {p.id: p for p in held_parts if type(p) is TextPart or type(p) is ReasoningPart}
    if not held:
        return fact
    parts = list(message.parts)
    changed = False
    for i, p in enumerate(parts):
        kind = type(p)
        if kind is not TextPart and kind is not ReasoningPart:
            continue
        q = held.get(p.id)
        if q is None or type(q) is not kind or p._buf is q._buf or p.extra != q.extra:  # type: ignore[union-attr]  # kind: a text part
            continue  # nothing to share, or shared already
        new, old = p.text, q.text  # type: ignore[union-attr]  # kind: a text part
        if type(new) is str and type(old) is str and len(new) > len(old) and new.startswith(old):
            parts[i] = q.append(new[len(old):])
            changed = True
    if not changed:
        return fact
    made: MessageFact = MessageFact._make(  # type: ignore[attr-defined]  # core._values adds _make
        fact.session_id, fact.run_id, fact.event_id, fact.source_sequence, fact.position, fact.at, message.with_parts(tuple(parts))
    )
    return made


#: Where the session of a stream of one session comes from: its request or its reply.
_FIXED_SESSION = frozenset({"path", "query", "header", "body", "constant", "response", "inherited", "split"})


def multiplexed(exchange: Exchange) -> bool:
    """A subscription whose session is not fixed by its request or reply but
    read from its events (``session = "events:…"``, or derived): a socket
    that may carry several sessions, each event going to the session it
    names (docs/profiles.md, "WebSocket")."""
    if exchange.capability != "subscribe":
        return False
    note = (exchange.notes or {}).get("identity")
    if not isinstance(note, dict):
        return False
    source = note.get("session_source")
    if source in _FIXED_SESSION:
        return False
    events = note.get("events")
    return source in ("events", "derived") or (isinstance(events, dict) and bool(events.get("session")))


class _IdentifyError(Exception):
    """``identify_event`` raised: the event is reported as an error, not routed."""

    def __init__(self, err: BaseException) -> None:
        super().__init__(f"{type(err).__name__}: {err}")
        self.err = err


class _Socket:
    """What the replay keeps of one subscription: the route's per-event
    sources and command rules (from the exchange's ``notes.identity``), and
    which session each run belongs to on it."""

    __slots__ = ("mux", "home", "session_ptrs", "run_ptrs", "rules", "run_session", "waiting")

    def __init__(self, exchange: Exchange) -> None:
        note = (exchange.notes or {}).get("identity")
        note = note if isinstance(note, dict) else {}
        events: Any = note.get("events") if isinstance(note.get("events"), dict) else {}
        self.session_ptrs = tuple(tuple(p) for p in events.get("session") or () if isinstance(p, list))
        self.run_ptrs = tuple(tuple(p) for p in events.get("run") or () if isinstance(p, list))
        rules = note.get("messages")
        if rules:
            from .route.profiles import message_rules

            self.rules = message_rules(rules)
        else:
            self.rules = None
        self.mux = multiplexed(exchange)
        self.home = exchange.session_id or DEFAULT_SESSION
        #: run id -> the session it was first seen in on this socket.
        self.run_session: dict[str, str] = {}
        #: history commands not answered yet: (rule, session, frame index).
        self.waiting: list[tuple[int, str, int]] = []

    def session_of_event(self, value: Any, ident: EventIdentity | None) -> str:
        if not self.mux:
            return self.home
        sid = ident.session_id if ident is not None else None
        if sid is None and self.session_ptrs and value is not None:
            sid = _find(value, self.session_ptrs)
        run = ident.run_id if ident is not None else (_find(value, self.run_ptrs) if self.run_ptrs and value is not None else None)
        if sid is None and run is not None:
            sid = self.run_session.get(run)
        sid = sid or self.home
        if run is not None:
            self.run_session.setdefault(run, sid)
        return sid

    def session_of_message(self, value: Any, command: Any) -> str:
        if not self.mux:
            return self.home
        sid = command.session_id if command is not None else None
        if sid is None and self.session_ptrs and value is not None:
            sid = _find(value, self.session_ptrs)
        run = command.run_id if command is not None else None
        if sid is None and run is not None:
            sid = self.run_session.get(run)
        sid = sid or self.home
        if run is not None and command.capability == "run":
            self.run_session.setdefault(run, sid)
        return sid


def _find(doc: Any, pointers: tuple[tuple[str, ...], ...]) -> str | None:
    from .route.identity import lookup, scalar_id

    for p in pointers:
        v = scalar_id(lookup(doc, p))
        if v is not None:
            return v
    return None


def split_frames(exchange: Exchange, adapter: Adapter) -> dict[str, list[Frame]]:
    """A socket's frames per session they name, in order: the split the
    replay makes (each frame goes to the session it names)."""
    sock = _Socket(exchange)
    if not sock.mux:
        return {sock.home: list(exchange.frames)}
    r = Replayer(adapter, None)
    out: dict[str, list[Frame]] = {}
    for frame in exchange.frames:
        out.setdefault(r._classify(sock, frame)[0], []).append(frame)
    return out or {sock.home: []}


def socket_sessions(exchange: Exchange, adapter: Adapter) -> list[str]:
    """The sessions whose messages a socket carries, in order of first frame."""
    if exchange.capability != "subscribe":
        return [exchange.session_id or DEFAULT_SESSION]
    return list(split_frames(exchange, adapter))


def _fields(fact: Fact) -> dict[str, Any]:
    from dataclasses import fields

    return {f.name: getattr(fact, f.name) for f in fields(fact)}


def _event_type(value: Any) -> str | None:
    if value is DONE:
        return "[DONE]"
    if isinstance(value, dict):
        for key in ("type", "event", "kind", "object"):
            v = value.get(key)
            if isinstance(v, str):
                return v
        result = value.get("result")
        if isinstance(result, dict):
            for key in ("kind", "type"):
                v = result.get(key)
                if isinstance(v, str):
                    return v
    return None


def understood_exchanges(rep: Replay) -> set[int]:
    """The matched exchanges the adapter made sense of: a stream with at least
    one event it decoded or knows (or a frame that is broken on the wire, a
    verdict in itself), a history it decoded, a request that failed at the
    HTTP level.  ``check`` has nothing to judge when this is empty (a wrong
    profile, an empty recording), never a pass."""
    out: set[int] = set()
    for index, rec in rep.exchanges.items():
        cap = rec.exchange.capability
        if cap is None:
            continue
        if cap == "history":
            if rec.history is not None and rec.history.result is not None:
                out.add(index)
            continue
        if cap in ("run", "regenerate", "edit", "resume", "subscribe") and rec.exchange.failed:
            out.add(index)
            continue
        for fr in rec.frames:
            if fr.state in (FrameState.OUTGOING, FrameState.EMPTY, FrameState.IGNORED, FrameState.UNROUTED):
                continue
            if fr.facts or fr.shadow or fr.end_marker or fr.state != _ADMITTED or not fr.unknown:
                out.add(index)
                break
    return out


def replay(
    exchanges: Iterable[Exchange],
    adapter: Adapter,
    *,
    capabilities: Iterable[str] | None = None,
    observe: Callable[[int, Exchange, Frame | None, Replayer], None] | None = None,
    only: Iterable[str] | None = None,
) -> Replay:
    """Replay ``exchanges`` (any order: they are sorted by time) through ``adapter``.

    ``capabilities`` are the Core's (from the route profile); by default the
    adapter's.  ``observe(kind, exchange, frame, replayer)`` is called after
    each event (kind 0: request start, 1: frame, 2: end of stream), e.g. to
    read the snapshot the UI had at that moment (the HTML report).
    ``only``: record only these sessions' frames of a socket several sessions
    share (a trace analysed one session at a time).
    """
    r = Replayer(adapter, capabilities, only=only)
    start, frame, frames, end = r.start, r.frame, r.frames, r.end
    with paused_gc():
        sequential = _one_after_another(exchanges) if observe is None else None
        if sequential is not None:
            # Each exchange's events in a row: no event list to build and sort.
            for ex in sequential:
                start(ex)
                frames(ex, ex.frames)
                end(ex)
            return r.finish()
        for _, _, kind, _, ex, fr in _events(exchanges):
            if kind == 1:
                frame(ex, fr)  # type: ignore[arg-type]
            elif kind == 0:
                start(ex)
            else:
                end(ex)
            if observe is not None:
                for s in r.out.sessions.values():
                    r.settle_live(s)
                observe(kind, ex, fr, r)
    return r.finish()


def _frame_time(frame: Frame, started: float) -> float:
    """When a frame counts in the replay's order: its arrival, never before its exchange started."""
    at = frame.at
    return (at if at > started else started) if at else started


def _events(exchanges: Iterable[Exchange]) -> list[tuple[float, int, int, int, Exchange, Frame | None]]:
    """Every exchange's start (kind 0), frames (1) and end (2) in replay order:
    ``(time, exchange, kind, frame)``.  The first four are unique, so the
    tuples sort without a key function and never compare the objects."""
    events: list[tuple[float, int, int, int, Exchange, Frame | None]] = []
    add = events.append
    for ex in exchanges:
        started, index = ex.started_at, ex.index
        add((started, index, 0, -1, ex, None))
        last = started
        for fr in ex.frames:
            t = _frame_time(fr, started)
            add((t, index, 1, fr.index, ex, fr))
            if t > last:
                last = t
        ended = ex.ended_at or last
        add((ended if ended > last else last, index, 2, 1 << 30, ex, None))
    events.sort()
    return events


def _one_after_another(exchanges: Iterable[Exchange]) -> list[Exchange] | None:
    """The exchanges in replay order when that order is simply one exchange
    after the other (each one's frames in order, each ending before the next
    starts: :func:`_events` would sort them so), else None."""
    exs = list(exchanges)
    exs.sort(key=replay_order)
    previous: tuple[float, int] | None = None
    for ex in exs:
        started, index = ex.started_at, ex.index
        if previous is not None and previous >= (started, index):
            return None
        last, last_frame = started, -1
        for fr in ex.frames:
            at = fr.at
            t = (at if at > started else started) if at else started
            if t < last or fr.index <= last_frame:
                return None
            last, last_frame = t, fr.index
        ended = ex.ended_at or last
        previous = (ended if ended > last else last, index)
    return exs
