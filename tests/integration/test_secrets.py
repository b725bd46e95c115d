"""Secrets stay out of every recording (issue 16), through a real mitmdump.

A real aiohttp upstream echoes the request's Authorization, X-Api-Key,
Cookie, query and body secrets in SSE frames, in a JSON error body, in a
non-streamed response and in a WebSocket message, and makes up tokens of
its own (a JWT, a GitHub token), for each content encoding.  The client
gets every byte as sent; afterwards no file the recording produced (the
database, its WAL), no exported fixture and no log line of the recorder
holds any of them, in any form an echo gives them.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
from pathlib import Path
from urllib.parse import quote, quote_plus

import aiohttp
import pytest

from chatkit_trace.fixtures import dump_fixture, export_fixture
from chatkit_trace.store import TraceStore
from chatkit_trace.wire import SSEParser, make_decoder

from .client import fetch
from .conftest import stopped_store
from .echo_backend import SERVER_GITHUB, SERVER_JWT, echo_backend
from .proxy import BIN, mitmdump

pytestmark = pytest.mark.mitmdump

AUTH = "sk-proj-Zq8xLm2Vb7Nc4Rt6Yw1Pk9Hs3Df5Gj0Au"  # a key shape, and learned from Authorization
API_KEY = "KEY-93jf02kdm3nd82kq-x7"  # no known shape: only learning finds it
SESSION = "sess-7Hq2LmZx91KpQwEr/+x"  # a cookie value with characters that get escaped
QUERY = "qsecret-4f8a9b2c1d"  # a query parameter
BODY_PW = "Hunter2-Body-Pw-55"  # a JSON body field
WS_TOKEN = "wstoken-0b1c2d3e4f5a"  # a client WebSocket auth message
LEARNED = [AUTH, API_KEY, SESSION, QUERY, BODY_PW, WS_TOKEN, "SETCOOKIEVALUE-77a1b2c3"]
SHAPED = [SERVER_JWT, SERVER_GITHUB]


def forms(secret: str) -> set[bytes]:
    """The secret as sent and as echoes spell it (JSON-escaped, URL-encoded)."""
    out = {secret, json.dumps(secret)[1:-1], quote(secret, safe=""), quote_plus(secret, safe="")}
    return {s.encode() for s in out}


def scan(paths: list[Path]) -> list[str]:
    """Every (secret, file) where a secret's bytes are found, byte by byte."""
    found = []
    for path in paths:
        data = path.read_bytes()
        for secret in LEARNED + SHAPED:
            for form in forms(secret):
                if form in data:
                    found.append(f"{secret!r} as {form!r} in {path.name}")
    return found


def files(folder: Path) -> list[Path]:
    return [p for p in sorted(folder.rglob("*")) if p.is_file()]


def headers(key: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {AUTH}",
        "X-Api-Key": API_KEY,
        "Cookie": f"session={SESSION}; theme=dark",
        "X-Test-Key": key,
    }


async def drive(base: str, enc: str) -> dict[str, bytes]:
    """The four echoing exchanges and a WebSocket; returns what the client received."""
    got = {}
    body = {"runId": "r1", "text": "hi", "password": BODY_PW}
    q = f"enc={enc}&api_key={QUERY}"
    got["run"] = (await fetch("POST", f"{base}/sessions/s1/runs?{q}", json=body, headers=headers("run"))).raw
    err = await fetch("POST", f"{base}/sessions/s1/runs?{q}&fail=401", json={**body, "runId": "r2"}, headers=headers("err"))
    assert err.status == 401
    got["err"] = err.raw
    got["echo"] = (await fetch("GET", f"{base}/echo?{q}", headers=headers("echo"))).raw
    ws_url = base.replace("http://", "ws://") + "/ws"
    h = {k: v for k, v in headers("ws").items() if k != "X-Test-Key"}
    async with aiohttp.ClientSession() as s, s.ws_connect(ws_url, headers=h) as ws:
        hello = json.loads((await ws.receive()).data)
        assert hello["authorization"] == f"Bearer {AUTH}" and hello["x_api_key"] == API_KEY  # it really echoed
        await ws.send_str(json.dumps({"type": "auth", "token": WS_TOKEN}))
        echoed = json.loads((await ws.receive()).data)
        assert WS_TOKEN in echoed["data"]
        assert WS_TOKEN.encode() in (await ws.receive()).data
        await ws.send_str("close")
        await ws.receive()
    return got


