"""Which stored exchanges make up each session of a trace.

Most exchanges belong to the one session they are filed under
(``exchanges.session_id``).  A socket several sessions share
(:func:`chatkit_trace.pipeline.multiplexed`: a subscription whose session
comes from its events) belongs to every session its frames name: its frames
are split by the code the replay uses (:func:`chatkit_trace.pipeline.socket_sessions`),
and each session is replayed with its own messages only (``replay(..., only=
{session})``).  ``check``, the recorder's live derivation, the viewer,
``diff``, ``export`` and the report select a session's exchanges here, so they
agree on what a session holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from .pipeline import DEFAULT_SESSION, Replay, multiplexed, replay, split_frames
from .store import TraceStore
from .trace import Exchange

__all__ = ["TraceSessions"]


class TraceSessions:
    """The sessions of a stored trace and the exchanges each is replayed from.
    A shared socket's frames are read and split once; each session's replay
    gets that session's frames of it."""

    def __init__(self, store: TraceStore, adapter: Any) -> None:
        self.store = store
        self.adapter = adapter
        self._sockets: dict[int, list[str]] | None = None
        self._homes: set[str | None] = set()
        self._split: dict[int, tuple[Exchange, dict[str, list[Any]]]] = {}

    def sockets(self) -> dict[int, list[str]]:
        """Shared sockets (their exchange index) and the sessions each carries."""
        if self._sockets is None:
            out: dict[int, list[str]] = {}
            homes: set[str | None] = set()
            for ex in self.store.capability_exchanges("subscribe"):
                if multiplexed(ex):
                    ex.frames = self.store.frames(ex.index)
                    split = split_frames(ex, self.adapter)
                    out[ex.index] = list(split)
                    self._split[ex.index] = (ex, split)
                    homes.add(ex.session_id)
            self._sockets = out
            self._homes = homes
        return self._sockets

    def sessions(self) -> list[str | None]:
        """Every session, in order of first appearance (None: matched
        exchanges without a session, replayed as ``default``).  The session
        a shared socket is filed under is one only if a frame names it or
        another exchange belongs to it."""
        sockets = self.sockets()
        carried = {sid for sids in sockets.values() for sid in sids}
        out: dict[str | None, None] = {}
        for sid in self.store.session_ids():
            if sid in self._homes and sid not in carried and not any(
                    ex.index not in sockets for ex in self.store.session_exchanges(sid, with_frames=False)):
                continue
            out.setdefault(sid, None)
        for sids in sockets.values():
            for sid in sids:
                out.setdefault(sid, None)
        return list(out)

    def exchanges(self, session_id: str | None, *, with_frames: bool = True) -> list[Exchange]:
        """What ``session_id`` is replayed from: its own exchanges and every
        shared socket that carries it (whole: the replay records its frames only)."""
        sockets = self.sockets()
        own = [ex for ex in self.store.session_exchanges(session_id, with_frames=with_frames) if ex.index not in sockets]
        key = session_id if session_id is not None else DEFAULT_SESSION
        for i, sids in sockets.items():
            if key in sids:
                # the session's own frames of it (the replay places them exactly
                # as it would in the whole socket: a frame's session depends only
                # on frames of the same session before it)
                ex, split = self._split[i]
                own.append(replace(ex, frames=list(split[key]) if with_frames else []))
        own.sort(key=lambda e: (e.started_at, e.index))
        return own

    def replay(self, session_id: str | None, exchanges: Iterable[Exchange] | None = None, **kw: Any) -> Replay:
        """The session's replay (its own messages of every shared socket only)."""
        exs = list(exchanges) if exchanges is not None else self.exchanges(session_id)
        key = session_id if session_id is not None else DEFAULT_SESSION
        only = {key} if self.sockets() else None
        return replay(exs, self.adapter, only=only, **kw)

    def together(self, sessions: Iterable[str | None]) -> set[str | None]:
        """``sessions`` and every session that shares a socket with one of them
        (derived rows of a socket are rewritten for all its sessions at once)."""
        out = set(sessions)
        sockets = self.sockets()
        changed = True
        while changed:
            changed = False
            for sids in sockets.values():
                keys = set(sids)
                if keys & {s if s is not None else DEFAULT_SESSION for s in out} and not keys <= out:
                    out |= keys
                    changed = True
        return out
