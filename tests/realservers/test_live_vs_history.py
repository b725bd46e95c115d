"""Live vs history on the REAL servers, recorded THROUGH THE ADDON (issue 13).

A real ``chatkit-trace record`` (mitmdump + the recording addon) stands in
front of each real server (google-adk, a2a-sdk, hermes-agent); the harness
drives it; then ``chatkit-trace diff`` and ``check`` judge the trace.  The
seeded cases edit the recorded history response of a copy of the trace (a
session store that re-mints ids, one that lost the last model event).

    CHATKIT_REQUIRE_PEERS=1 pytest tests/realservers/test_live_vs_history.py -m realserver
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chatkit_trace.cli import main
from chatkit_trace.derive import Deriver
from chatkit_trace.loading import open_trace

from .harness import REPO_ROOT, free_port

pytestmark = pytest.mark.realserver


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chatkit-trace record exited {proc.returncode}: {proc.communicate()[0][-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the recording proxy did not listen on {port} within {timeout} s")


@contextlib.contextmanager
def through_addon(srv, protocol: str, db: Path) -> Iterator[None]:
    """Point ``srv``'s helpers at a real recording proxy in front of it."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "chatkit_trace.cli", "record", "--profile", protocol, "--upstream", srv.base_url,
         "--port", str(port), "--db", str(db)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    base = srv.base_url
    try:
        _wait_port(port, proc)
        srv.base_url = f"http://127.0.0.1:{port}"
        yield
    finally:
        srv.base_url = base
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # the recorder flushes what it received
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()


def findings(db: Path):
    loaded = open_trace(db)
    try:
        out = Deriver(loaded.store, loaded.adapter, capabilities=loaded.capabilities).run().findings
    finally:
        loaded.close()
    return out


def codes(found) -> list[str]:
    return sorted(f.code for f in found if f.code not in ("CK401", "CK203", "CK601", "CK602"))


def diff(db: Path, capsys) -> tuple[int, str]:
    rc = main(["diff", str(db), "--full"])
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


def edited(db: Path, tmp: Path, name: str, capability: str, edit: Callable[[dict], None]) -> Path:
    """A copy of ``db`` whose (single) history response is edited."""
    out = tmp / f"{name}.db"
    shutil.copy(db, out)
    con = sqlite3.connect(out)
    try:
        rows = con.execute("SELECT id, response_body FROM exchanges WHERE capability = ?", [capability]).fetchall()
        assert len(rows) == 1, rows
        doc = json.loads(rows[0][1])
        edit(doc)
        con.execute("UPDATE exchanges SET response_body = ? WHERE id = ?", [json.dumps(doc).encode(), rows[0][0]])
        con.commit()
    finally:
        con.close()
    return out


