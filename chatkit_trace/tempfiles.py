"""Private temporary files that leave nothing behind (issue 32).

The viewer derives a trace into a side database, ``check``/``view`` of a HAR
or flow file import it into a temporary trace, a fixture opened as a trace
is written to one: each holds recorded and derived text.  They all live in
one folder per process, ``$TMPDIR/chatkit-trace-<pid>-XXXX``, created
owner-only (``0700``; every file in it ``0600``, so SQLite's ``-wal`` and
``-shm`` next to a database are ``0600`` too), and the folder is removed on
every way out:

* a normal exit and an exception that ends the process (``atexit``);
* Ctrl-C (SIGINT: ``KeyboardInterrupt``, then ``atexit``);
* SIGTERM and SIGHUP (a handler removes the folder, then the signal takes
  its usual course: the previous handler, or the default, so the exit
  status still says which signal);
* ``kill -9`` or a power cut cannot be caught: the next process that makes
  a folder removes every ``chatkit-trace-<pid>-*`` folder of this user
  whose process is gone.

Standard library only.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any

__all__ = ["PREFIX", "cleanup", "folder", "guard", "new_dir", "new_file"]

PREFIX = "chatkit-trace-"
_NAME = re.compile(re.escape(PREFIX) + r"(\d+)-")
_lock = threading.Lock()
_folder: Path | None = None
_pid = -1
_handled: dict[Any, Any] = {}


def folder() -> Path:
    """This process's private folder (made on first use, ``0700``)."""
    global _folder, _pid
    with _lock:
        if _folder is not None and _pid == os.getpid() and _folder.is_dir():
            return _folder
        _sweep()
        _folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
        os.chmod(_folder, 0o700)
        _pid = os.getpid()
        if not _handled.get("atexit"):
            _handled["atexit"] = True
            atexit.register(cleanup)
    guard()
    return _folder


def new_file(prefix: str = "", suffix: str = "") -> Path:
    """A new empty file (``0600``) in :func:`folder` (an empty file is an empty SQLite database)."""
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=folder())
    os.fchmod(fd, 0o600)
    os.close(fd)
    return Path(name)


def new_dir(prefix: str = "") -> Path:
    """A new folder (``0700``) in :func:`folder`."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=folder()))


def cleanup() -> None:
    """Remove this process's folder and everything in it (again: a no-op)."""
    global _folder
    f, owner = _folder, _pid
    if f is None or owner != os.getpid():  # a forked child leaves its parent's folder alone
        return
    _folder = None
    shutil.rmtree(f, ignore_errors=True)


def guard() -> None:
    """Remove the folder on SIGTERM and SIGHUP too (from the main thread;
    elsewhere a no-op: the main thread's next call installs it)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if sig in _handled:
            continue
        try:
            _handled[sig] = signal.signal(sig, _on_signal)
        except (ValueError, OSError):  # pragma: no cover - not the main interpreter
            pass


def _on_signal(signum: int, frame: Any) -> None:
    cleanup()
    previous = _handled.get(signum)
    if callable(previous):
        previous(signum, frame)
        return
    if previous == signal.SIG_IGN:
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _sweep() -> None:
    """Folders of this user's processes that are gone (killed outright)."""
    base = Path(tempfile.gettempdir())
    me = os.getuid()
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            m = _NAME.match(entry.name)
            if m is None or int(m.group(1)) == os.getpid():
                continue
            try:
                if entry.stat().st_uid != me or not entry.is_dir():
                    continue
                os.kill(int(m.group(1)), 0)
            except ProcessLookupError:
                shutil.rmtree(entry, ignore_errors=True)
            except (PermissionError, OSError):
                continue
