"""Recorded text is never markup: text that looks like Rich/Textual markup
(``[/code]``, ``[bold]``, ``[link=…]``, ``[$text-muted]``, a trailing
backslash right before one of the viewer's own tags) goes through every
output as it was recorded: ``check`` (text, JSON, JUnit), ``diff``, ``runs``
and the viewer (run list, timeline, snapshot, frame detail, findings,
live-vs-history screen).

The trace is a real recording: a headless Chromium page with an
``EventSource`` on the subscription backend, through a real ``mitmdump``; the
backend's history keeps other text than the stream sent, so there is a CK201
whose message quotes both."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest

from .browser import chromium
from .proxy import BIN, Proc
from .subscription import Recorded, record_session
from .subscription_backend import subscription_backend

pytestmark = [pytest.mark.mitmdump, pytest.mark.slow, pytest.mark.browser]

SID = "s-[bold]x"
RUN = "r[/code]1"
RUN2 = "r2\\"  # a run id ending in a backslash
ANSWER = ["[bold]One[/bold] ", "[/code] ", "[link=https://example.test/x]three[/link] ", "[$text-muted]four ",
          "<b>five</b> ", "C:\\"]
HISTORY = ["[bold]One[/bold] ", "[/code] ", "[link=https://example.test/x]three[/link] ", "[i]FOUR ",
           "<b>five</b> ", "C:\\"]
LIVE_TEXT = "".join(ANSWER)
HISTORY_TEXT = "".join(HISTORY)
INPUT = "[red]hi[/red] \\"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """One recorded session; Chromium is closed again before any test runs."""
    folder = tmp_path_factory.mktemp("markup")
    procs: list[Proc] = []
    try:
        with subscription_backend() as backend, chromium() as browser:
            rec = record_session(browser, backend, procs, folder / "markup.db", SID, runs=(RUN, RUN2), close_after=(),
                                 answer=ANSWER, history_answer=HISTORY, history=True, text=INPUT)
    finally:
        for p in procs:
            p.kill()
    assert [e["data"].get("text") for e in rec.got if e["data"]["type"] == "text"] == ANSWER * 2
    yield rec


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "chatkit-trace"), *args], capture_output=True, text=True, timeout=120)


def _no_trouble(out: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in out.stderr and "MarkupError" not in out.stderr, out.stderr


def test_check_text_json_and_junit_quote_recorded_text_as_recorded(recorded):
    out = _cli("check", str(recorded.db))
    _no_trouble(out)
    assert out.returncode == 1, out.stdout + out.stderr
    text = out.stdout
    assert f"session {SID}  run {RUN}" in text
    assert "CK201" in text and "[$text-muted]four" in text and "[i]FOUR" in text and "[bold]One[/bold]" in text
    out = _cli("check", str(recorded.db), "--format", "json")
    by_run = {x["run_id"]: x for x in json.loads(out.stdout)["findings"]}
    assert sorted(by_run) == sorted([RUN, RUN2]) and by_run[RUN2]["code"] == "CK201"
    f = by_run[RUN]
    assert (f["code"], f["session_id"], f["run_id"]) == ("CK201", SID, RUN)
    live = f["detail"]["differences"][0]["live"]["text"]
    assert live == LIVE_TEXT
    out = _cli("check", str(recorded.db), "--format", "junit")
    _no_trouble(out)
    root = ET.fromstring(out.stdout)
    failures = [x for x in root.iter("failure")]
    assert failures and "[/code]" in (failures[0].get("message") or "") + (failures[0].text or "")


def test_diff_shows_both_sides_as_recorded(recorded):
    out = _cli("diff", str(recorded.db), "--full")
    _no_trouble(out)
    assert out.returncode == 1
    for piece in ("[link=https://example.test/x]three[/link]", "[$text-muted]four", "[i]FOUR", INPUT, f"run {RUN}"):
        assert piece in out.stdout, piece
    assert "C:\\" in out.stdout


def test_runs_lists_the_recorded_ids_as_they_are(recorded):
    out = _cli("runs", str(recorded.db))
    _no_trouble(out)
    assert out.returncode == 0 and SID in out.stdout and RUN in out.stdout and RUN2 in out.stdout


async def test_the_viewer_shows_recorded_text_as_it_was_recorded(recorded, tmp_path):
    import shutil

    from chatkit_trace.viewer import ViewerApp
    from chatkit_trace.viewer.dialogs import DiffScreen
    from chatkit_trace.viewer.run_screen import RunScreen
    from chatkit_trace.viewer.runs_screen import RunsScreen
    from chatkit_trace.viewer.widgets import FindingsList, RunsTable, TimelineView

    from ..viewer.conftest import ready, wait_for

    db = tmp_path / "markup.db"
    shutil.copy(recorded.db, db)  # the viewer may write its analysis back
    app = ViewerApp(db, poll=0)
    async with app.run_test(size=(220, 60)) as pilot:
        await ready(pilot)
        assert isinstance(app.screen, RunsScreen)
        runs = app.screen.query_one(RunsTable)
        assert sorted((r.session_id, r.run_id) for r in runs.runs) == sorted([(SID, RUN), (SID, RUN2)])
        app.open_run(SID, RUN)
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        screen = app.screen
        await ready(pilot)
        view = screen.query_one(TimelineView)
        # the frame that carries "[/code] ", selected: its detail shows the raw event
        refs = [view.get_row(i).ref for i in range(view.row_count())]
        frame_rows = [i for i in range(view.row_count()) if view.get_row(i).text and "[/code]" in view.get_row(i).text]
        assert frame_rows, refs
        view.move_to(frame_rows[0])
        await ready(pilot)
        detail = screen.query_one("#detail").body.render().plain
        assert '"[/code] "' in detail or "[/code] " in detail, detail
        # at the run's done: the snapshot holds the whole live answer, the backslash included
        done = [i for i in range(view.row_count()) if view.get_row(i).text and '"done"' in view.get_row(i).text]
        view.move_to(done[0])
        await ready(pilot)
        chat = screen.describe_moment()
        assert LIVE_TEXT in chat and INPUT in chat, chat
        # after the history read: history's text
        view.move_to(view.row_count() - 1)
        await ready(pilot)
        assert HISTORY_TEXT in screen.describe_moment()
        assert f"run {RUN}" in chat
        findings = screen.query_one(FindingsList)
        shown = " ".join(c[0] for i in range(len(findings.findings)) for col in findings.row_cells(i) for c in col)
        assert "[$text-muted]four" in shown and "[i]FOUR" in shown, shown
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen))
        await pilot.pause()
        diff = app.screen
        title = diff.query_one("#diff-title").render().plain
        columns = diff.query_one("#diff-columns").render().plain
        listing = diff.query_one("#diff-list").render().plain
        assert f"session {SID} · run {RUN}" in title
        assert "[$text-muted]four" in columns and "[i]FOUR" in columns and "C:\\" in columns
        assert "[link=https://example.test/x]three[/link]" in listing
        # the second run: the first run's messages are context, dimmed by the
        # viewer's own tags, right after a recorded trailing backslash
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        app.open_run(SID, RUN2)
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.run.run_id == RUN2)
        screen = app.screen
        await ready(pilot)
        view = screen.query_one(TimelineView)
        done = [i for i in range(view.row_count()) if view.get_row(i).text and '"done"' in view.get_row(i).text
                and view.get_row(i).exchange.index == view.get_row(i).exchange.index]
        view.move_to(done[-1])
        await ready(pilot)
        chat = screen.describe_moment()
        assert chat.count(LIVE_TEXT) == 2 and "[/dim]" not in chat and f"run {RUN2}" in chat, chat
        panel = screen.query_one("#snapshot").body.render()
        dimmed = [sp for sp in panel.spans if "dim" in str(sp.style)]
        assert dimmed and max(sp.end for sp in dimmed) < panel.plain.index("assistant:" + RUN2), (dimmed, panel.plain)


def test_the_html_report_shows_recorded_text_as_it_was_recorded(recorded, tmp_path):
    out_html = tmp_path / "report.html"
    out = _cli("report", str(recorded.db), "-o", str(out_html))
    _no_trouble(out)
    assert out.returncode == 0 and out_html.is_file(), out.stdout + out.stderr
    with chromium() as browser:
        page = browser.new_page()
        try:
            page.goto(out_html.resolve().as_uri())
            page.wait_for_selector("html[data-ready='1']", state="attached", timeout=15_000)
            table = page.inner_text("#findings-table")
            assert "[$text-muted]four" in table and "[i]FOUR" in table and "<b>five</b>" in table, table
            assert page.locator("#findings-table b").count() == 0  # the backend's <b> is text, not an element
            runs = page.inner_text("#runs-view")
            assert SID in runs and RUN in runs and RUN2 in runs
            page.click("#findings-table tr[data-code='CK201'] a.frame-link >> nth=0")
            page.wait_for_selector("#run-view:not([hidden])")
            body = page.inner_text("#cmp-body")
            assert "[link=https://example.test/x]three[/link]" in body and "C:\\" in body, body
        finally:
            page.close()
