"""The view model's records: what the run list, a run's timeline and its rows
are made of, whichever source answered them (:class:`~.data.TraceData`,
SQLite; :class:`~.replay_source.ReplaySource`, one session's replay).

Nothing here reads a trace: these are values, and the small functions every
front end shares (the status a person reads, a finding's frame reference, a
row's place in replay order)."""

from __future__ import annotations

import json
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

from chatkit_trace.core import TERMINAL_STATUSES
from chatkit_trace.pipeline import FrameState
from chatkit_trace.trace import RECORDING_INCOMPLETE, run_status

__all__ = [
    "END",
    "LRU",
    "NOT_ANALYSED",
    "START",
    "ExchangeInfo",
    "FactCell",
    "FindingInfo",
    "Key",
    "Row",
    "RunInfo",
    "Timeline",
    "display_status",
    "frame_t",
    "loads_json",
    "parse_ref",
    "row_key",
]

#: Frame index of an exchange's "request" row and of its "end of stream" row.
START = -1
END = 1 << 30
#: A row's place in replay order: ``(t, exchange, kind, frame)``, kind 0 a
#: request, 1 a frame, 2 a stream's end (:func:`row_key`).
Key = tuple[float, int, int, int]


#: The status of a run of a trace not derived yet: the viewer's own state,
#: next to the one vocabulary (:data:`chatkit_trace.trace.RUN_STATUSES`).
NOT_ANALYSED = "not analysed"


def display_status(status: str | None, connection: str | None, codes: Iterable[str] = ()) -> str:
    """The status a person reads, in the one vocabulary
    (:data:`chatkit_trace.trace.RUN_STATUSES`: ``outcome unknown`` for a run
    still ``running`` whose connection is gone, R3.4; ``recording
    incomplete`` for one whose findings (``codes``) say the recorder lost
    part of it); ``not analysed`` for a run of a trace not derived yet (the
    viewer's own state)."""
    if status is None and not RECORDING_INCOMPLETE.intersection(codes):
        return NOT_ANALYSED
    return run_status(status, connection, codes)


def loads_json(value: str | None, default: Any = None) -> Any:
    """A stored JSON column: ``default`` when NULL or unreadable."""
    if value is None:
        return default
    try:
        return json.loads(value)
    except ValueError:
        return default


def parse_ref(ref: str) -> tuple[int, int]:
    """A frame reference: ``"ex:frame"``, ``"ex"`` (the exchange's request
    row) or ``"ex:end"`` (its end of stream, :attr:`Row.ref`); ValueError
    for anything else.  Findings name the first two
    (:func:`chatkit_trace.analyze.frame_ref`)."""
    a, sep, b = ref.partition(":")
    return int(a), ((END if b == "end" else int(b)) if sep else START)


_K = TypeVar("_K")
_V = TypeVar("_V")


class LRU(OrderedDict[_K, _V], Generic[_K, _V]):
    """A bounded mapping: the least recently used entry goes first.

    ``maxweight`` also bounds the sum of the entries' weights (e.g. bytes).
    """

    def __init__(self, maxsize: int, maxweight: float | None = None) -> None:
        super().__init__()
        self.maxsize = maxsize
        self.maxweight = maxweight
        self.weight = 0.0
        self._weights: dict[_K, float] = {}

    def get(self, key: _K, default: _V | None = None) -> _V | None:  # type: ignore[override]
        try:
            value = self[key]
        except KeyError:
            return default
        self.move_to_end(key)
        return value

    def put(self, key: _K, value: _V, weight: float = 0.0) -> None:
        self.weight += weight - self._weights.pop(key, 0.0)
        if weight:
            self._weights[key] = weight
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.maxsize or (
            self.maxweight is not None and self.weight > self.maxweight and len(self) > 1
        ):
            old, _ = self.popitem(last=False)
            self.weight -= self._weights.pop(old, 0.0)

    def clear(self) -> None:
        super().clear()
        self._weights.clear()
        self.weight = 0.0


# --------------------------------------------------------------------------- records


@dataclass
class RunInfo:
    """One line of the run list."""

    session_id: str
    run_id: str
    status: str  # display status (see display_status)
    origin: str | None = None
    connection: str | None = None
    phase: str | None = None
    duration: float | None = None
    frames: int = 0
    facts: int = 0
    rejected: int = 0
    errors: int = 0
    warnings: int = 0
    infos: int = 0
    codes: tuple[str, ...] = ()
    first_at: float | None = None
    exchanges: tuple[int, ...] = ()
    settled_by: str | None = None
    settled_at: float | None = None
    error: Any = None
    interrupt_reason: str | None = None
    analysed: bool = True
    #: the session whose replay shows this run (differs for a run only a finding names, e.g. CK501)
    replay_session: str | None = None
    #: the Core's own status (``status`` is the one a person reads); None: the Core never started it
    core_status: str | None = None

    @property
    def session_for_replay(self) -> str:
        return self.replay_session or self.session_id

    @property
    def key(self) -> tuple[str, str]:
        return (self.session_id, self.run_id)

    @property
    def terminal(self) -> bool:
        """The Core concluded it (whatever the status a person reads says)."""
        return self.core_status in TERMINAL_STATUSES


@dataclass
class FindingInfo:
    code: str
    severity: str
    rule: str
    session_id: str | None
    run_id: str | None
    frames: list[str]
    message: str
    fingerprint: str
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def decisive(self) -> str | None:
        return self.frames[0] if self.frames else None


