"""Replaying ahead: states from a child process, the UI thread's short cut, the text panels.

Every state the viewer restores must give exactly the snapshot a replay from
the start of the session gives; these tests compare them (no timing).
"""

from __future__ import annotations

import threading

from chatkit_trace.loading import open_trace
from chatkit_trace.viewer import ViewerApp
from chatkit_trace.viewer import run_screen as run_screen_module
from chatkit_trace.viewer.run_screen import RunScreen
from chatkit_trace.viewer.widgets import Panel, TimelineView
from chatkit_trace.views import TraceData, build_timeline, row_key
from chatkit_trace.views.ahead import Ahead
from chatkit_trace.views.replay import BEHIND, SessionReplayer

from .conftest import long_trace, wait_for

SIZE = (140, 40)


def _setup(tmp_path, frames):  # type: ignore[no-untyped-def]
    path = long_trace(tmp_path / "long.db", frames)
    loaded = open_trace(path)
    loaded.close()
    data = TraceData(path)
    (run,) = data.runs()
    tl = build_timeline(data, run)
    return path, loaded, data, tl


def _straight(data, loaded, keys):  # type: ignore[no-untyped-def]
    """The snapshots at ``keys`` replayed from the start of the session, moment by moment."""
    rp = SessionReplayer(data, "s1", loaded.adapter, loaded.capabilities, cache_size=100_000)
    while rp.extend(1000):
        pass
    return {k: rp.cached(k).snapshot.to_json() for k in keys}


def _with_child_states(path, data, loaded, every, horizon=None):  # type: ignore[no-untyped-def]
    """A replayer holding every state the child process sent (the child has finished)."""
    rp = SessionReplayer(data, "s1", loaded.adapter, loaded.capabilities)
    rp.horizon = horizon
    rp.start_ahead(str(path), None, every=every)
    try:
        assert rp.ahead.wait(120)
    finally:
        rp.stop_ahead()
    return rp


def test_states_from_the_child_process_equal_a_straight_replay(tmp_path):
    path, loaded, data, tl = _setup(tmp_path, 3000)
    keys = [row_key(data.row(tl, i)) for i in (len(tl) - 1, len(tl) - 2, 2100, 1200)]
    expected = _straight(data, loaded, keys)
    rp = SessionReplayer(data, "s1", loaded.adapter, loaded.capabilities)
    rp.horizon = keys[0]
    rp.start_ahead(str(path), None, every=500)
    try:
        assert rp.ahead.wait(120)
        positions = [pos for _, pos, _ in rp.remote]
        # every 500 events, every 256 in the last 1024, and right before the last one
        # (the request, 3000 frames, the end: 3002 events)
        assert positions == [500, 1000, 1500, 2000, 2048, 2304, 2500, 2560, 2816, 3000, 3001]
        for k in keys:
            before = rp.replays
            m = rp.moment(k)
            assert m.snapshot.to_json() == expected[k]
            assert rp.replays - before <= 500  # restored near the row, not replayed from the start
        assert rp.restores >= 1
    finally:
        rp.stop_ahead()


def test_a_jump_restored_right_before_its_row_is_filled_in_behind(tmp_path):
    """The child's state right before the last event serves a jump to the end
    with one event replayed; fill_behind then replays the events before it from
    earlier states, so the rows behind the end are cached, and right."""
    path, loaded, data, tl = _setup(tmp_path, 3000)
    behind = [row_key(data.row(tl, len(tl) - 1 - i)) for i in range(1, BEHIND)]
    end = row_key(data.row(tl, len(tl) - 1))
    expected = _straight(data, loaded, [end, *behind])
    rp = _with_child_states(path, data, loaded, 500, end)
    before = rp.replays
    assert rp.moment(end).snapshot.to_json() == expected[end]
    assert rp.replays - before == 1  # restored right before the end
    assert [rp.cached(k) is not None for k in behind[:2]] == [False, False]
    assert rp.wants_fill()
    fills = 0
    while rp.fill_behind():
        fills += 1
        assert fills < 10
    assert fills >= 1 and not rp.wants_fill()
    for k in behind:
        m = rp.cached(k)
        assert m is not None and m.snapshot.to_json() == expected[k]
    assert rp.at - rp.edge[1] >= BEHIND  # enough behind the cursor: no more fills


