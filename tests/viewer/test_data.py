"""The data layer and the incremental replay, without the UI: every corpus case."""

from __future__ import annotations

import random

import pytest

from chatkit_trace.loading import open_trace
from chatkit_trace.pipeline import replay
from chatkit_trace.views import START, TraceData, build_timeline, parse_ref, row_key
from chatkit_trace.views.replay import SessionReplayer

from ..analyze.corpus import CORPUS
from .conftest import corpus_trace, long_trace

CASES = sorted(p.stem for p in CORPUS.glob("*.json"))


@pytest.mark.parametrize("name", CASES)
def test_timelines_follow_the_replay_and_hold_every_decisive_frame(tmp_path, name):
    path = corpus_trace(tmp_path, name, check=True)
    loaded = open_trace(path)
    try:
        exchanges = loaded.exchanges()
        rep = replay(exchanges, loaded.adapter, capabilities=loaded.capabilities)
    finally:
        loaded.close()
    data = TraceData(path)
    runs = data.runs()
    core_runs = {(sid, v.id) for sid, s in rep.sessions.items() for v in s.run_views()}
    # runs the UI still shows at the end (a refresh may drop a settled run: decisions.md 272)
    shown = {(sid, v.id) for sid, s in rep.sessions.items() for v in s.core.snapshot.runs}
    assert core_runs <= {r.key for r in runs}
    assert all(r.status == "not started" for r in runs if r.key not in core_runs)
    for run in runs:
        findings = data.findings(run.session_id, run.run_id)
        tl = build_timeline(data, run, [ref for f in findings for ref in f.frames])
        rows = data.rows(tl, 0, len(tl))
        keys = [row_key(r) for r in rows]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)
        # every frame the pipeline gave this run is a row
        mine = {
            (fr.exchange_index, fr.frame_index)
            for fr in rep.frames
            if (fr.session_id, fr.run_id) == run.key
        }
        assert mine <= {(r.exchange.index, r.idx) for r in rows}
        for f in findings:
            e, i = parse_ref(f.decisive)
            row = tl.find(e, i)
            assert row is not None, f"{f.code} {f.decisive} not in the timeline of {run.key}"
        # the session replay reaches exactly each row (its moments are the rows' moments)
        rp = SessionReplayer(
            data, run.session_for_replay, loaded.adapter, loaded.capabilities, every=2
        )
        for r in rows:
            m = rp.moment(row_key(r))
            assert m is not None and m.key == row_key(r)
            if r.idx not in (START,) and r.kind == "frame":
                assert m.frame is not None and (m.frame.exchange_index, m.frame.frame_index) == (
                    r.exchange.index,
                    r.idx,
                )
        final = rp.moment(row_key(rows[-1])).snapshot
        times = [fr.at for fr in rep.frames if fr.session_id == run.session_id]
        if (
            run.key in shown
            and run.session_id in rep.sessions
            and times
            and rows[-1].t >= max(times)
        ):
            # the last row is the session's last event: the state check reached
            assert (
                final.run(run.run_id).status
                == rep.sessions[run.session_id].core.snapshot.run(run.run_id).status
            )


@pytest.mark.parametrize("name", ["CK404", "CK101-subscription", "CK201", "CK106", "clean-myproto"])
def test_snapshots_from_checkpoints_equal_a_straight_replay(tmp_path, name):
    path = corpus_trace(tmp_path, name)
    loaded = open_trace(path)
    loaded.close()
    data = TraceData(path)
    for sid in {r.session_id for r in data.runs()}:
        straight = SessionReplayer(data, sid, loaded.adapter, loaded.capabilities)
        while straight.extend(1000):
            pass
        expected = {k: m.snapshot.to_json() for k, m in straight.cache.items()}
        rp = SessionReplayer(
            data, sid, loaded.adapter, loaded.capabilities, every=2, max_checkpoints=3, cache_size=2
        )
        while rp.extend(3):
            pass
        assert len(rp.checkpoints) <= 3
        keys = list(expected)
        random.Random(7).shuffle(keys)
        for k in keys:
            assert rp.moment(k).snapshot.to_json() == expected[k]


def test_a_long_run_costs_bounded_memory(tmp_path):
    path = long_trace(tmp_path / "long.db", 3000)
    loaded = open_trace(path)
    loaded.close()
    data = TraceData(path)
    (run,) = data.runs()
    tl = build_timeline(data, run)
    assert len(tl) == 3002 and len(tl.segments) == 3  # request, 3000 frames in one segment, end
    rp = SessionReplayer(
        data, "s1", loaded.adapter, loaded.capabilities, every=64, max_checkpoints=8, cache_size=100
    )
    while rp.extend(500):
        pass
    assert len(rp.checkpoints) <= 8 and len(rp.cache) <= 100
    # far back: restored from a checkpoint, not replayed from the first frame
    before = rp.replays
    m = rp.moment(row_key(data.row(tl, 1500)))
    assert "w1499" in m.snapshot.message("assistant:r1").text
    assert rp.restores == 1 and rp.replays - before <= rp.every
    # pages are cached, bounded
    for i in range(0, 3000, 100):
        data.row(tl, i)
    assert len(data.page_cache) <= data.page_cache.maxsize


def test_what_checkpoints_refer_to_is_freed_with_their_replayer(tmp_path):
    """A checkpoint refers to the adapter, the trace's data and the lazy
    frame lists instead of copying them; those references belong to the
    replayer (not to the process), so closing a run's replayer frees them
    while its checkpoints still restore exactly."""
    import gc
    import weakref

    from chatkit_trace.views.replay import _TABLES, _LazyFrames

    path = corpus_trace(tmp_path, "CK201")
    loaded = open_trace(path)
    loaded.close()
    data = TraceData(path)
    sid = data.runs()[0].session_id
    rp = SessionReplayer(data, sid, loaded.adapter, loaded.capabilities, every=2, cache_size=2)
    while rp.extend(3):
        pass
    assert len(rp.checkpoints) >= 2
    lazy = [weakref.ref(o) for o in rp._shared.objects.values() if isinstance(o, _LazyFrames)]
    assert lazy and all(r() is not None for r in lazy)
    key, _, blob = rp.checkpoints[-1]
    assert key is not None
    assert rp._load(blob).out.sessions[sid].core.snapshot.to_json() == rp.moment(key).snapshot.to_json()
    table = id(rp._shared)
    assert table in _TABLES
    del rp, blob
    gc.collect()
    assert all(r() is None for r in lazy)
    assert table not in _TABLES


@pytest.mark.parametrize("name", ["CK702", "CK702-queue", "CK703"])
def test_a_run_the_recorder_lost_part_of_is_recording_incomplete(tmp_path, name):
    """The viewer's run list says what `chatkit-trace runs` says (CK702, CK703)."""
    data = TraceData(corpus_trace(tmp_path, name, check=True))
    [run] = data.runs()
    assert run.status == "recording incomplete", run
    assert set(run.codes) == {name.split("-")[0]}