@dataclass
class ExchangeInfo:
    index: int
    capability: str | None
    session_id: str | None
    run_id: str | None
    method: str
    path: str
    status: int | None
    started_at: float
    ended_at: float | None
    transport: str | None
    end: str | None
    error: str | None
    cursor: str | None
    target_run_id: str | None

    @classmethod
    def of(
        cls,
        index: int,
        capability: str | None,
        session_id: str | None,
        run_id: str | None,
        method: str | None,
        url: str | None,
        status: int | None,
        started_at: float | None,
        ended_at: float | None,
        transport: str | None,
        end: str | None,
        error: str | None,
        cursor: str | None,
        target_run_id: str | None,
    ) -> ExchangeInfo:
        """An exchange as the views show it, from its stored values: the
        URL's path only (``/`` when it has none), ``GET`` when no method was
        recorded, the start at 0 when unknown."""
        return cls(
            index,
            capability,
            session_id,
            run_id,
            method or "GET",
            urlsplit(url or "").path or "/",
            status,
            started_at or 0.0,
            ended_at,
            transport,
            end,
            error,
            cursor,
            target_run_id,
        )


@dataclass
class FactCell:
    kind: str
    accepted: bool
    reason: str | None
    detail: str | None


@dataclass
class Row:
    """One timeline row: a request (``idx == START``), a frame, or an end of stream."""

    exchange: ExchangeInfo
    idx: int
    t: float
    # frame fields
    event: str | None = None
    event_id: str | None = None
    text: str | None = None
    has_raw: bool = False
    direction: str = "in"
    frame_error: dict[str, Any] | None = None
    # derived (None: the trace is not analysed yet)
    state: str | None = None
    facts: list[FactCell] | None = None
    shadow: int = 0
    result_error: dict[str, Any] | None = None

    @property
    def ref(self) -> str:
        if self.idx == START:
            return str(self.exchange.index)
        if self.idx == END:
            return f"{self.exchange.index}:end"
        return f"{self.exchange.index}:{self.idx}"

    @property
    def kind(self) -> str:
        if self.idx == START:
            return "request"
        if self.idx == END:
            return "end"
        return "frame"

    @property
    def problem(self) -> str | None:
        """``rejected`` / ``error`` / ``lost`` when the row shows something wrong."""
        if self.frame_error is not None and self.state in (None, FrameState.ERROR):
            return "error"
        if self.result_error is not None or self.state == FrameState.ERROR:
            return "error"
        for f in self.facts or ():
            if not f.accepted and f.reason not in ("duplicate-event", "no-change"):
                return "rejected"
        if self.shadow:
            return "lost"
        return None


def row_key(row: Row) -> Key:
    """The row's place in the session's replay order (see :mod:`.replay`)."""
    kind = 0 if row.idx == START else 2 if row.idx == END else 1
    return (row.t, row.exchange.index, kind, row.idx)


def frame_t(at: float | None, started_at: float) -> float:
    """A frame's place in time, as the pipeline orders it."""
    return max(at, started_at) if at else started_at


class Timeline:
    """The rows of one run in replay order, as segments ``(exchange, first, count)``.

    ``first`` is a frame index, or :data:`START` / :data:`END` (count 1).
    ``keys`` holds each segment's first key ``(t, exchange, kind, idx)``.
    """

    def __init__(
        self,
        session_id: str,
        run_id: str,
        segments: list[tuple[int, int, int]],
        keys: list[tuple[float, int, int, int]],
        exchanges: dict[int, ExchangeInfo],
    ) -> None:
        self.session_id = session_id
        self.run_id = run_id
        self.segments = segments
        self.seg_keys = keys
        self.exchanges = exchanges
        self.offsets: list[int] = []
        n = 0
        for _, _, count in segments:
            self.offsets.append(n)
            n += count
        self.length = n

    def __len__(self) -> int:
        return self.length

    def locate(self, row: int) -> tuple[int, int]:
        """(exchange, frame index) of row ``row``."""
        if not 0 <= row < self.length:
            raise IndexError(row)
        s = bisect_right(self.offsets, row) - 1
        ex, first, _ = self.segments[s]
        if first in (START, END):
            return ex, first
        return ex, first + (row - self.offsets[s])

    def find(self, exchange: int, idx: int) -> int | None:
        """The row of frame ``idx`` of ``exchange`` (START/END for the special rows), or None."""
        for s, (ex, first, count) in enumerate(self.segments):
            if ex != exchange:
                continue
            if first in (START, END):
                if first == idx:
                    return self.offsets[s]
            elif first <= idx < first + count:
                return self.offsets[s] + idx - first
        return None

    def nearest(self, exchange: int, idx: int) -> int | None:
        """Like :meth:`find`, falling back to the exchange's nearest row."""
        row = self.find(exchange, idx)
        if row is not None:
            return row
        best = None
        for s, (ex, first, count) in enumerate(self.segments):
            if ex == exchange:
                if first == START or (idx != START and first not in (START, END) and first <= idx):
                    best = self.offsets[s] + (
                        0 if first in (START, END) else min(count - 1, idx - first)
                    )
                elif best is None:
                    best = self.offsets[s]
        return best

    def pieces(self, start: int, stop: int) -> Iterator[tuple[int, int, int, int]]:
        """``(row, exchange, first, count)`` covering rows ``[start, stop)``."""
        stop = min(stop, self.length)
        row = start
        while row < stop:
            s = bisect_right(self.offsets, row) - 1
            ex, first, count = self.segments[s]
            off = row - self.offsets[s]
            n = min(count - off, stop - row)
            yield row, ex, (first if first in (START, END) else first + off), n
            row += n
