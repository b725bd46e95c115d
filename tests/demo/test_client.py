"""The demo client against the demo backend directly (no proxy): what the chatkit Core ends up showing."""

from __future__ import annotations

import aiohttp

from chatkit_trace.demo.backend import running_backend
from chatkit_trace.demo.client import DEMO_SESSIONS, Driver, HttpChat, Page, drive


async def test_every_demo_session_plays_and_ends_as_its_backend_makes_it():
    async with running_backend(pace_ms=1, hold_ms=200) as (url, backend):
        outcomes = {o.session_id: o for o in await drive(url)}
    assert [o.error for o in outcomes.values()] == [None] * len(DEMO_SESSIONS)
    status = {sid: [(what, st) for _, what, st in o.runs] for sid, o in outcomes.items()}
    # after a reload the page does not know the run: history names it differently
    assert status["history-ids"] == [("answer", "completed"), ("after a reload", None)]
    assert outcomes["history-ids"].statuses() == "completed, not shown"  # the one vocabulary (RUN_STATUSES)
    assert status["clean+close=6+lag=3"] == [
        ("text", "completed"),
        ("tool", "completed"),
        ("failure", "failed"),
        ("stop", "interrupted"),
        ("reload + resume after a clean cut", "completed"),
    ]
    assert status["subscribe"] == [
        ("text via send + subscribe", "completed"),
        ("tool via send + subscribe", "completed"),
    ]
    for sid in ("resume+cut=6+lag=3", "resume-shuffle+cut=6+lag=3", "resume-skip+cut=6+lag=3"):
        assert status[sid] == [("reset, reload, resume", "completed")]
    # The bugs leave the Core where the UI would be stuck.
    assert status["no-end"] == [("text", "outcome unknown")]  # the stream ended without a conclusion (R3.4)
    assert status["tool-unsettled"] == [("tool", "running")]  # completed rejected: active work
    assert status["stop-ignored"] == [("stop (acknowledged, never ends)", "running")]
    assert status["late-chunk"] == [("text", "completed")]
    assert status["done-marker"] == [("text", "completed")]  # history settled it
    # The backend saw the client's run ids (run-1, run-2 … per session).
    assert list(backend.sessions["clean+close=6+lag=3"].runs) == [
        "run-1",
        "run-2",
        "run-3",
        "run-4",
        "run-5",
    ]


async def test_a_reloaded_page_resumes_from_the_cursor_history_gives():
    async with running_backend(pace_ms=1, hold_ms=300) as (url, _):
        d = Driver(url)
        try:
            page = d.page("s+cut=6+lag=3")
            rid = await page.send("Tell me a long story")
            await page.quiet()
            assert page.status(rid) == "outcome unknown"  # the cut stream: running, connection gone (R3.4)
            assert page.chat.done["history"] == 1  # the disconnect made it read history (R3.4)
            page = await d.reload(page)
            await page.runtime.refresh_history()
            await page.runtime.resume_active_run()
            assert await page.settled(rid) == "completed"
            await page.runtime.refresh_history()
            assert page.chat.done["resume"] == 1
            text = page.text_of(rid)
            assert text.startswith(
                "Once upon a time, a proxy recorded every frame."
            ) and text.endswith("ever after.")
            assert page._next_run == 2
        finally:
            await d.close()


async def test_http_chat_returns_plain_responses_and_streams():
    async with running_backend(pace_ms=0) as (url, _), aiohttp.ClientSession() as http:
        adapter = HttpChat(url, http).adapter()
        assert sorted(adapter.capabilities) == ["abort", "history", "resume", "run"]
        subscribing = HttpChat(url, http, send_subscribe=True).adapter()
        assert sorted(subscribing.capabilities) == [
            "abort",
            "history",
            "resume",
            "run",
            "subscribe",
        ]
        page = Page(url, "plain")
        try:
            rid = await page.send("hello")
            assert await page.settled(rid) == "completed"
            assert (
                page.text_of(rid)
                == "You said: “hello”. This answer streamed through chatkit-trace."
            )
            assert page.chat.done == {"run": 1}
        finally:
            await page.close()
        assert page.chat.open == []
