"""The viewer driven headless with Textual's Pilot: the README's stories, end to end."""

from __future__ import annotations

import json

import pytest

from chatkit_trace.store import TraceStore
from chatkit_trace.viewer import ViewerApp
from chatkit_trace.viewer.dialogs import DiffScreen, ExportScreen, HelpScreen
from chatkit_trace.viewer.run_screen import RunScreen
from chatkit_trace.viewer.runs_screen import RunsScreen
from chatkit_trace.viewer.widgets import FindingsList, RunsTable, TimelineView
from chatkit_trace.wire import Frame

from .conftest import long_trace, ready, wait_for

SIZE = (150, 40)


def row_refs(screen: RunScreen) -> list[str]:
    view = screen.query_one(TimelineView)
    return [view.get_row(i).ref for i in range(view.row_count())]


async def test_terminal_sealed_story_jumps_to_the_decisive_frame(traces):
    """CK101 (a chunk after the terminal): find the run, select the finding,
    the cursor lands on frame 0:4 and the snapshot shows the answer without the lost chunk."""
    app = ViewerApp(traces("CK101-direct"), poll=0)  # raw trace: the viewer analyses it
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.analysed
        runs = app.screen.query_one(RunsTable)
        assert [(r.run_id, r.status, r.errors, r.codes) for r in runs.runs] == [
            ("r1", "completed", 1, ("CK101",))
        ]
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        screen = app.screen
        await ready(pilot)
        assert row_refs(screen) == ["0", "0:0", "0:1", "0:2", "0:3", "0:4", "0:end"]
        await pilot.press("f")  # focus the findings
        assert screen.query_one(FindingsList).has_focus
        await pilot.press("enter")
        await ready(pilot)
        view = screen.query_one(TimelineView)
        assert view.get_row(view.cursor).ref == "0:4"
        assert view.has_focus
        chat = screen.describe_moment()
        assert "Hello world" in chat and "(late)" not in chat
        assert "run r1  completed" in chat
        detail = screen.query_one("#detail").body.render().plain
        assert "never admitted" in detail and "(late)" in detail and "CK101" in detail
        # the terminal fact is the row just before
        before = view.get_row(view.cursor - 1)
        assert [(f.kind, f.accepted) for f in before.facts] == [("completed", True)]


async def test_rejected_fact_shows_its_reason(traces):
    """CK101 on a subscription: the Core rejects the late output with terminal-sealed."""
    app = ViewerApp(traces("CK101-subscription", check=True), poll=0)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        table = app.screen.query_one(RunsTable)
        target = next(i for i, r in enumerate(table.runs) if "CK101" in r.codes)
        table.move_to(target)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await ready(pilot)
        screen = app.screen
        await pilot.press("n")
        await ready(pilot)
        view = screen.query_one(TimelineView)
        row = view.get_row(view.cursor)
        assert row.problem == "rejected"
        assert any(f.reason == "terminal-sealed" for f in row.facts)
        assert "rejected: terminal-sealed" in screen.query_one("#detail").body.render().plain


async def test_refresh_shows_twice_story_live_vs_history(traces):
    """CK201/CK202: the history read is the decisive row; d shows live and history side by side."""
    app = ViewerApp(traces("CK201", check=True), poll=0)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await ready(pilot)
        screen = app.screen
        assert {f.code for f in screen.findings} == {"CK201", "CK202"}
        await pilot.press("n")
        await ready(pilot)
        view = screen.query_one(TimelineView)
        assert view.get_row(view.cursor).ref == "1"  # the history read request
        assert "history read" in screen.query_one("#detail").body.render().plain
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen))
        diff = app.screen
        cols = diff.query_one("#diff-columns").render().plain
        assert "assistant:r1" in cols and "msg_8f2c" in cols
        listing = diff.query_one("#diff-list").render().plain
        assert "assistant:r1 vs msg_8f2c" in listing
        assert "CK201" in listing
        await pilot.press("escape")
        assert app.screen is screen


async def test_spinner_never_stops_outcome_unknown(traces):
    """CK102: the stream ended without a conclusion: 'outcome unknown', and the
    last snapshot shows the run still running with the connection lost."""
    app = ViewerApp(traces("CK102"), poll=0)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        table = app.screen.query_one(RunsTable)
        assert table.runs[0].status == "outcome unknown"
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await ready(pilot)
        await pilot.press("end")
        await ready(pilot)
        screen = app.screen
        view = screen.query_one(TimelineView)
        assert view.get_row(view.cursor).kind == "end"
        assert "outcome unknown" in screen.describe_moment()
        assert "connection lost" in screen.describe_moment()
        assert "no conclusion" in screen.query_one("#detail").body.render().plain


