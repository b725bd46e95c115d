"""Deriving a trace's facts, runs and findings for the viewer (in a worker thread).

This is ``chatkit-trace check`` (:func:`chatkit_trace.cli.check.run_check`):
the same derive engine (:class:`chatkit_trace.derive.Deriver`), one session
at a time, the same trace-level merge, so the viewer shows exactly what
``check`` says.  Two differences a viewer needs: it reports progress after
each session, and it writes the derived tables somewhere.  The viewer puts
them in a side database in a temporary directory, deleted when it exits: no
command writes to its input (``chatkit-trace redecode`` is the one that
stores them in the trace).  ``write_back=True`` writes them into the trace
itself (for callers that own it).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chatkit_trace import tempfiles

__all__ = ["AUTO_LIMIT", "AnalysisResult", "analyse"]

#: Traces up to this many frames are analysed on open without asking.
AUTO_LIMIT = 200_000

Progress = Callable[[str, float | None], None]


@dataclass
class AnalysisResult:
    derived_path: Path | None  # None: written into the trace itself
    findings: int
    frames: int
    facts: int


class _Cancelled(Exception):
    pass


def analyse(
    path: str | Path,
    *,
    profile: str | None = None,
    write_back: bool = False,
    side_dir: str | Path | None = None,
    progress: Progress | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> AnalysisResult | None:
    """Derive ``path`` as ``check`` does; write the derived tables back or into a side database.

    Returns None when ``cancelled()`` turned true on the way (checked after
    each session; a side database is then removed, a trace written back holds
    the sessions done so far).
    """
    from chatkit_trace.derive import Deriver
    from chatkit_trace.loading import open_trace
    from chatkit_trace.store import TraceStore

    report = progress or (lambda what, frac: None)
    loaded = open_trace(path, profile=profile, writable=write_back)
    derived: Path | None = None
    target: Any = None
    try:
        deriver = Deriver(loaded.store, loaded.adapter, capabilities=loaded.capabilities)
        total = max(1, len(deriver.sessions()))
        done = 0

        def session_done(_: Any) -> None:
            nonlocal done
            done += 1
            report("analysing sessions", done / total)
            if cancelled():
                raise _Cancelled

        report("analysing sessions", 0.0)
        if cancelled():
            return None
        if write_back and loaded.kind == "db" and not loaded.store.readonly:
            target = loaded.store
        else:
            derived = _side_database(side_dir)
            target = TraceStore(derived, create=True)
        try:
            result = deriver.run(write_to=target, on_session=session_done)
        except _Cancelled:
            if derived is not None:
                target.close()
                target = None
                for suffix in ("", "-wal", "-shm", "-journal"):
                    Path(f"{derived}{suffix}").unlink(missing_ok=True)
            return None
        report("writing derived tables", None)
        target.commit()
        return AnalysisResult(derived, len(result.findings), result.counts["frames"], result.counts["facts"])
    finally:
        if target is not None and target is not loaded.store:
            target.close()
        loaded.close()


def _side_database(side_dir: str | Path | None) -> Path:
    """A new file for the derived tables, in ``side_dir`` or the process's private
    folder (``0700``, files ``0600``, removed on every way out: :mod:`chatkit_trace.tempfiles`)."""
    if side_dir is None:
        return tempfiles.new_file("derived-", ".db")
    fd, name = tempfile.mkstemp(prefix="derived-", suffix=".db", dir=side_dir)
    os.close(fd)  # mkstemp: 0600
    return Path(name)