@pytest.mark.parametrize("enc", ["", "gzip", "br", "zstd"])
async def test_no_secret_byte_in_any_file_the_recording_or_its_export_produced(tmp_path, procs, enc):
    rec = tmp_path / "rec"
    rec.mkdir()
    db = rec / "trace.db"
    with echo_backend() as upstream:
        p = mitmdump(upstream=upstream.url, db=db, profile="myproto")
        procs.append(p)
        got = await drive(f"http://127.0.0.1:{p.port}", enc)
        # The user's bytes are the upstream's, byte for byte (still encoded), secrets and all.
        for key in ("run", "err", "echo"):
            assert got[key] == upstream.sent[key], key
        d = make_decoder(enc or None)
        plain = d.decode(got["run"]) + d.flush()
        assert AUTH.encode() in plain and SESSION.encode() in plain and SERVER_JWT.encode() in plain
        assert p.wait_for("run r1: completed", timeout=15), p.output
        live = files(rec)
        assert Path(f"{db}-wal") in live and scan(live) == []  # mid-recording: the file and its WAL as they are
        store = stopped_store(p, db)
    # What the recorder logged about this recording holds none of them either.
    ours = "\n".join(line for line in p.lines if "chatkit-trace" in line)
    assert "run r1: completed" in ours
    assert not [s for s in LEARNED + SHAPED if s in ours]

    exchanges = {e.path + ("?fail" if "fail=" in e.url else ""): e for e in store.exchanges(with_frames=True)}
    run = exchanges["/sessions/s1/runs"]
    assert (run.run_id, run.status, run.end) == ("r1", 200, "complete")
    [r1] = [r for r in store.rows("runs") if r["run_id"] == "r1"]
    assert r1["status"] == "completed" and r1["rejected"] == 0  # masks keep JSON valid: the run decodes as before
    # Offsets stay true: every stored frame sits where the upstream's event sat, with the same length.
    events = SSEParser().feed(plain)
    assert [(f.start, f.end) for f in run.frames] == [(e.start, e.end) for e in events]
    assert [len(f.text.encode()) for f in run.frames] == [len(e.data.encode()) for e in events]
    # ... and the trace says what was masked and where, never what.
    spans = [s for s in run.notes["scrubbed"] if s["where"].startswith("frame:")]
    assert {s["kind"] for s in spans} >= {"learned", "jwt", "github-token"}
    for s in spans:
        hidden = plain[s["stream"] : s["stream"] + s["len"]].decode()
        assert any(hidden in x or x in hidden for x in LEARNED + SHAPED), (s, hidden)
    assert {"frame:1", "frame:2", "frame:3"} <= set(run.notes["redacted"])
    debug = json.loads(run.frames[2].text)
    assert debug["authorization"].startswith("Bearer [REDACTED]") and debug["cookie"].startswith("session=[REDACTED]")
    err = exchanges["/sessions/s1/runs?fail"]
    assert err.status == 401 and json.loads(err.response_body)["error"]["message"].startswith("Incorrect API key provided: [REDACTED]")
    [ws] = [e for e in store.exchanges(with_frames=True) if e.path == "/ws"]
    assert json.loads(ws.frames[0].text)["x_api_key"].startswith("[REDACTED]")
    store.close()

    out = tmp_path / "export" / "s1.chatkit.json"
    out.parent.mkdir()
    dump_fixture(export_fixture(db, "s1").fixture, out)
    produced = files(tmp_path)
    assert db in produced and out in produced
    assert scan(produced) == []


