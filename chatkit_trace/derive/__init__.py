"""One derive engine: exchanges in; facts, frame results, run and session
snapshots, history reads and findings out.

Everything that turns recorded traffic into results runs through here: the
recorder's writer (each session that changed, and its per-run log line),
``check`` and ``redecode``, ``import``, ``runs``, ``diff``, the viewer's
analysis and the fixtures' expected outcomes.  So they say the same thing:
they run the same code.

* :class:`Deriver` walks a stored trace one session at a time
  (:meth:`Deriver.run`, with an ``on_session`` hook for progress), writes the
  derived tables where asked, and merges the trace's findings in one place
  (:func:`merge_findings`: the once-per-trace codes, :data:`TRACE_LEVEL`,
  and the recording's own, CK7xx);
* :func:`derive_parallel` does :meth:`Deriver.run` over worker processes
  (``check``/``redecode`` of a large trace, ``-j N``): the same findings in
  the same order, and the same rows written by the one process
  (:meth:`Deriver.collect`);
* :class:`TraceSessions` is the one selection of a session's exchanges: a
  socket several sessions share is split per event, each session replayed
  with its own frames of it (:func:`split_shared`: the same split of
  exchanges held in memory, for ``export`` and ``serve``);
* :func:`derive_exchanges` derives one session's exchanges held in memory;
* :func:`derived_rows` and :func:`finding_rows` turn a replay and findings
  into the plain rows the store writes; :func:`run_summaries` counts each
  run as the log line, ``runs`` and the ``runs`` table show it.

Layering: the engine sits on the replay (:mod:`chatkit_trace.pipeline`), the
analyzers and the store; the store knows nothing of it.
"""

from ._engine import TRACE_LEVEL, Deriver, DeriveResult, SessionDerivation, derive_exchanges, merge_findings, session_counts
from ._parallel import derive_parallel
from ._rows import RunSummary, derived_rows, fact_summary, finding_rows, reader_stops, run_summaries, unstarted_runs, wait_span
from ._sessions import TraceSessions, split_shared

__all__ = [
    "TRACE_LEVEL",
    "DeriveResult",
    "Deriver",
    "RunSummary",
    "SessionDerivation",
    "TraceSessions",
    "derive_exchanges",
    "derive_parallel",
    "derived_rows",
    "fact_summary",
    "finding_rows",
    "merge_findings",
    "reader_stops",
    "run_summaries",
    "unstarted_runs",
    "wait_span",
    "session_counts",
    "split_shared",
]