async def test_stop_request_is_a_row_of_the_timeline(traces):
    """CK106: the stop request shows in the run's timeline."""
    app = ViewerApp(traces("CK106"), poll=0)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await ready(pilot)
        screen = app.screen
        rows = [
            screen.query_one(TimelineView).get_row(i)
            for i in range(screen.query_one(TimelineView).row_count())
        ]
        assert [r.exchange.capability for r in rows if r.kind == "request"] == ["run", "abort"]
        await pilot.press("n")
        await ready(pilot)
        assert "stop request" in screen.query_one("#detail").body.render().plain
        assert "stop requested" in screen.describe_moment()


async def test_filters_status_code_and_search(traces, tmp_path):
    path = tmp_path / "mixed.db"
    # two cases in one trace: a clean run and an unconcluded one, different sessions
    from ..analyze.corpus import CORPUS, load_case

    with TraceStore(path, create=True) as store:
        store.set_meta("protocol", "myproto")
        n = 0
        for name, sid in (("clean-myproto", "good"), ("CK102", "bad")):
            _, exchanges, _ = load_case(CORPUS / f"{name}.json")
            for ex in exchanges:
                ex.index, ex.session_id = n, sid
                ex.frames = [
                    Frame(
                        n,
                        f.index,
                        f.transport,
                        f.direction,
                        f.text,
                        f.raw,
                        f.event,
                        f.event_id,
                        f.start,
                        f.end,
                        f.at + 100 * n,
                        f.error,
                    )
                    for f in ex.frames
                ]
                ex.started_at += 100 * n
                if ex.ended_at:
                    ex.ended_at += 100 * n
                store.add_exchange(ex)
                n += 1
    app = ViewerApp(path, poll=0)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = app.screen
        table = screen.query_one(RunsTable)
        assert len(table.runs) == len(screen.all_runs) >= 2
        await pilot.press("s")  # problems
        assert {r.session_id for r in table.runs} == {"bad"}
        await pilot.press("s")  # failed
        assert table.runs == []
        await pilot.press("escape")
        await pilot.press("c")
        code = screen.query_one("#query").value
        assert code.startswith("code:CK")
        assert table.runs and all(any(c.startswith(code[5:]) for c in r.codes) for r in table.runs)
        await pilot.press("escape")
        await pilot.press("slash")
        await pilot.press(*"good")
        assert {r.session_id for r in table.runs} == {"good"}
        await pilot.press("enter")
        assert table.has_focus


async def test_search_by_frame_text(traces):
    app = ViewerApp(traces("CK101-direct", check=True), poll=0)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = app.screen
        table = screen.query_one(RunsTable)
        await pilot.press("slash", *"nothing-like-this")
        await wait_for(pilot, lambda: "nothing-like-this" in screen.text_hits)
        await pilot.pause()
        assert table.runs == []
        screen.query_one("#query").value = "late"
        await wait_for(pilot, lambda: "late" in screen.text_hits)
        await pilot.pause()
        assert [r.run_id for r in table.runs] == ["r1"]


async def test_raw_bytes_help_export_theme(traces, tmp_path):
    app = ViewerApp(
        traces("CK101-direct", check=True), poll=0, session="s1", run="r1", export_dir=tmp_path
    )
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await ready(pilot)
        screen = app.screen
        await pilot.press("down", "down")
        await ready(pilot)
        await pilot.press("x")
        detail = screen.query_one("#detail").body.render().plain
        assert (
            "00000000" in detail
            and "data: {" in detail.replace("\n", " ")
            or "64 61 74 61" in detail
        )
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.press("e")
        assert isinstance(app.screen, ExportScreen)
        export = app.screen
        text = export.query_one("#export-text").render().plain
        assert "CK101-direct-s1-r1.chatkit.json" in text
        if export.exporter is None:
            assert "not available" in text
        else:
            await pilot.press("enter")
            await wait_for(pilot, lambda: export.written is not None, what="the export")
            assert export.written == tmp_path / "CK101-direct-s1-r1.chatkit.json", (
                export.query_one("#export-text").render().plain
            )
            assert json.loads(export.written.read_text())
        await pilot.press("escape")
        assert app.screen is screen
        dark = app.theme
        await pilot.press("ctrl+t")
        assert app.theme != dark and "light" in app.theme
        await pilot.press("escape")
        assert isinstance(app.screen, RunsScreen)


