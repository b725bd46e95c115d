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

When the last pause ends, what it built is moved to the collector's
permanent generation (``gc.freeze()``) instead of being walked by the next
young collection: the first collection after a pause walked every object the
pause made (a replay's records: 6-11% of a replay's time in
``bench/decode_throughput.py``, issue 18).  Frozen objects are still freed
by reference counting the moment they are dropped; only cycles among them
wait, and not for long: before every full (generation 2) collection, the
permanent generation is merged back into the oldest one (``gc.unfreeze()``
from a ``gc.callbacks`` hook), so a full collection sees every object as it
would have without the pause.  Frozen objects are thus treated as the oldest
generation: scanned by full collections only.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused_gc"]

_lock = threading.Lock()
_depth = 0
_was_enabled = False


def _unfreeze_before_full_collection(phase: str, info: dict[str, int]) -> None:
    """A full collection sees the objects pauses froze (see the module docstring)."""
    if phase == "start" and info["generation"] == 2 and gc.get_freeze_count():
        gc.unfreeze()


gc.callbacks.append(_unfreeze_before_full_collection)


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
                gc.freeze()  # what the pause built: the oldest generation, not the next young collection's work
                gc.enable()
