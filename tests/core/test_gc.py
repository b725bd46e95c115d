"""paused_gc: no collection during the pause; what it built goes to the oldest
generation unwalked; the collector's state and a host's freeze are respected."""

from __future__ import annotations

import gc
import weakref

from chatkit_trace.core._gc import UNWALKED_FROM, paused_gc


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_the_pause_switches_the_collector_off_and_back_as_it_was() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():  # nested: still off
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # it was off: left off
    finally:
        gc.enable()


def test_what_a_large_pause_built_is_in_the_oldest_generation_afterwards() -> None:
    gc.collect()
    with paused_gc():
        kept = [Node() for _ in range(UNWALKED_FROM)]
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(n) in oldest for n in kept)
    assert gc.get_count()[0] < 100  # no young collection is due for them


def test_what_a_small_pause_built_stays_young() -> None:
    gc.collect()
    with paused_gc():
        kept = [Node() for _ in range(100)]
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert not any(id(n) in oldest for n in kept)  # walked by the next young collection, as usual


def test_a_cycle_made_during_the_pause_is_still_collected() -> None:
    with paused_gc():
        a, b = Node(), Node()
        a.other, b.other = b, a
        ref = weakref.ref(a)
        del a, b
    assert ref() is not None  # a cycle: reference counting alone cannot free it
    gc.collect()
    assert ref() is None


def test_a_host_that_froze_objects_keeps_them_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with paused_gc():
            kept = [Node() for _ in range(UNWALKED_FROM)]
        assert gc.get_freeze_count() == frozen
        del kept
    finally:
        gc.unfreeze()
