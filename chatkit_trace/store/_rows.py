"""The rows :class:`~chatkit_trace.store.TraceReader` returns, named.

Each read returns one of these instead of a bare tuple, so a reader names the
column it wants (``row.settled_by``) and a query's column order is no longer
a contract kept by hand on both sides.  They are tuples still (``NamedTuple``):
SQLite builds them directly (the cursor's row factory), and code that unpacks
them keeps working.  Field names are the SQL columns' own (a computed column
gets the name its method's docstring gave it).
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = [
    "ExchangeDetail",
    "ExchangeSummary",
    "FactCell",
    "FindingGroup",
    "FindingRow",
    "FrameDetail",
    "FrameFact",
    "FrameResult",
    "FrameResultDetail",
    "FrameSummary",
    "FrameTime",
    "HistoryRead",
    "HistoryReadAt",
    "RunRow",
    "SettledSnapshot",
]


class ExchangeSummary(NamedTuple):
    """An exchange as the run list and the timeline show it."""

    id: int
    capability: str | None
    session_id: str | None
    run_id: str | None
    method: str | None
    url: str | None
    status: int | None
    started_at: float | None
    ended_at: float | None
    transport: str | None
    end: str | None
    error: str | None
    #: the route's resume cursor, else a subscription's ``Last-Event-ID``
    cursor: str | None
    target_run_id: str | None


class ExchangeDetail(NamedTuple):
    """An exchange's request and response (headers JSON, bodies as stored)."""

    method: str | None
    url: str | None
    status: int | None
    request_headers: str | None
    request_body: Any
    response_headers: str | None
    response_body: Any
    error: str | None
    notes: str | None


class FrameTime(NamedTuple):
    """A frame's place in replay order (``t``: ``max(at, started_at)``, else ``started_at``)."""

    idx: int
    t: float


class FrameSummary(NamedTuple):
    """A timeline row's frame: its text cut to 400 characters."""

    idx: int
    at: float | None
    event: str | None
    event_id: str | None
    text: str | None
    has_raw: int
    direction: str | None
    error: str | None


class FrameDetail(NamedTuple):
    """One frame in full."""

    at: float | None
    event: str | None
    event_id: str | None
    text: str | None
    raw: bytes | None
    start: int | None
    end: int | None
    error: str | None
    transport: str | None
    direction: str | None


class FindingRow(NamedTuple):
    """A stored finding (``frames`` and ``detail`` are JSON)."""

    code: str
    severity: str
    rule: str
    session_id: str | None
    run_id: str | None
    frames: str | None
    message: str
    fingerprint: str
    detail: str | None


class FindingGroup(NamedTuple):
    """The findings of one code and severity on one run: how many, and each one's frames JSON in a JSON list."""

    session_id: str | None
    run_id: str | None
    severity: str
    code: str
    n: int
    frames: str


class RunRow(NamedTuple):
    """A derived run (``error`` and ``exchanges`` are JSON; ``created_at`` in ms)."""

    session_id: str
    run_id: str
    status: str | None
    origin: str | None
    phase: str | None
    connection: str | None
    error: str | None
    interrupt_reason: str | None
    created_at: float | None
    settled_at: float | None
    settled_by: str | None
    exchanges: str | None
    frames: int | None
    facts: int | None
    rejected: int | None
    first_at: float | None
    last_at: float | None


class SettledSnapshot(NamedTuple):
    """The snapshot a run settled with (JSON), what settled it and when."""

    snapshot: str | None
    settled_by: str | None
    settled_at: float | None


class FrameResult(NamedTuple):
    """A timeline row's derived state (``error`` and ``shadow`` are JSON)."""

    idx: int
    state: str | None
    error: str | None
    shadow: str | None


class FrameResultDetail(NamedTuple):
    """One frame's derived state in full."""

    state: str | None
    error: str | None
    shadow: str | None
    event_type: str | None
    end_marker: int | None
    unknown: int | None


class FactCell(NamedTuple):
    """A timeline row's fact: its kind and admission result."""

    frame_idx: int
    kind: str
    accepted: int
    reason: str | None
    detail: str | None


class FrameFact(NamedTuple):
    """One frame's fact in full (``fact`` is JSON)."""

    kind: str
    accepted: int
    reason: str | None
    detail: str | None
    fact: str | None


class HistoryRead(NamedTuple):
    """A history read's outcome (``result`` is JSON)."""

    ok: int
    error: str | None
    rule: str | None
    result: str | None


class HistoryReadAt(NamedTuple):
    """A session's history read, with its exchange and time (``result`` is JSON)."""

    exchange_id: int
    at: float | None
    ok: int
    error: str | None
    result: str | None
