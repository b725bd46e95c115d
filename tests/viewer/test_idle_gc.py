"""The viewer's full garbage collections wait until the user is idle (decision 208).

Driven with a fake clock and explicit young collections, so nothing depends
on timing: ``gc.collect(1)`` moves what survives into the oldest generation
and counts one middle collection, which is exactly what makes CPython's own
rule call a full collection due.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from chatkit_trace.core._gc import paused_gc
from chatkit_trace.viewer import ViewerApp
from chatkit_trace.viewer.idle_gc import IdleCollector
from chatkit_trace.viewer.run_screen import RunScreen
from chatkit_trace.viewer.widgets import TimelineView

from .conftest import long_trace, ready, wait_for

#: the oldest generation's threshold as the process had it (read before any install)
OLDEST_THRESHOLD = gc.get_threshold()[2]


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def collector() -> Iterator[tuple[IdleCollector, Clock, list[int]]]:
    clock = Clock()
    c = IdleCollector(idle=1.0, clock=clock)
    started: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    before = gc.get_threshold()
    gc.collect()
    c.install()
    gc.callbacks.append(seen)
    try:
        yield c, clock, started
    finally:
        gc.callbacks.remove(seen)
        c.uninstall()
        assert gc.get_threshold() == before


def old_garbage() -> weakref.ref[Node]:
    """A cycle that dies in the oldest generation: young collections never free it."""
    node = Node()
    gc.collect(1)  # survives: now in the oldest generation
    ref = weakref.ref(node)
    del node
    gc.collect(1)
    assert ref() is not None
    return ref


def make_due(keep: list[object], overdue: bool = False) -> None:
    """Grow the oldest generation past the collector's rule (a quarter of its
    survivors, or more than all of them) and count enough middle collections."""
    size = len(gc.get_objects(generation=2))
    keep.extend([] for _ in range(size + 20_000 if overdue else size // 4 + 5_000))
    for _ in range(OLDEST_THRESHOLD + 1):
        gc.collect(1)


def test_install_puts_only_the_oldest_threshold_out_of_reach_and_uninstall_restores_it():
    before = gc.get_threshold()
    c = IdleCollector()
    try:
        c.install()
        c.install()  # once is enough: a second install keeps the saved thresholds
        now = gc.get_threshold()
        assert now[:2] == before[:2] and now[2] >= 2**20
        assert c.installed
    finally:
        c.uninstall()
    assert gc.get_threshold() == before
    assert not c.installed
    c.uninstall()  # harmless
    assert gc.get_threshold() == before


def test_a_collector_without_an_oldest_threshold_is_left_alone(monkeypatch):
    """CPython 3.14's incremental collector ignores the third threshold: then
    nothing is deferred and the thresholds stay as they were."""
    before = gc.get_threshold()
    real = gc.set_threshold

    def incremental(*values: int) -> None:
        real(*values[:2])  # what 3.14 does with the rest: ignores it

    monkeypatch.setattr(gc, "set_threshold", incremental)
    c = IdleCollector()
    c.install()
    assert not c.installed and gc.get_threshold() == before
    assert c.tick() is False


def test_a_due_full_collection_waits_until_the_user_is_idle(collector):
    c, clock, started = collector
    keep: list[object] = []
    ref = old_garbage()
    make_due(keep)
    assert c.due() == (True, False)
    started.clear()
    c.touch()
    clock.now += 0.5  # busy: the last key was half a second ago
    assert c.tick() is False
    assert 2 not in started and ref() is not None
    clock.now += 0.6  # idle for more than a second
    assert c.tick() is True
    assert 2 in started and ref() is None
    assert (c.collections, c.overdue) == (1, 0)
    assert c.due() == (False, False)  # done: not due again
    assert c.tick() is False


def test_nothing_due_means_no_collection_even_when_idle(collector):
    c, clock, started = collector
    clock.now += 60
    started.clear()
    assert c.tick() is False  # no middle collection counted yet
    for _ in range(OLDEST_THRESHOLD + 5):
        gc.collect(1)  # counted, but the oldest generation did not grow
    assert c.due()[0] is False
    assert c.tick() is False
    assert 2 not in started


def test_a_long_overdue_collection_runs_although_the_user_is_busy(collector):
    c, clock, started = collector
    keep: list[object] = []
    ref = old_garbage()
    make_due(keep, overdue=True)
    assert c.due() == (True, True)
    c.touch()
    started.clear()
    assert c.tick() is True
    assert 2 in started and ref() is None
    assert (c.collections, c.overdue) == (1, 1)


def test_a_tick_leaves_a_paused_collector_alone(collector):
    c, clock, started = collector
    keep: list[object] = []
    make_due(keep)
    clock.now += 60
    with paused_gc():
        started.clear()
        assert c.tick() is False  # a replay is building: not now
        assert not started
    assert c.tick() is True


def test_an_uninstalled_collector_never_collects():
    clock = Clock()
    c = IdleCollector(clock=clock)
    clock.now += 60
    assert c.due() == (False, False)
    assert c.tick() is False


async def test_the_viewer_defers_full_collections_while_open_and_every_step_counts_as_activity(tmp_path):
    before = gc.get_threshold()
    path = long_trace(tmp_path / "long.db", 300)
    app = ViewerApp(str(path), analyse="never", poll=0)
    async with app.run_test(size=(150, 40)) as pilot:
        await ready(pilot)
        assert app.collector.installed
        assert gc.get_threshold()[:2] == before[:2] and gc.get_threshold()[2] >= 2**20
        app.collector.last_activity = 0.0
        await pilot.press("enter")  # a key is activity
        assert app.collector.last_activity > 0.0
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await ready(pilot)
        view = app.screen.query_one(TimelineView)
        app.collector.last_activity = 0.0
        view.action_move(1)  # a cursor move, by key or not, is activity too
        assert app.collector.last_activity > 0.0
    assert not app.collector.installed
    assert gc.get_threshold() == before
