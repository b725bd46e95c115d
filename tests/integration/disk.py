"""A small real file system for the tests of a full disk: a ``tmpfs`` mount.

``mount -t tmpfs -o size=…`` needs root (CI runs as root: .ci/run installs
Chromium with apt-get).  Without it the test is skipped with the reason, unless
``CHATKIT_REQUIRE_MOUNT=1`` (then it fails): a full disk is never simulated
by a mock, the bytes really do not fit.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _can_mount() -> str | None:
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    return None


@contextmanager
def tiny_disk(where: Path, size: str) -> Iterator[Path]:
    """A ``tmpfs`` of ``size`` (``8m``) mounted at ``where``, unmounted after."""
    why = _can_mount()
    if why is None:
        where.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0777", "tmpfs", str(where)],
                              capture_output=True, text=True)
        why = None if done.returncode == 0 else f"mount -t tmpfs failed: {done.stderr.strip()}"
    if why is not None:
        if os.environ.get("CHATKIT_REQUIRE_MOUNT") == "1":
            pytest.fail(f"CHATKIT_REQUIRE_MOUNT=1 but {why}")
        pytest.skip(why)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(disk: Path, leave: int, name: str = "filler") -> Path:
    """Fill ``disk`` with one new file until ``leave`` bytes are free; the file."""
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    filler = disk / name
    with open(filler, "wb") as f:
        left = max(0, free - leave)
        chunk = b"\0" * (1 << 20)
        try:
            while left > 0:
                n = min(left, len(chunk))
                f.write(chunk[:n])
                f.flush()
                left -= n
        except OSError:
            pass  # full already: the recorder took some of it meanwhile
    return filler


def remount_read_only(disk: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True, capture_output=True)
