"""The CI gate through a real mitmdump (issue 14): a recording made with the
wrong profile keeps every exchange, says so live, cannot pass ``check`` and is
fully recovered by ``--profile``; an empty recording is "nothing recorded";
the per-run log line and ``check`` say the same thing; a clean stop leaves
one file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chatkit_trace.store import TraceStore

from .client import fetch
from .conftest import stopped_store

pytestmark = pytest.mark.mitmdump

HINT = "POST /sessions/{id}/runs matched no route of profile 'adk'; it looks like myproto: use --profile myproto"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "chatkit_trace.cli", *args], capture_output=True, text=True, timeout=120
    )


async def _two_runs(port: int, *, late: bool = False) -> None:
    base = f"http://127.0.0.1:{port}"
    q = "&late=1" if late else ""
    await fetch("POST", f"{base}/sessions/s1/runs?n=4{q}", json={"runId": "run-one1", "text": "hi"})
    await fetch("POST", f"{base}/sessions/s1/runs?n=5", json={"runId": "run-two22", "text": "again"})


async def test_a_wrong_profile_keeps_everything_says_so_live_and_never_passes(proxy, tmp_path):
    db = tmp_path / "trace.db"
    p = proxy(profile="adk")  # the README's example profile, in front of a myproto backend
    await _two_runs(p.port)
    assert p.wait_for(HINT, timeout=15), p.output
    stopped_store(p, db).close()
    assert p.output.count("matched no route of profile") == 1  # the first time only
    assert sorted(x.name for x in tmp_path.iterdir()) == ["trace.db"]  # one file after a clean stop
    with TraceStore(db, readonly=True) as store:
        exchanges = list(store.exchanges())
        assert len(exchanges) == 2 and {e.capability for e in exchanges} == {None}
        assert sum(len(store.frames(e.index)) for e in exchanges) == 9  # every frame kept

    before = db.read_bytes()
    proc = cli("check", str(db))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "nothing to judge" in proc.stderr
    assert "POST /sessions/{id}/runs (2 exchanges, 9 frames) matched no route of profile 'adk'" in proc.stderr
    assert "it looks like myproto: use --profile myproto" in proc.stderr

    # --profile re-classifies the stored exchanges: the recording is judged in full
    ok = cli("check", str(db), "--profile", "myproto", "--format", "json")
    assert ok.returncode == 0, ok.stderr
    summary = json.loads(ok.stdout)["summary"]
    assert summary["frames"] == 9 and summary["facts"] > 0 and summary["error"] == 0
    runs = cli("runs", str(db), "--profile", "myproto", "--format", "json")
    assert {(r["run"], r["status"]) for r in json.loads(runs.stdout)} == {("run-one1", "completed"), ("run-two22", "completed")}
    assert db.read_bytes() == before  # check and runs never write to their input
    assert sorted(x.name for x in tmp_path.iterdir()) == ["trace.db"]

    # redecode stores the new classification: check needs no --profile any more
    assert cli("redecode", str(db), "--profile", "adk").returncode == 2  # still wrong: nothing written
    assert db.read_bytes() == before
    red = cli("redecode", str(db), "--profile", "myproto")
    assert red.returncode == 0, red.stderr
    again = cli("check", str(db), "--format", "json")
    assert again.returncode == 0 and json.loads(again.stdout)["summary"] == summary
    assert sorted(x.name for x in tmp_path.iterdir()) == ["trace.db"]


async def test_record_logs_the_same_hint(recorder_cmd, tmp_path):
    db = tmp_path / "trace.db"
    p = recorder_cmd(profile="adk")
    await _two_runs(p.port)
    assert p.wait_for(HINT, timeout=15), p.output
    assert p.stop() == 0
    proc = cli("check", str(db))
    assert proc.returncode == 2 and "it looks like myproto: use --profile myproto" in proc.stderr


async def test_an_empty_recording_is_nothing_recorded(proxy, tmp_path):
    db = tmp_path / "trace.db"
    p = proxy(profile="myproto")
    stopped_store(p, db).close()  # record, Ctrl-C, no traffic
    proc = cli("check", str(db))
    assert proc.returncode == 2 and "nothing recorded" in proc.stderr and proc.stdout == ""
    assert sorted(x.name for x in tmp_path.iterdir()) == ["trace.db"]


async def test_the_per_run_log_line_says_what_check_says(proxy, tmp_path):
    db = tmp_path / "trace.db"
    p = proxy(profile="myproto")
    await _two_runs(p.port, late=True)
    assert p.wait_for("run run-one1: completed", timeout=15), p.output
    assert p.wait_for("run run-two22: completed", timeout=15), p.output
    stopped_store(p, db).close()
    lines = {
        run: line for line in p.output.splitlines() for run in ("run-one1", "run-two22") if f"run {run}:" in line
    }
    assert "findings: CK101 error" in lines["run-one1"], lines
    assert lines["run-two22"].endswith("no findings"), lines
    proc = cli("check", str(db), "--format", "json")
    assert proc.returncode == 1
    per_run = {(f["run_id"], f["code"], f["severity"]) for f in json.loads(proc.stdout)["findings"] if f["run_id"]}
    assert per_run == {("run-one1", "CK101", "error")}


def test_the_zero_byte_file_stays_zero_bytes(tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for args in (("check", str(empty)), ("check", str(empty), "--no-store"), ("runs", str(empty)), ("redecode", str(empty))):
        proc = cli(*args)
        assert proc.returncode == 2 and "is empty" in proc.stderr, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1
    assert empty.read_bytes() == b"" and sorted(x.name for x in tmp_path.iterdir()) == ["empty.db"]


def test_a_trace_recorded_without_a_profile_names_the_one_it_looks_like(tmp_path: Path):
    from chatkit_trace.trace import Exchange, frames_from_body

    db = tmp_path / "t.db"
    body = b'data: {"choices":[{"delta":{"content":"hi"},"index":0}]}\n\ndata: [DONE]\n\n'
    with TraceStore(db, create=True) as store:
        ex = Exchange(0, "POST", "http://127.0.0.1:8000/v1/chat/completions", started_at=1.0, ended_at=1.1,
                      request_body=b'{"messages":[{"role":"user","content":"hi"}],"stream":true}', status=200,
                      response_headers=[("content-type", "text/event-stream")], transport="sse", end="complete")
        ex.frames = frames_from_body(body, 0, at=1.05)
        store.add_exchange(ex)
    proc = cli("check", str(db))
    assert proc.returncode == 2
    assert "POST /v1/chat/completions (1 exchange, 2 frames) was recorded without a profile; it looks like openai" in proc.stderr


async def test_the_product_card_command_records_from_a_checkout(server, tmp_path, procs):
    """``mitmdump -s chatkit_trace.addon`` exactly as written, from the repository root."""
    from .backend import free_port
    from .proxy import MITMDUMP, REPO, Proc

    db = tmp_path / "trace.db"
    port = free_port()
    argv = [MITMDUMP, "-s", "chatkit_trace.addon", "--mode", f"reverse:{server.url}", "--listen-host", "127.0.0.1",
            "-p", str(port), "--set", "chatkit_profile=myproto", "--set", f"chatkit_db={db}"]
    p = Proc(argv, port=port)  # cwd: the repository root
    procs.append(p)
    assert Path(p.proc.args[2]).name == "chatkit_trace.addon" and (REPO / "chatkit_trace.addon").is_file()
    p.wait_ready()
    await fetch("POST", f"http://127.0.0.1:{port}/sessions/s1/runs?n=4", json={"runId": "card1", "text": "hi"})
    assert p.wait_for("run card1: completed", timeout=15), p.output
    with stopped_store(p, db) as store:
        [ex] = list(store.exchanges())
        assert (ex.capability, ex.session_id, ex.run_id) == ("run", "s1", "card1")
        assert len(store.frames(ex.index)) == 4
    assert "No such script" not in p.output