async def test_playback_runs_to_the_end(traces):
    app = ViewerApp(traces("CK404", check=True), poll=0, session="s1", run="r1")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await ready(pilot)
        screen = app.screen
        view = screen.query_one(TimelineView)
        for _ in range(5):
            await pilot.press("plus")
        await pilot.press("space")
        assert screen.playing or view.cursor == view.row_count() - 1
        await wait_for(pilot, lambda: not screen.playing, timeout=10, what="playback to finish")
        assert view.cursor == view.row_count() - 1
        await ready(pilot)
        assert "run r1  completed" in screen.describe_moment()


async def test_problem_rows_and_step_back_use_the_cache(traces):
    app = ViewerApp(traces("CK108", check=True), poll=0, session="s1", run="r1")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await ready(pilot)
        screen = app.screen
        view = screen.query_one(TimelineView)
        assert screen.problems
        await pilot.press("right_square_bracket")
        await ready(pilot)
        assert view.cursor == screen.problems[0]
        await pilot.press("end")
        await ready(pilot)
        replays = screen.replayer.replays
        await pilot.press("up", "up", "down")
        await ready(pilot)
        assert screen.replayer.replays == replays  # served from the moments already computed


async def test_live_tail_follows_new_frames(tmp_path):
    path = long_trace(tmp_path / "live.db", 20, done=False)
    with TraceStore(path) as store:  # the stream is still open: the recorder is writing
        store.update_exchange(0, end=None, ended_at=None)
    app = ViewerApp(path, poll=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await ready(pilot)
        screen = app.screen
        view = screen.query_one(TimelineView)
        rows = view.row_count()
        await pilot.press("end")
        await ready(pilot)
        with TraceStore(path) as writer:
            writer.add_frames(
                [
                    Frame(
                        0,
                        20 + i,
                        "sse",
                        "in",
                        json.dumps({"type": "text", "text": f"new{i}"}),
                        None,
                        None,
                        f"n{i}",
                        None,
                        None,
                        200.0 + i,
                    )
                    for i in range(3)
                ]
            )
        await wait_for(pilot, lambda: view.row_count() == rows + 3, what="new frames")
        assert app.live
        await ready(pilot)
        assert view.cursor == view.row_count() - 1  # following the end
        assert "new2" in screen.describe_moment()


async def test_live_tail_says_how_far_derivation_is_behind(tmp_path):
    """The recorder's writer queued frames its deriver has not derived yet
    (derive_queue): the live title says so, and stops saying it once derived."""
    from textual.widgets import Static

    path = long_trace(tmp_path / "behind.db", 20, done=False)
    app = ViewerApp(path, poll=0.05, analyse="never")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        title = app.screen.query_one("#title", Static)
        assert "derivation behind" not in str(title.render())
        with TraceStore(path) as writer:
            with writer.transaction():
                writer.queue_derivation({"s1": 7}, 1)
        await wait_for(pilot, lambda: "derivation behind by 7 frames" in str(title.render()), what="the backlog")
        with TraceStore(path) as deriver:
            [pending] = deriver.derive_pending()
            deriver.write_derived({}, done=pending)
        await wait_for(pilot, lambda: "derivation behind" not in str(title.render()), what="caught up")
        assert app.behind == 0


async def test_large_run_renders_only_what_is_visible(tmp_path):
    path = long_trace(tmp_path / "long.db", 6000)
    app = ViewerApp(path, poll=0, analyse="never")
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await ready(pilot)
        screen = app.screen
        view = screen.query_one(TimelineView)
        assert view.row_count() == 6002
        await pilot.press("end")
        await ready(pilot)
        assert view.get_row(view.cursor).kind == "end"
        assert len(view._strips) <= 2 * view.size.height + 4
        assert len(app.data.page_cache) <= 4
        assert "w5997" in screen.describe_moment()
        await pilot.press("pageup", "pageup")
        await ready(pilot)
        assert view.cursor == 6001 - 2 * view.page_size


async def test_missing_trace_is_one_line_exit_2(tmp_path, capsys):
    from chatkit_trace.cli import main

    assert main(["view", str(tmp_path / "nope.db")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file" in err


@pytest.mark.parametrize("write_back", [True, False])
def test_analysis_writes_back_or_to_a_side_database(traces, tmp_path, write_back):
    from chatkit_trace.views import TraceData
    from chatkit_trace.views.analysis import analyse

    path = traces("CK105")
    steps: list[tuple[str, float | None]] = []
    result = analyse(
        path,
        write_back=write_back,
        side_dir=tmp_path,
        progress=lambda what, frac: steps.append((what, frac)),
    )
    assert result is not None and result.findings >= 1
    # progress after every session, then the findings
    assert steps == [("analysing sessions", 0.0), ("analysing sessions", 1.0), ("writing derived tables", None)]
    data = TraceData(path, result.derived_path)
    assert (result.derived_path is None) == write_back
    assert (
        data.has_derived()
        and [f.code for f in data.findings()]
        and data.runs()[0].status == "running"
    )
    assert TraceData(path).has_derived() == write_back


async def test_mouse_selects_rows_and_opens_runs(traces):
    app = ViewerApp(traces("CK101-direct", check=True), poll=0)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.click(
            "#runs", offset=(5, 1), times=2
        )  # double-click the first run (line 0 is the header)
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await ready(pilot)
        screen = app.screen
        await pilot.click("#timeline", offset=(3, 5))
        await ready(pilot)
        view = screen.query_one(TimelineView)
        assert view.cursor == 4 and view.get_row(4).ref == "0:3"
        assert "Hello world" in screen.describe_moment()


async def test_rows_show_facts_from_the_replay_before_analysis(tmp_path):
    path = long_trace(tmp_path / "raw.db", 30)
    app = ViewerApp(path, poll=0, analyse="never")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await ready(pilot)
        screen = app.screen
        view = screen.query_one(TimelineView)
        assert view.get_row(2).facts is None  # no derived tables
        await pilot.press("down", "down", "down")
        await ready(pilot)
        assert [c[0] for c in view.row_cells(2)[2]] == ["message ✓"]


@pytest.mark.parametrize("modal", ["e", "question_mark"])
async def test_q_quits_while_a_modal_is_open(traces, tmp_path, modal):
    exports = tmp_path / "exports"
    exports.mkdir()
    app = ViewerApp(traces("CK101-direct", check=True), poll=0, session="s1", run="r1", export_dir=exports)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await ready(pilot)
        await pilot.press(modal)
        assert isinstance(app.screen, (ExportScreen, HelpScreen))
        assert app.return_code is None
        await pilot.press("q")
        await pilot.pause()
        assert app.return_code == 0  # the app is exiting
    assert not list(exports.iterdir())  # quitting the export modal writes nothing


async def test_a_wrong_profile_recording_opens_with_the_right_profile(tmp_path):
    """--profile re-classifies a recording made with the wrong one (in a temporary
    copy the viewer reads and removes; the trace itself is not changed)."""
    import shutil
    from pathlib import Path

    from chatkit_trace.loading import reclassify
    from chatkit_trace.route import load_profile
    from chatkit_trace.viewer import open_source

    trace = tmp_path / "openai.db"
    shutil.copy(Path(__file__).resolve().parents[2] / "recordings" / "traces" / "openai.db", trace)
    with TraceStore(trace) as store:
        reclassify(store, load_profile("adk"))  # as if recorded with --profile adk
    before = trace.read_bytes()
    source = open_source(trace, "openai")
    assert source.temporary and source.path != str(trace)
    app = ViewerApp(source, profile="openai", poll=0, side_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        runs = app.screen.query_one(RunsTable).runs
        assert len(runs) == 6 and {r.status for r in runs} >= {"completed", "failed"}
    source.discard()
    assert not Path(source.path).exists()
    assert trace.read_bytes() == before


def test_a_cancelled_analysis_stops_after_a_session_and_leaves_no_side_database(tmp_path):
    from chatkit_trace.views.analysis import analyse

    from ..derive.test_engine import _several_sessions

    store, _, _ = _several_sessions(tmp_path / "several.db")
    store.set_meta("protocol", "myproto")
    store.close()
    side = tmp_path / "side"
    side.mkdir()
    calls = []
    result = analyse(tmp_path / "several.db", side_dir=side, cancelled=lambda: calls.append(1) or len(calls) > 2)
    assert result is None and list(side.iterdir()) == []
    assert len(calls) == 3  # once before the first session, then after each session until it turned true
