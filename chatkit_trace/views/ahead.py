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
(:class:`~._portable.PortablePickler`): the adapter, its protocol and the
trace are named, not copied, a session's local functions (the Core's clock)
travel as code.  If the child cannot start, resolves another adapter or
fails, the viewer replays in its own process as before: nothing is lost but
time.

This module is the parent's side and imports nothing of the replay: the
child's entry is :mod:`._ahead_child` (which imports :mod:`.replay`), the
portable pickler is :mod:`._portable`, and :mod:`.replay` imports both this
module and the pickler, so the three import one another in one direction.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["MIN_EVENTS", "NEAR_END", "Ahead"]

#: a session with fewer frames is replayed in the viewer's process alone (under a second)
MIN_EVENTS = 20_000
#: near the end of the session the child sends a state this often (events)
NEAR_END = 256


class Ahead:
    """A child process replaying one session ahead; its states land in ``receive``.

    A plain subprocess (``python -m chatkit_trace.views._ahead_child FD``): its
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
                [sys.executable, "-m", "chatkit_trace.views._ahead_child", str(w)],
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
