"""``chatkit-trace import``: HAR and mitmproxy flow files -> the trace a live
recording would make.  The files in tests/data/import/ come from real traffic
(make_files.py: an aiohttp server behind a real ``mitmdump -w … --set
hardump=…``), plus a Chrome-style HAR written by hand."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chatkit_trace.capture.importer import ImportError_, import_file, read_exchanges
from chatkit_trace.cli import main
from chatkit_trace.store import TraceStore

from .capture._util import response_body

DATA = Path(__file__).parent / "data" / "import"
CAPTURES = Path(__file__).parent / "capture" / "data"
HAR = DATA / "myproto.har"
FLOWS = DATA / "myproto.mitm"
CHROME = DATA / "chrome-ws.har"

sys.path.insert(0, str(DATA))
import make_files  # noqa: E402

SECRETS = [make_files.SECRET_BEARER, make_files.SECRET_QUERY, make_files.SECRET_PASSWORD, make_files.SECRET_WS,
           "COOKIE-SECRET-42"]


def do_import(path: Path, tmp_path: Path, profile: str = "myproto", name: str | None = None, **kw):
    db = tmp_path / (name or (path.name + ".db"))
    store = TraceStore(db, create=True)
    try:
        result = import_file(path, profile, store, **kw)
    finally:
        store.close()
    return result, db


def facts(db: Path) -> list[tuple]:
    """Every fact with its result, without times (imports approximate them)."""
    con = sqlite3.connect(db)
    out = []
    for row in con.execute(
        "SELECT exchange_id, frame_idx, session_id, run_id, kind, event_id, accepted, reason, fact FROM facts ORDER BY seq"
    ):
        fact = json.loads(row[-1])
        fact.pop("at", None)
        out.append((*row[:-1], json.dumps(fact, sort_keys=True)))
    return out


def exchanges(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    return con.execute(
        "SELECT id, method, path, status, transport, \"end\", capability, session_id, run_id, run_id_source, cursor,"
        " request_headers IS NOT NULL, length(request_body), length(response_body) FROM exchanges ORDER BY id"
    ).fetchall()


def frames(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    return con.execute(
        "SELECT exchange_id, idx, transport, direction, event, event_id, text, start, \"end\" FROM frames ORDER BY exchange_id, idx"
    ).fetchall()


# -- the same traffic, two formats ----------------------------------------------------------------


def test_a_har_and_a_flow_file_of_the_same_traffic_yield_the_same_trace(tmp_path):
    har, har_db = do_import(HAR, tmp_path)
    flows, flow_db = do_import(FLOWS, tmp_path)
    assert har.format == "har" and flows.format == "flows"
    assert facts(har_db) == facts(flow_db)
    assert exchanges(har_db) == exchanges(flow_db)
    assert frames(har_db) == frames(flow_db)
    for r in (har, flows):
        assert (r.exchanges, r.matched, r.sessions, r.runs) == (8, 6, 1, 3)
        assert r.facts == len(facts(har_db)) and r.rejected == 0


def test_the_imported_trace_is_what_the_traffic_says(tmp_path):
    _, db = do_import(FLOWS, tmp_path)
    rows = {r[0]: r for r in exchanges(db)}
    caps = [(r[1], r[2], r[6], r[7], r[8], r[9], r[10]) for r in rows.values()]
    assert caps == [
        ("POST", "/api/login", None, None, None, None, None),
        ("GET", "/favicon.ico", None, None, None, None, None),
        ("POST", "/api/chat/sessions/s1/runs", "run", "s1", "r1", "body", None),
        ("POST", "/api/chat/sessions/s1/runs", "run", "s1", "r2", "body", None),
        ("GET", "/api/chat/sessions/s1/runs/r2/events", "resume", "s1", "r2", "path", "e2"),
        ("POST", "/api/chat/sessions/s1/runs/r2/stop", "abort", "s1", "r2", "path", None),
        ("GET", "/api/chat/events", "subscribe", "s1", None, None, None),
        ("GET", "/api/chat/sessions/s1/runs", "history", "s1", None, None, None),
    ]
    assert [rows[i][4] for i in range(8)] == [None, None, "sse", "sse", "sse", None, "ws", None]
    got = facts(db)
    kinds = [(f[0], f[3], f[4], f[5], f[6], f[7]) for f in got]
    assert kinds == [
        (2, "r1", "message", "e1", 1, None), (2, "r1", "message", "e2", 1, None), (2, "r1", "completed", "e3", 1, None),
        (3, "r2", "message", "e1", 1, None), (3, "r2", "message", "e2", 1, None), (3, "r2", "message", "e3", 1, None),
        (3, "r2", "message", "e4", 1, None), (3, "r2", "completed", "e5", 1, None),
        # the resume of r2 started after r2 had completed: chatkit never resumes a
        # settled run (R8.3), so its replayed events are read in the shadow only
        # the passive run from the WebSocket subscription: no SSE ids, so {exchange}:{frame}
        (6, "p1", "message", "6:2", 1, None), (6, "p1", "completed", "6:3", 1, None),
    ]
    messages = {json.loads(f[-1]).get("message", {}).get("id") for f in got} - {None}
    assert messages == {"assistant:r1", "assistant:r2", "assistant:p1"}
    con = sqlite3.connect(db)
    assert dict(con.execute("SELECT key, value FROM meta WHERE key IN ('profile', 'protocol')").fetchall()) == {
        "profile": '"myproto"', "protocol": '"myproto"'}
    hist = con.execute("SELECT ok FROM history_reads").fetchall()
    assert hist == [(1,)]
    states = sqlite3.connect(db).execute("SELECT state FROM frame_results WHERE exchange_id = 4").fetchall()
    assert states and {st for (st,) in states} == {"after-settled"}



def test_frames_are_spread_over_the_response_and_ws_messages_keep_their_times(tmp_path):
    _, exs = read_exchanges(FLOWS)
    run = exs[2]
    ats = [f.at for f in run.frames]
    assert ats == sorted(ats) and ats[0] >= run.started_at and ats[-1] <= run.ended_at + 1e-6 and len(set(ats)) == len(ats)
    ws = exs[6]
    assert [f.direction for f in ws.frames] == ["out", "in", "in", "in"]
    _, har_exs = read_exchanges(HAR)
    assert [f.at for f in har_exs[6].frames] == [f.at for f in ws.frames]


# -- redaction ------------------------------------------------------------------------------------


@pytest.mark.parametrize("src", [HAR, FLOWS])
def test_secrets_never_reach_the_trace_file(tmp_path, src):
    result, db = do_import(src, tmp_path)
    data = db.read_bytes()
    for wal in (Path(f"{db}-wal"),):
        if wal.exists():
            data += wal.read_bytes()
    for secret in SECRETS:
        assert secret.encode() not in data, secret
    assert result.redacted == 7
    con = sqlite3.connect(db)
    notes = [json.loads(n) for (n,) in con.execute("SELECT notes FROM exchanges ORDER BY id")]
    assert notes[0]["redacted"] == ["response.header:set-cookie", "request.body"]
    assert notes[6]["redacted"] == ["request.header:authorization", "frame:0"]


def test_keep_secrets_and_extra_names(tmp_path):
    _, db = do_import(FLOWS, tmp_path, redact=False)
    assert make_files.SECRET_BEARER.encode() in db.read_bytes()
    _, db = do_import(FLOWS, tmp_path, name="extra.db", extra_redact="field:text")
    con = sqlite3.connect(db)
    body = con.execute("SELECT request_body FROM exchanges WHERE id = 2").fetchone()[0]
    assert json.loads(body) == {"runId": "r1", "text": "[REDACTED]"}


# -- Chrome-style HAR -----------------------------------------------------------------------------


def test_a_chrome_har_with_websocket_messages(tmp_path):
    _, exs = read_exchanges(CHROME)
    run, ws = exs
    assert not any(k.startswith(":") for k, _ in run.request_headers)  # HTTP/2 pseudo-headers dropped
    assert [f.event_id for f in run.frames] == ["e0", "e1", "e2", "e3"]  # base64 body, not gunzipped again
    started = datetime(2026, 11, 30, 7, 0, 1, tzinfo=UTC).timestamp()
    assert run.started_at == started and run.frames[0].at == pytest.approx(started + 0.012)
    assert run.frames[-1].at == pytest.approx(started + 0.4123)
    assert ws.transport == "ws" and ws.status == 101
    assert [(f.direction, f.text) for f in ws.frames] == [
        ("out", '{"type":"auth","token":"WS-CHROME-SECRET"}'),
        ("in", '{"type": "started", "run": "p9"}'),
        ("in", '{"type": "text", "text": "remote", "run": "p9"}'),
        ("in", '{"type": "done", "run": "p9"}'),  # opcode 2 (base64) decoded; the ping (opcode 9) skipped
    ]
    assert [f.at for f in ws.frames] == [1796022002.1, 1796022002.2, 1796022002.3, 1796022002.4]
    result, db = do_import(CHROME, tmp_path)
    assert (result.sessions, result.runs, result.rejected) == (1, 2, 0)
    data = db.read_bytes()
    for secret in (b"sk-chrome-SECRET-1", b"CHROME-COOKIE-SECRET", b"WS-CHROME-SECRET"):
        assert secret not in data
    got = {(f[3], f[4]) for f in facts(db)}
    assert got == {("c1", "message"), ("c1", "completed"), ("p9", "message"), ("p9", "completed")}


def test_a2a_traffic_resolves_context_and_task_from_the_events_and_turns(tmp_path):
    """A HAR built from the real A2A captures: a first message without contextId,
    the input-required follow-up on the same task, then tasks/get."""

    def body_of(name):
        return response_body(name)[1]

    def entry(t, req_name, resp_name, ctype, req_body=None):
        req_text = (CAPTURES / "requests" / req_name).read_text() if req_name else None
        body = req_body or req_text.split("\n\n", 1)[1].strip()
        return {
            "startedDateTime": datetime.fromtimestamp(t, UTC).isoformat(),
            "time": 50,
            "request": {"method": "POST", "url": "http://127.0.0.1:18802/", "headers": [
                {"name": "content-type", "value": "application/json"}], "postData": {"mimeType": "application/json", "text": body}},
            "response": {"status": 200, "headers": [{"name": "content-type", "value": ctype}],
                         "content": {"mimeType": ctype, "text": body_of(resp_name).decode()}},
            "timings": {"send": 1, "wait": 5, "receive": 44},
        }

    first = json.loads(body_of("a2a-v03-input.sse").split(b"data: ", 1)[1].split(b"\n", 1)[0])
    task, context = first["result"]["id"], first["result"]["contextId"]
    get = json.dumps({"jsonrpc": "2.0", "id": "h", "method": "tasks/get", "params": {"id": task}})
    har = {"log": {"version": "1.2", "entries": [
        entry(1000.0, None, "a2a-v03-input.history.json", "application/json", req_body=get),  # out of order on purpose
        entry(10.0, "a2a-v03-input.request.txt", "a2a-v03-input.sse", "text/event-stream"),
        entry(20.0, "a2a-v03-input.turn2.request.txt", "a2a-v03-input.turn2.sse", "text/event-stream"),
    ]}}
    path = tmp_path / "a2a.har"
    path.write_text(json.dumps(har))
    result, db = do_import(path, tmp_path, profile="a2a")
    rows = [(r[6], r[7], r[8], r[9]) for r in exchanges(db)]
    assert rows == [("run", context, task, "events"), ("run", context, f"{task}:turn2", "body"),
                    ("history", context, f"{task}:turn2", "body")]
    assert result.sessions == 1
    con = sqlite3.connect(db)
    runs = dict(con.execute("SELECT run_id, status FROM runs").fetchall())
    assert runs[task] == "interrupted" and runs[f"{task}:turn2"] == "completed"


def test_a_flow_streamed_through_mitmproxy_has_no_body_and_says_so(tmp_path):
    from mitmproxy import io
    from mitmproxy.test import tflow

    f = tflow.tflow(resp=True)
    f.request.path = "/sessions/s1/runs"
    f.request.method = "POST"
    f.request.content = b'{"runId": "r1", "text": "hi"}'
    f.response.headers["content-type"] = "text/event-stream"
    f.response.content = None
    path = tmp_path / "streamed.mitm"
    with path.open("wb") as fo:
        io.FlowWriter(fo).add(f)
    result, db = do_import(path, tmp_path)
    note = json.loads(sqlite3.connect(db).execute("SELECT notes FROM exchanges").fetchone()[0])
    assert "streamed through mitmproxy" in note["body"]
    assert any("streamed through mitmproxy" in n for n in result.notes)
    assert exchanges(db)[0][4:9] == ("sse", "complete", "run", "s1", "r1")


# -- the command ------------------------------------------------------------------------------------


def test_cli_import_writes_the_output_and_a_summary(tmp_path, capsys):
    out = tmp_path / "trace.db"
    assert main(["import", str(HAR), "--profile", "myproto", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "imported 8 exchanges (6 matched by profile 'myproto')" in printed and str(out) in printed
    assert out.exists() and not Path(f"{out}-wal").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left
    assert TraceStore(out, readonly=True).exchange_count() == 8
    assert main(["import", str(FLOWS), "-p", "myproto", "-o", str(out), "-q"]) == 2  # exists
    assert "exists: use --force" in capsys.readouterr().err
    assert main(["import", str(FLOWS), "-p", "myproto", "-o", str(out), "-q", "--force"]) == 0
    assert capsys.readouterr().out == ""
    assert json.loads(sqlite3.connect(out).execute("SELECT value FROM meta WHERE key = 'source'").fetchone()[0])["format"] == "flows"


def cli_error(args: list[str], capsys) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("chatkit-trace import: error: "), err
    return err


def test_bad_inputs_are_one_line_exit_2_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "out.db"
    not_json = tmp_path / "x.har"
    not_json.write_text("hello, world")
    assert "not a HAR or flow file" in cli_error(["import", str(not_json), "-p", "myproto", "-o", str(out)], capsys)
    bad_json = tmp_path / "y.har"
    bad_json.write_text('{"log": {"entries": [')
    assert "y.har: not JSON" in cli_error(["import", str(bad_json), "-p", "myproto", "-o", str(out)], capsys)
    not_har = tmp_path / "z.json"
    not_har.write_text('{"hello": 1}')
    assert "not a HAR file (no log.entries list)" in cli_error(["import", str(not_har), "-p", "myproto", "-o", str(out)], capsys)
    truncated = tmp_path / "cut.mitm"
    data = FLOWS.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    assert "not a complete mitmproxy flow file" in cli_error(["import", str(truncated), "-p", "myproto", "-o", str(out)], capsys)
    assert "no profile named 'nope'" in cli_error(["import", str(HAR), "-p", "nope", "-o", str(out)], capsys)
    bad_profile = tmp_path / "p.toml"
    bad_profile.write_text('extends = "myproto"\n[[routes]]\ncapability = "run"\npath = "/x"\nrun = "bodyy:x"\n')
    assert "routes[0].run.from: unknown source 'bodyy'" in cli_error(["import", str(HAR), "-p", str(bad_profile), "-o", str(out)], capsys)
    assert "no such file" in cli_error(["import", str(tmp_path / "missing.har"), "-p", "myproto", "-o", str(out)], capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.mitm", "p.toml", "x.har", "y.har", "z.json"]


def test_a_failed_import_leaves_an_existing_output_untouched(tmp_path, capsys):
    out = tmp_path / "out.db"
    assert main(["import", str(HAR), "-p", "myproto", "-o", str(out), "-q"]) == 0
    before = out.read_bytes()
    truncated = tmp_path / "cut.mitm"
    truncated.write_bytes(FLOWS.read_bytes()[:300])
    cli_error(["import", str(truncated), "-p", "myproto", "-o", str(out), "--force"], capsys)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.mitm", "out.db"]


def test_python_api_errors_are_import_errors(tmp_path):
    store = TraceStore(tmp_path / "a.db", create=True)
    bad = tmp_path / "bad.har"
    bad.write_text("[]")
    with pytest.raises(ImportError_, match="not a HAR file"):
        import_file(bad, "myproto", store)
    import_file(HAR, "myproto", store)
    with pytest.raises(ImportError_, match="already holds a recording"):
        import_file(HAR, "myproto", store)
    store.close()


def test_other_commands_open_har_files_through_the_importer(tmp_path):
    from chatkit_trace.loading import open_trace

    loaded = open_trace(HAR, profile="myproto")
    try:
        assert loaded.kind == "har" and loaded.profile == "myproto"
        assert len(loaded.exchanges()) == 8
    finally:
        loaded.close()


def test_python_dash_m_runs_the_command(tmp_path):
    out = tmp_path / "m.db"
    proc = subprocess.run([sys.executable, "-m", "chatkit_trace.cli", "import", str(CHROME), "-p", "myproto", "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "imported 2 exchanges" in proc.stdout and proc.stderr == ""


# -- from live traffic --------------------------------------------------------------------------------


@pytest.mark.mitmdump
@pytest.mark.slow
def test_fresh_recording_through_a_real_mitmdump_imports_identically(tmp_path):
    """Regenerate both files from new traffic (make_files.py) and compare the imports."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, str(DATA / "make_files.py"), str(tmp_path)], capture_output=True, text=True,
                          timeout=180, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _, har_db = do_import(tmp_path / "myproto.har", tmp_path)
    _, flow_db = do_import(tmp_path / "myproto.mitm", tmp_path)
    assert facts(har_db) == facts(flow_db) == facts(do_import(FLOWS, tmp_path, name="committed.db")[1])
    data = har_db.read_bytes() + flow_db.read_bytes()
    for secret in SECRETS:
        assert secret.encode() not in data
    assert base64.b64encode(make_files.SECRET_BEARER.encode()) not in data


