"""What the UI reads: immutable snapshots (SPEC R1.3, R1.4).

A :class:`Snapshot` is published after every accepted fact or command.  It
holds references to persistent structures (the message vector, the tuple of
run views), never copies, so publishing is O(1) and an old snapshot never
changes when the Core moves on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._model import ActiveRun, RunError, RuntimeMessage, SessionInfo, WorkItem
from ._pvec import PVec
from ._values import ABSENT, FrozenDict, thaw

__all__ = ["AbortView", "RunView", "HistoryView", "Snapshot"]

_EMPTY = FrozenDict()


@dataclass(frozen=True, slots=True)
class AbortView:
    """The stop request of a run (R9.4, R9.5)."""

    requested_at: float
    remote: str = "unknown"  # unknown | accepted | confirmed
    accepted_at: float | None = None
    output_sealed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "requestedAt": self.requested_at,
            "acceptedAt": self.accepted_at,
            "outputSealed": self.output_sealed,
            "remote": self.remote,
        }


@dataclass(frozen=True, slots=True)
class RunView:
    """One run as the UI sees it (chatkit's ``RunView``)."""

    id: str
    status: str
    origin: str = "local"  # local | remote
    phase: str = "idle"
    connection: str = "none"  # none | connected | disconnected | reconnecting
    error: RunError | None = None
    interrupt_reason: str | None = None
    abort: AbortView | None = None
    work_items: FrozenDict = _EMPTY
    created_at: float | None = None
    settled_at: float | None = None
    dispatch: str | None = None  # None | pending | accepted
    via: str | None = None  # run | regenerate | edit | resume
    target_run_id: str | None = None
    input: Any = ABSENT
    resumed_from: str | None = None

    @property
    def terminal(self) -> bool:
        return self.status in ("completed", "failed", "interrupted")

    @property
    def active(self) -> bool:
        return self.status in ("queued", "running")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "status": self.status,
            "origin": self.origin,
            "phase": self.phase,
            "connection": self.connection,
        }
        if self.error is not None:
            out["error"] = self.error.to_json()
        if self.interrupt_reason is not None:
            out["interruptReason"] = self.interrupt_reason
        if self.abort is not None:
            out["abort"] = self.abort.to_json()
        if self.work_items:
            out["workItems"] = {
                k: (v.to_json() if isinstance(v, WorkItem) else thaw(v)) for k, v in self.work_items.items()
            }
        return out


@dataclass(frozen=True, slots=True)
class HistoryView:
    """What the last history read said (R8.1, R8.4)."""

    loaded: bool = False
    cursor: str | None = None
    has_more: bool = False
    active_run: ActiveRun | None | Any = ABSENT
    reconciliation_required: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "loaded": self.loaded,
            "hasMore": self.has_more,
            "reconciliationRequired": self.reconciliation_required,
        }
        if self.cursor is not None:
            out["cursor"] = self.cursor
        if self.active_run is not ABSENT:
            out["activeRun"] = None if self.active_run is None else self.active_run.to_json()
        return out


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The frozen state the UI renders at one instant."""

    session_id: str
    version: int
    messages: PVec[RuntimeMessage]
    runs: tuple[RunView, ...]
    session: SessionInfo | None = None
    history: HistoryView = HistoryView()
    disposed: bool = False

    def run(self, run_id: str) -> RunView | None:
        for r in self.runs:
            if r.id == run_id:
                return r
        return None

    def message(self, message_id: str) -> RuntimeMessage | None:
        for m in self.messages:
            if m.id == message_id:
                return m
        return None

    @property
    def active_run(self) -> RunView | None:
        for r in self.runs:
            if r.status == "running":
                return r
        return None

    @property
    def session_status(self) -> str:
        return self.session.status if self.session is not None else "unknown"

    def to_json(self) -> dict[str, Any]:
        """The ``snapshot`` object of docs/core-scripts.md (plus ``session``/``history``)."""
        out: dict[str, Any] = {
            "sessionId": self.session_id,
            "messages": [m.to_json() for m in self.messages],
            "runs": [r.to_json() for r in self.runs],
        }
        if self.session is not None:
            out["session"] = self.session.to_json()
        if self.history.loaded:
            out["history"] = self.history.to_json()
        if self.disposed:
            out["disposed"] = True
        return out
