"""Tests of the harness's own machinery that need no real server.

Skip/fail rules for missing envs, startup failure reporting, process-group
cleanup and the SSE splitter.  The realserver-marked ones start the a2a peer
(it is up in well under a second).
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from . import harness
from .harness import (
    PeerStartError,
    Stream,
    a2a_server,
    adk_server,
    http_request,
    parse_sse,
    peer_env,
)


def _fake_env(home: Path, name: str, python_script: str) -> Path:
    env = home / name
    (env / "bin").mkdir(parents=True)
    py = env / "bin" / "python"
    py.write_text(python_script)
    py.chmod(py.stat().st_mode | stat.S_IEXEC)
    (env / harness.STAMP_FILE).write_text("test\n")
    return env


def test_missing_env_skips_with_clear_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("CHATKIT_PEERS_HOME", str(tmp_path))
    monkeypatch.delenv("CHATKIT_REQUIRE_PEERS", raising=False)
    with pytest.raises(pytest.skip.Exception) as info:
        peer_env("adk")
    msg = str(info.value)
    assert str(tmp_path / "adk") in msg and ".ci/peers.sh adk" in msg


def test_missing_env_fails_when_required(tmp_path, monkeypatch):
    monkeypatch.setenv("CHATKIT_PEERS_HOME", str(tmp_path))
    monkeypatch.setenv("CHATKIT_REQUIRE_PEERS", "1")
    with pytest.raises(pytest.fail.Exception) as info:
        peer_env("hermes")
    assert "CHATKIT_REQUIRE_PEERS" in str(info.value)


def test_half_built_env_counts_as_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("CHATKIT_PEERS_HOME", str(tmp_path))
    monkeypatch.delenv("CHATKIT_REQUIRE_PEERS", raising=False)
    (tmp_path / "a2a" / "bin").mkdir(parents=True)
    (tmp_path / "a2a" / "bin" / "python").write_text("")
    with pytest.raises(pytest.skip.Exception):
        peer_env("a2a")  # no stamp: the install did not finish


def test_startup_failure_reports_log_tail(tmp_path, monkeypatch):
    monkeypatch.setenv("CHATKIT_PEERS_HOME", str(tmp_path))
    _fake_env(tmp_path, "adk", "#!/bin/sh\necho 'boom: scripted startup failure' >&2\nexit 3\n")
    with pytest.raises(PeerStartError) as info, adk_server(timeout=20):
        pass  # pragma: no cover
    msg = str(info.value)
    assert "exited with code 3" in msg and "boom: scripted startup failure" in msg


def test_startup_timeout_kills_group(tmp_path, monkeypatch):
    monkeypatch.setenv("CHATKIT_PEERS_HOME", str(tmp_path))
    pidfile = tmp_path / "pid"
    _fake_env(tmp_path, "a2a", f"#!/bin/sh\necho $$ > {pidfile}\necho listening-never >&2\n"
                               "exec sleep 300\n")
    with pytest.raises(PeerStartError) as info, a2a_server(timeout=2):
        pass  # pragma: no cover
    assert "not ready after" in str(info.value) and "listening-never" in str(info.value)
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_parse_sse_whatwg_rules():
    body = (b": keepalive\r\n\r\nevent: e1\r\ndata: {\"a\":1}\r\nid: 7\r\n\r\n"
            b"data:x\ndata: y\n\n"
            b"data: [DONE]\n\n"
            b"data: unterminated")
    events, comments = parse_sse(body)
    assert comments == ["keepalive"]
    assert [(e.event, e.data, e.id) for e in events] == [
        ("e1", '{"a":1}', "7"), (None, "x\ny", None), (None, "[DONE]", None)]
    assert harness._count_events(body) == 3


@pytest.mark.realserver
def test_server_group_killed_on_exit_even_after_failure():
    pids = []
    with pytest.raises(RuntimeError, match="test failure inside"), a2a_server() as srv:
        pids = [p.proc.pid for p in srv.procs]
        assert srv.agent_card().status == 200
        raise RuntimeError("test failure inside the with block")
    assert pids
    time.sleep(0.1)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)


@pytest.mark.realserver
def test_nothing_written_into_the_repo(a2a_peer, adk_peer):
    # servers run with cwd/HOME in a temp dir; the recipe folders stay clean
    for peer in ("adk", "a2a", "hermes", "openai"):
        leftovers = [p for p in (harness.PEERS_DIR / peer).rglob("*")
                     if p.name in ("__pycache__", ".adk", ".run", ".hermes")]
        assert leftovers == [], leftovers
    assert adk_peer.workdir.is_dir() and a2a_peer.workdir.is_dir()


# --- the HTTP reader, against fake_llm.py (stdlib only, so no peer env needed)
@pytest.fixture
def fake_llm(tmp_path):
    port = harness.free_port()
    argv = [sys.executable, str(harness.PEERS_DIR / "openai" / "fake_llm.py"), "--port", str(port),
            "--slow-count", "6", "--slow-interval", "0.3"]
    proc = harness.PeerProcess("fake_llm", argv, env=harness.offline_env(tmp_path), cwd=tmp_path,
                               log=tmp_path / "fake_llm.log")
    try:
        harness._wait_ready([proc], f"http://127.0.0.1:{port}/health", 20)
        yield f"http://127.0.0.1:{port}/v1/chat/completions"
    finally:
        proc.stop()


def _chat(scenario: str) -> dict:
    return {"model": "m", "stream": True, "messages": [
        {"role": "user", "content": f"hi scenario:{scenario}"}]}


def test_http_chunked_sse_read_to_end(fake_llm):
    r = http_request("POST", fake_llm, _chat("text"))
    assert r.status == 200 and r.is_sse and r.ended_by == "server"
    assert r.header("transfer-encoding") == "chunked"
    assert r.sse()[-1].data == "[DONE]"
    assert r.body.startswith(b"data: {")  # de-chunked: no chunk-size lines
    text = "".join(c["choices"][0]["delta"].get("content") or ""
                   for c in r.sse_json() if c.get("choices"))
    assert text == "Hello from the fake model."


def test_http_midstream_error_ends_cleanly(fake_llm):
    r = http_request("POST", fake_llm, _chat("midstream"))
    assert r.ended_by == "server"
    assert "error" in r.sse_json()[-1]


def test_http_json_error_with_content_length(fake_llm):
    r = http_request("POST", fake_llm, _chat("http400"))
    assert r.status == 400 and r.ended_by == "server"
    assert r.json()["error"]["code"] == "fake_http400"
    assert r.head_text().startswith("HTTP/1.1 400 ")


def test_stream_waiting_does_not_close(fake_llm):
    with Stream("POST", fake_llm, body=_chat("slow"), timeout=10) as st:
        st.read(max_events=2, timeout=10)
        assert st.events >= 2 and not st.done
        st.read(timeout=0.01)  # nothing new in time: still open
        assert not st.done
        r = st.read_all(timeout=15)
    assert r.ended_by == "server"
    ticks = [c["choices"][0]["delta"].get("content") for c in r.sse_json() if c.get("choices")]
    assert [t for t in ticks if t and t.startswith("tick")] == [f"tick{i} " for i in range(6)]
    assert json.loads(r.request_body)["stream"] is True
    assert r.request_headers["Content-Type"] == "application/json"


def test_max_events_and_timeout_close_from_client(fake_llm):
    capped = http_request("POST", fake_llm, _chat("slow"), max_events=2, timeout=10)
    assert capped.ended_by == "client" and len(capped.sse()) >= 2
    late = http_request("POST", fake_llm, _chat("slow"), timeout=0.5)
    assert late.ended_by == "timeout" and late.status == 200
