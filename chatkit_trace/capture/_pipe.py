"""How the recorder's processes talk: length-prefixed batches of typed messages over pipes.

The proxy (mitmdump with the addon) starts two processes of the Python it
runs under (docs/recording.md "How it stays out of the way")::

    proxy --stdin pipe--> writer  (decode, parse, identity, redaction, SQLite)
    proxy <--stdout pipe-- writer (log lines, sync replies)
    proxy --stdin pipe--> deriver (options, "final")
    proxy <--stdout pipe-- deriver (log lines, mitmweb marks)

The writer and the deriver share nothing but the trace file.  What crosses a
pipe is a batch (a list) of the messages of :mod:`._messages`; on the wire a
batch is an 8-byte little-endian length and its MessagePack encoding.  Pipes
never touch the disk, so the unredacted bytes the proxy hands to the writer
are never written anywhere before the writer has redacted them
(docs/recording.md "Redaction").

A child is started as ``python -P -m chatkit_trace.capture._child writer``
(or ``deriver``): ``-P`` keeps the current folder off ``sys.path``, and
``PYTHONPATH`` starts with the folder of the very ``chatkit_trace`` package
the proxy imported, so both sides run the same code.  The first message
(:class:`~._messages.Hello`) adds the proxy's other import paths, so an
adapter the proxy could import (``chatkit_profile=module:Class``) imports
in the child too.
"""

from __future__ import annotations

import os
import select
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

import msgspec

from ._messages import ToDeriver, ToProxy, ToWriter, Undecodable

__all__ = ["HEADER", "Unpacker", "pack", "read_some", "spawn", "write_all"]

HEADER = struct.Struct("<Q")
#: Pipe capacity asked for (Linux: F_SETPIPE_SZ; an unprivileged process may
#: raise it to /proc/sys/fs/pipe-max-size, 1 MiB by default).
PIPE_SIZE = 1 << 20

_ENCODER = msgspec.msgpack.Encoder()

M = TypeVar("M")


def pack(messages: Sequence[Any]) -> bytes:
    """One batch of messages, framed for a pipe."""
    data = _ENCODER.encode(messages)
    return HEADER.pack(len(data)) + data


class Unpacker(Generic[M]):
    """Bytes in (as they come off a pipe), whole messages out: every message
    of each whole batch, decoded as ``union`` (:data:`~._messages.ToWriter`,
    :data:`~._messages.ToDeriver` or :data:`~._messages.ToProxy`)."""

    __slots__ = ("buf", "decoder", "union")

    def __init__(self, union: Any) -> None:
        self.buf = bytearray()
        self.union = union
        self.decoder: msgspec.msgpack.Decoder[list[M]] = msgspec.msgpack.Decoder(list[union])

    def feed(self, data: bytes) -> list[M | Undecodable]:
        buf = self.buf
        buf += data
        out: list[M | Undecodable] = []
        pos = 0
        n = len(buf)
        while n - pos >= HEADER.size:
            (size,) = HEADER.unpack_from(buf, pos)
            end = pos + HEADER.size + size
            if end > n:
                break
            out += self._decode(memoryview(buf)[pos + HEADER.size : end])
            pos = end
        if pos:
            del buf[:pos]
        return out

    def _decode(self, data: memoryview) -> list[M | Undecodable]:
        try:
            return list(self.decoder.decode(data))
        except msgspec.ValidationError:
            pass
        # One message the union does not allow: the others of the batch still count.
        out: list[M | Undecodable] = []
        for raw in msgspec.msgpack.decode(data):
            try:
                out.append(msgspec.convert(raw, self.union))
            except msgspec.ValidationError as err:
                kind = raw[0] if isinstance(raw, list) and raw else type(raw).__name__
                out.append(Undecodable(f"{kind!r}: {err}"))
        return out


def writer_unpacker() -> Unpacker[ToWriter]:
    return Unpacker(ToWriter)


def deriver_unpacker() -> Unpacker[ToDeriver]:
    return Unpacker(ToDeriver)


def proxy_unpacker() -> Unpacker[ToProxy]:
    return Unpacker(ToProxy)


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


def read_some(fd: int, unpacker: Unpacker[M], timeout: float | None) -> tuple[list[M | Undecodable], bool]:
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
