"""AG-UI traffic recorded through a real mitmdump: an AG-UI agent server
built on the real ``ag-ui-protocol`` library (its event types and SSE
encoder, :func:`chatkit_trace.examples.agui_backend.make_app`) on 127.0.0.1,
``chatkit-trace record --profile agui`` in front of it, a client sending the
library's ``RunAgentInput``.  The traffic is judged right by ``check``, and
re-decoded with each deliberately broken adapter (``check --profile
tests.adapters.agui_broken:…``) each bug shows, with and without a history
read in the trace.  ``record --profile module:Class`` (an adapter without
routes) records every streamed response."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ag_ui.core import RunAgentInput, UserMessage

from tests.integration.backend import free_port
from tests.integration.proxy import BIN, REPO, Proc

pytestmark = [pytest.mark.mitmdump, pytest.mark.timeout(240)]


def _serve() -> tuple[Proc, str]:
    port = free_port()
    code = (
        "from aiohttp import web\n"
        "from chatkit_trace.examples.agui_backend import make_app\n"
        f"web.run_app(make_app(), host='127.0.0.1', port={port}, print=None)\n"
    )
    proc = Proc([sys.executable, "-c", code], port=port, ready=None)
    proc.wait_ready()
    return proc, f"http://127.0.0.1:{port}"


def _record(upstream: str, db: Path, profile: str) -> Proc:
    port = free_port()
    argv = [str(BIN / "chatkit-trace"), "record", "--profile", profile, "--upstream", upstream, "--port", str(port), "--db", str(db)]
    proc = Proc(argv, port=port)
    proc.wait_ready()
    return proc


def _post_run(base: str, thread: str, run: str, text: str) -> str:
    """One AG-UI run as a client sends it: the library's RunAgentInput."""
    import urllib.request

    body = RunAgentInput(
        thread_id=thread, run_id=run, messages=[UserMessage(id=f"user:{run}", content=text)], tools=[], context=[], state={},
        forwarded_props={},
    ).model_dump(mode="json", by_alias=True)
    req = urllib.request.Request(
        f"{base}/agent", data=json.dumps(body).encode(), headers={"Content-Type": "application/json", "Accept": "text/event-stream"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.read().decode()


def _get(base: str, path: str) -> bytes:
    import urllib.request

    with urllib.request.urlopen(f"{base}{path}", timeout=30) as resp:
        return resp.read()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chatkit_trace.cli", *args], capture_output=True, text=True, timeout=120, cwd=REPO)


def _findings(db: Path, *extra: str) -> tuple[int, list[dict]]:
    done = _cli("check", str(db), "--format", "json", *extra)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)["findings"]


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    """Two traces of the same conversations through ``record --profile agui``:
    one without any history read, one with a history read after every run."""
    tmp = tmp_path_factory.mktemp("agui")
    server, upstream = _serve()
    out = {}
    try:
        for name, with_history in (("plain", False), ("history", True)):
            db = tmp / f"{name}.db"
            proxy = _record(upstream, db, "agui")
            base = f"http://127.0.0.1:{proxy.port}"
            try:
                for kind in ("text", "tool", "fail", "frontend", "text"):
                    # one thread per conversation: this client sends only the new user message
                    thread = f"{name}-{kind}" if kind not in [k for k in out.get(name + ":kinds", [])] else f"{name}-{kind}-2"
                    out.setdefault(name + ":kinds", []).append(kind)
                    run = f"{thread}-r1"
                    out.setdefault(name + ":sse", []).append(_post_run(base, thread, run, kind))
                    if with_history:
                        _get(base, f"/threads/{thread}/messages")
            finally:
                assert proxy.stop() == 0, proxy.output
            out[name] = db
            out[name + ":log"] = proxy.output
    finally:
        server.kill()
    return out


def test_recorded_agui_traffic_is_judged_right(recordings):
    for name in ("plain", "history"):
        code, found = _findings(recordings[name], "--fail-on", "warning")
        codes = sorted({f["code"] for f in found})
        assert code == 0 and set(codes) <= {"CK401"}, (name, found)  # AG-UI has no SSE ids: one info
    done = _cli("runs", str(recordings["history"]), "--format", "json")
    assert done.returncode == 0, done.stderr
    runs = {r["session"]: r for r in json.loads(done.stdout)}
    assert {k: r["status"] for k, r in runs.items()} == {
        "history-text": "completed",
        "history-tool": "completed",
        "history-fail": "failed",
        "history-frontend": "interrupted",  # pending frontend tools: the application answers next
        "history-text-2": "completed",
    }
    assert all(r["rejected"] == 0 for r in runs.values())


@pytest.mark.parametrize("name", ["plain", "history"])
@pytest.mark.parametrize(
    ("bug", "codes"),
    [
        ("TimeIds", {"plain": {"CK203"}, "history": {"CK201"}}),
        ("LateDelta", {"plain": {"CK101"}, "history": {"CK101"}}),
        ("NoTerminal", {"plain": {"CK102"}, "history": {"CK112"}}),
    ],
)
def test_each_deliberate_bug_shows_in_check_on_the_recorded_traffic(recordings, bug, codes, name):
    code, found = _findings(recordings[name], "--profile", f"tests.adapters.agui_broken:{bug}", "--fail-on", "info")
    got = {f["code"] for f in found}
    assert codes[name] <= got, (bug, name, found)
    assert code == 1
    # the recording itself is untouched by a re-decode with another adapter
    assert _findings(recordings[name], "--fail-on", "warning")[0] == 0


def test_record_with_an_adapter_and_no_routes_records_every_stream(tmp_path):
    server, upstream = _serve()
    db = tmp_path / "all.db"
    try:
        proxy = _record(upstream, db, "chatkit_trace.adapters.agui:AGUIProtocol")
        base = f"http://127.0.0.1:{proxy.port}"
        try:
            _post_run(base, "t-all", "r-all", "tool")
            _get(base, "/threads/t-all/messages")  # JSON, not a stream: stored, not a run
        finally:
            assert proxy.stop() == 0, proxy.output
    finally:
        server.kill()
    assert "has no routes of its own: every streamed response" in proxy.output
    assert "To narrow it, write a profile file" in proxy.output
    done = _cli("runs", str(db), "--format", "json")
    runs = json.loads(done.stdout)
    assert [(r["session"], r["run"], r["status"]) for r in runs] == [("t-all", "r-all", "completed")]
    assert _findings(db, "--fail-on", "warning")[0] == 0
