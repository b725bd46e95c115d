"""The view model both front ends read: the Textual viewer
(``chatkit_trace.viewer``) and the HTML report (``chatkit_trace.report``).

Nothing here imports Textual or draws anything: the run list, a run's
timeline, the rows of a page, the incremental replay (and its replay ahead in
a child process), the viewer's analysis of a trace, and the live-vs-history
comparisons' message cells.  Modules:

* :mod:`.model`: the records (``RunInfo``, ``FindingInfo``, ``ExchangeInfo``,
  ``Row``, ``Timeline`` ...) and the small functions both front ends share;
* :mod:`.source`: :class:`ViewSource`, the one interface a timeline is built
  from, with two implementations: :class:`TraceData` (:mod:`.data`, SQLite,
  the viewer's) and :class:`ReplaySource` (:mod:`.replay_source`, one
  session's replay, the report's);
* :mod:`.timeline`: :func:`build_timeline`, a run's rows in replay order;
* :mod:`.replay`: :class:`~.replay.SessionReplayer`, the snapshot at any row
  (from SQLite, with checkpoints); :mod:`.ahead` replays a long session ahead
  in a child process (:mod:`._ahead_child`, states pickled by :mod:`._portable`);
* :mod:`.analysis`: deriving a trace as ``check`` does, into a side database;
* :mod:`.diff`: the live-vs-history comparisons of a run and a message's cells.

The heavier modules (replay, ahead, analysis, diff) are imported by name.
"""

from .data import TraceData
from .model import END, LRU, NOT_ANALYSED, START, ExchangeInfo, FactCell, FindingInfo, Key, Row, RunInfo, Timeline, display_status, parse_ref, row_key
from .replay_source import ReplaySource
from .source import ViewSource
from .timeline import build_timeline

__all__ = [
    "END",
    "LRU",
    "NOT_ANALYSED",
    "START",
    "ExchangeInfo",
    "FactCell",
    "FindingInfo",
    "Key",
    "ReplaySource",
    "Row",
    "RunInfo",
    "Timeline",
    "TraceData",
    "ViewSource",
    "build_timeline",
    "display_status",
    "parse_ref",
    "row_key",
]
