"""Two recorders on one trace file (issue 31 part 3), with real processes.

Two recorders appending to one file used to number their exchanges from the
same ``MAX(id) + 1`` and overwrite each other's rows (20 streams each: 1,020
of 2,040 events lost).  The writer holds an exclusive lock on the file for
its life: a second recorder is refused in one line, exit 2, whether it
starts while the first records or at the same moment; the file then holds
every exchange of every recording made into it.
"""

from __future__ import annotations

import concurrent.futures
import json
import sqlite3
import urllib.request
from pathlib import Path

from .backend import free_port
from .proxy import Proc
from .test_lifecycle import mitmdump_argv, one_line, record_argv, run

EVENTS = 51  # per stream: 20 streams carry 1,020 events


def streams(port: int, tag: str, n: int = 20) -> list[bytes]:
    """``n`` concurrent runs through the proxy; the bodies the clients got."""

    def one(i: int) -> bytes:
        body = json.dumps({"runId": f"{tag}-{i}", "text": "hi"}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/sessions/{tag}/runs?n={EVENTS}", data=body)
        with urllib.request.urlopen(req, timeout=60) as resp:
            return bytes(resp.read())

    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def start_record(db: Path, upstream: str) -> Proc:
    port = free_port()
    return Proc(record_argv(db, port, upstream), port=port, ready="Ctrl-C to stop")


def test_a_second_recorder_on_the_same_file_is_refused_and_no_exchange_is_lost(tmp_path: Path, server, procs) -> None:
    db = tmp_path / "trace.db"
    # two recorders started at the same moment on a new file: one records, one is refused
    a, b = start_record(db, server.url), start_record(db, server.url)
    procs += [a, b]
    done = {}
    for p in (a, b):
        try:
            p.wait_ready()
        except RuntimeError:
            done[p] = p.proc.wait(30)
    assert len(done) == 1, (a.output, b.output)
    [(loser, code)] = done.items()
    winner = b if loser is a else a
    assert code == 2, loser.output
    refusal = [line for line in loser.output.splitlines() if "another recorder" in line]
    assert len(refusal) == 1 and str(db) in refusal[0], loser.output
    assert "Traceback" not in loser.output, loser.output

    # while it records, neither `record` nor a plain mitmdump may join it
    one_line(run(record_argv(db)), "--db", "another recorder", "is recording into")
    one_line(run(mitmdump_argv(db, "chatkit_profile=myproto")), "chatkit_db: another recorder")

    first = streams(winner.port, "a")
    assert winner.stop() == 0, winner.output
    second = start_record(db, server.url)  # after the first stopped: it appends
    procs.append(second)
    second.wait_ready()
    later = streams(second.port, "b")
    assert second.stop() == 0, second.output

    for body in first + later:
        assert body.count(b"\n\n") == EVENTS  # every client got every event
    con = sqlite3.connect(db)
    rows = con.execute("SELECT id, run_id FROM exchanges ORDER BY id").fetchall()
    assert len(rows) == 40 and len({r[1] for r in rows}) == 40, rows
    assert [r[0] for r in rows] == list(range(40))
    per = dict(con.execute("SELECT exchange_id, COUNT(*) FROM frames GROUP BY exchange_id"))
    assert per == {i: EVENTS for i in range(40)}  # 2,040 events, none lost
    recordings = json.loads(con.execute("SELECT value FROM meta WHERE key = 'recordings'").fetchone()[0])
    assert len(recordings) == 2


def test_the_lock_goes_with_a_killed_recorder(tmp_path: Path, server, procs) -> None:
    """The kernel releases the lock of a process however it ends: after a
    ``kill -9`` of the whole recorder the next one records into the file."""
    db = tmp_path / "trace.db"
    a = start_record(db, server.url)
    procs.append(a)
    a.wait_ready()
    streams(a.port, "a", 3)
    a.kill()  # SIGKILL to its process group: the proxy and its writer
    b = start_record(db, server.url)
    procs.append(b)
    b.wait_ready()
    streams(b.port, "b", 3)
    assert b.stop() == 0, b.output
    con = sqlite3.connect(db)
    runs = {r[0] for r in con.execute("SELECT run_id FROM exchanges WHERE run_id LIKE 'b-%'")}
    assert runs == {"b-0", "b-1", "b-2"}
