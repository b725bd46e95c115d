"""A frame's state is one of chatkit_trace.pipeline.FrameState, listed once:
the replay sets only those, and the viewer and the report mark the same ones
as problems (the viewer had missed ``after-settled`` and ``after-concurrent``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chatkit_trace.derive import Deriver
from chatkit_trace.loading import open_trace
from chatkit_trace.pipeline import PROBLEM_STATES, READER_STOPPED, FrameState, ReaderStop
from chatkit_trace.report._html import _script
from chatkit_trace.views import ExchangeInfo, Row

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"
INPUTS = [*sorted((RECORDINGS / "traces").glob("*.db")), *sorted((RECORDINGS / "fixtures").rglob("*.chatkit.json"))]


def test_every_reader_stop_has_its_state():
    assert {str(s) for s in READER_STOPPED} == {f"after-{stop}" for stop in ReaderStop}
    assert READER_STOPPED <= set(FrameState) and PROBLEM_STATES <= set(FrameState)
    with pytest.raises(ValueError):
        FrameState("after-nothing")


def test_the_replay_sets_only_the_listed_states():
    seen: set[str] = set()
    for path in INPUTS:
        loaded = open_trace(path)
        try:

            def session_done(derived, seen=seen, path=path):
                for fr in derived.replay.frames:
                    assert type(fr.state) is FrameState, (path, fr.exchange_index, fr.frame_index, fr.state)
                    seen.add(fr.state)
                for rec in derived.replay.exchanges.values():
                    assert rec.reader_stop is None or type(rec.reader_stop[0]) is ReaderStop

            Deriver(loaded.store, loaded.adapter, capabilities=loaded.capabilities).run(on_session=session_done)
        finally:
            loaded.close()
    # the recordings exercise the common states and a reader that stopped
    assert {FrameState.ADMITTED, FrameState.AFTER_TERMINAL, FrameState.AFTER_SETTLED} <= seen, seen


def test_the_report_marks_the_problem_states():
    m = re.search(r"const BAD_STATES = new Set\(\[(.*?)\]\);", _script())
    assert m is not None
    assert set(re.findall(r"'([^']*)'", m.group(1))) == {str(s) for s in PROBLEM_STATES}


@pytest.mark.parametrize("state", sorted(READER_STOPPED))
def test_the_viewer_warns_of_every_frame_read_after_the_reader_stopped(state):
    from chatkit_trace.viewer.render import facts_cells

    ex = ExchangeInfo(1, "run", "s", "r", "POST", "/run", 200, 0.0, 1.0, "sse", "complete", None, None, None)
    (label, tone), = facts_cells(Row(ex, 3, 0.5, state=state, facts=[]))
    assert (label, tone) == (state.replace("-", " "), "warning")


def test_the_viewer_shows_a_quiet_state_muted():
    from chatkit_trace.viewer.render import facts_cells

    ex = ExchangeInfo(1, "run", "s", "r", "POST", "/run", 200, 0.0, 1.0, "sse", "complete", None, None, None)
    assert facts_cells(Row(ex, 3, 0.5, state=FrameState.EMPTY, facts=[])) == [("no event", "muted")]
    assert facts_cells(Row(ex, 3, 0.5, state=FrameState.OVER_LIMIT, facts=[])) == [("over-limit", "muted")]
