"""The run list, computed in one place: a line per run as ``chatkit-trace
runs``, the viewer and the report show it.

A run comes from one of three places, and each becomes a
:class:`~.model.RunInfo` here, never elsewhere:

* a run of a replay (:class:`chatkit_trace.derive.RunSummary`: ``runs`` and
  the report derive the trace as ``check`` does): :func:`from_summary`;
* a stored row of the derived ``runs`` table (the viewer reads a trace that
  was derived): :func:`from_row`, the same values as the row was written
  from the same summary (:func:`chatkit_trace.derive.derived_rows`);
* a run the Core never started (a request that failed or was refused, or a
  run only a finding names): :func:`not_started`.

What a line says is decided once, in :func:`_run`: the status in the one
vocabulary (:func:`chatkit_trace.trace.run_status`, ``recording
incomplete`` when a finding says the recorder lost part of the run), the
duration the user waited (:func:`chatkit_trace.derive.wait_span`: from the
run's request to the end they saw), the frames, facts and rejections, and
the findings by severity (:func:`tally`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from chatkit_trace.derive import RunSummary, wait_span
from chatkit_trace.store import RunRow
from chatkit_trace.trace import run_status

from .model import RunInfo, loads_json, parse_ref

__all__ = ["Tally", "from_row", "from_summary", "not_started", "tally"]


class _Finding(Protocol):
    @property
    def session_id(self) -> str | None: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def severity(self) -> str: ...
    @property
    def code(self) -> str: ...
    @property
    def frames(self) -> Sequence[str]: ...


@dataclass
class Tally:
    """A run's findings: how many of each severity, their codes, the frames they name."""

    error: int = 0
    warning: int = 0
    info: int = 0
    codes: set[str] = field(default_factory=set)
    refs: list[str] = field(default_factory=list)

    def add(self, severity: str, code: str, n: int = 1, refs: Iterable[str] = ()) -> None:
        if severity == "error":
            self.error += n
        elif severity == "warning":
            self.warning += n
        elif severity == "info":
            self.info += n
        self.codes.add(code)
        self.refs.extend(refs)


Tallies = dict[tuple[str | None, str | None], Tally]


def tally(findings: Iterable[_Finding]) -> Tallies:
    """Each run's :class:`Tally` (key ``(session, run)``; a trace-wide finding under ``(None, None)``)."""
    out: Tallies = {}
    for f in findings:
        out.setdefault((f.session_id, f.run_id), Tally()).add(f.severity, f.code, 1, f.frames)
    return out


_NONE = Tally()


def _run(
    session_id: str,
    run_id: str,
    status: str | None,
    connection: str | None,
    first_at: float | None,
    last_at: float | None,
    found: Tally | None,
    created_ms: float | None = None,
    **values: Any,
) -> RunInfo:
    """A line of the run list: the one place its status, duration and counts are decided.

    ``created_ms``: when the Core made the run (ms), the start shown when no
    exchange dates it (the duration stays unknown then)."""
    found = found or _NONE
    return RunInfo(
        session_id,
        run_id,
        # the one vocabulary (chatkit_trace.trace.RUN_STATUSES); None: the Core never started it
        run_status(status, connection, found.codes),
        connection=connection,
        # how long the user waited: from the run's request to the end they saw (decisions.md 278)
        duration=(last_at - first_at) if first_at is not None and last_at is not None else None,
        errors=found.error,
        warnings=found.warning,
        infos=found.info,
        codes=tuple(sorted(found.codes)),
        first_at=first_at if first_at is not None or created_ms is None else created_ms / 1000.0,
        core_status=status,
        **values,
    )


def from_summary(summary: RunSummary, found: Tally | None = None) -> RunInfo:
    """A run of a replay (``runs``, the report)."""
    view, rec = summary.view, summary.record
    return _run(
        summary.session_id,
        view.id,
        view.status,
        view.connection,
        summary.started_at,
        summary.ended_at,
        found,
        view.created_at or 0,
        origin=view.origin,
        phase=view.phase,
        frames=len(summary.frame_times),
        facts=summary.facts,
        rejected=summary.violations,
        exchanges=tuple(rec.exchanges) if rec else (),
        settled_by=rec.settled_by if rec else None,
        settled_at=rec.settled_at if rec else None,
        error=view.error.to_json() if view.error else None,
        interrupt_reason=view.interrupt_reason,
    )


def from_row(row: RunRow, found: Tally | None = None) -> RunInfo:
    """A stored row of the derived ``runs`` table (the viewer)."""
    return _run(
        row.session_id,
        row.run_id,
        row.status,
        row.connection,
        row.first_at,
        row.last_at,
        found,
        row.created_at or 0,
        origin=row.origin,
        phase=row.phase,
        frames=row.frames or 0,
        facts=row.facts or 0,
        rejected=row.rejected or 0,
        exchanges=tuple(loads_json(row.exchanges) or []),
        settled_by=row.settled_by,
        settled_at=row.settled_at,
        error=loads_json(row.error),
        interrupt_reason=row.interrupt_reason,
    )


def not_started(
    session_id: str,
    run_id: str,
    exchanges: Sequence[int],
    exchange: Callable[[int], Any],
    found: Tally | None = None,
    *,
    refs: Iterable[str] = (),
    replay_session: str | None = None,
) -> RunInfo:
    """A run the Core never started: its request failed or was refused, or
    only a finding names it (CK110 ...).  ``exchanges``: the run's own, to
    which each exchange ``refs`` (its findings' frames) name is added once;
    ``exchange``: an exchange by index (``capability``, ``started_at``,
    ``ended_at``, ``index``; None when unknown), for the user's wait."""
    indexes = list(exchanges)
    for ref in refs:
        try:
            e = parse_ref(ref)[0]
        except ValueError:
            continue
        if e not in indexes:
            indexes.append(e)
    own = [x for x in map(exchange, indexes) if x is not None]
    start, end = wait_span(own, [])
    return _run(session_id, run_id, None, None, start, end, found, exchanges=tuple(indexes), replay_session=replay_session)
