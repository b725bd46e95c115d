"""``ChatCore``: chatkit's Core for one session, sans-IO (SPEC R1.3, R3, R8-R10, R13).

Facts come in through the twelve ingress members of SPEC R3.1 and return a
:class:`FactResult`; UI commands (send, abort, regenerate, edit, history,
resume) return a :class:`CommandResult` and queue *requests* for whoever
drives the Core (:meth:`ChatCore.take_requests`), who reports back with
:meth:`~ChatCore.dispatch_settled` and :meth:`~ChatCore.abort_settled`.
The Core itself never does I/O, never reads the clock unless no time is
given (``at=``), and never guesses: a terminal state comes only from a
terminal fact or from history (R3.4).

Runs are kept in conversation order (``snapshot.runs``, the default
regenerate target, what regenerate/edit cut): a refresh that returns the
whole conversation puts its runs first, in its order, and the runs it does
not name after them; a page (a refresh with older pages left, or an older
page) orders the runs it names among the runs the Core knows
(:meth:`ChatCore._merge_order`); a new run goes last.

Admission decides in this order (SPEC R3.6a, docs/decisions.md):

1. runtime disposed                                   -> ``runtime-disposed``
2. the fact names another session                     -> ``wrong-session``
3. an emitter fact without event id                   -> ``missing-event-id``
4. unknown run                                        -> ``run-not-found``
5. run already terminal                               -> ``terminal-sealed``
6. event id already admitted for this run             -> ``duplicate-event``
7. source sequence lower than the run's last one      -> ``source-sequence-regressed``
8. output (message, delta, work item) after the stop
   was acknowledged                                   -> ``output-sealed``
9. the fact's own checks: ``invalid-message`` (a message id of another
   run's message included), ``missing-work-item-id``, ``active-work`` (not
   once the stop was acknowledged: then the terminal ends the run),
   ``invalid-transition``
10. nothing would change                              -> ``no-change``
11. accepted: state changes, a new snapshot is published.

TypeScript names: ``ChatCore`` is ``ChatCoreRuntime``; ``emit_message`` is
``ingress.emitMessage`` and so on; ``take_requests`` stands for the calls the
TS runtime makes on its ``ChatRuntimeAdapter``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from ._errors import HistoryFormatError, InvalidMessageError
from ._facts import (
    ACCEPTED,
    CompletedFact,
    DeltaFact,
    FactResult,
    FailedFact,
    InterruptedFact,
    MessageFact,
    PhaseFact,
    WorkItemFact,
    rejected,
    to_run_error,
)
from ._facts import (
    FactRejectReason as R,
)
from ._model import (
    HistoryResult,
    ReasoningPart,
    RuntimeMessage,
    SessionInfo,
    TextPart,
    ToolCallPart,
    WorkItem,
    get_tool_call_status,
    history_from_json,
    message_from_json,
    work_item_from_json,
)
from ._pvec import PVec
from ._snapshot import AbortView, HistoryView, RunView, Snapshot
from ._state import (
    ABORT_TRANSITIONS,
    ALLOWED_IN,
    COMPLETED,
    CONNECTION_STATES,
    CORE_CAPABILITIES,
    FAILED,
    INTERRUPTED,
    PHASES,
    QUEUED,
    RUNNING,
    TERMINAL,
    WORK_STATUSES,
    WORK_TRANSITIONS,
    next_run_status,
)
from ._validate import check_history, check_message, coerce_tool_errors
from ._values import ABSENT, FrozenDict, freeze

__all__ = [
    "ChatCore",
    "CommandResult",
    "DispatchRequest",
    "AbortRequest",
    "ResumeRequest",
    "RuntimeEvent",
    "Capabilities",
    "CAPABILITY_NAMES",
]

CAPABILITY_NAMES = CORE_CAPABILITIES
Capabilities = frozenset[str]

_REJ_DISPOSED = rejected(R.RUNTIME_DISPOSED)
_REJ_SESSION = rejected(R.WRONG_SESSION)
_REJ_NO_EVENT = rejected(R.MISSING_EVENT_ID)
_REJ_NOT_FOUND = rejected(R.RUN_NOT_FOUND)
_REJ_SEALED = rejected(R.TERMINAL_SEALED)
_REJ_DUP = rejected(R.DUPLICATE_EVENT)
_REJ_SEQ = rejected(R.SOURCE_SEQUENCE_REGRESSED)
_REJ_OUTPUT = rejected(R.OUTPUT_SEALED)

#: The statuses in which the run state machine's table admits each output
#: fact (read from it once: an emitter's test is a set lookup).
_MESSAGE_OK, _DELTA_OK, _PHASE_OK, _WORK_ITEM_OK = (ALLOWED_IN[e] for e in ("message", "delta", "phase", "work-item"))
#: A fact the table refuses in the run's status: the rejection's words, per event.
_REFUSALS = {
    "message": "run is {}",
    "delta": "run is {}",
    "phase": "phase on a {} run",
    "work-item": "work item on a {} run",
    COMPLETED: "completed on a {} run",
    FAILED: "failed on a {} run",
    INTERRUPTED: "interrupted on a {} run",
}


def _refused(run: _Run, event: str) -> FactResult:
    """``invalid-transition``: the table has no ``(status, event)`` for the run."""
    return rejected(R.INVALID_TRANSITION, _REFUSALS[event].format(run.view.status))
_REJ_NO_CHANGE = rejected(R.NO_CHANGE)


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What a UI command did: ``ok``, or not with one sentence saying why.

    A rejected history batch has ``reason='invalid-message'`` and the rule.
    """

    ok: bool
    error: str | None = None
    reason: str | None = None
    rule: str | None = None

    def __bool__(self) -> bool:
        return self.ok


_DONE = CommandResult(True)


def _refuse(error: str, reason: str | None = None, rule: str | None = None) -> CommandResult:
    return CommandResult(False, error, reason, rule)


@dataclass(frozen=True, slots=True)
class DispatchRequest:
    """Call the adapter's run / regenerate / edit (``via``) for ``run_id``."""

    run_id: str
    via: str
    input: Any
    messages: tuple[RuntimeMessage, ...]
    target_run_id: str | None = None


@dataclass(frozen=True, slots=True)
class AbortRequest:
    run_id: str


@dataclass(frozen=True, slots=True)
class ResumeRequest:
    run_id: str
    event_id: str


@dataclass(frozen=True, slots=True)
class RuntimeEvent:
    """chatkit's runtime events (``run_settled``, ``tool_call_settled``);
    ``attributes`` carry the run's annotations (R3.3)."""

    type: str
    run_id: str
    attributes: FrozenDict
    payload: FrozenDict


class _Tail:
    """Deltas to one text part not yet written into the message list.

    A streaming answer is one delta after another to the same part.  Writing
    each into the persistent message list costs a new part, a new message and
    a copied block per delta, and nobody reads the versions in between unless
    a snapshot is taken.  So consecutive accepted deltas to one part are only
    collected here, and the part (``_TextLike.extend``: what appending each
    delta would give), its message and the list are written when anything
    reads the message list (:attr:`ChatCore._messages`).  What is read is the
    same as if every delta had been written at once (issue 18).
    """

    __slots__ = ("pos", "msg", "i", "message_id", "part_id", "part", "chunks")

    def __init__(self, pos: int, msg: RuntimeMessage, i: int, part: Any, delta: str) -> None:
        self.pos = pos  #: the message's position in the list
        self.msg = msg  #: the message as the list holds it (its part ``i`` is ``part``)
        self.i = i
        self.message_id = msg.id
        self.part_id = part.id
        self.part = part
        self.chunks = [delta]

    def written(self, messages: PVec[RuntimeMessage]) -> PVec[RuntimeMessage]:
        """``messages`` with the part's text as the deltas left it."""
        parts = self.msg.parts
        i = self.i
        return messages.set(self.pos, self.msg.with_parts(parts[:i] + (self.part.extend(self.chunks),) + parts[i + 1 :]))


