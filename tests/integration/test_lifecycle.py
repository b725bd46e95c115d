"""The recorder starts, stops and fails cleanly (issue 31 part 2), with real processes.

* every bad start (a file that is not a trace, a corrupt one, a FIFO, a
  read-only disk, a full disk, a bad profile under plain mitmdump, a port in
  use) is one line naming the option, exit 2, and nothing is created;
* ``record``'s banner comes once the port accepts connections;
* Ctrl-C with a stream open is one line, no asyncio traceback, then the
  summary (exchanges, frames, runs, findings by severity, the next command).
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from .backend import free_port
from .disk import fill, remount_read_only, tiny_disk
from .proxy import ADDON, BIN, MITMDUMP, REPO, Proc

CT = str(BIN / "chatkit-trace")


def listing(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes (what "nothing created, nothing changed" compares)."""
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else b"<dir>")
            for p in sorted(folder.rglob("*")) if not p.is_fifo()}


def run(argv: list[str], timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=str(REPO), stdin=subprocess.DEVNULL)


def record_argv(db: Path, port: int | None = None, upstream: str = "http://127.0.0.1:9", profile: str = "myproto") -> list[str]:
    return [CT, "record", "--profile", profile, "--upstream", upstream, "--port", str(port or free_port()), "--db", str(db)]


def mitmdump_argv(db: Path, *sets: str) -> list[str]:
    argv = [MITMDUMP, "-s", str(ADDON), "--listen-host", "127.0.0.1", "-p", str(free_port()),
            "--mode", "reverse:http://127.0.0.1:9", "--set", f"chatkit_db={db}"]
    for s in sets:
        argv += ["--set", s]
    return argv


