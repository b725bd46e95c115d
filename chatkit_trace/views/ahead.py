"""Replay ahead in a child process: checkpoints of a long session, built once, on the other core.

A jump to the end of a long run needs the Core's state there, and that state
depends on every event before it: the first jump replays the whole session.
The UI process cannot do it in the background without taking the GIL from
the screen, so for a long session (:data:`MIN_EVENTS`) a child process (spawned,
``nice``) replays it once, fast-forward (no moments), and every ``every``
events sends the replayer's state back over a pipe: a :class:`~.replay.SessionReplayer`
restores the nearest one before a far target and replays only what lies
between (a few hundred events), instead of replaying from the start.

The child runs the same code on the same file (read-only), with the adapter
resolved the way the app resolved it; its states are pickled *portably*
(:class:`PortablePickler`): the adapter, its protocol and the trace are named,
not copied, a session's local functions (the Core's clock) travel as code.
If the child cannot start, resolves another adapter or fails, the viewer
replays in its own process as before: nothing is lost but time.
"""

from __future__ import annotations

import contextlib
import io
import marshal
import os
import pickle
import struct
import subprocess
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

__all__ = ["MIN_EVENTS", "Ahead", "PortablePickler", "PortableUnpickler"]

#: a session with fewer frames is replayed in the viewer's process alone (under a second)
MIN_EVENTS = 20_000
#: near the end of the session the child sends a state this often (events)
NEAR_END = 256


def _rebuild_function(
    code: bytes, module: str, name: str, defaults: Any, kwdefaults: Any, cells: tuple[Any, ...]
) -> types.FunctionType:
    mod = sys.modules.get(module)
    globs = mod.__dict__ if mod is not None else {"__builtins__": __builtins__}
    closure = tuple(types.CellType(c) for c in cells) or None
    fn = types.FunctionType(marshal.loads(code), globs, name, defaults, closure)
    fn.__kwdefaults__ = kwdefaults
    return fn


class PortablePickler(pickle.Pickler):
    """Pickles a replayer's state so that another process (same code) can load it:
    ``named`` objects (the adapter, its protocol, the trace) by name, a session's
    frames by exchange, local functions and lambdas by their code."""

    def __init__(self, file: io.BytesIO, named: dict[str, Any], frames_type: type[Any]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.names = {id(obj): name for name, obj in named.items()}
        self.frames_type = frames_type

    def persistent_id(self, obj: Any) -> Any:
        name = self.names.get(id(obj))
        if name is not None:
            return name
        if type(obj) is self.frames_type:
            return ("frames", obj.index)
        return None

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.FunctionType) and "<" in obj.__qualname__:  # a lambda or a local function
            cells = tuple(c.cell_contents for c in obj.__closure__ or ())
            return _rebuild_function, (
                marshal.dumps(obj.__code__),
                obj.__module__,
                obj.__name__,
                obj.__defaults__,
                obj.__kwdefaults__,
                cells,
            )
        return NotImplemented


class PortableUnpickler(pickle.Unpickler):
    """Loads what :class:`PortablePickler` wrote, with this process's named objects."""

    def __init__(self, file: io.BytesIO, named: dict[str, Any], frames: Callable[[int], Any]) -> None:
        super().__init__(file)
        self.named = named
        self.frames = frames

    def persistent_load(self, pid: Any) -> Any:
        if isinstance(pid, tuple) and pid[0] == "frames":
            return self.frames(pid[1])
        return self.named[pid]


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


class Ahead:
    """A child process replaying one session ahead; its states land in ``receive``.

    A plain subprocess (``python -m chatkit_trace.views.ahead FD``): its
    arguments arrive pickled on stdin, its states leave length-prefixed on a
    pipe of their own (stdout and stderr stay out of the screen's way)."""

    def __init__(
        self,
        path: str,
        profile: str | None,
        session: str,
        horizon: Any,
        every: int,
        expect: tuple[str, Any],
        receive: Callable[[Any, int, bytes], None],
    ) -> None:
        r, w = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "chatkit_trace.views.ahead", str(w)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(w,),
            )
        except BaseException:
            os.close(r)
            raise
        finally:
            os.close(w)
        self._file = os.fdopen(r, "rb")
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):
            self.process.stdin.write(pickle.dumps((path, profile, session, horizon, every, expect)))
            self.process.stdin.close()
        self.done = False
        self.received = 0
        self._receive = receive
        self._thread = threading.Thread(target=self._read, name="ahead-reader", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        read = self._file.read
        try:
            while True:
                head = read(8)
                if len(head) < 8:
                    break  # the child is done (or died, or was stopped): the viewer replays the rest
                (size,) = struct.unpack("<Q", head)
                payload = read(size)
                if len(payload) < size:
                    break
                self.received += 1
                self._receive(*pickle.loads(payload))
        except (OSError, ValueError):
            pass
        finally:
            self.done = True

    def wait(self, timeout: float) -> bool:
        """Wait until the child has sent everything (tests)."""
        self._thread.join(timeout)
        return self.done

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(2)


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
