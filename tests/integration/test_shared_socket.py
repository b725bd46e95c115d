"""A shared WebSocket backend (one /ws, several sessions) recorded through a
real mitmdump and judged per session and run (issue 20).

The backend (``shared_socket_backend.py``) acts out one bug per run (late,
remint, noend, stop, fail, a dropped socket) on two sessions interleaved on
one socket, history over HTTP; the client (``shared_socket_client.py``)
drives it through the proxy.  The trace must say, per run, exactly what the
backend did (no CK501 from the socket being shared), every frame must land in
the session it names, each session exports on its own, ``serve`` must stand
in for the backend for a client that mints other run ids, and the client
must see the close codes the backend sent.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from chatkit_trace.cli import main
from chatkit_trace.derive import Deriver
from chatkit_trace.loading import open_trace
from chatkit_trace.store import TraceStore

from .conftest import stopped_store
from .proxy import REPO, mitmdump
from .shared_socket_backend import SharedSocketBackend, shared_socket_backend
from .shared_socket_client import EXPECTED, scenario

pytestmark = pytest.mark.mitmdump

PROFILE = REPO / "chatkit_trace" / "examples" / "shared_socket.toml"
BEFORE = REPO / "tests" / "data" / "shared_socket"


@pytest.fixture
def backend():
    with shared_socket_backend() as b:
        yield b


def _verdicts(findings) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = defaultdict(set)
    for f in findings:
        if f.severity in ("error", "warning") and f.run_id is not None:
            out[(f.session_id, f.run_id)].add(f.code)
    return out


def _row_set(path: Path, table: str, columns: tuple[str, ...]) -> set[tuple]:
    with TraceStore(path, readonly=True) as store:
        return {tuple(r[c] for c in columns) for r in store.rows(table)}


def _judge(path: Path, profile: str | None = None):
    loaded = open_trace(str(path), profile=profile)
    try:
        placed = []  # (frame's session in the replay, the session its JSON names)

        def session_done(derived) -> None:
            for rec in derived.replay.exchanges.values():
                if rec.exchange.capability != "subscribe":
                    continue
                by_index = {f.index: f for f in rec.exchange.frames}
                for fr in rec.frames:
                    named = json.loads(by_index[fr.frame_index].text).get("sessionId")
                    placed.append((rec.exchange.index, fr.frame_index, fr.session_id, named))

        result = Deriver(loaded.store, loaded.adapter, capabilities=loaded.capabilities).run(on_session=session_done)
        findings, counts = result.findings, result.counts
    finally:
        loaded.close()
    return findings, counts, placed


async def test_a_shared_socket_is_judged_per_session_and_run(backend: SharedSocketBackend, tmp_path, procs):
    db = tmp_path / "trace.db"
    proxy = mitmdump(upstream=backend.url, db=db, profile=str(PROFILE))
    procs.append(proxy)
    seen = await scenario(f"http://127.0.0.1:{proxy.port}")
    # the client saw the close codes the backend sent: a clean close, then a dropped socket
    assert seen["close_codes"] == [1000, 1006], proxy.output
    # the recorder's own live derivation says it per run, as check does
    for line in ("session sess-b run b-r2: completed, ", "session sess-a run a-r4: no conclusion (stream ended)",
                 "session sess-c run c-r1: no conclusion (connection reset)"):
        assert proxy.wait_for(f"chatkit-trace: {line}", timeout=15), proxy.output
    store = stopped_store(proxy, db)
    sockets = [e for e in store.exchanges(with_frames=True) if e.path == "/ws"]
    assert [(e.end, e.notes.get("close_code")) for e in sockets] == [("complete", 1000), ("reset", 1006)]
    # recorded exactly: every message both ways, in order
    sent = [json.loads(f.text) for e in sockets for f in e.frames if f.direction == "in"]
    assert sorted(json.dumps(m, sort_keys=True) for m in sent) == sorted(
        json.dumps(m, sort_keys=True) for ms in backend.sent.values() for m in ms)
    assert [json.loads(f.text) for e in sockets for f in e.frames if f.direction == "out"] == backend.received
    store.close()

    findings, counts, placed = _judge(db)
    assert not [f for f in findings if f.code == "CK501"]
    assert _verdicts(findings) == {k: v for k, v in EXPECTED.items() if v}
    # every frame of the socket went to the session it names, once
    assert placed and all(sid == named for _, _, sid, named in placed), placed
    assert len({(e, i) for e, i, _, _ in placed}) == len(placed) == sum(len(e.frames) for e in sockets)
    out = proxy.output
    for sid, run in EXPECTED:
        line = next(x for x in out.splitlines() if f"chatkit-trace: session {sid} run {run}: " in x)
        assert sorted(c for c in EXPECTED[(sid, run)]) == sorted(
            c for c in ("CK101", "CK102", "CK103", "CK107", "CK116", "CK201", "CK202") if c in line), line
        assert "CK501" not in line
    with TraceStore(db, readonly=True) as s:
        rows = {(r["exchange_id"], r["idx"]): r["session_id"] for r in s.rows("frame_results")}
    assert {(e, i): sid for e, i, sid, _ in placed}.items() <= rows.items()
    # the recorder's live derivation (a socket's sessions re-derived together, its rows
    # replaced by session) stores what redecode stores from the same engine
    copy = tmp_path / "redecoded.db"
    shutil.copy(db, copy)
    assert main(["redecode", str(copy)]) == 0
    for table, key in (("frame_results", ("exchange_id", "idx", "session_id", "run_id", "state")),
                       ("runs", ("session_id", "run_id", "status", "settled_by", "frames")),
                       ("history_reads", ("exchange_id", "session_id", "ok"))):
        live, again = (_row_set(p, table, key) for p in (db, copy))
        assert live == again and live, table
    runs = {(r["session_id"], r["run_id"]): r["settled_by"] for r in TraceStore(db, readonly=True).rows("runs")}
    assert runs[("sess-b", "b-r2")] == "history" and runs[("sess-b", "b-r1")] == "fact"
    assert runs[("sess-a", "a-r4")] is None

    # export, one session at a time: only that session's messages of the socket
    from chatkit_trace.fixtures import replay_fixture
    from chatkit_trace.fixtures.export import export_fixture
    from chatkit_trace.fixtures.model import dump_fixture

    for sid in ("sess-a", "sess-b"):
        res = export_fixture(db, sid)
        path = tmp_path / f"{sid}.chatkit.json"
        dump_fixture(res.fixture, path)
        data = json.loads(path.read_text())
        [sock] = [e for e in data["exchanges"] if e.get("transport") == "ws"]
        named = {(f.get("json") or {}).get("sessionId") for f in sock["frames"]}
        assert named == {sid}, named
        assert {(f["session"], f["run"]) for f in data["expected"]["findings"] if f["severity"] != "info"} == {
            k for k, v in EXPECTED.items() if v and k[0] == sid}
        assert replay_fixture(path).ok


async def test_serve_stands_in_for_the_backend_with_new_run_ids(backend: SharedSocketBackend, tmp_path, procs):
    db = tmp_path / "trace.db"
    proxy = mitmdump(upstream=backend.url, db=db, profile=str(PROFILE))
    procs.append(proxy)
    recorded = await scenario(f"http://127.0.0.1:{proxy.port}")
    stopped_store(proxy, db).close()

    from chatkit_trace.fixtures.server import serve

    ids = {run: f"new-{run}" for _, run in EXPECTED}
    async with serve(db, speed=None) as (url, server):
        got = await scenario(url, ids=ids)
    assert got["close_codes"] == recorded["close_codes"] == [1000, 1006]
    for mine, theirs in zip(got["sockets"], recorded["sockets"], strict=True):
        # each session's events as recorded, in order, each run under the id the client minted
        # (sessions interleave as the client's messages come)
        for sid in {t["sessionId"] for t in theirs} | {m["sessionId"] for m in mine}:
            assert [(m["type"], m["runId"]) for m in mine if m["sessionId"] == sid] == [
                (t["type"], ids[t["runId"]]) for t in theirs if t["sessionId"] == sid], server.log


async def test_serve_answers_a_message_it_never_saw_with_an_error_naming_the_closest(backend, tmp_path, procs):
    import aiohttp

    from chatkit_trace.fixtures.server import serve

    db = tmp_path / "trace.db"
    proxy = mitmdump(upstream=backend.url, db=db, profile=str(PROFILE))
    procs.append(proxy)
    await scenario(f"http://127.0.0.1:{proxy.port}", drop=False)
    stopped_store(proxy, db).close()
    async with serve(db, speed=None) as (url, _), aiohttp.ClientSession() as http:
        async with http.ws_connect(url.replace("http", "ws", 1) + "/ws") as ws:
            await ws.send_str(json.dumps({"type": "regenerate", "sessionId": "sess-a", "runId": "x"}))
            msg = json.loads((await ws.receive(timeout=10)).data)
    assert msg["type"] == "chatkit-trace.replay-mismatch"
    assert msg["closest"]["type"] in ("run", "stop", "subscribe") and "sessionId" in msg["closest"]


def test_a_recording_from_before_issue_20_is_judged_per_session():
    """Recorded through the addon as it was before issue 20 (make_before_20.py),
    decoded with the profile written then (the session comes from the events):
    no false CK501, and late, remint and noend are caught on their runs."""
    findings, _, placed = _judge(BEFORE / "before-20.db", str(BEFORE / "before-20.toml"))
    assert not [f for f in findings if f.code == "CK501"]
    got = _verdicts(findings)
    assert "CK101" in got[("sess-b", "b-r1")]  # late
    assert "CK202" in got[("sess-a", "a-r2")]  # remint
    assert got[("sess-b", "b-r2")] & {"CK116"} and got[("sess-a", "a-r4")] == {"CK102"}  # noend
    assert got[("sess-c", "c-r1")] == {"CK103"}  # the dropped socket
    assert all(sid == named for _, _, sid, named in placed)
    # without run messages its runs are the backend's (passive): their questions are the protocol's limit, once
    assert [f.code for f in findings if f.code == "CK201" and "user message" in f.message] == []
    assert [f.code for f in findings if f.severity == "info"] == ["CK505"]
    # with today's profile (client messages as commands) each run says exactly what the backend did
    findings, _, _ = _judge(BEFORE / "before-20.db", str(PROFILE))
    assert _verdicts(findings) == {k: v for k, v in EXPECTED.items() if v}


async def test_record_says_loudly_once_when_it_cannot_import_the_adapter(backend, tmp_path, procs):
    """Every exchange is still recorded; the console says what to do, once."""
    profile = tmp_path / "team.toml"
    profile.write_text(PROFILE.read_text().replace("chatkit_trace.examples.shared_socket:SharedSocket",
                                                   "no_such_adapter_pkg.protocol:Missing"))
    db = tmp_path / "trace.db"
    proxy = mitmdump(upstream=backend.url, db=db, profile=str(profile))
    procs.append(proxy)
    await scenario(f"http://127.0.0.1:{proxy.port}", drop=False)
    store = stopped_store(proxy, db)
    lines = [x for x in proxy.output.splitlines() if "cannot import the adapter" in x]
    assert len(lines) == 1, proxy.output
    assert "no_such_adapter_pkg.protocol:Missing" in lines[0] and "pip install" in lines[0] and "redecode" in lines[0]
    assert [e.path for e in store.exchanges()].count("/ws") == 1  # recorded all the same
    assert any("cannot build the adapter" in e["message"] for e in store.capture_errors())
