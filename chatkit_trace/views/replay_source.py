"""The view model's source answered from one session's replay in memory
(the report's; the viewer's is SQLite, :class:`~.data.TraceData`).

The report derives a trace as ``check`` does, a session at a time, and draws
each session's runs while its replay is at hand: :class:`ReplaySource`
answers :class:`~.source.ViewSource`'s questions from that replay's
exchanges and frame records, so :func:`~.timeline.build_timeline` gives the
report the rows the viewer shows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from chatkit_trace.pipeline import DEFAULT_SESSION, Replay
from chatkit_trace.trace import Exchange, replay_order

from .model import END, ExchangeInfo, Key, frame_t

__all__ = ["ReplaySource"]


class ReplaySource:
    """:class:`~.source.ViewSource` over ``exchanges`` and their ``replay``."""

    def __init__(self, exchanges: Sequence[Exchange], replay: Replay) -> None:
        self.replay = replay
        self.exchanges = {e.index: e for e in exchanges}
        # run ids as the replay left them (it writes those it found in the events onto the exchange)
        self.infos = {
            e.index: ExchangeInfo.of(
                e.index, e.capability, e.session_id, e.run_id, e.method, e.url,
                e.status, e.started_at, e.ended_at, e.transport, e.end, e.error, e.resume_cursor, e.target_run_id,
            )
            for e in exchanges
        }

    def session_exchanges(self, session_id: str) -> list[ExchangeInfo]:
        out = [
            i for i in self.infos.values()
            if i.capability is not None and (i.session_id == session_id or (session_id == DEFAULT_SESSION and i.session_id is None)
                                             or self._carries(i.index, session_id))
        ]
        return sorted(out, key=replay_order)

    def _carries(self, index: int, session_id: str) -> bool:
        """A socket several sessions share that carried frames of ``session_id`` (SQLite's ``shared_sockets``)."""
        rec = self.replay.exchanges.get(index)
        return rec is not None and rec.exchange.capability == "subscribe" and any(fr.session_id == session_id for fr in rec.frames)

    def exchange(self, index: int) -> ExchangeInfo | None:
        return self.infos.get(index)

    def routed_frames(self, sid: str, rid: str, exchanges: list[int]) -> dict[int, set[int]]:
        out: dict[int, set[int]] = {}
        for e in exchanges:
            rec = self.replay.exchanges.get(e)
            out[e] = {fr.frame_index for fr in (rec.frames if rec else []) if fr.session_id == sid and fr.run_id == rid}
        return out

    def frame_keys(self, ex: ExchangeInfo, only: set[int] | None = None) -> Iterator[tuple[Key, int]]:
        s = ex.started_at
        frames = self.exchanges[ex.index].frames if ex.index in self.exchanges else []
        keys = sorted((frame_t(f.at, s), f.index) for f in frames if only is None or f.index in only)
        for t, idx in keys:
            yield (t, ex.index, 1, idx), idx

    def end_key(self, ex: ExchangeInfo) -> Key:
        frames = self.exchanges[ex.index].frames if ex.index in self.exchanges else []
        last = ex.started_at
        for f in frames:
            if f.at:
                last = max(last, f.at)
        return (max(ex.ended_at or last, last), ex.index, 2, END)
