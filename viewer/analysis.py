"""Deriving a trace's facts, runs and findings for the viewer (in a worker thread).

This is ``chatkit-trace check`` (:func:`chatkit_trace.checkcmd.run_check`)
with two differences a viewer needs: it reports progress, and it writes the
derived tables somewhere.  The viewer puts them in a side database in a
temporary directory, deleted when it exits: no command writes to its input
(``chatkit-trace redecode`` is the one that stores them in the trace).
``write_back=True`` writes them into the trace itself (for callers that own it).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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


def analyse(
    path: str | Path,
    *,
    profile: str | None = None,
    write_back: bool = False,
    side_dir: str | Path | None = None,
    progress: Progress | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> AnalysisResult | None:
    """Replay and analyse ``path``; write the derived tables back or into a side database.

    Returns None when ``cancelled()`` turned true on the way.
    """
    from chatkit_trace.analyze import analyze_replay, trace_findings
    from chatkit_trace.checkcmd import write_findings
    from chatkit_trace.loading import open_trace
    from chatkit_trace.pipeline import replay
    from chatkit_trace.store import TraceStore, write_replay

    report = progress or (lambda what, frac: None)
    loaded = open_trace(path, profile=profile, writable=write_back)
    try:
        total = max(1, loaded.store.exchange_count())
        exchanges = []
        for i, ex in enumerate(loaded.store.exchanges(with_frames=True)):
            exchanges.append(ex)
            if i % 16 == 0 or i + 1 == total:
                report("reading frames", (i + 1) / total)
            if cancelled():
                return None
        frames = sum(len(e.frames) for e in exchanges)
        report(f"replaying {frames} frames", None)
        rep = replay(exchanges, loaded.adapter, capabilities=loaded.capabilities)
        if cancelled():
            return None
        report("analysing", None)
        findings = analyze_replay(rep, exchanges, loaded.adapter) + trace_findings(loaded.store.meta())
        if cancelled():
            return None
        report("writing derived tables", None)
        if write_back and loaded.kind == "db" and not loaded.store.readonly:
            target, derived = loaded.store, None
        else:
            folder = (
                Path(side_dir)
                if side_dir is not None
                else Path(tempfile.mkdtemp(prefix="chatkit-view-"))
            )
            derived = Path(tempfile.mkstemp(prefix="derived-", suffix=".db", dir=folder)[1])
            derived.unlink()
            target = TraceStore(derived, create=True)
        write_replay(target, rep)
        write_findings(target, findings)
        target.commit()
        if target is not loaded.store:
            target.close()
        return AnalysisResult(derived, len(findings), len(rep.frames), len(rep.facts))
    finally:
        loaded.close()
