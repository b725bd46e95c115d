"""What every analyzer reads: the replay of a trace, its exchanges, options."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from ..adapters import Adapter
from ..core import OUTPUT_KINDS, TERMINAL_KINDS, Snapshot
from ..pipeline import ExchangeRecord, FactRecord, FrameRecord, FrameState, Replay, RunRecord
from ..trace import Exchange
from ._finding import Finding

__all__ = ["Options", "Context", "analyzer", "ANALYZERS", "frame_ref", "OUTPUT_KINDS", "TERMINAL_KINDS"]


@dataclass
class Options:
    """Thresholds of the timing codes (seconds)."""

    first_event: float = 2.0  # CK601
    stall: float = 5.0  # CK602
    #: Whether the whole trace holds a history read (CK203 looks at the whole
    #: trace; set when sessions are analysed one at a time).  None: look at
    #: the replay itself.
    trace_has_history: bool | None = None


def frame_ref(exchange_index: int | None, frame_index: int | None) -> str:
    """``"{exchange}:{frame}"`` for a frame; ``"{exchange}"`` for an exchange
    without frames (a history body, an abort request)."""
    if frame_index is None:
        return str(exchange_index)
    return f"{exchange_index}:{frame_index}"


@dataclass
class Context:
    replay: Replay
    exchanges: dict[int, Exchange]
    adapter: Adapter
    options: Options = field(default_factory=Options)
    #: What several analyzers compute once (the live-vs-history comparisons).
    cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def protocol(self) -> Any:
        return self.adapter.protocol

    def exchange_records(self) -> Iterator[ExchangeRecord]:
        for index in sorted(self.replay.exchanges):
            yield self.replay.exchanges[index]

    def frames(self) -> Iterable[FrameRecord]:
        return self.replay.frames

    def facts(self) -> Iterable[FactRecord]:
        return self.replay.facts

    def runs(self) -> Iterator[tuple[str, RunRecord, Snapshot]]:
        for sid, s in self.replay.sessions.items():
            for rec in s.runs.values():
                yield sid, rec, s.core.snapshot

    def run_view(self, session_id: str | None, run_id: str) -> Any:
        """The run's final view; for a run a history read dropped with its
        messages (decisions.md 272), its last view before that read."""
        s = self.replay.sessions.get(cast(str, session_id))  # None: no such session
        if s is None:
            return None
        view = s.core.snapshot.run(run_id)
        if view is None:
            rec = s.runs.get(run_id)
            if rec is not None and rec.dropped is not None:
                return rec.dropped[1]
        return view

    def settled_later(self, session_id: str | None, run_id: str) -> str | None:
        """How a run was settled at all in the trace (fact, history, status), or None."""
        s = self.replay.sessions.get(cast(str, session_id))  # None: no such session
        if s is None:
            return None
        rec = s.runs.get(run_id)
        view = self.run_view(session_id, run_id)
        if view is not None and view.terminal:
            return (rec.settled_by if rec else None) or "fact"
        return None

    def first_frame_of_run(self, session_id: str, run_id: str) -> str | None:
        for fr in self.replay.frames:
            if fr.session_id == session_id and fr.run_id == run_id and fr.state != FrameState.OUTGOING:
                return frame_ref(fr.exchange_index, fr.frame_index)
        return None


Analyzer = Callable[[Context], Iterable[Finding]]
ANALYZERS: list[tuple[tuple[str, ...], Analyzer]] = []


def analyzer(*codes: str) -> Callable[[Analyzer], Analyzer]:
    """Register a function that reports findings of ``codes`` (one place per code)."""

    def register(fn: Analyzer) -> Analyzer:
        ANALYZERS.append((codes, fn))
        return fn

    return register
