"""Loss on the recorder's side is recorded and reported (issue 31 parts 4 and 5), with real processes.

A real ``chatkit-trace record`` (mitmdump with the addon, its writer and
deriver processes) in front of the real test backend on 127.0.0.1:

* the writer process killed (``kill -9``) while a stream is open: the proxy
  says so in one line, the trace marks the exchange it left open and counts
  the exchanges that passed unrecorded; ``check --fail-on warning`` exits 1
  (CK702), ``runs`` says "recording incomplete";
* the trace's disk fills up (a real tmpfs): one line when it fills, one when
  it has room again, no traceback, the lost frames marked on their exchange
  (CK702);
* a 17 MiB SSE event is stored whole and its run judged completed; one over
  ``chatkit_max_event_mb`` is kept as its head, length and SHA-256 and
  reported as the recorder's own limit (CK703), never as the backend's CK405.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from .backend import free_port
from .disk import fill, tiny_disk
from .proxy import BIN, REPO, Proc
from .test_lifecycle import record_argv

CT = str(BIN / "chatkit-trace")


def start(db: Path, upstream: str, procs: list[Proc], *extra: str) -> Proc:
    port = free_port()
    argv = record_argv(db, port, upstream) + (["--", *extra] if extra else [])
    p = Proc(argv, port=port, ready="Ctrl-C to stop")
    procs.append(p)
    p.wait_ready()
    return p


def post(port: int, path: str, body: dict[str, Any], timeout: float = 120) -> bytes:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return bytes(resp.read())


def check(db: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    done = subprocess.run([CT, "check", str(db), "--format", "json", *args], capture_output=True, text=True, timeout=300,
                          cwd=str(REPO))
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)["findings"]


def runs(db: Path) -> dict[str, str]:
    done = subprocess.run([CT, "runs", str(db), "--format", "json"], capture_output=True, text=True, timeout=300, cwd=str(REPO))
    assert done.returncode == 0, done.stderr
    return {r["run"]: r["status"] for r in json.loads(done.stdout)}


def no_traceback(p: Proc) -> None:
    assert "Traceback" not in p.output and "stored in the trace" not in p.output, p.output


def writer_pid(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        recordings = json.loads(con.execute("SELECT value FROM meta WHERE key = 'recordings'").fetchone()[0])
    finally:
        con.close()
    return int(recordings[-1]["writer_pid"])


def test_a_killed_writer_is_a_marked_gap_and_fails_check_on_warning(tmp_path: Path, server, procs) -> None:
    db = tmp_path / "trace.db"
    p = start(db, server.url, procs)
    post(p.port, "/sessions/s1/runs", {"runId": "r1", "text": "hi"})
    held: list[bytes] = []
    t = threading.Thread(target=lambda: held.append(post(p.port, "/sessions/s1/runs?hold=1", {"runId": "r2"})), daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while not (db.exists() and _frames_of(db, "r2")):  # r2's first event is stored: it is in flight
        assert time.monotonic() < deadline, p.output
        time.sleep(0.05)
    os.kill(writer_pid(db), signal.SIGKILL)
    assert p.wait_for("the writer process killed by SIGKILL", 30), p.output
    post(server.port, "/release/r2", {})  # the backend finishes r2
    t.join(30)
    assert held and held[0].count(b"\n\n") == 5  # the client got every event
    post(p.port, "/sessions/s2/runs", {"runId": "r3", "text": "after"})  # passes unrecorded
    assert p.stop() == 0, p.output
    no_traceback(p)
    said = [line for line in p.output.splitlines() if "writer process" in line and "SIGKILL" in line]
    assert len(said) == 2, p.output  # when it died, and at the stop what passed unrecorded
    assert "1 exchange(s) passed through the proxy after the writer process killed by SIGKILL" in p.output, p.output

    code, findings = check(db, "--fail-on", "warning")
    assert code == 1
    gaps = [f for f in findings if f["code"] == "CK702"]
    by_run = {f["run_id"]: f for f in gaps}
    assert set(by_run) == {"r2", None}, gaps
    assert "killed by SIGKILL" in by_run["r2"]["message"] and by_run["r2"]["severity"] == "warning"
    assert "1 exchange(s) passed through the proxy" in by_run[None]["message"]
    assert not [f for f in findings if f["run_id"] == "r2" and f["code"] != "CK702"], findings  # nothing blamed on r2
    assert runs(db) == {"r1": "completed", "r2": "recording incomplete"}
    assert check(db)[0] == 0  # the default gate (errors) passes: a gap is a warning


def _frames_of(db: Path, run: str) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            row = con.execute("SELECT COUNT(*) FROM frames JOIN exchanges ON exchanges.id = frames.exchange_id "
                              "WHERE exchanges.run_id = ?", [run]).fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return 0
    return int(row[0])


def test_a_full_disk_is_one_line_each_way_and_a_marked_gap(tmp_path: Path, server, procs) -> None:
    with tiny_disk(tmp_path / "disk", "16m") as disk:
        db = disk / "trace.db"
        p = start(db, server.url, procs)
        post(p.port, "/sessions/s1/runs", {"runId": "r1", "text": "hi"})
        # r1 is stored (derived from the file) before the disk fills, not by luck of the batch timer
        assert p.wait_for("session s1 run r1: completed", 30), p.output
        filler = fill(disk, leave=512 * 1024)
        big = post(p.port, "/sessions/s1/runs?n=60&pad=50000", {"runId": "r2"})  # 3 MB: does not fit
        assert big.count(b"\n\n") == 60  # the client got every event
        assert p.wait_for("cannot write to", 30), p.output
        filler.unlink()  # room again
        post(p.port, "/sessions/s2/runs", {"runId": "r3", "text": "after"})
        assert p.wait_for("is writable again", 30), p.output
        assert p.stop() == 0, p.output
        no_traceback(p)
        assert sum("cannot write to" in line for line in p.output.splitlines()) == 1, p.output
        assert sum("is writable again" in line for line in p.output.splitlines()) == 1, p.output
        assert not (disk / "trace.db-reserve").exists() and not (disk / "trace.db-wal").exists()

        code, findings = check(db, "--fail-on", "warning")
        assert code == 1
        gaps = {f["run_id"]: f for f in findings if f["code"] == "CK702"}
        assert "r2" in gaps and "the disk is full" in gaps["r2"]["message"], findings
        assert None not in gaps  # the disk had room again: every lost frame is marked on its exchange
        assert not [f for f in findings if f["run_id"] == "r2" and f["code"] != "CK702"], findings
        status = runs(db)
        assert status["r2"] == "recording incomplete" and status["r1"] == status["r3"] == "completed", status


def test_a_17_mib_event_is_stored_whole_and_its_run_judged_completed(tmp_path: Path, server, procs) -> None:
    db = tmp_path / "trace.db"
    p = start(db, server.url, procs)
    pad = 17 * 1024 * 1024
    body = post(p.port, f"/sessions/s1/runs?n=3&pad={pad}", {"runId": "r1"})
    assert len(body) > pad
    assert p.stop() == 0, p.output
    code, findings = check(db, "--fail-on", "warning")
    assert code == 0 and not findings or {f["code"] for f in findings} <= {"CK303", "CK401"}, findings
    assert runs(db) == {"r1": "completed"}
    con = sqlite3.connect(db)
    sizes = [r[0] for r in con.execute("SELECT length(text) FROM frames ORDER BY idx")]
    assert len(sizes) == 3 and sizes[1] > pad, sizes


def test_an_event_over_the_limit_is_the_recorders_own_info_never_ck405(tmp_path: Path, server, procs) -> None:
    db = tmp_path / "trace.db"
    p = start(db, server.url, procs, "--set", "chatkit_max_event_mb=1")
    pad = 2 * 1024 * 1024
    body = post(p.port, f"/sessions/s1/runs?n=4&pad={pad}", {"runId": "r1"})
    assert p.stop() == 0, p.output
    code, findings = check(db, "--fail-on", "warning")
    assert code == 0, findings  # an info: the recorder's documented limit
    codes = [f["code"] for f in findings]
    assert "CK405" not in codes and "CK703" in codes, findings
    [limit] = [f for f in findings if f["code"] == "CK703"]
    # the event as the client got it: its length and SHA-256 are in the trace
    events = body.split(b"\n\n")
    line = next(e for e in events if len(e) > pad).split(b"\n")[1]  # "data: {...}" after the id line
    assert limit["detail"]["over_limit"][0]["bytes"] == len(line)
    assert limit["detail"]["over_limit"][0]["sha256"] == hashlib.sha256(line).hexdigest()
    assert limit["run_id"] == "r1" and limit["severity"] == "info"
    assert runs(db) == {"r1": "recording incomplete"}
