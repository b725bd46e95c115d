"""Regular proxy mode, `chatkit-trace record`, a dead upstream, options."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path

import pytest

from chatkit_trace.store import TraceStore

from .backend import free_port, run_events
from .client import fetch
from .conftest import stopped_store
from .proxy import ADDON, BIN, MITMDUMP

pytestmark = pytest.mark.mitmdump


async def test_regular_proxy_mode(server, proxy, tmp_path):
    p = proxy(mode="regular", upstream=None)
    got = await fetch("POST", f"{server.url}/sessions/s5/runs?n=6&enc=gzip", json={"runId": "reg"}, proxy=f"http://127.0.0.1:{p.port}")
    assert got.raw == bytes(server.sent["reg"])
    store = stopped_store(p, tmp_path / "trace.db")
    [ex] = [e for e in store.exchanges() if e.run_id == "reg"]
    assert ex.session_id == "s5" and ex.url.startswith(server.url)
    assert [json.loads(f.text) for f in store.frames(ex.index)] == run_events("reg", 6)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_record_command_end_to_end_flushes_everything_on_stop(server, recorder_cmd, tmp_path, sig):
    db = tmp_path / "trace.db"
    p = recorder_cmd(db=db)
    base = f"http://127.0.0.1:{p.port}"
    for i in range(3):
        got = await fetch("POST", f"{base}/sessions/s1/runs?n=20", json={"runId": f"rec{i}"})
        assert got.raw == bytes(server.sent[f"rec{i}"])
    # one stream still running when the recorder is stopped
    received = 0

    async def long_stream() -> None:
        nonlocal received
        import aiohttp

        async with aiohttp.ClientSession(auto_decompress=False) as s:
            async with s.post(f"{base}/sessions/s1/runs?n=400&delay=0.01", json={"runId": "open"}) as r:
                try:
                    async for chunk in r.content.iter_any():
                        received += chunk.count(b"\n\n")
                except aiohttp.ClientPayloadError:
                    pass

    task = asyncio.create_task(long_stream())
    while received < 20:
        await asyncio.sleep(0.01)
    rc = await asyncio.to_thread(p.stop, sig)
    await asyncio.wait_for(task, 10)
    assert rc == 0, p.output
    store = TraceStore(db, readonly=True)
    for i in range(3):
        [ex] = [e for e in store.exchanges() if e.run_id == f"rec{i}"]
        assert len(store.frames(ex.index)) == 20 and ex.end == "complete"
    [ex] = [e for e in store.exchanges() if e.run_id == "open"]
    assert len(store.frames(ex.index)) >= received  # everything the client got is in the trace
    assert ex.end in ("open", "client-gone", "reset", "error")
    assert store.capture_errors() == []


async def test_a_dead_upstream_is_a_recorded_502(tmp_path, recorder_cmd):
    dead = f"http://127.0.0.1:{free_port()}"
    p = recorder_cmd(upstream=dead)
    got = await fetch("POST", f"http://127.0.0.1:{p.port}/sessions/s1/runs", json={"runId": "d"})
    assert got.status == 502
    store = stopped_store(p, tmp_path / "trace.db")
    [ex] = list(store.exchanges())
    assert (ex.status, ex.end, ex.notes.get("status_from")) == (502, "error", "proxy")
    assert ex.run_id == "d" and "connect" in (ex.error or "").lower()


@pytest.mark.parametrize(
    "setting, message",
    [
        ("chatkit_queue=0", "chatkit_queue must be at least 1"),
        ("chatkit_profile=nosuchprofile", "chatkit_profile:"),
        ("chatkit_max_age=soon", "chatkit_max_age: not a duration"),
    ],
)
def test_a_bad_option_stops_mitmdump_with_a_clear_message(tmp_path, setting, message):
    argv = [MITMDUMP, "-s", str(ADDON), "-p", str(free_port()), "--listen-host", "127.0.0.1",
            "--set", f"chatkit_db={tmp_path / 't.db'}", "--set", setting]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode != 0
    assert message in out.stdout + out.stderr


def test_addon_path_prints_the_installed_script():
    out = subprocess.run([str(BIN / "chatkit-trace"), "addon-path"], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0
    path = out.stdout.strip()
    assert path.endswith("chatkit_trace/addon.py")
    assert Path(path).read_text() == ADDON.read_text()