def test_stepping_back_far_from_a_jump_finds_every_moment_filled_in(tmp_path):
    """Between the user's steps the worker fills in behind him: every step back
    is a cache hit, with a fill every BEHIND / 2 steps or so, not one per step."""
    path, loaded, data, tl = _setup(tmp_path, 3000)
    last = len(tl) - 1
    keys = [row_key(data.row(tl, last - i)) for i in range(0, 700)]
    expected = _straight(data, loaded, keys)
    rp = _with_child_states(path, data, loaded, 500, keys[0])
    assert rp.moment(keys[0]).snapshot.to_json() == expected[keys[0]]
    fills = 0
    for k in keys[1:]:
        while rp.fill_behind():  # what the worker does between the user's steps
            fills += 1
        assert rp.cached(k) is not None
        m = rp.try_moment(k, 128)
        assert m is not None and m.snapshot.to_json() == expected[k]
    assert 2 <= fills <= len(keys) // (BEHIND // 2) + 2


def test_a_fill_replays_every_event_it_was_asked_for_even_with_a_later_state_at_hand(tmp_path):
    """A long replay switches to a child's state far ahead of it; a fill must
    not (the state ahead is the one it fills in behind: it would skip the
    very moments it was asked for, and try again for ever)."""
    path, loaded, data, tl = _setup(tmp_path, 6000)
    row = 4100
    target = row_key(data.row(tl, row))
    behind = [row_key(data.row(tl, row - i)) for i in range(1, BEHIND)]
    expected = _straight(data, loaded, [target, *behind])
    rp = _with_child_states(path, data, loaded, 2000)  # states at 2000 and 4000 events
    assert rp.moment(target).snapshot.to_json() == expected[target]
    assert rp.wants_fill()
    fills = 0
    while rp.fill_behind():
        fills += 1
        assert fills <= 3, "the fill makes no progress"
    for k in behind:
        m = rp.cached(k)
        assert m is not None and m.snapshot.to_json() == expected[k]


def test_a_child_that_resolves_another_adapter_sends_nothing(tmp_path):
    path, loaded, data, tl = _setup(tmp_path, 50)
    got: list[object] = []
    ahead = Ahead(str(path), None, "s1", None, 10, ("NotTheAdapter", loaded.capabilities), lambda *a: got.append(a))
    try:
        assert ahead.wait(120)
        assert got == [] and ahead.received == 0  # the viewer replays alone
    finally:
        ahead.stop()


def test_portable_states_replay_on_like_the_original(tmp_path):
    path, loaded, data, tl = _setup(tmp_path, 400)
    keys = [row_key(data.row(tl, i)) for i in (len(tl) - 1, 300)]
    expected = _straight(data, loaded, keys)
    other = SessionReplayer(data, "s1", loaded.adapter, loaded.capabilities)
    cur = other.frontier
    for _ in range(250):
        cur.step(moment=False)
    rp = SessionReplayer(data, "s1", loaded.adapter, loaded.capabilities, every=1 << 20)
    rp.add_remote(cur.key, cur.position, other.portable_dump(cur.rp))  # a state through the portable pickle
    for k in keys:
        assert rp.moment(k).snapshot.to_json() == expected[k]
    assert rp.restores >= 1


def test_the_ui_threads_short_cut_stays_within_its_budget(tmp_path):
    path, loaded, data, tl = _setup(tmp_path, 600)
    far = row_key(data.row(tl, 500))
    near = row_key(data.row(tl, 40))
    expected = _straight(data, loaded, [far, near])
    rp = SessionReplayer(data, "s1", loaded.adapter, loaded.capabilities)
    m = rp.try_moment(near, 128)
    assert m is not None and m.snapshot.to_json() == expected[near]
    before = rp.replays
    assert rp.try_moment(far, 128) is None  # too far: left to the worker ...
    assert rp.replays - before == 128  # ... after replaying its budget, which stays replayed
    assert rp.moment(far).snapshot.to_json() == expected[far]
    # while a worker replays, the UI thread does not wait for it
    held = threading.Event()
    release = threading.Event()

    def worker() -> None:
        with rp._busy:
            held.set()
            release.wait(10)

    t = threading.Thread(target=worker)
    t.start()
    held.wait(10)
    try:
        assert rp.try_moment(row_key(data.row(tl, 520)), 128) is None
    finally:
        release.set()
        t.join()


