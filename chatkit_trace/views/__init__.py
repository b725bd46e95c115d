"""The view model both front ends read: the Textual viewer
(``chatkit_trace.viewer``) and the HTML report (``chatkit_trace.report``).

Nothing here imports Textual or draws anything: the run list, a run's
timeline, the rows of a page, the incremental replay (and its replay ahead in
a child process), the viewer's analysis of a trace, and the live-vs-history
comparisons' message cells.  Modules:

* :mod:`.data`: the records (``RunInfo``, ``FindingInfo``, ``ExchangeInfo``,
  ``Row``, ``Timeline`` ...) and :class:`~.data.TraceData`, the SQLite source;
* :mod:`.timeline`: :func:`~.timeline.build_timeline`;
* :mod:`.replay`: :class:`~.replay.SessionReplayer`, the snapshot at any row;
* :mod:`.ahead`: the child process that replays a long session ahead;
* :mod:`.analysis`: deriving a trace as ``check`` does, into a side database.
"""
