"""Derive a stored trace's sessions in worker processes (``check -j N``).

Sessions never share Core state (:mod:`._engine`), so they can be derived
apart: each worker opens the trace read-only once, derives the sessions it
is handed (replay and analysis, the very :class:`~._engine.Deriver` code) and
sends back only their findings and counts.  The chunks come back in session
order, so the merged findings are exactly :meth:`Deriver.run`'s.

Workers are started with ``spawn`` (never ``fork``: the caller may hold
threads and open SQLite connections).  Writing the derived tables
(``redecode``) stays in one process: its rows would cost more to send back
than to make.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from ..analyze import Finding, Options
from ._engine import Deriver, DeriveResult, merge_findings, session_counts

__all__ = ["derive_parallel"]

_deriver: Deriver | None = None
#: ``(profile, meta) -> (adapter, capabilities, name)``: the caller's
#: :func:`chatkit_trace.route.profiles.resolve_adapter` (the engine sits
#: below the route profiles, so it is handed the resolver, a module-level
#: function the spawned workers import by name)
Resolve = Callable[[str | None, dict[str, Any]], tuple[Any, frozenset[str], str | None]]


def _start(path: str, profile: str | None, capabilities: Any, options: Options | None, resolve_adapter: Resolve) -> None:
    """A worker's initializer: open the trace and resolve its adapter once."""
    global _deriver
    from ..store import TraceStore

    store = TraceStore(path, readonly=True)
    adapter, _, _ = resolve_adapter(profile, store.meta())
    _deriver = Deriver(store, adapter, capabilities=capabilities, options=options)


def _derive(sessions: Sequence[str | None]) -> list[tuple[list[Finding], dict[str, int]]]:
    assert _deriver is not None
    out = []
    for sid in sessions:
        d = _deriver.session(sid)
        out.append((d.findings, session_counts(d)))
    return out


def derive_parallel(
    deriver: Deriver,
    path: str,
    *,
    profile: str | None,
    jobs: int,
    options: Options | None = None,
    on_session: Callable[[Any], None] | None = None,
    resolve: Resolve,
) -> DeriveResult:
    """:meth:`Deriver.run` (analysis, no writing) over ``jobs`` worker
    processes; ``path`` is the database ``deriver.store`` reads (a temporary
    copy included), ``profile`` what resolved its adapter and ``resolve`` the
    resolver the workers resolve it with again.  ``on_session``
    is called once per session done, with None."""
    sessions = deriver.sessions()
    findings: list[Finding] = []
    counts = {"frames": 0, "facts": 0, "sessions": 0, "violations": 0, "matched": 0, "understood": 0}
    # Small chunks keep both workers busy to the end; not so small that
    # sending them costs more than deriving them.
    size = max(1, min(64, len(sessions) // (jobs * 8) or 1))
    chunks = [sessions[i : i + size] for i in range(0, len(sessions), size)]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=min(jobs, len(chunks)) or 1,
        mp_context=context,
        initializer=_start,
        initargs=(path, profile, deriver.capabilities, options, resolve),
    ) as pool:
        for done in pool.map(_derive, chunks):
            for found, n in done:
                findings.extend(found)
                for key, value in n.items():
                    counts[key] += value
                if on_session is not None:
                    on_session(None)
    return DeriveResult(merge_findings(findings, deriver.store.meta()), counts)
