"""``paused_gc()``: no cyclic garbage collection while a replay builds its records.

In the Core package because everything above it may use it (the trace, the
replay, the viewer) and it needs only the standard library.

A replay (and the analysis of a session) builds a large structure of
long-lived objects (a frame record, a fact record and a fact per frame, and
the Core's values) and frees almost nothing cyclic.  The cyclic collector's
full collections walk every tracked object again each time the heap grew by a
quarter: measured on ``bench/decode_throughput.py``, 25-40% of a replay's time
went there (issue 18).  Reference counting still frees everything acyclic at
once; cycles made meanwhile wait until the pause ends.

Process-wide (the collector is), nesting- and thread-safe: the collector is
switched back on when the last pause ends, and only if it was on before the
first began.

When a pause that built many objects (:data:`UNWALKED_FROM` or more, e.g. the
replay of one long stream) ends, they are moved into the oldest generation as
they are (``gc.freeze()`` then ``gc.unfreeze()``: two list moves, no walk).
Otherwise the first allocation after the pause starts a young collection
that walks every one of them, all alive (a replay's facts and lists: 9-16%
of ``bench/decode_throughput.py``'s time), and then again as they age.  The
price: cycles made during such a pause are found by the next full collection
instead of the next young one, and the collector does not count the moved
objects towards its next full collection.  So small pauses (a session of a
few hundred frames, what ``check`` makes one after the other) keep the
plain path, where a process that checks again and again stays flat
(decisions.md 199, 207).  A process that keeps objects frozen itself
(``gc.get_freeze_count()`` not 0, e.g. before forking workers) is left as it
is: unfreezing would undo its freeze.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["UNWALKED_FROM", "paused_gc"]

#: A pause that leaves this many young objects or more hands them to the
#: oldest generation unwalked (module docstring).
UNWALKED_FROM = 20_000

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def paused_gc() -> Iterator[None]:
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                if gc.get_count()[0] >= UNWALKED_FROM and gc.get_freeze_count() == 0:
                    gc.freeze()  # the pause's objects to the oldest generation, unwalked
                    gc.unfreeze()
                gc.enable()
