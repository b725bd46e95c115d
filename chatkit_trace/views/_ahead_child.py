"""The replay-ahead child process (``python -m chatkit_trace.views._ahead_child FD``,
started by :class:`chatkit_trace.views.ahead.Ahead`): its arguments arrive
pickled on stdin, it replays one session of the trace read-only and sends the
replayer's state, pickled portably, length-prefixed on the pipe ``FD``."""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
import sys
from typing import Any

from .ahead import NEAR_END

__all__ = ["main"]


def _send(out: Any, item: Any) -> None:
    payload = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(struct.pack("<Q", len(payload)))
    out.write(payload)
    out.flush()


def _child(out: Any, path: str, profile: str | None, session: str, horizon: Any, every: int, expect: tuple[str, Any]) -> None:
    """The child process: replay ``session`` of ``path`` up to ``horizon``, a state every ``every`` events."""
    with contextlib.suppress(OSError):
        os.nice(10)  # the screen's process comes first
    from chatkit_trace.core._gc import paused_gc
    from chatkit_trace.loading import resolve_adapter
    from chatkit_trace.store import TraceStore

    from .data import TraceData
    from .replay import SessionReplayer

    with TraceStore(path, readonly=True) as store:
        meta = store.meta()
    adapter, caps, _name = resolve_adapter(profile, meta)
    if (type(adapter).__qualname__, caps) != expect:
        return  # not the adapter the viewer uses: the viewer replays alone
    data = TraceData(path)
    rp = SessionReplayer(data, session, adapter, caps, every=1 << 30)
    # the session's events at most (requests, frames, stream ends): its last
    # 4 x NEAR_END events get a state every NEAR_END, so a step back from
    # the end replays a few hundred events, not up to ``every``
    total = sum(data.frame_count(ex.index) + 2 for ex in rp.exchanges())
    cur = rp.frontier
    with paused_gc():
        while True:
            nxt = cur.peek()
            if nxt is None or (horizon is not None and nxt[0] > horizon):
                break
            cur.step(moment=False)
            after = cur.peek()
            pos = cur.position
            # every ``every`` events, densely near the end, and right before the last one (a jump to the end)
            if (
                pos % every == 0
                or (total - pos <= 4 * NEAR_END and pos % NEAR_END == 0)
                or (after is not None and horizon is not None and after[0] == horizon)
            ):
                _send(out, (cur.key, pos, rp.portable_dump(cur.rp)))


def main() -> None:
    out = os.fdopen(int(sys.argv[1]), "wb")
    args = pickle.loads(sys.stdin.buffer.read())
    try:
        _child(out, *args)
    finally:
        with contextlib.suppress(OSError):
            out.close()


if __name__ == "__main__":
    main()
