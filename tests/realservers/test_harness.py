"""Tests of the harness's own machinery that need no real server.

Skip/fail rules for missing envs, startup failure reporting, process-group
cleanup and the SSE splitter.  The realserver-marked ones start the a2a peer
(it is up in well under a second).
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from . import harness
from .harness import PeerStartError, a2a_server, adk_server, parse_sse, peer_env


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
