"""Derive a stored trace's sessions in worker processes (``check -j N``).

Sessions never share Core state (:mod:`._engine`), so they can be derived
apart: each worker opens the trace read-only once, derives the sessions it
is handed (replay and analysis, the very :class:`~._engine.Deriver` code) and
sends back their findings and counts, and, when the derived tables are
written (``redecode``, the benchmark's ``check``), their rows.  The chunks
come back in session order and go through :meth:`Deriver.collect`, so the
merged findings are exactly :meth:`Deriver.run`'s and the rows are written
in the same order (the facts' ``seq`` included).

Rows travel packed (:class:`~chatkit_trace.store.PackedRows`: column names
once, a tuple per row): sending one back costs about 0.7 us, making it about
5 us (a fact's summary and its JSON), so the workers make them and the
parent only writes them, SQLite's one writer.  The trace is in WAL mode
while it is written, so the workers' reads never wait for the parent's
writes.

Workers are started with ``spawn`` (never ``fork``: the caller may hold
threads and open SQLite connections).
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import islice
from typing import Any

from ..analyze import Options
from ..store import PackedRows, TraceStore
from ._engine import Deriver, DeriveResult, Outcome, session_counts

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


def _derive(sessions: Sequence[str | None], rows: bool) -> list[Outcome]:
    assert _deriver is not None
    out: list[Outcome] = []
    for sid in sessions:
        d = _deriver.session(sid)
        packed = {table: PackedRows.of(items) for table, items in d.rows().items()} if rows else None
        out.append((d.findings, session_counts(d), packed))
        del d
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
    write_to: TraceStore | None = None,
) -> DeriveResult:
    """:meth:`Deriver.run` over ``jobs`` worker processes; ``path`` is the
    database ``deriver.store`` reads (a temporary copy included), ``profile``
    what resolved its adapter and ``resolve`` the resolver the workers
    resolve it with again.  ``write_to``: as for :meth:`Deriver.run` (the
    parent writes what the workers send).  ``on_session`` is called once
    per session done, with None."""
    sessions = deriver.sessions()
    writing = write_to is not None
    # Small chunks keep both workers busy to the end; not so small that
    # sending them costs more than deriving them.  Chunks with rows are
    # smaller still: the parent holds the ones waiting to be written.
    size = max(1, min(8 if writing else 64, len(sessions) // (jobs * 8) or 1))
    chunks = [sessions[i : i + size] for i in range(0, len(sessions), size)]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=min(jobs, len(chunks)) or 1,
        mp_context=context,
        initializer=_start,
        initargs=(path, profile, deriver.capabilities, options, resolve),
    ) as pool:

        def outcomes() -> Iterator[Outcome]:
            # At most two chunks per worker in flight: when the parent's
            # writes are slower than the workers, they wait, and the parent's
            # memory stays bounded whatever the trace's length.
            ahead: deque[Future[list[Outcome]]] = deque()
            todo = iter(chunks)
            for chunk in islice(todo, 2 * jobs):
                ahead.append(pool.submit(_derive, chunk, writing))
            while ahead:
                done = ahead.popleft().result()
                for chunk in islice(todo, 1):
                    ahead.append(pool.submit(_derive, chunk, writing))
                for outcome in done:
                    yield outcome
                    if on_session is not None:
                        on_session(None)
                del done

        return deriver.collect(outcomes(), write_to=write_to)