class _Run:
    """Mutable bookkeeping behind one published :class:`RunView`."""

    __slots__ = (
        "view",
        "seen",
        "last_seq",
        "sealed",
        "output_sealed",
        "attributes",
        "message_ids",
        "project",
        "cancelled",
    )

    def __init__(self, view: RunView, project: tuple[RuntimeMessage, ...] = ()) -> None:
        self.view = view
        self.seen: set[str] = set()
        self.last_seq: float | None = None
        self.sealed = view.terminal
        self.output_sealed = False
        self.attributes: dict[str, Any] = {}
        self.message_ids: set[str] = set()
        self.project = project
        #: A send cancelled while queued: it never reached the backend, so it
        #: is no conversation turn (no default regenerate target, R10.2).
        self.cancelled = False


_FLAT = (str, int, float, bool, type(None))


class ChatCore:
    """chatkit's Core for one session: admission, run state machine, snapshots.

    :param session_id: the session this runtime serves (facts naming another
        one are ``wrong-session``, R10.1).
    :param capabilities: names of the adapter's capability functions
        (``run`` is implied), e.g. ``{"abort", "history", "resume"}``.
    :param on_invalid_message: receives every :class:`InvalidMessageError`
        (R3.7); the default keeps them in :attr:`invalid_messages`.
    :param clock: milliseconds "now" for commands and facts given no ``at``.
    """

    def __init__(
        self,
        session_id: str,
        *,
        capabilities: Iterable[str] = ("run",),
        on_invalid_message: Callable[[InvalidMessageError], None] | None = None,
        on_event: Callable[[RuntimeEvent], None] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.session_id = session_id
        self.capabilities: frozenset[str] = frozenset(capabilities) | {"run"}
        self.invalid_messages: list[InvalidMessageError] = []
        self._on_invalid = on_invalid_message
        self._on_event = on_event
        self._clock = clock or (lambda: time.time() * 1000.0)
        self._list: PVec[RuntimeMessage] = PVec()
        #: consecutive deltas to one part, not yet in ``_list`` (:class:`_Tail`)
        self._tail: _Tail | None = None
        self._index: dict[str, int] = {}
        self._runs: dict[str, _Run] = {}
        self._run_views: tuple[RunView, ...] | None = ()
        self._queue: list[str] = []
        self._requests: list[DispatchRequest | AbortRequest | ResumeRequest] = []
        self._session_info: SessionInfo | None = None
        self._history = HistoryView()
        self._disposed = False
        self._version = 0
        self._snapshot: Snapshot | None = None
        self._listeners: list[Callable[[Snapshot], None]] = []
        #: What a regenerate/edit removed, to put back unchanged when the
        #: adapter refuses it (R10.2): the message order before the cut, the
        #: removed messages and the removed runs (in conversation order).
        self._removed: dict[str, tuple[tuple[str, ...], tuple[RuntimeMessage, ...], dict[str, _Run]]] = {}
        #: Tool-call parts of messages a display-only update changed, as the
        #: facts (or history) left them: execution state (active-work, tool
        #: settlements) reads these, never the displayed copy (decisions.md 99).
        self._exec_tools: dict[str, tuple[Any, ...]] = {}

    # ------------------------------------------------------------------ reading

    @property
    def _messages(self) -> PVec[RuntimeMessage]:
        """The message list, with the pending deltas (:class:`_Tail`) written."""
        tail = self._tail
        if tail is not None:
            self._tail = None
            self._list = tail.written(self._list)
        return self._list

    @_messages.setter
    def _messages(self, messages: PVec[RuntimeMessage]) -> None:
        self._tail = None  # the new list was made from a read of the old one, which wrote them
        self._list = messages

    @property
    def snapshot(self) -> Snapshot:
        """The current snapshot (immutable; later facts publish new ones)."""
        snap = self._snapshot
        if snap is None:
            views = self._run_views
            if views is None:
                views = self._run_views = tuple(r.view for r in self._runs.values())
            snap = self._snapshot = Snapshot(
                self.session_id,
                self._version,
                self._messages,
                views,
                self._session_info,
                self._history,
                self._disposed,
            )
        return snap

    @property
    def version(self) -> int:
        """The current snapshot's version, without building the snapshot."""
        return self._version

    @property
    def disposed(self) -> bool:
        return self._disposed

    def subscribe(self, listener: Callable[[Snapshot], None]) -> Callable[[], None]:
        """Call ``listener`` with every new snapshot; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def run_view(self, run_id: str) -> RunView | None:
        run = self._runs.get(run_id)
        return run.view if run is not None else None

    def run_attributes(self, run_id: str) -> dict[str, Any]:
        run = self._runs.get(run_id)
        return dict(run.attributes) if run is not None else {}

    def take_requests(self) -> list[DispatchRequest | AbortRequest | ResumeRequest]:
        """The adapter calls the Core wants made, oldest first (and forget them)."""
        out, self._requests = self._requests, []
        return out

    # ------------------------------------------------------------------ internals

    def _now(self, at: float | None) -> float:
        return self._clock() if at is None else at

    def _publish(self) -> None:
        self._version += 1
        self._snapshot = None
        if self._listeners:
            snap = self.snapshot
            for listener in tuple(self._listeners):
                listener(snap)

    def _set_view(self, run: _Run, view: RunView) -> None:
        run.view = view
        self._run_views = None

    def _invalid(self, err: InvalidMessageError) -> None:
        self.invalid_messages.append(err)
        if self._on_invalid is not None:
            self._on_invalid(err)

    def _emit_event(self, type_: str, run: _Run, **payload: Any) -> None:
        if self._on_event is not None:
            self._on_event(
                RuntimeEvent(type_, run.view.id, FrozenDict(run.attributes), FrozenDict(freeze(payload)))
            )

    def _gate(self, session_id: str | None, run_id: str, event_id: str | None) -> _Run | FactResult:
        """Steps 1-7 of admission, shared by every emitter."""
        if self._disposed:
            return _REJ_DISPOSED
        if session_id is not None and session_id != self.session_id:
            return _REJ_SESSION
        if not event_id or not isinstance(event_id, str):
            return _REJ_NO_EVENT
        run = self._runs.get(run_id)
        if run is None:
            return _REJ_NOT_FOUND
        if run.sealed:
            return _REJ_SEALED
        if event_id in run.seen:
            return _REJ_DUP
        return run

    def _sequence_ok(self, run: _Run, seq: Any) -> bool:
        if seq is None:
            return True
        last = run.last_seq
        return last is None or not seq < last

    def _admitted(self, run: _Run, event_id: str, seq: Any) -> None:
        run.seen.add(event_id)
        if seq is not None:
            run.last_seq = seq

    def _put_message(self, msg: RuntimeMessage) -> None:
        pos = self._index.get(msg.id)
        if pos is None:
            self._index[msg.id] = len(self._messages)
            self._messages = self._messages.append(msg)
        else:
            self._messages = self._messages.set(pos, msg)

    def _rebuild_index(self) -> None:
        self._index = {m.id: i for i, m in enumerate(self._messages)}

    def _new_run(self, view: RunView, project: tuple[RuntimeMessage, ...] = ()) -> _Run:
        run = _Run(view, project)
        self._runs[view.id] = run
        self._run_views = None
        return run

    @staticmethod
    def _foreign(run: _Run, msg: RuntimeMessage) -> str | None:
        """Why ``run`` may not write into ``msg``, a message that is not its
        own (``None``: it may).  Message ids are unique in the session (seed
        000 §4.1 "消息 id 在会话内唯一"): a message of another run is that run's,
        and a message of no run (a history message without ``runId``, a
        host's insert) is no new run's either.  Only a resumed run continues
        history's answer (§8 "适配器要保证续接回来的内容接在历史里已有的那条回答后面：
        消息 id、part id 沿用历史里的"): an assistant message of no run
        (decisions.md 270)."""
        if msg.run_id is not None:
            return f"id belongs to run {msg.run_id!r}"
        if run.view.via == "resume" and msg.role == "assistant":
            return None
        if msg.role != "assistant":
            return f"id belongs to a {msg.role} message of no run (only a resumed run continues history's answer)"
        return "id belongs to a message of no run (only a resumed run continues history's answer)"

    def _running_run(self) -> _Run | None:
        for run in self._runs.values():
            if run.view.status == RUNNING:
                return run
        return None

    # ------------------------------------------------------------------ ingress: emitters

    def emit_message(
        self,
        *,
        run_id: str,
        event_id: str | None,
        message: RuntimeMessage | Mapping[str, Any],
        session_id: str | None = None,
        source_sequence: int | float | None = None,
        position: Any = None,
        at: float | None = None,
    ) -> FactResult:
        """Create or replace a whole message (R2.4 ``message``)."""
        return self._message(run_id, event_id, message, session_id, source_sequence)

    def _message(
        self,
        run_id: str,
        event_id: str | None,
        message: RuntimeMessage | Mapping[str, Any],
        session_id: str | None,
        source_sequence: int | float | None,
    ) -> FactResult:
        """:meth:`emit_message` with positional arguments (``admit``'s hot path)."""
        run = self._gate(session_id, run_id, event_id)
        if type(run) is FactResult:
            return run
        assert isinstance(run, _Run)
        if source_sequence is not None and run.last_seq is not None and source_sequence < run.last_seq:
            return _REJ_SEQ
        if run.output_sealed:
            return _REJ_OUTPUT
        if not isinstance(message, RuntimeMessage):
            try:
                message = message_from_json(message, "live")
            except InvalidMessageError as exc:
                self._invalid(exc)
                return rejected(R.INVALID_MESSAGE, exc.rule)
        msg = coerce_tool_errors(message.with_run_id(run_id))  # R13.2, R5.3
        pos = self._index.get(msg.id) if type(msg.id) is str else None
        old = self._messages[pos] if pos is not None else None
        err = check_message(msg, "live", old)
        if err is None and old is not None and old.run_id != run_id:
            # Message ids are unique in the session (seed 000 §4.1): an id of
            # another run's message rejects the whole message (decisions.md
            # 97), and so does the id of a message of no run (history's, a
            # host's) unless a resumed run continues history's answer (§8;
            # decisions.md 270).
            why = self._foreign(run, old)
            if why is not None:
                err = InvalidMessageError("message-id-unique", msg.id, None, "live", why)
        if err is not None:
            self._invalid(err)
            return rejected(R.INVALID_MESSAGE, err.rule)
        if run.view.status not in _MESSAGE_OK:
            return _refused(run, "message")
        if old is not None:
            if old == msg:
                return _REJ_NO_CHANGE
            self._messages = self._messages.set(cast(int, pos), msg)  # old is not None: pos is its index
            shown = self._exec_tools.pop(msg.id, None)
            self._tool_settlements(run, old.parts if shown is None else shown, msg)
        else:
            self._index[msg.id] = len(self._messages)
            self._messages = self._messages.append(msg)
        run.message_ids.add(msg.id)
        self._admitted(run, event_id, source_sequence)  # type: ignore[arg-type]
        self._publish()
        return ACCEPTED

    def _tool_settlements(self, run: _Run, old_parts: Sequence[Any], new: RuntimeMessage) -> None:
        if self._on_event is None:
            return
        before = {p.tool_call_id: get_tool_call_status(p) for p in old_parts if isinstance(p, ToolCallPart)}
        for p in new.parts:
            if isinstance(p, ToolCallPart):
                status = get_tool_call_status(p)
                if before.get(p.tool_call_id) == "running" and status != "running":
                    self._emit_event("tool_call_settled", run, toolCallId=p.tool_call_id, status=status)

    def emit_delta(
        self,
        *,
        run_id: str,
        event_id: str | None,
        message_id: str,
        part_id: str,
        delta: str,
        session_id: str | None = None,
        source_sequence: int | float | None = None,
        position: Any = None,
        at: float | None = None,
    ) -> FactResult:
        """Append text to an existing text or reasoning part (R2.4 ``delta``): O(1)."""
        return self._delta(run_id, event_id, message_id, part_id, delta, session_id, source_sequence)

    def _delta(
        self,
        run_id: str,
        event_id: str | None,
        message_id: str,
        part_id: str,
        delta: str,
        session_id: str | None,
        source_sequence: int | float | None,
    ) -> FactResult:
        """:meth:`emit_delta` with positional arguments (``admit``'s hot path)."""
        # long-function: the delta rule (R2.4) with its rejections in the rule's order, read against docs/rules.md
        # The hot path: the gate is inlined.
        if self._disposed:
            return _REJ_DISPOSED
        if session_id is not None and session_id != self.session_id:
            return _REJ_SESSION
        if not event_id or type(event_id) is not str:
            return _REJ_NO_EVENT
        run = self._runs.get(run_id)
        if run is None:
            return _REJ_NOT_FOUND
        if run.sealed:
            return _REJ_SEALED
        if event_id in run.seen:
            return _REJ_DUP
        if source_sequence is not None and run.last_seq is not None and source_sequence < run.last_seq:
            return _REJ_SEQ
        if run.output_sealed:
            return _REJ_OUTPUT
        if run.view.status not in _DELTA_OK:
            return _refused(run, "delta")
        tail = self._tail
        if tail is not None and (tail.part_id != part_id or tail.message_id != message_id):
            tail = None  # another part: looked up (the read below writes the pending deltas)
        if tail is not None:
            # The part the last delta went to: the message and its part are the
            # ones looked up then (nothing changed them without writing the tail).
            msg = tail.msg
        else:
            pos = self._index.get(message_id, -1)
            if pos < 0:
                return rejected(R.INVALID_TRANSITION, f"delta to missing message {message_id!r}")
            msg = self._messages.get(pos)  # the index holds valid positions only
        if msg.run_id != run_id:
            why = self._foreign(run, msg)
            if why is not None:
                return rejected(R.INVALID_TRANSITION, f"delta to message {message_id!r}: {why}")
        if tail is None:
            parts = msg.parts
            i = len(parts) - 1
            while i >= 0 and parts[i].id != part_id:
                i -= 1
            if i < 0:
                return rejected(R.INVALID_TRANSITION, f"delta to missing part {part_id!r} of {message_id!r}")
            part = parts[i]
            if type(part) is not TextPart and type(part) is not ReasoningPart:
                return rejected(R.INVALID_TRANSITION, f"delta to a {part.type} part {part_id!r}")
        if type(delta) is not str:
            return rejected(R.INVALID_TRANSITION, "delta must be a string")
        if not delta:
            return _REJ_NO_CHANGE
        if tail is not None:
            tail.chunks.append(delta)
        else:
            self._tail = _Tail(pos, msg, i, part, delta)
        run.seen.add(event_id)
        if source_sequence is not None:
            run.last_seq = source_sequence
        self._version += 1
        self._snapshot = None
        if self._listeners:
            self._publish_listeners()
        return ACCEPTED

    def _publish_listeners(self) -> None:
        snap = self.snapshot
        for listener in tuple(self._listeners):
            listener(snap)

    def emit_phase(
        self,
        *,
        run_id: str,
        event_id: str | None,
        phase: str,
        session_id: str | None = None,
        source_sequence: int | float | None = None,
        position: Any = None,
        at: float | None = None,
    ) -> FactResult:
        """The backend's current phase (R2.4 ``phase``, R3.2a)."""
        run = self._gate(session_id, run_id, event_id)
        if type(run) is FactResult:
            return run
        assert isinstance(run, _Run)
        if not self._sequence_ok(run, source_sequence):
            return _REJ_SEQ
        if phase not in PHASES:
            return rejected(R.INVALID_TRANSITION, f"unknown phase {phase!r}")
        if run.view.status not in _PHASE_OK:
            return _refused(run, "phase")
        if run.view.phase == phase:
            return _REJ_NO_CHANGE
        self._set_view(run, replace(run.view, phase=phase))
        self._admitted(run, event_id, source_sequence)  # type: ignore[arg-type]
        self._publish()
        return ACCEPTED

    def emit_work_item(
        self,
        *,
        run_id: str,
        event_id: str | None,
        work_item: WorkItem | Mapping[str, Any],
        session_id: str | None = None,
        source_sequence: int | float | None = None,
        position: Any = None,
        at: float | None = None,
    ) -> FactResult:
        """Create or update a tracked work item, e.g. a tool call (R3.2a)."""
        run = self._gate(session_id, run_id, event_id)
        if type(run) is FactResult:
            return run
        assert isinstance(run, _Run)
        if not self._sequence_ok(run, source_sequence):
            return _REJ_SEQ
        if run.output_sealed:
            return _REJ_OUTPUT
        item = work_item if isinstance(work_item, WorkItem) else work_item_from_json(work_item)
        if not isinstance(item.id, str) or not item.id:
            return rejected(R.MISSING_WORK_ITEM_ID)
        if item.status not in WORK_STATUSES:
            return rejected(R.INVALID_TRANSITION, f"unknown work item status {item.status!r}")
        if run.view.status not in _WORK_ITEM_OK:
            return _refused(run, "work-item")
        old = run.view.work_items.get(item.id)
        if old is not None:
            if old == item:
                return _REJ_NO_CHANGE
            if (old.status, item.status) not in WORK_TRANSITIONS:
                return rejected(
                    R.INVALID_TRANSITION, f"work item {item.id!r} cannot go {old.status} -> {item.status}"
                )
        items = dict(run.view.work_items)
        items[item.id] = item
        self._set_view(run, replace(run.view, work_items=FrozenDict(items)))
        self._admitted(run, event_id, source_sequence)  # type: ignore[arg-type]
        self._publish()
        if item.status != "running" and (old is None or old.status == "running"):
            self._emit_event("tool_call_settled", run, toolCallId=item.id, status=item.status)
        return ACCEPTED

    def _running_work(self, run: _Run) -> str | None:
        for wid, item in run.view.work_items.items():
            if item.status == "running":
                return cast(str, wid)
        for mid in run.message_ids:
            parts = self._exec_tools.get(mid)  # what the facts said, not a display update
            if parts is None:
                pos = self._index.get(mid)
                if pos is None:
                    continue
                parts = self._messages[pos].parts
            for p in parts:
                if type(p) is ToolCallPart and get_tool_call_status(p) == "running":
                    return p.tool_call_id
        return None

    def _terminal(
        self,
        event: str,
        session_id: str | None,
        run_id: str,
        event_id: str | None,
        seq: Any,
        at: float | None,
        *,
        error: Any = None,
        reason: str | None = None,
    ) -> FactResult:
        """The one terminal gate (R3.4, R3.5): admission, the run state
        machine's table, then the run settled as ``event`` says."""
        run = self._gate(session_id, run_id, event_id)
        if type(run) is FactResult:
            return run
        assert isinstance(run, _Run)
        if not self._sequence_ok(run, seq):
            return _REJ_SEQ
        if run.view.status not in ALLOWED_IN[event]:
            return _refused(run, event)
        if event == COMPLETED:
            # After an acknowledged stop the tool's own settlement is output and
            # cannot be admitted (output-sealed), so running work cannot block the
            # terminal: the terminal event ends the run (seed 000 §9, §12;
            # decisions.md 101).  Work still running is cancelled, as on any stop.
            if not run.output_sealed:
                busy = self._running_work(run)
                if busy is not None:
                    return rejected(R.ACTIVE_WORK, f"tool call {busy!r} is still running")
            self._settle(run, COMPLETED, at=at, cancel_work=run.output_sealed)
        elif event == FAILED:
            self._settle(run, FAILED, error=to_run_error(error), at=at)
        else:
            why = reason or ("abort" if run.view.abort is not None else "protocol")
            self._settle(run, INTERRUPTED, interrupt_reason=why, at=at)
        self._admitted(run, event_id, seq)  # type: ignore[arg-type]
        self._after_settle(run)
        return ACCEPTED

    def emit_completed(
        self,
        *,
        run_id: str,
        event_id: str | None,
        session_id: str | None = None,
        source_sequence: int | float | None = None,
        position: Any = None,
        at: float | None = None,
    ) -> FactResult:
        """The backend explicitly concluded the run (R2.4, R3.4)."""
        return self._terminal(COMPLETED, session_id, run_id, event_id, source_sequence, at)

    def emit_failed(
        self,
        *,
        run_id: str,
        event_id: str | None,
        error: Any,
        session_id: str | None = None,
        source_sequence: int | float | None = None,
        position: Any = None,
        at: float | None = None,
    ) -> FactResult:
        """The backend explicitly failed the run; ``error`` goes through
        :func:`to_run_error` (R5.3)."""
        return self._terminal(FAILED, session_id, run_id, event_id, source_sequence, at, error=error)

    def emit_interrupted(
        self,
        *,
        run_id: str,
        event_id: str | None,
        reason: str | None = None,
        session_id: str | None = None,
        source_sequence: int | float | None = None,
        position: Any = None,
        at: float | None = None,
    ) -> FactResult:
        """The backend explicitly interrupted the run (R2.4)."""
        return self._terminal(INTERRUPTED, session_id, run_id, event_id, source_sequence, at, reason=reason)

    def _settle(
        self,
        run: _Run,
        status: str,
        *,
        error: Any = None,
        interrupt_reason: str | None = None,
        at: float | None = None,
        event: str | None = None,
        cancel_work: bool = False,
    ) -> None:
        view = run.view
        new_status = next_run_status(view.status, event or status)
        if new_status != status:  # an internal invariant, checked under -O too
            raise RuntimeError(f"run status {view.status!r} cannot settle as {status!r}")
        items = view.work_items
        if (status != "completed" or cancel_work) and any(i.status == "running" for i in items.values()):
            items = FrozenDict(
                {k: (replace(v, status="cancelled") if v.status == "running" else v) for k, v in items.items()}
            )
        abort = view.abort
        if abort is not None:
            abort = replace(abort, remote=ABORT_TRANSITIONS[(abort.remote, "terminal")])
        self._set_view(
            run,
            replace(
                view,
                status=status,
                phase="idle",
                error=error,
                interrupt_reason=interrupt_reason,
                abort=abort,
                work_items=items,
                settled_at=self._now(at),
            ),
        )
        run.sealed = True

    def _after_settle(self, run: _Run) -> None:
        if "history" in self.capabilities:
            self._history = replace(self._history, reconciliation_required=True)
        self._publish()
        view = run.view
        self._emit_event(
            "run_settled",
            run,
            status=view.status,
            **({"error": view.error.to_json()} if view.error is not None else {}),
        )
        self._dispatch_next()

    # ------------------------------------------------------------------ ingress: the other five

    def annotate_run(
        self, *, run_id: str, attributes: Mapping[str, Any], session_id: str | None = None
    ) -> FactResult:
        """Attributes for the run's later events (R3.3); not deduplicated, never in snapshots."""
        if self._disposed:
            return _REJ_DISPOSED
        if session_id is not None and session_id != self.session_id:
            return _REJ_SESSION
        run = self._runs.get(run_id)
        if run is None:
            return _REJ_NOT_FOUND
        for key, value in attributes.items():
            if not isinstance(key, str) or not isinstance(value, _FLAT):
                raise TypeError(f"annotate_run: attribute {key!r} must be a flat primitive (R3.3)")
        run.attributes.update(attributes)
        return ACCEPTED

    def calibrate_run(
        self,
        *,
        run_id: str,
        status: str,
        error: Any = None,
        interrupt_reason: str | None = None,
        session_id: str | None = None,
        at: float | None = None,
    ) -> FactResult:
        """Settle a run from history, e.g. a confirmed remote stop (R3.1, R9.4)."""
        if self._disposed:
            return _REJ_DISPOSED
        if session_id is not None and session_id != self.session_id:
            return _REJ_SESSION
        run = self._runs.get(run_id)
        if run is None:
            return _REJ_NOT_FOUND
        if status not in TERMINAL:
            return rejected(R.INVALID_TRANSITION, f"cannot calibrate to {status!r}")
        if run.sealed:
            if run.view.status == status:
                return _REJ_NO_CHANGE
            return rejected(R.INVALID_TRANSITION, f"run is already {run.view.status}")
        if next_run_status(run.view.status, f"calibrate-{status}") is None:
            return rejected(R.INVALID_TRANSITION, f"cannot calibrate a {run.view.status} run")
        self._settle(
            run,
            status,
            error=to_run_error(error) if status == "failed" else None,
            interrupt_reason=(interrupt_reason or "protocol") if status == "interrupted" else None,
            at=at,
            event=f"calibrate-{status}",
        )
        self._after_settle(run)
        return ACCEPTED

    def register_run(
        self, *, run_id: str, session_id: str | None = None, at: float | None = None, resume: bool = False
    ) -> FactResult:
        """A run the page did not start (passive run, R2.6, R11.2).

        ``resume=True`` registers it as resumed (``via`` ``resume``, R8.3):
        a replay of recorded traffic in which the client resumed a run it did
        not know, what :meth:`resume_active_run` starts in chatkit.  A resumed
        run may continue history's answer (decisions.md 270)."""
        if self._disposed:
            return _REJ_DISPOSED
        if session_id is not None and session_id != self.session_id:
            return _REJ_SESSION
        if not isinstance(run_id, str) or not run_id:
            return rejected(R.INVALID_TRANSITION, "a run id is required")
        run = self._runs.get(run_id)
        if run is not None:
            return _REJ_SEALED if run.sealed else _REJ_NO_CHANGE
        active = self._history.active_run
        resumed_from = (
            active.event_id
            if resume and active is not ABSENT and active is not None and active.run_id == run_id
            else None
        )
        self._new_run(
            RunView(
                run_id,
                RUNNING,
                origin="remote",
                connection="connected",
                created_at=self._now(at),
                via="resume" if resume else None,
                resumed_from=resumed_from,
            )
        )
        if resume:  # as resume_active_run: the run's messages history holds are its own
            self._runs[run_id].message_ids = {m.id for m in self._messages if m.run_id == run_id}
        self._publish()
        return ACCEPTED

    def update_content(
        self, *, message: RuntimeMessage | Mapping[str, Any], session_id: str | None = None
    ) -> FactResult:
        """Display-only content (transformOutput, host rewrites); never execution state."""
        if self._disposed:
            return _REJ_DISPOSED
        if session_id is not None and session_id != self.session_id:
            return _REJ_SESSION
        if not isinstance(message, RuntimeMessage):
            try:
                message = message_from_json(message, "content")
            except InvalidMessageError as exc:
                self._invalid(exc)
                return rejected(R.INVALID_MESSAGE, exc.rule)
        pos = self._index.get(message.id) if isinstance(message.id, str) else None
        if pos is not None:
            message = message.with_run_id(self._messages[pos].run_id)
        message = coerce_tool_errors(message)
        err = check_message(message, "content")
        if err is not None:
            self._invalid(err)
            return rejected(R.INVALID_MESSAGE, err.rule)
        if pos is None:
            rid = message.run_id
            # Display-only: it may add a message to the conversation (a host
            # rewrite), never to a run the Core does not know (decisions.md 99).
            if rid is not None and rid not in self._runs and not any(m.run_id == rid for m in self._messages):
                return rejected(R.RUN_NOT_FOUND, f"message {message.id!r} names unknown run {rid!r}")
            self._exec_tools[message.id] = ()
        else:
            old = self._messages[pos]
            if old == message:
                return _REJ_NO_CHANGE
            # Execution state (tool status, R6.3 -> active-work) stays what the
            # facts said: "updateContent 只更新展示数据，不写执行状态".
            self._exec_tools.setdefault(message.id, old.parts)
        self._put_message(message)
        self._publish()
        return ACCEPTED

    def observe_connection(
        self, *, run_id: str, state: str, session_id: str | None = None, at: float | None = None
    ) -> FactResult:
        """The connection carrying a run (R3.4): never changes the run's status."""
        if self._disposed:
            return _REJ_DISPOSED
        if session_id is not None and session_id != self.session_id:
            return _REJ_SESSION
        run = self._runs.get(run_id)
        if run is None:
            return _REJ_NOT_FOUND
        if state not in CONNECTION_STATES:
            return rejected(R.INVALID_TRANSITION, f"unknown connection state {state!r}")
        if run.view.connection == state:
            return _REJ_NO_CHANGE
        self._set_view(run, replace(run.view, connection=state))
        self._publish()
        return ACCEPTED

    _ADMIT = {
        MessageFact: "emit_message",
        DeltaFact: "emit_delta",
        PhaseFact: "emit_phase",
        WorkItemFact: "emit_work_item",
        CompletedFact: "emit_completed",
        FailedFact: "emit_failed",
        InterruptedFact: "emit_interrupted",
    }

    def admit(self, fact: Any) -> FactResult:
        """Admit a fact value (:mod:`._facts`) through its emitter."""
        kind = type(fact)
        if kind is DeltaFact:
            return self._delta(
                fact.run_id, fact.event_id, fact.message_id, fact.part_id, fact.delta, fact.session_id, fact.source_sequence
            )
        if kind is MessageFact:
            return self._message(fact.run_id, fact.event_id, fact.message, fact.session_id, fact.source_sequence)
        common = fact.common()
        if kind is PhaseFact:
            return self.emit_phase(phase=fact.phase, **common)
        if kind is WorkItemFact:
            return self.emit_work_item(work_item=fact.work_item, **common)
        if kind is CompletedFact:
            return self.emit_completed(**common)
        if kind is FailedFact:
            return self.emit_failed(error=fact.error, **common)
        if kind is InterruptedFact:
            return self.emit_interrupted(reason=fact.reason, **common)
        raise TypeError(f"not a fact: {fact!r}")

    # ------------------------------------------------------------------ commands

    def send(
        self,
        run_id: str,
        input: Any,
        *,
        project: Sequence[RuntimeMessage | Mapping[str, Any]] | None = None,
        at: float | None = None,
    ) -> CommandResult:
        """The UI sends: a local run is queued and dispatched when the session's
        execution slot is free (R13.4); ``project`` is the adapter's projection
        of the input, made visible at dispatch (R4.5)."""
        if self._disposed:
            return _refuse("the runtime is disposed")
        if not isinstance(run_id, str) or not run_id:
            return _refuse("a run id is required")
        if run_id in self._runs:
            return _refuse(f"run {run_id!r} already exists")
        projected = self._projection(run_id, project)
        self._new_run(
            RunView(run_id, QUEUED, origin="local", created_at=self._now(at), via="run", input=freeze(input)),
            projected,
        )
        self._queue.append(run_id)
        self._dispatch_next(at)
        self._publish()
        return _DONE

    def _projection(
        self, run_id: str, project: Sequence[RuntimeMessage | Mapping[str, Any]] | None
    ) -> tuple[RuntimeMessage, ...]:
        out: list[RuntimeMessage] = []
        for item in project or ():
            try:
                msg = item if isinstance(item, RuntimeMessage) else message_from_json(item, "projection")
            except InvalidMessageError as exc:
                self._invalid(exc.with_source("projection"))
                continue
            msg = coerce_tool_errors(msg.with_run_id(run_id))
            err = check_message(msg, "projection")
            if err is not None:
                self._invalid(err)
                continue
            out.append(msg)
        return tuple(out)

    def _dispatch_next(self, at: float | None = None, force: bool = False) -> None:
        if not force and self._running_run() is not None:
            return
        while self._queue:
            run_id = self._queue.pop(0)
            run = self._runs.get(run_id)
            if run is None or run.view.status not in ALLOWED_IN["dispatch"]:
                continue
            before = tuple(self._messages)
            for msg in run.project:
                pos = self._index.get(msg.id)
                if pos is not None and self._messages[pos].run_id not in (None, run_id):
                    self._invalid(
                        InvalidMessageError(
                            "message-id-unique", msg.id, None, "projection", "id belongs to another run"
                        )
                    )
                    continue
                self._put_message(msg)
                run.message_ids.add(msg.id)
            view = run.view
            self._set_view(
                run,
                replace(view, status=cast(str, next_run_status(view.status, "dispatch")), dispatch="pending", connection="connected"),
            )
            self._requests.append(
                DispatchRequest(run_id, view.via or "run", view.input, before, view.target_run_id)
            )
            return

    def force_dispatch(self, run_id: str, *, at: float | None = None) -> CommandResult:
        """Dispatch a queued run although the session's slot is taken.

        chatkit never does this (R13.4); it exists for replaying recordings in
        which a client *did* send while another run was still active (the
        recording is the truth about what was sent).  Returns an error for a
        run that is not queued.
        """
        run = self._runs.get(run_id)
        if run is None or run.view.status not in ALLOWED_IN["dispatch"]:
            return _refuse(f"run {run_id!r} is not queued")
        self._queue.remove(run_id)
        self._queue.insert(0, run_id)
        self._dispatch_next(at, force=True)
        self._publish()
        return _DONE

    def dispatch_settled(self, run_id: str, accepted: bool, error: str | None = None) -> CommandResult:
        """The adapter's run/regenerate/edit resolved (``True``) or refused / threw.

        Refusal removes the run and its projection and, for regenerate/edit,
        puts the removed content back unchanged (R10.2, decisions.md).
        """
        run = self._runs.get(run_id)
        if run is None or run.view.dispatch != "pending":
            return _refuse(f"run {run_id!r} has no dispatch in flight")
        if accepted:
            self._removed.pop(run_id, None)
            self._set_view(run, replace(run.view, dispatch="accepted"))
            self._publish()
            return _DONE
        del self._runs[run_id]
        self._run_views = None
        if not run.sealed:
            keep = [m for m in self._messages if m.id not in run.message_ids]
            self._messages = PVec(keep)
        restored = self._removed.pop(run_id, None)
        if restored is not None:
            self._restore(*restored)
        self._rebuild_index()
        self._dispatch_next()
        self._publish()
        return _DONE

    def abort(self, run_id: str, *, at: float | None = None) -> CommandResult:
        """The UI asks to stop (R9): a queued run is cancelled locally; a
        running one needs the abort capability (R9.2) and keeps receiving
        until a terminal fact or history settles it (R9.1)."""
        if self._disposed:
            return _refuse("the runtime is disposed")
        run = self._runs.get(run_id)
        if run is None:
            return _refuse(f"unknown run {run_id!r}")
        view = run.view
        if view.status in ALLOWED_IN["cancel"]:
            if run_id in self._queue:
                self._queue.remove(run_id)
            self._set_view(
                run,
                replace(
                    view,
                    status=cast(str, next_run_status(view.status, "cancel")),
                    interrupt_reason="cancelled",
                    settled_at=self._now(at),
                ),
            )
            run.sealed = True
            run.cancelled = True
            self._publish()
            return _DONE
        if view.status != RUNNING:
            return _refuse(f"run {run_id!r} is already {view.status}")
        if "abort" not in self.capabilities:
            return _refuse("the adapter has no abort capability: a dispatched run cannot be stopped (R9.2)")
        if view.abort is not None:
            return _DONE
        self._set_view(
            run,
            replace(view, abort=AbortView(self._now(at), ABORT_TRANSITIONS[(None, "request")])),
        )
        self._requests.append(AbortRequest(run_id))
        self._publish()
        return _DONE

    def abort_settled(self, run_id: str, accepted: bool, *, at: float | None = None) -> CommandResult:
        """The abort call returned: a 2xx acknowledges the stop and seals the
        output from then on; a throw leaves the outcome unknown (R9.4)."""
        run = self._runs.get(run_id)
        if run is None or run.view.abort is None:
            return _refuse(f"run {run_id!r} has no stop request")
        abort = run.view.abort
        if abort.remote != "unknown":
            return _DONE
        if accepted:
            abort = replace(abort, remote=ABORT_TRANSITIONS[("unknown", "ack")], accepted_at=self._now(at), output_sealed=True)
            run.output_sealed = True
            self._set_view(run, replace(run.view, abort=abort))
            self._publish()
        return _DONE

    def _default_target(self) -> str | None:
        """The last conversation turn (R10.2 "目标轮（缺省是最后一轮）"): the last
        run in conversation order, skipping sends cancelled while queued, which
        never reached the backend (decisions.md 102)."""
        for run_id in reversed(self._runs):
            if not self._runs[run_id].cancelled:
                return run_id
        return None

    def _rerun(
        self,
        via: str,
        run_id: str,
        target: str | None,
        input: Any,
        project: Sequence[RuntimeMessage | Mapping[str, Any]] | None,
        at: float | None,
    ) -> CommandResult:
        # long-function: regenerate and edit (R9) with their checks in the spec's order
        if self._disposed:
            return _refuse("the runtime is disposed")
        if via not in self.capabilities:
            return _refuse(f"the adapter has no {via} capability")
        if any(r.view.active for r in self._runs.values()):
            return _refuse(f"cannot {via} while a run is active or queued (R10.2)")
        target = target if target is not None else self._default_target()
        trun = self._runs.get(target) if target is not None else None
        if trun is None:
            return _refuse(f"unknown target run {target!r}")
        if via == "regenerate":
            input = trun.view.input
            if input is ABSENT:
                return _refuse(f"the input of run {target!r} is unknown (read from history)")
        if not isinstance(run_id, str) or not run_id or run_id in self._runs:
            return _refuse(f"run id {run_id!r} is missing or already used")
        # Remove the target run and every run after it in conversation order,
        # with the messages from the target's first one on; keep what came
        # before (R10.2: "替换目标轮次及之后的消息与运行记录，保留之前的内容").
        order = list(self._runs)
        cut_runs = order[order.index(cast(str, target)) :]  # trun is not None: target names it
        cut_set = set(cut_runs)
        earlier = set(order) - cut_set
        messages = list(self._messages)
        cut_at = len(messages)
        for i, m in enumerate(messages):
            if m.run_id in cut_set:
                cut_at = i
                break
        tail = messages[cut_at:]
        kept = messages[:cut_at] + [m for m in tail if m.run_id in earlier]
        removed_messages = tuple(m for m in tail if m.run_id not in earlier)
        removed_runs = {rid: self._runs.pop(rid) for rid in cut_runs}
        self._run_views = None
        self._messages = PVec(kept)
        self._rebuild_index()
        self._removed[run_id] = (tuple(m.id for m in messages), removed_messages, removed_runs)
        projected = self._projection(run_id, project)
        self._new_run(
            RunView(
                run_id,
                QUEUED,
                origin="local",
                created_at=self._now(at),
                via=via,
                target_run_id=target,
                input=freeze(input),
            ),
            projected,
        )
        self._queue.append(run_id)
        self._dispatch_next(at)
        self._publish()
        return _DONE

    def _restore(self, order: tuple[str, ...], removed: tuple[RuntimeMessage, ...], runs: dict[str, _Run]) -> None:
        """Put back what a refused regenerate/edit removed, where it was."""
        current = {m.id: m for m in self._messages}
        back = {m.id: m for m in removed}
        out: list[RuntimeMessage] = []
        for mid in order:
            m = back[mid] if mid in back else current.get(mid)
            current.pop(mid, None)
            if m is not None:
                out.append(m)
        out.extend(m for m in self._messages if m.id in current)
        self._messages = PVec(out)
        self._runs.update(runs)
        self._run_views = None

    def regenerate(
        self,
        run_id: str,
        *,
        target: str | None = None,
        project: Sequence[RuntimeMessage | Mapping[str, Any]] | None = None,
        at: float | None = None,
    ) -> CommandResult:
        """Redo ``target`` (default: the last run) with its own input as new run ``run_id`` (R10.2)."""
        return self._rerun("regenerate", run_id, target, ABSENT, project, at)

    def edit(
        self,
        run_id: str,
        *,
        target: str,
        input: Any,
        project: Sequence[RuntimeMessage | Mapping[str, Any]] | None = None,
        at: float | None = None,
    ) -> CommandResult:
        """Replace ``target`` and everything after it with a run of new ``input`` (R10.2)."""
        return self._rerun("edit", run_id, target, input, project, at)

    def _read_history(self, result: HistoryResult | Mapping[str, Any]) -> HistoryResult | CommandResult:
        if self._disposed:
            return _refuse("the runtime is disposed")
        if not isinstance(result, HistoryResult):
            try:
                result = history_from_json(result)
            except HistoryFormatError as exc:
                return _refuse(f"history is not a HistoryResult: {exc}")
            except InvalidMessageError as exc:
                exc = exc.with_source("history")
                self._invalid(exc)
                return _refuse(str(exc), R.INVALID_MESSAGE.value, exc.rule)
        coerced = tuple(coerce_tool_errors(m) for m in result.messages)
        if any(a is not b for a, b in zip(coerced, result.messages, strict=False)):
            result = replace(result, messages=coerced)
        err = check_history(result)
        if err is not None:
            self._invalid(err)
            return _refuse(str(err), R.INVALID_MESSAGE.value, err.rule)
        return result

    @staticmethod
    def _history_order(messages: Sequence[RuntimeMessage], snaps: Sequence[Any]) -> list[str]:
        """The runs of a history read in conversation order: as its messages
        order them (a run's first message); a run known only from its (finished)
        run snapshot comes right after the snapshot listed before it, first
        when none is."""
        order: list[str] = []
        seen: set[str] = set()
        for m in messages:
            rid = m.run_id
            if type(rid) is str and rid not in seen:
                seen.add(rid)
                order.append(rid)
        prev: str | None = None
        for snap in snaps:
            sid = snap.id
            if sid not in seen:
                seen.add(sid)
                order.insert(order.index(prev) + 1 if prev is not None else 0, sid)
            prev = sid
        return order

    def _merge_order(self, named: Sequence[str], known: Collection[str], read: str) -> None:
        """Order the runs as a history read names them (``named``, from
        :meth:`_history_order`; ``known``: the runs the Core had before it).

        ``read`` is ``"whole"`` (a refresh with ``hasMore: false``: the whole
        conversation), ``"newest"`` (a refresh with older pages left) or
        ``"older"`` (``load_more``).  A whole conversation comes first, in its
        order, and the runs it does not name (still active here, or never
        stored by the backend) follow in their order.  A page orders the
        known runs it names in the places they had, in its order; a run new
        to the Core goes right before the next known run the page names
        (after the last one when none follows); when the page names no known
        run, an older page goes before the first run with a message shown and
        the newest page after the settled runs (before a run still active or
        queued here).  A queued run has not started: a read never moves it.
        """
        runs = self._runs
        named = [rid for rid in named if rid in runs and runs[rid].view.status != QUEUED]
        if not named:
            return
        placed = set(named)
        if read == "whole":
            order = named + [rid for rid in runs if rid not in placed]
        else:
            groups: list[list[str]] = []
            cur: list[str] = []
            for rid in named:
                cur.append(rid)
                if rid in known:
                    groups.append(cur)
                    cur = []
            rest = [rid for rid in runs if rid not in placed]
            if not groups:
                if read == "newest":
                    at = next((i for i, rid in enumerate(rest) if runs[rid].view.active), len(rest))
                else:
                    at = next((i for i, rid in enumerate(rest) if runs[rid].message_ids), len(rest))
                order = rest[:at] + cur + rest[at:]
            else:
                groups[-1].extend(cur)
                slots = {rid for rid in named if rid in known}
                it = iter(groups)
                order = []
                for rid in runs:
                    if rid in slots:
                        order.extend(next(it))
                    elif rid not in placed:
                        order.append(rid)
        if order != list(runs):
            self._runs = {rid: runs[rid] for rid in order}
            self._run_views = None

    def _reindex_runs(self) -> None:
        by_run: dict[Any, set[str]] = {}
        for m in self._messages:
            by_run.setdefault(m.run_id, set()).add(m.id)
        for rid, run in self._runs.items():
            run.message_ids = by_run.get(rid, set())

    @staticmethod
    def _terminal_snapshots(result: HistoryResult) -> list[Any]:
        # runSnapshots hold finished runs (R8.1a); an active run is reported
        # through activeRun, and inventing one here would create a run nothing
        # ever settles (decisions.md 9).
        if result.run_snapshots is ABSENT:
            return []
        return [snap for snap in result.run_snapshots if snap.status in TERMINAL]

    def _calibrates(self, run: _Run, status: str) -> bool:
        return not run.sealed and next_run_status(run.view.status, f"calibrate-{status}") is not None

    def _apply_run_snapshots(self, snaps: Sequence[Any], at: float | None) -> list[_Run]:
        """Runs history reports finished: unknown ones are created (a reload's
        failure card, R8.2), known unsettled ones are settled (R9.1).  Returns
        the runs settled here."""
        settled: list[_Run] = []
        for snap in snaps:
            run = self._runs.get(snap.id)
            if run is None:
                error = to_run_error(snap.error) if snap.error is not ABSENT and snap.status == "failed" else None
                view = RunView(
                    snap.id,
                    snap.status,
                    origin=snap.origin if snap.origin in ("local", "remote") else "remote",
                    phase=snap.phase if snap.phase in PHASES else "idle",
                    error=error,
                    interrupt_reason=snap.interrupt_reason if isinstance(snap.interrupt_reason, str) else None,
                    created_at=snap.created_at,
                    work_items=FrozenDict(snap.work_items) if isinstance(snap.work_items, Mapping) else FrozenDict(),
                )
                new = self._new_run(view)
                new.sealed = view.terminal
                new.message_ids = {m.id for m in self._messages if m.run_id == snap.id}
            elif self._calibrates(run, snap.status):
                reason = snap.interrupt_reason if isinstance(snap.interrupt_reason, str) else None
                self._settle(
                    run,
                    snap.status,
                    error=to_run_error(snap.error) if snap.status == "failed" else None,
                    interrupt_reason=(reason or ("abort" if run.view.abort is not None else "protocol"))
                    if snap.status == "interrupted"
                    else None,
                    at=at,
                    event=f"calibrate-{snap.status}",
                )
                settled.append(run)
        return settled

    def apply_history(
        self,
        result: HistoryResult | Mapping[str, Any],
        *,
        at: float | None = None,
        covers: Collection[str] | None = None,
    ) -> CommandResult:
        """``history.refresh()``: history replaces the settled baseline (R8,
        decisions.md 10); messages of runs still active here stay after it.  A
        run this read reports finished is settled with history's content
        (decisions.md 98); a settled run it does not name goes with its
        messages (decisions.md 272).  Runs follow the conversation: history's
        order, then the runs still active here.  An invalid batch is rejected
        whole (R3.7) and changes nothing.

        ``covers`` (chatkit-trace's, for replaying a protocol whose history
        read covers one run, docs/history.md: A2A ``tasks/get``) names the
        runs the read covers besides the ones it names: only their messages
        and records are the read's to replace; the other runs and messages
        stay as they are, and the read does not reorder runs.  chatkit's own
        refresh is ``covers=None``: the whole conversation."""
        # long-function: one refresh's steps in their order (messages, runs settled, runs dropped, order, session, view)
        read = self._read_history(result)
        if isinstance(read, CommandResult):
            return read
        result = read
        snaps = self._terminal_snapshots(result)
        scope = None if covers is None else set(covers) | self._named_runs(result)
        # Runs this read settles: their content is history's, as for any
        # settled run ("终态事件或历史终态确认后才结束运行"; "history 可补齐最终内容").
        settling = {snap.id for snap in snaps if (r := self._runs.get(snap.id)) is not None and self._calibrates(r, snap.status)}
        history_ids = {m.id for m in result.messages}
        active = {rid for rid, r in self._runs.items() if r.view.active and rid not in settling}
        live = {m.id: m for m in self._messages if m.run_id in active}
        # A run still streaming here is ahead of any history read: its live
        # messages win over history's copies (R8.3, R8.4: a refresh may come
        # at any time and must not rewind what is being streamed).
        merged = [live.get(m.id, m) for m in result.messages]
        live_tail = [m for m in live.values() if m.id not in history_ids]
        if scope is None:
            self._messages = PVec(merged + live_tail)
        else:
            self._messages = PVec(self._outside(scope, history_ids, merged + live_tail))
        self._rebuild_index()
        self._exec_tools = {
            mid: parts for mid, parts in self._exec_tools.items() if mid in live or (scope is not None and mid in self._index)
        }
        self._reindex_runs()
        known = set(self._runs)
        settled = self._apply_run_snapshots(snaps, at)
        self._drop_unnamed_runs(result, scope)
        if scope is None:
            self._merge_order(self._history_order(result.messages, snaps), known, "newest" if result.has_more else "whole")
        self._read_session(result)
        self._history = HistoryView(
            loaded=True,
            cursor=result.cursor if result.cursor is not ABSENT else None,
            has_more=result.has_more,
            active_run=result.active_run,
            reconciliation_required=False,
        )
        self._publish()
        for run in settled:
            self._emit_event("run_settled", run, status=run.view.status)
        self._dispatch_next(at)
        return _DONE

    def _outside(self, scope: set[str], history_ids: set[str], read: list[RuntimeMessage]) -> list[RuntimeMessage]:
        """The message list after a read covering only the runs in ``scope``:
        the messages of other runs (and of no run) stay where they are; the
        read's go where the first covered message was, else last."""
        out: list[RuntimeMessage] = []
        placed = False
        for m in self._messages:
            if m.run_id in scope or m.id in history_ids:
                if not placed:
                    out.extend(read)
                    placed = True
                continue
            out.append(m)
        if not placed:
            out.extend(read)
        return out

    @staticmethod
    def _named_runs(result: HistoryResult) -> set[str]:
        """The runs a history read names: by a message, a run snapshot or as its active run."""
        named = {m.run_id for m in result.messages if isinstance(m.run_id, str)}
        if result.run_snapshots is not ABSENT:
            named.update(snap.id for snap in result.run_snapshots)
        active = result.active_run
        if active is not ABSENT and active is not None:
            named.add(active.run_id)
        return named

    def _drop_unnamed_runs(self, result: HistoryResult, scope: set[str] | None = None) -> None:
        """A refresh replaces the baseline (decisions.md 10): a settled run it
        does not name (no message of it, no run snapshot, not the active run)
        has lost its messages, and loses its record with them, failure card
        included.  Messages and run records go together (seed 000 §8
        "历史只从后端来"; §10.3 "替换目标轮次及之后的消息与运行记录"; decisions.md
        272): an older page's runs come back with that page (``load_more``); a
        run the backend never stored is gone, as after a reload.  Runs still
        active here keep their messages and their records; a read covering
        some runs only (``scope``) drops none of the others."""
        named = self._named_runs(result)
        gone = [
            rid
            for rid, run in self._runs.items()
            if rid not in named and not run.view.active and (scope is None or rid in scope)
        ]
        for rid in gone:
            del self._runs[rid]
        if gone:
            self._run_views = None

    def _read_session(self, result: HistoryResult) -> None:
        """The session summary of a history read; a read without one says the
        status is unknown (seed 000 §8 "session?: SessionInfo; // 当前会话摘要，
        未提供状态为 unknown"), it does not keep an older read's (decisions.md 271)."""
        if result.session is not ABSENT:
            self._session_info = result.session
        else:
            self._session_info = SessionInfo(self.session_id, "unknown")

    def load_more(self, result: HistoryResult | Mapping[str, Any], *, at: float | None = None) -> CommandResult:
        """``history.loadMore()``: an older page goes before what is shown, its
        runs before the runs shown, and its ``runSnapshots`` count as on the
        first page (seed 000 §2: one history method serves every page;
        decisions.md 98).  An invalid page, or one repeating a shown message
        id, is rejected whole."""
        read = self._read_history(result)
        if isinstance(read, CommandResult):
            return read
        for m in read.messages:
            if m.id in self._index:
                err = InvalidMessageError("message-id-unique", m.id, None, "history", "id already shown")
                self._invalid(err)
                return _refuse(str(err), R.INVALID_MESSAGE.value, err.rule)
        known = set(self._runs)
        self._messages = PVec(list(read.messages) + list(self._messages))
        self._rebuild_index()
        self._reindex_runs()
        snaps = self._terminal_snapshots(read)
        settled = self._apply_run_snapshots(snaps, at)
        self._merge_order(self._history_order(read.messages, snaps), known, "older")
        self._read_session(read)
        self._history = replace(
            self._history,
            loaded=True,
            cursor=read.cursor if read.cursor is not ABSENT else None,
            has_more=read.has_more,
        )
        self._publish()
        for run in settled:
            self._emit_event("run_settled", run, status=run.view.status)
        self._dispatch_next(at)
        return _DONE

    def resume_active_run(self, *, at: float | None = None) -> CommandResult:
        """R8.3: resume the run history reported active, when the adapter can
        resume, history gave an event id and the Core does not know the run;
        otherwise do nothing (the result says why)."""
        if self._disposed:
            return _refuse("the runtime is disposed")
        active = self._history.active_run
        if active is ABSENT or active is None:
            return CommandResult(True, "history reports no active run; nothing to resume")
        if "resume" not in self.capabilities:
            return CommandResult(True, "the adapter cannot resume; nothing to do")
        if active.event_id is None:
            return CommandResult(True, "history gave no event id; nothing to resume")
        if active.run_id in self._runs:
            return CommandResult(True, f"run {active.run_id!r} is already known; nothing to resume")
        run = self._new_run(
            RunView(
                active.run_id,
                RUNNING,
                origin="remote",
                connection="connected",
                created_at=self._now(at),
                via="resume",
                resumed_from=active.event_id,
            )
        )
        run.message_ids = {m.id for m in self._messages if m.run_id == active.run_id}
        self._requests.append(ResumeRequest(active.run_id, active.event_id))
        self._publish()
        return _DONE

    def dispose(self) -> CommandResult:
        """Release the runtime: every later fact is ``runtime-disposed``."""
        if self._disposed:
            return _DONE
        self._disposed = True
        self._requests.clear()
        self._queue.clear()
        self._publish()
        return _DONE
