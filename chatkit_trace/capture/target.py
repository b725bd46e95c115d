"""Where a recording goes: the checks before a recorder starts, and the lock it holds.

A recorder that cannot record must say so in one line and start nothing
(issue 31): ``chatkit-trace record`` checks its ``--db`` before mitmproxy
starts, the addon checks ``chatkit_db`` in ``configure`` (mitmproxy's options),
and the writer process, which alone opens the file for writing, takes the
lock (:class:`TraceLock`).  :func:`check_target` has no side effect: it
creates, changes and locks nothing.

**One recorder per file.**  Two recorders appending to one trace would both
number their exchanges from the same ``MAX(id) + 1`` and overwrite each
other's rows.  The writer holds an exclusive ``flock`` on the trace file for
its whole life (released by the kernel when the process ends, however it
ends); a second recorder is refused before it writes anything.  ``flock``
locks never interact with SQLite's own POSIX (``fcntl``) byte-range locks,
so readers (``check``, ``view``, the deriver) are never blocked by it; the
descriptor stays open until the writer's SQLite connection is closed (closing
any descriptor of a file drops the POSIX locks the process holds on it).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ..errors import RecordTargetError

__all__ = ["MIN_FREE_BYTES", "RecordTargetError", "TraceLock", "check_target", "free_bytes", "lock_holder"]

#: A recording does not start with less room than this on the trace's disk
#: (the first commits, the write-ahead log, the reserve the writer keeps for
#: saying the disk filled up: :data:`chatkit_trace.capture._losses.RESERVE_BYTES`).
MIN_FREE_BYTES = 4 * 1024 * 1024
_SQLITE_MAGIC = b"SQLite format 3\x00"


def free_bytes(folder: str | Path) -> int | None:
    """Bytes an unprivileged writer may still use on ``folder``'s file system (None: unknown)."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _existing_parent(path: Path) -> Path:
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent


def check_target(path: str | Path) -> None:
    """Raise :class:`RecordTargetError` (one sentence, without the option's
    name: the caller adds ``--db`` or ``chatkit_db``) when a recording cannot
    go into ``path``: a directory, a FIFO or device, a file that is not a
    chatkit-trace trace (or is corrupt, or newer), a file or folder this
    process cannot write, a disk with less than :data:`MIN_FREE_BYTES` free,
    a trace another recorder holds.  Touches nothing."""
    p = Path(path)
    if p.is_dir():
        raise RecordTargetError(f"{p} is a directory, not a trace file")
    if p.exists():
        _check_existing(p)
        folder = p.parent
    else:
        folder = _existing_parent(p)
        if not folder.is_dir():
            raise RecordTargetError(f"cannot create {p}: {folder} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        why = "is on a read-only file system" if _read_only(folder) else "is not writable"
        raise RecordTargetError(f"cannot record into {p}: the folder {folder} {why}")
    room = free_bytes(folder)
    if room is not None and room < MIN_FREE_BYTES:
        raise RecordTargetError(
            f"cannot record into {p}: the disk is full ({room // 1024} KiB free on {folder}; a recording needs at least "
            f"{MIN_FREE_BYTES // (1024 * 1024)} MiB): free some space or choose a file on another disk"
        )


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _check_existing(p: Path) -> None:
    mode = p.stat().st_mode
    if not stat.S_ISREG(mode):
        raise RecordTargetError(f"{p} is not a regular file (a FIFO, a device): a trace must be a file")
    if not os.access(p, os.R_OK | os.W_OK):
        why = "is on a read-only file system" if _read_only(p.parent) else "is not writable by this user"
        raise RecordTargetError(f"cannot record into {p}: it {why}")
    if p.stat().st_size == 0:
        return  # an empty file becomes a trace (as sqlite3 does)
    with open(p, "rb") as f:
        head = f.read(len(_SQLITE_MAGIC))
    if head != _SQLITE_MAGIC:
        raise RecordTargetError(
            f"{p} is not a chatkit-trace trace (not a SQLite database): a recording appends to a trace or creates a "
            "new file; choose another file"
        )
    _check_intact(p)
    from ..store import TraceFormatError, TraceStore

    try:
        TraceStore(p, readonly=True).close()
    except TraceFormatError as err:
        raise RecordTargetError(f"{err}: choose another file") from None
    holder = lock_holder(p)
    if holder is not None:
        raise RecordTargetError(holder)


def _check_intact(p: Path) -> None:
    """SQLite's own quick check of every page (read-only: nothing is written)."""
    from ..store import integrity_problem

    problem = integrity_problem(p)
    if problem is not None:
        raise RecordTargetError(f"{p} is a corrupt trace ({problem}): choose another file")


def _busy_message(p: Path) -> str:
    """Who records into ``p`` (the last recording's meta, best effort)."""
    who = ""
    try:
        from ..store import TraceStore

        store = TraceStore(p, readonly=True)
        try:
            last = (store.get_meta("recordings") or [{}])[-1]
        finally:
            store.close()
        pid = last.get("pid") if isinstance(last, dict) else None
        if pid:
            who = f" (mitmproxy pid {pid})"
    except Exception:  # noqa: BLE001, S110 - the refusal stands without a pid
        pass
    return (
        f"another recorder{who} is recording into {p}: two recorders would overwrite each other's exchanges; "
        "stop it first or record into another file"
    )


def lock_holder(path: str | Path) -> str | None:
    """The refusal's sentence when another recorder holds ``path``, else None (nothing is kept locked)."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return _busy_message(Path(path))
        return None
    finally:
        os.close(fd)  # releases the probe's lock
    return None


class TraceLock:
    """The writer's exclusive hold on its trace file (module docstring).

    :meth:`acquire` opens (creating it when missing: ``created`` says so)
    and locks ``path``, or raises :class:`RecordTargetError`; :meth:`release`
    unlocks and closes, after the SQLite connection is closed."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.fd: int | None = None
        self.created = False

    def acquire(self) -> None:
        import fcntl

        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            self.created = True
        except FileExistsError:
            fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise RecordTargetError(_busy_message(self.path)) from None
            raise
        self.fd = fd

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)  # the flock goes with the last descriptor
