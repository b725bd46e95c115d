"""Full garbage collections while the user is idle, never in the middle of a step.

CPython's cyclic collector walks every tracked object of the process in a
full (oldest-generation) collection.  In the viewer that is the app,
Textual's caches and the open run's replay state (the Core's chunk lists and
id sets, cached moments, checkpoints): on a run of 100k events in a 1M-frame
trace about 106,000 objects, 66-81 ms a walk.  The collector starts one
whenever its counters say so, that is at a random keypress: one step back in
twenty took 90-137 ms instead of 5-20 (issue 18, decision 208).

:class:`IdleCollector` keeps the collector's own rule for *when* a full
collection is due, and moves *where* it runs: while installed, the oldest
generation's automatic threshold is out of reach; :meth:`IdleCollector.tick`
(a timer of the app) runs a due full collection once the user has done
nothing for :attr:`~IdleCollector.idle` seconds.  Young collections are left
as they are (they walk only young objects).  So that cyclic garbage cannot
pile up under a user who never pauses, a collection that is long overdue
(the oldest generation more than doubled since the last one) runs anyway.

The rule is CPython's (``gcmodule.c``, ``collect_generations``): a full
collection is due when the oldest generation's count (the middle
collections since the last full one) is over its threshold *and* the objects
that reached the oldest generation since then are more than a quarter of
those that survived it.  The second number is not exposed; it is estimated
from the oldest generation's size, which :func:`gc.get_objects` gives.

Process-wide (the collector is): install one at a time; :meth:`uninstall`
puts the thresholds back as they were.  On an interpreter whose collector
has no oldest-generation threshold (CPython 3.14's incremental collector,
which has no long full pauses to move) :meth:`install` does nothing.  A tick while the collector is
switched off (a replay's :func:`~chatkit_trace.core._gc.paused_gc`) does
nothing.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

__all__ = ["IdleCollector"]

#: the oldest generation's threshold while installed: never reached
_OUT_OF_REACH = 2**30


class IdleCollector:
    """Run the cyclic collector's full collections when the user is idle."""

    def __init__(self, *, idle: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.idle = idle
        self.clock = clock
        self.last_activity = clock()
        self.collections = 0  # full collections this collector ran
        self.overdue = 0  # of which while the user was busy (long overdue)
        self._saved: tuple[int, int, int] | None = None
        self._survivors = 0  # the oldest generation's size after the last full collection

    @property
    def installed(self) -> bool:
        return self._saved is not None

    def install(self) -> None:
        """Defer full collections (no-op on a collector without an oldest-generation
        threshold: CPython 3.14's incremental collector ignores it, and needs no
        deferring, its pauses being short already)."""
        if self._saved is not None:
            return
        saved = gc.get_threshold()
        gc.set_threshold(saved[0], saved[1], _OUT_OF_REACH)
        if gc.get_threshold()[2] != _OUT_OF_REACH:
            gc.set_threshold(*saved)
            return
        self._saved = (saved[0], saved[1], saved[2])
        self._survivors = len(gc.get_objects(generation=2))

    def uninstall(self) -> None:
        if self._saved is None:
            return
        gc.set_threshold(*self._saved)
        self._saved = None

    def touch(self) -> None:
        """The user did something (a key, a click, a cursor move)."""
        self.last_activity = self.clock()

    def due(self) -> tuple[bool, bool]:
        """(due, long overdue) by the collector's own rule (module docstring)."""
        if self._saved is None or gc.get_count()[2] <= self._saved[2]:
            return False, False
        grown = len(gc.get_objects(generation=2)) - self._survivors
        return grown > self._survivors // 4, grown > max(self._survivors, 10_000)

    def tick(self) -> bool:
        """Run a due full collection if the user is idle (or it is long overdue);
        True if one ran."""
        if self._saved is None or not gc.isenabled():
            return False
        due, overdue = self.due()
        if not due:
            return False
        busy = self.clock() - self.last_activity < self.idle
        if busy and not overdue:
            return False
        gc.collect()
        self.collections += 1
        self.overdue += busy
        self._survivors = len(gc.get_objects(generation=2))
        return True
