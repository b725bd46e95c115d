"""One ingress, many sessions (SPEC R10.1): chatkit's ``createSessionAdapters``.

An adapter instance serves many sessions; facts are routed to the runtime
of the session they name, and a fact for a session that is not open is
rejected ``wrong-session``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ._facts import FactRejectReason, FactResult, rejected
from ._runtime import ChatCore

__all__ = ["SessionRouter"]


class SessionRouter:
    """Open runtimes by session id and route facts to them."""

    def __init__(self, factory: Callable[[str], ChatCore] | None = None, **core_options: Any) -> None:
        self._factory = factory or (lambda sid: ChatCore(sid, **core_options))
        self._open: dict[str, ChatCore] = {}

    def open(self, session_id: str) -> ChatCore:
        core = self._open.get(session_id)
        if core is None or core.disposed:
            core = self._open[session_id] = self._factory(session_id)
        return core

    def release(self, session_id: str) -> None:
        core = self._open.pop(session_id, None)
        if core is not None:
            core.dispose()

    def get(self, session_id: str) -> ChatCore | None:
        return self._open.get(session_id)

    def __iter__(self) -> Iterator[ChatCore]:
        return iter(self._open.values())

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._open

    def sessions(self) -> Iterable[str]:
        return self._open.keys()

    def admit(self, fact: Any) -> FactResult:
        """Route a fact value to its session's runtime."""
        core = self._open.get(fact.session_id)
        if core is None:
            return rejected(FactRejectReason.WRONG_SESSION, f"session {fact.session_id!r} is not open")
        return core.admit(fact)
