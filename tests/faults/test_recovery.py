"""Recovery scenarios end to end: the proxy cuts a run's stream, a real client
recovers (or cannot), and ``check`` judges the backend from the trace.

* With resume (the demo backend's "my protocol"): the client resumes after the
  cut; CK404 passes when the backend replays correctly and fails, pointing at
  the replay's frames, when it replays out of order or skips an event.
* Without resume: an OpenAI Chat Completions stream cut mid-answer is CK103
  and nothing more (no invented outcome); on the demo backend used without
  resume, a later history read settles the run.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from chatkit_trace.adapters import create_adapter
from chatkit_trace.adapters.openai import OpenAIProtocol
from chatkit_trace.demo.client import HttpChat, Page
from chatkit_trace.examples.my_protocol import MyProtocol
from chatkit_trace.runtime import ChatRuntime

from .conftest import ThreadServer, findings, settled_copy, start_proxy

STORY = "Once upon a time, a proxy recorded every frame. It lived happily ever after."
CUT = "cut:after=6,capability=run,session=rs-*"  # after the tool call (e5): the backend then holds
NO_RESUME = "cut:after=2,mode=reset,capability=run,session=nr-*"


@pytest.fixture(scope="module")
def myproto(demo, module_procs, tmp_path_factory):
    server, backend = demo
    db = tmp_path_factory.mktemp("recovery") / "trace.db"
    p = start_proxy(server.url, db, [CUT, NO_RESUME], faults_first=True)  # either order works
    module_procs.append(p)
    return f"http://127.0.0.1:{p.port}", db, server, backend


async def _story(base: str, sid: str) -> tuple[str, str, str]:
    """A page sends a long story; the proxy cuts it; the user reloads and the new
    page resumes the active run from history (as chatkit's demo client does)."""
    page = Page(base, sid)
    try:
        rid = await page.send("Tell me a long story")
        await page.quiet()
        assert page.status(rid) == "outcome unknown"  # the cut: running, its connection gone (R3.4)
        await page.close()
        page = Page(base, sid, first_run=2)
        await page.runtime.refresh_history()
        await page.runtime.resume_active_run()
        status = await page.settled(rid, timeout=10)
        await page.quiet()
        return rid, status, page.text_of(rid)
    finally:
        await page.close()


@pytest.mark.parametrize(
    "bug, text, ck404",
    [
        ("", STORY, None),
        (
            "+resume-shuffle",
            STORY.replace(" recorded every frame.", " every frame. recorded"),
            "out of order",
        ),
        ("+resume-skip", STORY.replace(" recorded", ""), "skips 1 event"),
    ],
    ids=["correct-replay", "out-of-order", "skipped-event"],
)
async def test_a_cut_then_a_resume_judges_the_replay(myproto, tmp_path, bug, text, ck404):
    base, db, _, _ = myproto
    sid = f"rs-{bug.strip('+') or 'ok'}{bug}+lag=3+hold=1500"
    _, status, seen = await _story(base, sid)
    assert (status, seen) == ("completed", text)  # what the user saw after recovering
    store = settled_copy(db, tmp_path / "copy.db", sid, 3)
    exs = {ex.capability: ex for ex in store.exchanges(session=sid)}
    run, resume = exs["run"], exs["resume"]
    assert run.end == "reset" and [f.event_id for f in store.frames(run.index)] == [
        f"e{i}" for i in range(6)
    ]
    [cut] = run.notes["fault"]["applied"]
    assert (cut["kind"], cut["event"], cut["event_id"], cut["frame"]) == ("cut", 6, "e5", 5)
    assert "fault" not in resume.notes and resume.cursor == "e2"
    found = {f.code: f for f in findings(store.path, sid)}
    assert "CK103" in found and found["CK103"].frames == [f"{run.index}:5"]  # the cause's frame
    assert found["CK103"].detail["resumed"] is True
    if ck404 is None:
        assert set(found) == {"CK103"}  # the resume check passes
    else:
        assert set(found) == {"CK103", "CK404"}
        f = found["CK404"]
        assert f.frames[0] == f"{resume.index}:0" and all(
            x.startswith(f"{resume.index}:") for x in f.frames
        )
        assert any(ck404 in p for p in f.detail["problems"]), f.detail


async def test_without_resume_a_later_history_read_settles_the_run(myproto, tmp_path):
    base, db, server, backend = myproto
    sid = "nr-history"
    http = aiohttp.ClientSession()
    chat = HttpChat(base, http)
    # the client offers run and history, not resume
    runtime = ChatRuntime(create_adapter(MyProtocol(), run=chat.run, history=chat.history), sid)
    try:
        rid = await runtime.send({"text": "hello"}, run_id="run-1")
        for _ in range(200):
            if not runtime._tasks and chat.in_flight == 0:
                break
            await asyncio.sleep(0.01)

        def done() -> bool:
            return backend.sessions[sid].runs["run-1"].status == "completed"

        for _ in range(200):
            if server.call(done):
                break
            await asyncio.sleep(0.01)
        await runtime.refresh_history()  # a later read: the backend finished meanwhile
        assert str(runtime.core.run_view(rid).status) == "completed"
    finally:
        await runtime.close()
        await chat.close()
        await http.close()
    # the run, the history read the client made at the cut (still running), the later one
    store = settled_copy(db, tmp_path / "copy.db", sid, 3)
    exs = list(store.exchanges(session=sid))
    assert [e.capability for e in exs] == ["run", "history", "history"]
    [run] = [e for e in exs if e.capability == "run"]
    assert run.end == "reset" and len(store.frames(run.index)) == 2
    assert run.notes["fault"]["applied"][0]["event"] == 2
    found = findings(store.path, sid)
    assert [f.code for f in found] == ["CK103"]
    assert found[0].detail["settled_by"] == "history" and found[0].detail["resumed"] is False
    assert "a later history read settled it" in found[0].message


# ---------------------------------------------------------------------- OpenAI


def openai_app() -> web.Application:
    """A minimal OpenAI Chat Completions server: one streamed answer, no history, no resume."""

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        base = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": body.get("model", "m"),
        }
        chunks = [{"role": "assistant", "content": ""}] + [
            {"content": w} for w in ("Hello", " from", " the", " model.")
        ]
        try:
            for delta in chunks:
                await resp.write(
                    b"data: "
                    + json.dumps(
                        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                    ).encode()
                    + b"\n\n"
                )
                await asyncio.sleep(0.005)
            await resp.write(
                b"data: "
                + json.dumps(
                    {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                ).encode()
                + b"\n\n"
            )
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except ConnectionError:
            pass
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    return app


@pytest.fixture(scope="module")
def openai(module_procs, tmp_path_factory):
    server = ThreadServer(openai_app).start()
    db = tmp_path_factory.mktemp("openai") / "trace.db"
    p = start_proxy(server.url, db, ["cut:after=3,path=/v1/chat/completions"], profile="openai")
    module_procs.append(p)
    try:
        yield f"http://127.0.0.1:{p.port}", db
    finally:
        server.stop()


async def test_a_cut_on_a_protocol_without_resume_is_ck103_and_nothing_is_invented(
    openai, tmp_path
):
    base, db = openai
    sid = "oa-1"
    http = aiohttp.ClientSession()

    async def run(req: Any) -> Any:
        return await http.post(
            f"{base}/v1/chat/completions", json=req.body, headers={"X-Session-Id": sid}
        )

    runtime = ChatRuntime(create_adapter(OpenAIProtocol(), run=run), sid)
    try:
        rid = await runtime.send({"text": "hi"}, run_id="run-1")
        for _ in range(300):
            if not runtime._tasks:
                break
            await asyncio.sleep(0.01)
        view = runtime.core.run_view(rid)
        # the client got the first words, then the cut: the run is neither completed nor failed
        assert str(view.status) == "running" and str(view.connection) == "disconnected"
        text = "".join(
            getattr(p, "text", "") or ""
            for m in runtime.core.snapshot.messages
            if m.id == f"assistant:{rid}"
            for p in m.parts
        )
        assert text == "Hello from"
    finally:
        await runtime.close()
        await http.close()
    store = settled_copy(db, tmp_path / "copy.db", sid, 1)
    [ex] = list(store.exchanges(session=sid))
    assert ex.end == "reset" and len(store.frames(ex.index)) == 3
    assert ex.notes["fault"]["applied"][0]["frame"] == 2
    found = findings(store.path, sid, profile="openai")
    assert [f.code for f in found] == ["CK103"]  # not CK102/CK104: no outcome is invented
    assert found[0].frames == [f"{ex.index}:2"] and found[0].detail["settled_by"] is None
    [r] = [r for r in _runs(store.path, sid)]
    assert r["status"] == "running"


def _runs(path: Any, sid: str) -> list[dict[str, Any]]:
    """The runs ``check`` derives (outcome per run), read from a checked copy."""
    from chatkit_trace.cli.check import run_check
    from chatkit_trace.store import TraceStore

    run_check(str(path), profile="openai", store_results=True)
    return [r for r in TraceStore(path, readonly=True).rows("runs") if r["session_id"] == sid]
