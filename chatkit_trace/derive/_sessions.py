"""Which stored exchanges make up each session of a trace (the derive
engine's one selection of a session).

Most exchanges belong to the one session they are filed under
(``exchanges.session_id``).  A socket several sessions share
(:func:`chatkit_trace.pipeline.multiplexed`: a subscription whose session
comes from its events) belongs to every session its frames name: its frames
are split by the code the replay uses (:func:`chatkit_trace.pipeline.split_frames`),
and each session is replayed with its own messages only (``replay(..., only=
{session})``).  :class:`~chatkit_trace.derive.Deriver` selects a session's
exchanges here, so ``check``, the recorder's live derivation, the fixtures'
expected outcomes, ``runs``, ``diff``, the viewer's analysis and the report
agree on what a session holds; ``export`` and ``serve`` take one session of
exchanges in memory with :func:`split_shared` (the same split).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ..adapters import Adapter
from ..pipeline import DEFAULT_SESSION, multiplexed, split_frames
from ..store import TraceStore
from ..trace import Exchange, replay_order

__all__ = ["TraceSessions", "split_shared"]


class TraceSessions:
    """The sessions of a stored trace and the exchanges each is replayed from.
    A shared socket's frames are read and split once; each session's replay
    gets that session's frames of it."""

    def __init__(self, store: TraceStore, adapter: Adapter) -> None:
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
            for ex in self.store.exchanges(capability="subscribe"):
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
        """Every session, in order of first appearance (None: classified
        exchanges without a session, replayed as ``default``).  The session
        a shared socket is filed under is one only if a frame names it or
        another exchange belongs to it."""
        sockets = self.sockets()
        carried = {sid for sids in sockets.values() for sid in sids}
        out: dict[str | None, None] = {}
        for sid in self.store.session_ids():
            if (
                sid in self._homes
                and sid not in carried
                and not any(ex.index not in sockets for ex in self.store.exchanges(session=sid, classified=True))
            ):
                continue
            out.setdefault(sid, None)
        for sids in sockets.values():
            for sid in sids:
                out.setdefault(sid, None)
        return list(out)

    def exchanges(self, session_id: str | None, *, with_frames: bool = True) -> list[Exchange]:
        """What ``session_id`` is replayed from: its own classified exchanges
        and every shared socket that carries it (with its frames of it only)."""
        sockets = self.sockets()
        own = [
            ex
            for ex in self.store.exchanges(with_frames=with_frames, session=session_id, classified=True)
            if ex.index not in sockets
        ]
        key = session_id if session_id is not None else DEFAULT_SESSION
        for i, sids in sockets.items():
            if key in sids:
                # the session's own frames of it (the replay places them exactly
                # as it would in the whole socket: a frame's session depends only
                # on frames of the same session before it)
                ex, split = self._split[i]
                own.append(replace(ex, frames=list(split[key]) if with_frames else []))
        own.sort(key=replay_order)
        return own

    def only(self, session_id: str | None) -> set[str] | None:
        """The replay's ``only`` for ``session_id``: its own messages of every
        shared socket (None: the trace has no shared socket)."""
        return {session_id if session_id is not None else DEFAULT_SESSION} if self.sockets() else None

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


def split_shared(exchanges: Iterable[Exchange], adapter: Adapter) -> list[Exchange]:
    """``exchanges`` with every socket several sessions share
    (:func:`~chatkit_trace.pipeline.multiplexed`) replaced by one copy per
    session it carries, each with that session's frames only (their indexes
    kept) and filed under it: what ``export`` and ``serve`` take of one
    session, split as :class:`TraceSessions` splits a stored trace."""
    out: list[Exchange] = []
    for ex in exchanges:
        if not multiplexed(ex):
            out.append(ex)
            continue
        for sid, frames in split_frames(ex, adapter).items():
            note = dict((ex.notes or {}).get("identity") or {})
            note["session_source"] = "split"  # one session now: not shared any more
            out.append(
                replace(
                    ex,
                    session_id=sid,
                    frames=list(frames),
                    notes={**ex.notes, "identity": note, "shared_socket": True},
                )
            )
    return out
