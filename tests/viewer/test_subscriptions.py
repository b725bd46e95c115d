"""Subscription rows in a run's timeline: the cursor a reconnect carried
(the route's, or the ``Last-Event-ID`` header of a recording classified
before subscription routes had cursors) and the end of a subscription
stream that ended while the run went on."""

from __future__ import annotations

from pathlib import Path

from chatkit_trace.store import TraceStore
from chatkit_trace.viewer import ViewerApp
from chatkit_trace.viewer.run_screen import RunScreen
from chatkit_trace.viewer.widgets import TimelineView

from ..analyze.corpus import CORPUS, load_case
from .conftest import CAPABILITIES, ready, wait_for

SIZE = (160, 44)


def _trace(tmp_path: Path, name: str, *, header_only: bool = False) -> Path:
    _, exchanges, _ = load_case(CORPUS / f"{name}.json")
    if header_only:  # what an EventSource sent, with no cursor in the stored classification
        for ex in exchanges:
            if ex.capability == "subscribe" and ex.cursor:
                ex.request_headers = [("Accept", "text/event-stream"), ("Last-Event-ID", ex.cursor)]
                ex.cursor = None
    path = tmp_path / f"{name}.db"
    with TraceStore(path, create=True) as store:
        store.set_meta("protocol", "myproto")
        store.set_meta("capabilities", CAPABILITIES)
        for ex in exchanges:
            store.add_exchange(ex)
    return path


async def _rows(path: Path, run: str) -> list[tuple[str, str]]:
    app = ViewerApp(path, poll=0)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.open_run("s1", run)
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await ready(pilot)
        view = app.screen.query_one(TimelineView)
        out = []
        for i in range(view.row_count()):
            cells = view.row_cells(i)
            out.append((view.get_row(i).ref, "".join(t for t, _ in cells[3])))
        return out


async def test_a_reconnect_shows_its_cursor_and_the_stream_that_ended_mid_run(tmp_path):
    for header_only in (False, True):
        rows = dict(await _rows(_trace(tmp_path, "CK404-subscription-skip", header_only=header_only), "r1"))
        assert rows["0"].startswith("▶ subscribe ") and " after " not in rows["0"]
        assert rows["2"].startswith("▶ subscribe after 3 "), rows
        # the first subscription ended before the run's last event: its end is a row
        assert rows["0:end"] == "■ end of subscription: complete", rows
        # the resumed one outlived the finished run: no row for its end
        assert "2:end" not in rows


async def test_a_subscription_that_outlived_a_finished_run_shows_no_end(tmp_path):
    path = _trace(tmp_path, "clean-subscription-resume")
    r1 = [ref for ref, _ in await _rows(path, "r1")]
    assert "0:end" not in r1 and "3" not in r1  # r1 ended on the first stream
    r2 = dict(await _rows(path, "r2"))
    assert r2["0:end"] == "■ end of subscription: complete" and r2["3"].startswith("▶ subscribe after 7 ")