def exchange_count(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT COUNT(*) FROM exchanges WHERE capability IS NOT NULL").fetchone()[0]
    finally:
        con.close()


# -- ADK ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def adk_trace(adk_peer, tmp_path_factory) -> Path:
    """One ADK session: a streamed text+tool run, a non-streamed one, then the history read."""
    db = tmp_path_factory.mktemp("adk") / "adk.db"
    sid = f"s-lvh-{uuid.uuid4().hex[:8]}"
    with through_addon(adk_peer, "adk", db):
        assert adk_peer.create_session(sid).status == 200
        text = adk_peer.TEXTS["text_tool"]
        assert adk_peer.run_sse(sid, text).status == 200
        assert adk_peer.run_sse(sid, text, streaming=False).status == 200
        assert adk_peer.get_session(sid).status == 200
    assert exchange_count(db) == 3  # two runs and the history read (the create is no capability)
    return db


def test_adk_both_runs_compared_and_isomorphic(adk_trace, capsys):
    rc, out = diff(adk_trace, capsys)
    assert rc == 0, out
    assert out.count("isomorphic") == 2 and out.count("(session scope)") >= 2
    assert out.count("run settled by this read") == 2  # stock ADK streams carry no terminal
    assert not {"CK201", "CK202"} & set(codes(findings(adk_trace)))


def test_adk_history_re_minting_ids_is_ck201_and_ck202(adk_trace, tmp_path, capsys):
    def remint(doc: dict) -> None:
        for i, ev in enumerate(doc["events"]):
            ev["id"] = f"reloaded-{i:03d}"

    db = edited(adk_trace, tmp_path, "remint", "history", remint)
    got = codes(findings(db))
    assert "CK201" in got and "CK202" in got, got
    rc, out = diff(db, capsys)
    assert rc == 1 and "reloaded-" in out and "same run, same place, same content" in out


def test_adk_history_missing_the_last_model_event_is_ck201_only(adk_trace, tmp_path, capsys):
    def drop(doc: dict) -> None:
        last = max(i for i, ev in enumerate(doc["events"]) if (ev.get("content") or {}).get("role") == "model")
        del doc["events"][last]

    db = edited(adk_trace, tmp_path, "drop", "history", drop)
    got = codes(findings(db))
    assert "CK201" in got and "CK202" not in got, got
    rc, out = diff(db, capsys)
    assert rc == 1 and "is missing in history" in out


# -- A2A ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.3", "1.0"])
def test_a2a_two_tasks_one_context_one_cancelled(a2a_peer, version, tmp_path, capsys):
    db = tmp_path / "a2a.db"
    with through_addon(a2a_peer, "a2a", db):
        first = a2a_peer.send_stream("hello", version=version)
        tid1, cid = a2a_peer.task_ids(first)
        assert tid1 and cid
        params = {"message": a2a_peer.message("be slow", version, context_id=cid)}
        with a2a_peer.open_rpc_stream("stream", params, version=version, req_id="req-slow") as main_stream:
            main_stream.read(max_events=5, timeout=20)  # the task, "Working on it...", three artifact updates
            tid2, cid2 = a2a_peer.task_ids(main_stream)
            assert tid2 and cid2 == cid and tid2 != tid1
            assert a2a_peer.cancel_task(tid2, version=version).status == 200
            main_stream.read_all(10)
        assert a2a_peer.get_task(tid1, version=version).status == 200
        assert a2a_peer.get_task(tid2, version=version).status == 200
    assert exchange_count(db) == 5
    found = findings(db)
    got = codes(found)
    assert "CK201" not in got and "CK202" not in got, [(f.code, f.message) for f in found]
    # the stop notice the cancel's terminal frame carries: an info on the route (CK117, issue 33; CK113 before)
    notices = [f for f in found if f.code == "CK117"]
    assert len(notices) == 1 and notices[0].severity == "info" and notices[0].run_id is None
    assert notices[0].detail["runs"] == [f"{cid}/{tid2}"] and notices[0].detail["how"] == ["sealed"]
    assert "cancelled by request" in notices[0].message and "the next refresh shows it" in notices[0].message
    # Anything else would be output the backend really sent after the stop (a tick racing the cancel).
    assert set(got) <= {"CK117", "CK107"}
    if "CK107" in got:
        assert _output_after_cancel(db, tid2)
    rc, out = diff(db, capsys)
    assert rc == 1 and out.count("(run scope)") >= 2 and "explained:" in out and "CK117" in out
    assert out.count("isomorphic") == 1  # the first task; the second differs only by the explained notice


def _output_after_cancel(db: Path, task: str) -> bool:
    con = sqlite3.connect(db)
    try:
        (t_cancel,) = con.execute("SELECT started_at FROM exchanges WHERE capability = 'abort'").fetchone()
        rows = con.execute(
            "SELECT f.text FROM frames f JOIN exchanges e ON e.id = f.exchange_id "
            "WHERE e.capability = 'run' AND e.run_id = ? AND f.at > ?", [task, t_cancel]
        ).fetchall()
    finally:
        con.close()
    return any("artifact" in (r[0] or "") for r in rows)


# -- Hermes ------------------------------------------------------------------------------


def test_hermes_run_stop_status_read_no_false_difference(hermes_peer, tmp_path, capsys):
    db = tmp_path / "hermes.db"
    with through_addon(hermes_peer, "hermes", db):
        ex = hermes_peer.scenario("runs_stop")
    assert ex["stop"].status in (200, 202) and ex["status"].json()["status"] == "cancelled"
    found = findings(db)
    assert not {"CK201", "CK202", "CK107", "CK113", "CK117", "CK106"} & set(codes(found)), [(f.code, f.message) for f in found]
    rc, out = diff(db, capsys)
    assert rc == 2 and "nothing to compare" in out  # a status read holds no messages: nothing is judged, nothing passes
