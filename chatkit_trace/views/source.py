"""The one interface the views read a trace through.

:func:`~.timeline.build_timeline` (a run's rows in replay order) asks a
source five questions; two sources answer them:

* :class:`~.data.TraceData`: the viewer's, from SQLite, paged, for a trace
  of any size and one that is still growing;
* :class:`~.replay_source.ReplaySource`: the report's, from one session's
  replay in memory (the report derives the trace as ``check`` does and
  draws each session as it is replayed).

Both answer in the same records (:mod:`.model`), so the viewer and the
report show a run with the same rows in the same order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from .model import ExchangeInfo, Key

__all__ = ["ViewSource"]


class ViewSource(Protocol):
    """What a run's timeline is built from (see the module docstring)."""

    def session_exchanges(self, session_id: str) -> list[ExchangeInfo]:
        """The classified exchanges of a session in replay order (the
        ``default`` session also holds those without a session id; a socket
        several sessions share belongs to each of them)."""
        ...

    def exchange(self, index: int) -> ExchangeInfo | None:
        """One exchange, or None when there is no such exchange."""
        ...

    def routed_frames(self, sid: str, rid: str, exchanges: list[int]) -> dict[int, set[int]]:
        """The frames of the subscriptions ``exchanges`` the replay routed to
        run ``rid`` of session ``sid`` (a source that was not analysed stops
        at the first exchange it cannot answer)."""
        ...

    def frame_keys(self, ex: ExchangeInfo, only: set[int] | None = None) -> Iterator[tuple[Key, int]]:
        """``(key, frame)`` of ``ex``'s frames (those in ``only``) in replay order."""
        ...

    def end_key(self, ex: ExchangeInfo) -> Key:
        """Where the end of ``ex``'s response stream falls in replay order."""
        ...
