#!/usr/bin/env python3
"""Record the real servers' traffic THROUGH THE ADDON into trace databases.

    .ci/peers.sh                                   # the peer environments, once
    .venv/bin/python recordings/record_peers.py [adk a2a hermes openai]
    .venv/bin/python recordings/record_peers.py --export-only   # re-derive the committed traces (current preset, analysis) and re-export

For each protocol: start the real server offline on 127.0.0.1 (the harness in
tests/realservers/harness.py: google-adk, a2a-sdk, hermes-agent, litellm, each
with its scripted model), put ``chatkit-trace record --profile <protocol>``
(a real mitmdump with the recording addon) in front of it, drive the
harness's scenarios through the proxy, stop the proxy with SIGINT (it flushes
everything it received) and write ``recordings/traces/<protocol>.db``.  Then
``chatkit-trace redecode`` (facts and findings stored in it) and ``check`` on
it, and each session exported as a fixture to
``recordings/fixtures/live/<protocol>/<scenario>.chatkit.json`` (the test
suite replays every fixture).

Slow scenarios are cut after a few events by the harness.  Ids, times and
ports change on every run; shapes, outcomes and finding codes stay.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from tests.realservers import harness as h  # noqa: E402

TRACES = HERE / "traces"
FIXTURES = HERE / "fixtures" / "live"

PLAN: dict[str, tuple] = {
    "adk": (h.adk_server, [("text_tool", {}), ("nostream", {}), ("error", {}), ("fail", {}), ("slow", {})]),
    "a2a": (
        h.a2a_server,
        [(s, {"version": v}) for v in ("1.0", "0.3") for s in ("text", "tool", "fail", "input", "slow_cancel")],
    ),
    "hermes": (h.hermes_server, [(s, {}) for s in ("runs_text", "runs_tool", "runs_stop", "session_text", "session_tool")]),
    "openai": (h.openai_server, [(s, {}) for s in ("text", "reasoning", "tool", "midstream", "slow_stop", "responses_text")]),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the recording proxy did not listen on {port}")


def record(protocol: str) -> Path:
    start, scenarios = PLAN[protocol]
    TRACES.mkdir(exist_ok=True)
    db = TRACES / f"{protocol}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with start() as srv:
        port = free_port()
        proxy = subprocess.Popen(
            [sys.executable, "-m", "chatkit_trace.cli", "record", "--profile", protocol, "--upstream", srv.base_url,
             "--port", str(port), "--db", str(db)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        try:
            wait_port(port)
            srv.base_url = f"http://127.0.0.1:{port}"  # every request of the scenarios goes through the proxy
            for name, kwargs in scenarios:
                t0 = time.monotonic()
                srv.scenario(name, **kwargs)
                print(f"  {protocol} {name} {kwargs or ''} {time.monotonic() - t0:.1f}s", flush=True)
            time.sleep(1.0)
        finally:
            proxy.send_signal(signal.SIGINT)
            try:
                out, _ = proxy.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proxy.pid, signal.SIGKILL)
                out, _ = proxy.communicate()
        if proxy.returncode not in (0, 130, -2):
            raise RuntimeError(f"record exited {proxy.returncode}:\n{out[-2000:]}")
    return db


def export(protocol: str, db: Path) -> None:
    from chatkit_trace.fixtures import dump_fixture, export_fixture
    from chatkit_trace.store import TraceStore

    folder = FIXTURES / protocol
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.chatkit.json"):
        old.unlink()
    with TraceStore(db, readonly=True) as store:
        sessions = [r[0] or "default" for r in store.db.execute(
            "SELECT session_id, MIN(id) FROM exchanges WHERE capability IS NOT NULL "
            "GROUP BY session_id ORDER BY MIN(id)").fetchall()]  # no session id: the pipeline's "default"
    for n, session in enumerate(sessions):
        result = export_fixture(db, session, profile=protocol)
        dump_fixture(result.fixture, folder / f"{n:02d}.chatkit.json")


def main(argv: list[str]) -> int:
    export_only = "--export-only" in argv  # re-export the committed traces after an analyzer change
    for protocol in [a for a in argv if not a.startswith("--")] or list(PLAN):
        if export_only:
            db = TRACES / f"{protocol}.db"
        else:
            print(f"recording {protocol} through the addon", flush=True)
            db = record(protocol)
        # redecode stores facts and findings in the trace (check never writes to its input), with the
        # exchanges classified again by the current preset (a route's scope or stop may have changed)
        subprocess.run([sys.executable, "-m", "chatkit_trace.cli", "redecode", str(db), "--profile", protocol], cwd=REPO, check=True)
        subprocess.run([sys.executable, "-m", "chatkit_trace.cli", "check", str(db), "--fail-on", "never"], cwd=REPO, check=True)
        export(protocol, db)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
