"""SVG snapshots of the viewer's main screens (pytest-textual-snapshot).

The screens are deterministic: no clock, no live polling (``poll=0``), every
background worker (analysis, replay) finished before the shot, and nothing
blinks (no focused text input).  Update after an intended change with
``pytest tests/viewer --snapshot-update`` and look at the SVGs.
"""

from __future__ import annotations

from pathlib import Path

from chatkit_trace.viewer import ViewerApp
from chatkit_trace.viewer.run_screen import RunScreen

from .conftest import combined_trace, ready, wait_for

WIDE = (140, 36)


def test_runs_screen(snap_compare, tmp_path: Path):
    """Sessions and runs of several cases: status, connection, counts, codes; the first run's findings."""
    path = combined_trace(
        tmp_path / "cases.db", ["clean-myproto", "CK101-direct", "CK102", "CK105", "CK404"]
    )
    app = ViewerApp(path, poll=0)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await ready(pilot)
        await pilot.press("down", "down")  # the CK101 run
        await ready(pilot)

    assert snap_compare(app, terminal_size=WIDE, run_before=run_before)


def test_run_screen_at_the_decisive_frame(snap_compare, traces):
    """CK101: the finding selected, the cursor on the lost chunk, the snapshot without it."""
    app = ViewerApp(traces("CK101-direct"), poll=0)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await ready(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, RunScreen))
        await ready(pilot)
        await pilot.press("f", "enter")
        await ready(pilot)

    assert snap_compare(app, terminal_size=WIDE, run_before=run_before)


def test_live_vs_history(snap_compare, traces):
    """CK201: live when settled vs the history read, the renamed message highlighted."""
    app = ViewerApp(traces("CK201"), poll=0, session="s1", run="r1")

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await ready(pilot)
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, RunScreen))
        await ready(pilot)
        await pilot.press("d")
        await pilot.pause()

    assert snap_compare(app, terminal_size=WIDE, run_before=run_before)


def test_run_screen_light_theme_narrow(snap_compare, traces):
    """CK404 (resume replayed out of order) in the light theme on an 80x24 terminal: the snapshot goes below."""
    app = ViewerApp(traces("CK404"), poll=0, session="s1", run="r1", theme="textual-light")

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await ready(pilot)
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, RunScreen))
        await ready(pilot)
        await pilot.press("n")
        await ready(pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_help_screen(snap_compare, traces):
    app = ViewerApp(traces("CK101-direct", check=True), poll=0)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await ready(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(app, terminal_size=WIDE, run_before=run_before)
