"""The viewer on a socket several sessions share (issue 20): each session's
runs, timelines and snapshots hold its own messages only, and its live vs
history is the one ``diff`` prints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from chatkit_trace.cli import main
from chatkit_trace.loading import open_trace
from chatkit_trace.views import TraceData, build_timeline, row_key
from chatkit_trace.views.diff import comparisons
from chatkit_trace.views.replay import SessionReplayer

ROOT = Path(__file__).resolve().parents[2]
BEFORE = ROOT / "tests" / "data" / "shared_socket" / "before-20.db"
PROFILE = ROOT / "chatkit_trace" / "examples" / "shared_socket.toml"


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "socket.db"
    shutil.copy(BEFORE, path)
    assert main(["redecode", str(path), "--profile", str(PROFILE)]) == 0
    return path


def test_each_session_shows_its_own_messages_of_the_socket(tmp_path, capsys):
    path = _trace(tmp_path)
    data = TraceData(path)
    runs = data.runs()
    assert {r.key for r in runs} == {("sess-a", f"a-r{i}") for i in range(1, 5)} | {
        ("sess-b", f"b-r{i}") for i in range(1, 4)} | {("sess-c", "c-r1")}
    assert not [r for r in runs if r.status == "not started"]
    settled = {r.key: r.settled_by for r in runs}
    assert settled[("sess-b", "b-r2")] == "history" and settled[("sess-b", "b-r1")] == "fact"
    loaded = open_trace(path)
    loaded.close()
    for run in runs:
        tl = build_timeline(data, run)
        rows = data.rows(tl, 0, len(tl))
        frames = [r for r in rows if r.kind == "frame"]
        assert frames, run.key
        for r in frames:
            detail = data.frame_detail(r.exchange.index, r.idx)
            assert json.loads(detail["text"])["sessionId"] == run.session_id, (run.key, r.exchange.index, r.idx)
        rp = SessionReplayer(data, run.session_for_replay, loaded.adapter, loaded.capabilities, every=2)
        last = rp.moment(row_key(rows[-1]))
        assert last is not None and last.snapshot.session_id == run.session_id
        assert last.snapshot.run(run.run_id) is not None
    # live vs history of b-r2 (settled only by the read): the viewer's and diff's are one comparison
    [c] = comparisons(data, "sess-b", "b-r2", loaded.adapter, loaded.capabilities)
    assert (c.read, c.settled, c.diffs) == (2, "read", [])
    assert main(["diff", str(path), "--session", "sess-b", "--run", "b-r2"]) == 0
    assert "history read 2 (session scope)" in capsys.readouterr().out


def test_a_page_cached_for_one_timeline_is_never_shown_for_another_with_its_id(tmp_path):
    """The page cache is keyed by id(timeline): a run's freed timeline can
    leave its id to the next run's (this test failed once in CI, showing
    sess-a's frame in sess-b's run).  An entry under the new timeline's id
    that belongs to another timeline is not used."""
    data = TraceData(_trace(tmp_path))
    a, b = (next(r for r in data.runs() if r.key == key) for key in (("sess-a", "a-r1"), ("sess-b", "b-r1")))
    tl_a, tl_b = build_timeline(data, a), build_timeline(data, b)
    rows_a = data.page(tl_a, 0)
    data.page_cache.clear()
    data.page_cache.put((id(tl_b), data.generation, 0), (tl_a, rows_a))  # as if tl_b had tl_a's old id
    rows_b = data.page(tl_b, 0)
    assert rows_b != rows_a
    assert {json.loads(data.frame_detail(r.exchange.index, r.idx)["text"])["sessionId"] for r in rows_b if r.kind == "frame"} == {"sess-b"}
