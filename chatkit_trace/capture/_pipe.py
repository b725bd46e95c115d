"""How the recorder's processes talk: length-prefixed pickles over pipes.

The proxy (mitmdump with the addon) starts two processes of the Python it
runs under (docs/recording.md "How it stays out of the way")::

    proxy --stdin pipe--> writer  (decode, parse, identity, redaction, SQLite)
    proxy <--stdout pipe-- writer (log lines, sync replies)
    proxy --stdin pipe--> deriver (options, "final")
    proxy <--stdout pipe-- deriver (log lines, mitmweb marks)

The writer and the deriver share nothing but the trace file.  A message is
any picklable object; on the wire it is an 8-byte little-endian length and
the pickle.  Pipes never touch the disk, so the unredacted bytes the proxy
hands to the writer are never written anywhere before the writer has
redacted them (docs/recording.md "Redaction").

A child is started as ``python -P -m chatkit_trace.capture._child writer``
(or ``deriver``): ``-P`` keeps the current folder off ``sys.path``, and
``PYTHONPATH`` starts with the folder of the very ``chatkit_trace`` package
the proxy imported, so both sides run the same code.  The first message
(``("hello", sys.path)``) adds the proxy's other import paths, so an
adapter the proxy could import (``chatkit_profile=module:Class``) imports
in the child too.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["HEADER", "Unpacker", "pack", "read_some", "spawn", "write_all"]

HEADER = struct.Struct("<Q")
#: Pipe capacity asked for (Linux: F_SETPIPE_SZ; an unprivileged process may
#: raise it to /proc/sys/fs/pipe-max-size, 1 MiB by default).
PIPE_SIZE = 1 << 20


def pack(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


class Unpacker:
    """Bytes in (as they come off a pipe), whole messages out."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        buf = self.buf
        buf += data
        out = []
        pos = 0
        n = len(buf)
        while n - pos >= HEADER.size:
            (size,) = HEADER.unpack_from(buf, pos)
            end = pos + HEADER.size + size
            if end > n:
                break
            out.append(pickle.loads(memoryview(buf)[pos + HEADER.size : end]))
            pos = end
        if pos:
            del buf[:pos]
        return out


def write_all(fd: int, data: bytes | bytearray | memoryview, timeout: float | None = None) -> bool:
    """Write everything to ``fd`` (blocking or not); ``False`` if ``timeout`` passed first."""
    view = memoryview(data)
    deadline = None if timeout is None else time.monotonic() + timeout
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            n = 0
        view = view[n:]
        if view:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            select.select([], [fd], [], 0.1 if left is None else min(left, 0.1))
    return True


def read_some(fd: int, unpacker: Unpacker, timeout: float | None) -> tuple[list[Any], bool]:
    """The messages readable within ``timeout``, and whether the pipe ended."""
    ready, _, _ = select.select([fd], [], [], timeout)
    if not ready:
        return [], False
    try:
        data = os.read(fd, 1 << 20)
    except BlockingIOError:
        return [], False
    except OSError:
        return [], True
    if not data:
        return [], True
    return unpacker.feed(data), False


def messages(fd: int) -> Iterator[Any]:
    """Every message on a blocking pipe until it ends (a child's stdin)."""
    unpacker = Unpacker()
    while True:
        data = os.read(fd, 1 << 20)
        if not data:
            return
        yield from unpacker.feed(data)


def spawn(role: str, module: str) -> subprocess.Popen[bytes]:
    """Start the writer or deriver process, ``python -P -m MODULE ROLE``
    (:mod:`chatkit_trace.capture._child`, named by the caller so this module
    imports neither process), with pipes on its stdin and stdout; its stderr
    is the proxy's, so a crash's traceback is seen."""
    import chatkit_trace

    root = str(Path(chatkit_trace.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    env.pop("PYTHONSTARTUP", None)
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", module, role],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        close_fds=True,
    )
    for f in (proc.stdin, proc.stdout):
        if f is not None:
            _grow(f.fileno())
    return proc


def _grow(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    except (ImportError, AttributeError, OSError):
        pass  # not Linux, or over the limit: the default capacity will do