def test_adk_blocking_run_decodes_like_the_stream_of_the_same_events(tmp_path):
    """POST /run answers the JSON array of the events /run_sse (streaming: false)
    sends one by one: both imports give the same facts."""
    from .capture._util import request

    _, sse = response_body("adk-02-text-tool-nostream.sse")
    events = [line[6:] for line in sse.decode().splitlines() if line.startswith("data: ")]
    _, _, _, req = request("adk-02-text-tool-nostream.request.txt")

    def har(path: str, ctype: str, text: str) -> Path:
        entry = {
            "startedDateTime": "2026-11-30T07:04:30.000Z", "time": 100,
            "request": {"method": "POST", "url": f"http://127.0.0.1:18801{path}",
                        "headers": [{"name": "content-type", "value": "application/json"}],
                        "postData": {"mimeType": "application/json", "text": req.decode()}},
            "response": {"status": 200, "headers": [{"name": "content-type", "value": ctype}],
                         "content": {"mimeType": ctype, "text": text}},
            "timings": {"send": 1, "wait": 10, "receive": 89},
        }
        out = tmp_path / (path.strip("/") + ".har")
        out.write_text(json.dumps({"log": {"version": "1.2", "entries": [entry]}}))
        return out

    stream = har("/run_sse", "text/event-stream", "".join(f"data: {e}\n\n" for e in events))
    blocking = har("/run", "application/json", "[" + ", ".join(events) + "]")
    _, sdb = do_import(stream, tmp_path, profile="adk")
    _, bdb = do_import(blocking, tmp_path, profile="adk")
    invocation = json.loads(events[0])["invocationId"]
    assert exchanges(bdb)[0][4:10] == ("body", "complete", "run", json.loads(req)["sessionId"], invocation, "response")
    assert exchanges(sdb)[0][8:10] == (invocation, "events")
    strip = [(f[1], f[4], f[5], f[6], f[7], f[8]) for f in facts(sdb)]
    assert strip and strip == [(f[1], f[4], f[5], f[6], f[7], f[8]) for f in facts(bdb)]