async def test_keep_secrets_stores_them_and_check_says_so(tmp_path, procs):
    db = tmp_path / "kept.db"
    with echo_backend() as upstream:
        p = mitmdump(upstream=upstream.url, db=db, profile="myproto", options={"chatkit_keep_secrets": "true"})
        procs.append(p)
        await drive(f"http://127.0.0.1:{p.port}", "")
        stopped_store(p, db).close()
    assert scan([db])  # turned off: the secrets are there
    report = subprocess.run([str(BIN / "chatkit-trace"), "check", str(db), "--format", "json"], capture_output=True, text=True)
    assert report.returncode in (0, 1), report.stderr
    kept = [f for f in json.loads(report.stdout)["findings"] if f["code"] == "CK701"]
    assert len(kept) == 1 and kept[0]["severity"] == "info" and kept[0]["session_id"] is None


# -- crash ---------------------------------------------------------------------------------------


def _committed(db: Path) -> dict[tuple[str, int], str]:
    """Frames a reader sees now (committed batches), by (run id, frame index)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT e.run_id, f.idx, f.text FROM frames f JOIN exchanges e ON e.id = f.exchange_id WHERE e.run_id IS NOT NULL"
        ).fetchall()
    finally:
        conn.close()
    return {(r, i): t for r, i, t in rows}


async def test_kill_9_mid_flight_loses_no_committed_batch_and_the_file_records_again(server, tmp_path, procs):
    db = tmp_path / "crash.db"
    p = mitmdump(upstream=server.url, db=db, profile="myproto")
    procs.append(p)
    base = f"http://127.0.0.1:{p.port}"
    n = 20
    tasks = [
        asyncio.ensure_future(fetch("POST", f"{base}/sessions/s{i % 4}/runs?n=8&hold=1", json={"runId": f"k{i:02d}"},
                                    headers={"Authorization": f"Bearer crash-secret-{i:02d}-abcdefgh"}, timeout=30))
        for i in range(n)
    ]
    # Wait until every stream's first event is committed (a reader sees it): all 20 are mid-flight, held.
    deadline = asyncio.get_running_loop().time() + 30
    seen: dict[tuple[str, int], str] = {}
    while asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.2)
        if db.exists():
            try:
                seen = _committed(db)
            except sqlite3.OperationalError:
                continue
            if len({r for r, _ in seen}) == n:
                break
    assert len({r for r, _ in seen}) == n, seen
    p.kill()  # SIGKILL to its own process group: no done hook, no flush, no checkpoint
    assert p.proc.returncode == -9
    for i in range(n):
        await fetch("POST", f"{server.url}/release/k{i:02d}")
    await asyncio.gather(*tasks, return_exceptions=True)
    left = files(tmp_path)
    assert Path(f"{db}-wal") in left  # killed: its WAL was never checkpointed ...
    assert not [f for f in left if b"crash-secret-" in f.read_bytes()]  # ... and holds no secret either

    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    after = _committed(db)
    assert {k: after.get(k) for k in seen} == seen  # every committed frame is there, unchanged
    check = subprocess.run([str(BIN / "chatkit-trace"), "check", str(db), "--format", "json"], capture_output=True, text=True,
                           cwd=tmp_path)
    assert check.returncode in (0, 1), check.stdout + check.stderr
    assert "Traceback" not in check.stderr
    assert json.loads(check.stdout)["summary"]["frames"] == len(after)  # check read every frame there is

    # The next recording into the same file works, and keeps what was there.
    again = mitmdump(upstream=server.url, db=db, profile="myproto")
    procs.append(again)
    got = await fetch("POST", f"http://127.0.0.1:{again.port}/sessions/s9/runs?n=4", json={"runId": "after"})
    assert got.raw == bytes(server.sent["after"])
    store = stopped_store(again, db)
    runs = {r["run_id"]: r for r in store.rows("runs")}
    assert runs["after"]["status"] == "completed"
    killed = {f"k{i:02d}" for i in range(n)}
    assert killed <= {e.run_id for e in store.exchanges()}  # the killed recording's exchanges are kept
    assert len(store.get_meta("recordings")) == 2
    store.close()
    # check never writes to its input (issue 14); redecode derives what the
    # killed recorder never got to
    done = subprocess.run([str(BIN / "chatkit-trace"), "redecode", str(db)], capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    store = TraceStore(db, readonly=True)
    assert killed | {"after"} <= {r["run_id"] for r in store.rows("runs")}
    assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store.close()


# -- imports, redrive, serve ----------------------------------------------------------------------


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "chatkit-trace"), *args], capture_output=True, text=True, cwd=cwd, timeout=120)


async def test_har_and_flow_imports_of_an_echoing_upstream_hold_no_secret(tmp_path, procs):
    inputs = tmp_path / "inputs"  # the user's own captures: secrets and all
    inputs.mkdir()
    flows, har = inputs / "echo.flows", inputs / "echo.har"
    with echo_backend() as upstream:
        p = mitmdump(upstream=upstream.url, db=tmp_path / "unused.db", addon=False,
                     extra=["-w", str(flows), "--set", f"hardump={har}"])
        procs.append(p)
        await drive(f"http://127.0.0.1:{p.port}", "gzip")
        assert p.stop() == 0, p.output
    assert scan([flows]) and scan([har])  # the inputs hold them, so the imports had something to hide
    out = tmp_path / "out"
    out.mkdir()
    for src in (flows, har):
        r = _cli("import", str(src), "--profile", "myproto", "-o", str(out / f"{src.suffix[1:]}.db"), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert not [s for s in LEARNED + SHAPED if s in r.stdout + r.stderr]
    assert sorted(p.name for p in files(out)) == ["flows.db", "har.db"]  # no temporary file left
    assert scan(files(out)) == []
    store = TraceStore(out / "flows.db", readonly=True)
    [run] = [e for e in store.exchanges(with_frames=True) if e.run_id == "r1"]
    assert json.loads(run.frames[2].text)["x_api_key"].startswith("[REDACTED]")  # learned from the header, masked in the frame
    store.close()
    checked = _cli("check", str(har), "--profile", "myproto", "--format", "json", cwd=tmp_path)
    assert checked.returncode in (0, 1) and "CK701" not in checked.stdout


async def test_redrive_and_serve_output_hold_no_secret(tmp_path, procs):
    rec = tmp_path / "rec"
    rec.mkdir()
    with echo_backend() as upstream:
        # A recording that kept its secrets (so serve has something to hide) ...
        kept = rec / "kept.db"
        p = mitmdump(upstream=upstream.url, db=kept, profile="myproto", options={"chatkit_keep_secrets": "true"})
        procs.append(p)
        await drive(f"http://127.0.0.1:{p.port}", "")
        stopped_store(p, kept).close()
        # ... exported as a fixture (redacted again) and re-driven with the real credentials.
        fixture = rec / "s1.chatkit.json"
        dump_fixture(export_fixture(kept, "s1").fixture, fixture)
        assert scan([fixture]) == []
        out = tmp_path / "out"
        out.mkdir()
        r = _cli("redrive", str(fixture), "--upstream", upstream.url,
                 "-H", f"Authorization: Bearer {AUTH}", "-H", f"X-Api-Key: {API_KEY}", "-H", f"Cookie: session={SESSION}",
                 "--save", str(out / "new.chatkit.json"), "--trace", str(out / "new.db"), cwd=tmp_path)
        assert r.returncode in (0, 1), r.stderr
        assert r.stdout.startswith("re-drove 2 request(s)")
    assert not [s for s in LEARNED + SHAPED if s in r.stdout + r.stderr]
    new = json.loads((out / "new.chatkit.json").read_text())
    echoed = [f for ex in new["exchanges"] for f in ex.get("frames", []) if "debug" in json.dumps(f)]
    assert echoed and "[REDACTED]" in json.dumps(echoed)  # the upstream did echo the real values back
    assert scan(files(out)) == []

    serve = subprocess.Popen([str(BIN / "chatkit-trace"), "serve", str(kept), "--port", "0", "--speed", "max"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        line = serve.stdout.readline()
        base = line.split(" at ", 1)[1].split(" ", 1)[0]
        served = await fetch("POST", f"{base}/sessions/s1/runs", json={"runId": "r1"})
        echo = await fetch("GET", f"{base}/echo")
    finally:
        serve.terminate()
        _, err = serve.communicate(timeout=10)
    assert served.status == 200 and b"Bearer [REDACTED]" in served.raw
    assert not [s for s in LEARNED + SHAPED if s.encode() in served.raw + echo.raw or s in line + err]