def one_line(done: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The refusal: exit 2, one line of ours on stderr, no traceback."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    text = done.stdout + done.stderr
    assert "Traceback" not in text and "Error logged during startup" not in text, text
    ours = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(ours) == 1, ours
    for needle in needles:
        assert needle in ours[0], ours[0]
    return ours[0]


def corrupt_trace(path: Path) -> None:
    """A real trace whose pages are then overwritten: SQLite's header stays."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    con.execute("CREATE TABLE exchanges (id INTEGER PRIMARY KEY, url TEXT)")
    con.executemany("INSERT INTO exchanges (url) VALUES (?)", [("x" * 500,)] * 200)
    con.commit()
    con.close()
    data = bytearray(path.read_bytes())
    data[4096 + 100 : 4096 + 3000] = os.urandom(2900)
    data[2 * 4096 : 3 * 4096] = b"\xff" * 4096
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("case", ["notes", "corrupt", "fifo", "folder"])
def test_record_refuses_a_file_that_is_not_a_trace_in_one_line_and_touches_nothing(tmp_path: Path, case: str) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    db = folder / {"notes": "notes.txt", "corrupt": "old.db", "fifo": "pipe.db", "folder": "dir.db"}[case]
    if case == "notes":
        db.write_text("my notes\n")
    elif case == "corrupt":
        corrupt_trace(db)
    elif case == "fifo":
        os.mkfifo(db)
    else:
        db.mkdir()
    before = listing(folder)
    port = free_port()
    line = one_line(run(record_argv(db, port)), "--db", str(db.name))
    assert {"notes": "not a SQLite database", "corrupt": "corrupt", "fifo": "not a regular file",
            "folder": "is a directory"}[case] in line
    assert listing(folder) == before  # nothing created, nothing changed
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()


@pytest.mark.parametrize("case", ["notes", "profile", "corrupt"])
def test_plain_mitmdump_refuses_a_bad_option_in_one_line_exit_2_nothing_created(tmp_path: Path, case: str) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    if case == "notes":
        db = folder / "notes.txt"
        db.write_text("my notes\n")
        argv, needle = mitmdump_argv(db, "chatkit_profile=myproto"), "chatkit_db: "
    elif case == "corrupt":
        db = folder / "old.db"
        corrupt_trace(db)
        argv, needle = mitmdump_argv(db, "chatkit_profile=myproto"), "chatkit_db: "
    else:
        db = folder / "new" / "trace.db"  # its folder would be created
        argv, needle = mitmdump_argv(db, "chatkit_profile=nope"), "chatkit_profile: no profile named 'nope'"
    before = listing(folder)
    line = one_line(run(argv), "chatkit-trace: cannot start recording:", needle)
    assert listing(folder) == before, line
    assert not (folder / "new").exists()


def test_a_read_only_disk_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with tiny_disk(tmp_path / "ro", "8m") as disk:
        trace = disk / "trace.db"
        done = run([CT, "import", str(REPO / "tests" / "data" / "import" / "myproto.har"), "--profile", "myproto",
                    "-o", str(trace)])
        assert done.returncode == 0, done.stderr
        remount_read_only(disk)
        before = listing(disk)
        one_line(run(record_argv(trace)), "--db", "read-only file system")
        one_line(run(record_argv(disk / "new.db")), "--db", "read-only file system")
        one_line(run(mitmdump_argv(trace, "chatkit_profile=myproto")), "chatkit_db: ", "read-only file system")
        assert listing(disk) == before


def test_a_full_disk_at_start_is_one_line_and_nothing_is_created(tmp_path: Path) -> None:
    with tiny_disk(tmp_path / "full", "8m") as disk:
        fill(disk, leave=64 * 1024)
        before = listing(disk)
        db = disk / "rec" / "trace.db"
        one_line(run(record_argv(db)), "--db", "the disk is full")
        one_line(run(mitmdump_argv(db, "chatkit_profile=myproto")), "chatkit_db: ", "the disk is full")
        assert listing(disk) == before


def test_the_writer_that_cannot_create_its_trace_on_a_full_disk_leaves_nothing(tmp_path: Path) -> None:
    """Past the start-up check (the disk fills between the check and the
    first write): the writer's own failure removes the file and the folder it
    created.  A real SQLite file on a real full file system."""
    from chatkit_trace.capture.writer import Writer, WriterConfig

    with tiny_disk(tmp_path / "full", "8m") as disk:
        fill(disk, leave=0)
        before = listing(disk)
        w = Writer(WriterConfig(db=str(disk / "rec" / "trace.db")))
        w.start()
        w.ready.wait(30)
        w.join(30)
        assert w.open_error is not None and ("full" in w.open_error or "No space" in w.open_error), w.open_error
        assert listing(disk) == before


def test_record_names_port_when_the_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_line(run(record_argv(tmp_path / "trace.db", port)), f"--port {port}", "already in use")
    assert "--mode" not in line
    assert list(tmp_path.iterdir()) == []


def test_the_banner_comes_once_the_port_accepts_connections(tmp_path: Path, server, procs) -> None:
    """The first connection made right after the banner is accepted (the
    banner used to come 0.5-0.8 s before the port listened)."""
    port = free_port()
    p = Proc(record_argv(tmp_path / "trace.db", port, server.url), port=port, ready=None)
    procs.append(p)
    deadline = time.monotonic() + 60
    while "Ctrl-C to stop" not in p.output:
        assert p.proc.poll() is None and time.monotonic() < deadline, p.output
        time.sleep(0.005)
    socket.create_connection(("127.0.0.1", port), timeout=5).close()  # no retry: refused would raise
    assert p.output.count("Ctrl-C to stop") == 1
    assert p.stop() == 0


def test_ctrl_c_with_a_stream_open_is_one_line_then_the_summary(tmp_path: Path, server, procs) -> None:
    db = tmp_path / "trace.db"
    port = free_port()
    p = Proc(record_argv(db, port, server.url), port=port, ready="Ctrl-C to stop")
    procs.append(p)
    p.wait_ready()
    # one finished run, one stream held open by the backend after its first event
    body = b'{"runId": "r1", "text": "hi"}'
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/sessions/s1/runs", data=body), timeout=30).read()
    got: list[bytes] = []

    def hold() -> None:
        req = urllib.request.Request(f"http://127.0.0.1:{port}/sessions/s1/runs?hold=1", data=b'{"runId": "r2"}')
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                got.append(resp.read(40))
                got.append(resp.read())
        except Exception:  # noqa: BLE001 - cut off by the stop (IncompleteRead, a reset)
            got.append(b"<cut>")

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while not got:
        assert time.monotonic() < deadline, p.output
        time.sleep(0.02)
    assert p.stop(signal.SIGINT, timeout=60) == 0, p.output
    t.join(30)
    out = p.output
    assert "Traceback" not in out and "CancelledError" not in out, out
    still_open = [line for line in out.splitlines() if "still open" in line]
    assert len(still_open) == 1 and "1 exchange(s)" in still_open[0], out
    con = sqlite3.connect(db)
    ends = dict(con.execute("SELECT run_id, \"end\" FROM exchanges"))
    assert ends == {"r1": "complete", "r2": "open"}
    frames = con.execute("SELECT COUNT(*) FROM frames").fetchone()[0]
    assert frames >= 6
    assert f"chatkit-trace: recorded 2 exchange(s), {frames} frame(s), 2 run(s) into {db}" in out, out
    assert "findings in the trace: 0 error, " in out, out
    assert out.rstrip().endswith(f"next: chatkit-trace check {db}"), out