async def test_a_long_run_jumps_to_its_end_from_the_childs_state(tmp_path, monkeypatch):
    monkeypatch.setattr(run_screen_module, "MIN_EVENTS", 100)
    path, loaded, data, tl = _setup(tmp_path, 1500)
    end = row_key(data.row(tl, len(tl) - 1))
    behind = [row_key(data.row(tl, len(tl) - 1 - i)) for i in range(1, 6)]
    straight = _straight(data, loaded, [end, *behind])
    expected = straight[end]
    # no replay ahead in the viewer's own process while the test waits (its checkpoints
    # would serve the step back below, and its replays would count in rp.replays)
    monkeypatch.setattr(SessionReplayer, "extend", lambda self, n=256: False)
    app = ViewerApp(path, poll=0, analyse="never", session="s1", run="r1")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.settled)
        screen = app.screen
        rp = screen.replayer
        assert rp.ahead is not None
        await wait_for(pilot, lambda: rp.ahead.done, timeout=120)
        assert rp.remote
        screen.query_one(TimelineView).action_jump(-1)
        await wait_for(pilot, lambda: screen.settled)
        assert screen.moment.snapshot.to_json() == expected
        assert rp.restores >= 1
        # the worker then fills in the moments behind the end (the state it
        # restored was right before the end): each step back finds its moment
        # computed already and shows it in the same call
        await wait_for(pilot, lambda: not rp.wants_fill())
        view = screen.query_one(TimelineView)
        for k in behind:
            assert rp.cached(k) is not None
            view.action_move(-1)
            assert screen.settled and screen.moment.key == k
            assert screen.moment.snapshot.to_json() == straight[k]
        child = rp.ahead.process
        await pilot.press("escape")
        await wait_for(pilot, lambda: child.poll() is not None)


async def test_a_short_run_has_no_child(tmp_path):
    path = long_trace(tmp_path / "short.db", 30)
    app = ViewerApp(path, poll=0, analyse="never", session="s1", run="r1")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.settled)
        assert app.screen.replayer.ahead is None


async def test_a_cursor_move_shows_its_snapshot_in_the_same_call(tmp_path, monkeypatch):
    # the worker never replays ahead here (it would hold the replayer a moment: then the
    # UI thread leaves the row to it, correctly, and this test could not tell)
    monkeypatch.setattr(SessionReplayer, "extend", lambda self, n=256: False)
    path = long_trace(tmp_path / "short.db", 400)
    app = ViewerApp(path, poll=0, analyse="never", session="s1", run="r1")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.settled)
        screen = app.screen
        view = screen.query_one(TimelineView)
        view.focus()
        for _ in range(3):
            view.action_page(1)
            # no await in between: the moved row's snapshot is already shown (one screen update per key)
            assert screen.settled and screen.moment_row == view.cursor
        assert f"w{view.cursor - 1} " in screen.describe_moment()


async def test_a_panel_lays_out_a_new_text_and_keeps_the_end_in_view(tmp_path):
    path = long_trace(tmp_path / "short.db", 10)
    app = ViewerApp(path, poll=0, analyse="never", session="s1", run="r1")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.settled)
        panel = app.screen.query_one("#snapshot", Panel)
        height = panel.content_region.height
        panel.show("\n".join(f"line {i}" for i in range(200)), scroll="end")
        await pilot.pause()
        assert panel.virtual_size.height == 200 and panel.show_vertical_scrollbar
        assert panel.render_line(height - 1).text.startswith("line 199")
        panel.show("short text", scroll="end")  # the laid-out lines follow the new text
        await pilot.pause()
        assert panel.virtual_size.height == 1 and panel.scroll_offset.y == 0
        assert panel.render_line(0).text.startswith("short text")
        assert panel.body.render().plain == "short text"


async def test_pre_styled_rows_equal_rows_styled_afterwards(tmp_path):
    """The timeline's rows are built from segments styled once per kind; they must be
    the strips ``Segment.apply_style`` gave (the row's style under every cell's tone)."""
    from rich.segment import Segment
    from textual.strip import Strip

    path = long_trace(tmp_path / "short.db", 60)
    app = ViewerApp(path, poll=0, analyse="never", session="s1", run="r1")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.settled)
        view = app.screen.query_one(TimelineView)
        width = view.size.width
        for focused in (False, True):
            if focused:
                view.focus()
                await pilot.pause()
            for index in range(view.row_count()):
                for selected in (False, True):
                    style = view._row_style(view.row_tone(index), selected)
                    cells = view.row_cells(index)
                    fast = Strip(view._segments(cells, width, selected, style)).crop_extend(0, width, style)
                    slow = Strip(Segment.apply_style(view._segments(cells, width, selected), style)).crop_extend(0, width, style)
                    assert list(fast) == list(slow)
                    assert fast.text.strip()  # not an empty row
