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
                gc.enable()
