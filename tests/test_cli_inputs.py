"""Inputs that are not traces: one line on stderr, exit 2, the file untouched."""

from __future__ import annotations

import subprocess
import sys

import pytest


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chatkit_trace.cli", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", ["check", "runs", "diff", "redecode"])
def test_dev_null_is_a_one_line_error(command):
    done = cli(command, "/dev/null")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "/dev/null" in lines[0] and "not a regular file" in lines[0]


def test_an_empty_file_is_refused_and_left_empty(tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for command in ("check", "runs"):
        done = cli(command, str(empty), "--profile", "openai")
        assert done.returncode == 2, done.stderr
        assert "is empty" in done.stderr and "Traceback" not in done.stderr
    assert empty.read_bytes() == b""  # no command writes to its input


@pytest.mark.parametrize(
    "args",
    [
        ["view", "{fifo}"],
        ["import", "{fifo}", "--profile", "myproto", "-o", "{out}"],
        ["replay", "{fifo}"],
        ["check", "{fifo}"],
        ["report", "{fifo}", "-o", "{out}"],
    ],
    ids=lambda a: a[0],
)
def test_a_fifo_is_not_a_regular_file_and_nothing_waits_for_it(tmp_path, args):
    """A FIFO nobody writes to: reading it would block for ever (``view``
    ignored Ctrl-C there); every command says it is not a regular file."""
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    out = tmp_path / "out.db"
    argv = [a.format(fifo=fifo, out=out) for a in args]
    done = cli(*argv)  # the timeout fails the test if it blocks
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a regular file" in lines[0], done.stderr
    assert not out.exists()
