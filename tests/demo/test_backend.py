"""The demo backend's protocol over real HTTP: each scenario and each bug puts the intended bytes on the wire."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import aiohttp
import pytest

from chatkit_trace.adapters import MessageUpdate, create_adapter
from chatkit_trace.demo.backend import (
    BUGS,
    SessionOptions,
    options_from_json,
    parse_options,
    running_backend,
    scenario_for,
    sse,
)
from chatkit_trace.examples.my_protocol import MyProtocol

from .helpers import events, history, read_stream, run, types


@pytest.fixture
async def server():
    async with (
        running_backend(pace_ms=1, hold_ms=150) as (url, backend),
        aiohttp.ClientSession() as http,
    ):
        yield url, backend, http


# ---------------------------------------------------------------------- options


def test_session_ids_spell_options():
    assert parse_options("clean") == SessionOptions()
    assert parse_options("late-chunk").late_chunk
    o = parse_options("resume-skip+cut=6+lag=3+pace=2.5+label")
    assert (o.resume_skip, o.cut, o.lag, o.pace, o.close) == (True, 6, 3, 2.5, 0)
    assert o.bugs() == ["resume-skip"]
    # parts that are not options are labels; a malformed number is a label too
    assert parse_options("my-session+cut=x+history-ids=1") == SessionOptions()
    assert parse_options("+".join(BUGS)).bugs() == list(BUGS)
    assert parse_options("conformance-fail+scenario=tool").scenario == "tool"
    assert parse_options("s+scenario=dance").scenario is None


def test_options_from_json_checks_names():
    o = options_from_json({"bugs": ["no-end"], "cut": 4})
    assert o.no_end and o.cut == 4
    with pytest.raises(ValueError, match="unknown bug"):
        options_from_json({"bugs": ["nope"]})
    with pytest.raises(ValueError, match="unknown option"):
        options_from_json({"cutt": 1})
    with pytest.raises(ValueError, match=">= 0"):
        options_from_json({"lag": -1})
    with pytest.raises(ValueError, match="unknown scenario"):
        options_from_json({"scenario": "dance"})
    assert options_from_json({"scenario": "slow"}).to_json() == {"bugs": [], "scenario": "slow"}


async def test_a_session_can_fix_its_scenario(server):
    url, _, http = server
    evs, _, _ = await run(http, url, "s+scenario=tool", "hello")
    assert types(evs) == ["started", "text", "tool", "tool_result", "text", "done"]


@pytest.mark.parametrize(
    "text, kind",
    [
        ("hello", "text"),
        ("use a TOOL", "tool"),
        ("please fail", "fail"),
        ("be slow", "slow"),
        ("a long story", "long"),
        ("slow tool that fails", "fail"),
    ],
)
def test_scenario_by_keyword(text, kind):
    assert scenario_for(text) == kind


def test_sse_bytes():
    assert sse("e1", {"type": "done"}) == b'id: e1\ndata: {"type":"done"}\n\n'
    assert sse(None, "[DONE]") == b"data: [DONE]\n\n"


# ---------------------------------------------------------------------- scenarios


async def test_text_answer_exact_bytes(server):
    url, _, http = server
    _, end, body = await run(http, url, "clean", "hi")
    assert end == "eof"
    assert body == (
        b'id: e0\ndata: {"type":"started","run":"r1"}\n\n'
        b'id: e1\ndata: {"type":"text","text":"You said: "}\n\n'
        + 'id: e2\ndata: {"type":"text","text":"“hi”."}\n\n'.encode()
        + b'id: e3\ndata: {"type":"text","text":" This answer streamed through chatkit-trace."}\n\n'
        b'id: e4\ndata: {"type":"done"}\n\n'
    )


@pytest.mark.parametrize(
    "text, expected",
    [
        ("use a tool", ["started", "text", "tool", "tool_result", "text", "done"]),
        ("please fail", ["started", "text", "error"]),
        (
            "a long story",
            [
                "started",
                "text",
                "text",
                "text",
                "text",
                "tool",
                "tool_result",
                "text",
                "text",
                "done",
            ],
        ),
    ],
)
async def test_scenarios(server, text, expected):
    url, _, http = server
    evs, end, _ = await run(http, url, "clean", text)
    assert end == "eof"
    assert types(evs) == expected
    assert [i for i, _ in evs] == [f"e{n}" for n in range(len(expected))]
    if expected[-1] == "error":
        assert evs[-1][1] == {
            "type": "error",
            "code": "RATE_LIMITED",
            "message": "Too many requests, try again in a minute",
            "retryable": True,
        }
        (h,) = (await history(http, url, "clean"))["runs"]
        assert h["status"] == "failed" and h["error"] == {
            "code": "RATE_LIMITED",
            "message": "Too many requests, try again in a minute",
        }
    if "tool" in expected:
        tool = next(v for _, v in evs if v["type"] == "tool")
        result = next(v for _, v in evs if v["type"] == "tool_result")
        assert tool["id"] == result["id"] == "call-1"


async def test_slow_streams_until_stopped(server):
    url, _, http = server
    async with http.post(
        f"{url}/sessions/clean/runs", json={"runId": "r1", "text": "slow"}
    ) as resp:
        body, end = await read_stream(resp, until=2)
        assert end == "open" and types(events(body)) == ["started", "text"]
        async with http.post(f"{url}/sessions/clean/runs/r1/stop", json={}) as stop:
            assert stop.status == 204
        rest, end = await read_stream(resp)
    assert (rest, end) == (b"", "eof")  # ends cleanly, no conclusion event: history says how
    (h,) = (await history(http, url, "clean"))["runs"]
    assert h["status"] == "interrupted" and [f["id"] for f in h["frames"]] == ["e0", "e1"]


async def test_a_run_without_run_id_gets_one_and_errors_are_json(server):
    url, _, http = server
    async with http.post(f"{url}/sessions/s/runs", json={"text": "hi"}) as resp:
        evs = events(await resp.read())
    assert evs[0][1] == {"type": "started", "run": "r1"}
    async with http.post(f"{url}/sessions/s/runs", json={"runId": "r1", "text": "again"}) as resp:
        assert resp.status == 409 and "exists" in (await resp.json())["error"]
    async with http.post(f"{url}/sessions/s/runs", data=b"not json") as resp:
        assert resp.status == 400
    async with http.post(f"{url}/sessions/s/runs/nope/stop") as resp:
        assert resp.status == 404
    async with http.get(f"{url}/sessions/s/runs/nope/events?after=e1") as resp:
        assert resp.status == 404
    async with http.get(f"{url}/sessions/s/runs/r1/events?after=e99") as resp:
        assert resp.status == 404 and "unknown event id" in (await resp.json())["error"]
    async with http.get(f"{url}/") as resp:
        assert set((await resp.json())["bugs"]) == set(BUGS)


# ---------------------------------------------------------------------- history


def _live_messages(sid, run_id, text, evs):
    """What the UI shows live: the adapter's decoding of the stream (user message projected)."""
    adapter = create_adapter(MyProtocol(), history=True)
    dec = adapter.decoder(sid)
    msgs = {m.id: m for m in dec.project({"text": text}, run_id)}
    for eid, ev in evs:
        for u in dec.decode(ev, run_id=run_id, event_id=eid, fallback_id=eid).updates:
            if isinstance(u, MessageUpdate):
                msgs[u.message.id] = u.message
    return [m.to_json() for m in msgs.values()]


async def test_history_is_isomorphic_for_a_clean_session(server):
    url, _, http = server
    live = []
    runs = [("r1", "hello"), ("r2", "use a tool"), ("r3", "please fail"), ("r4", "a long story")]
    frames = {}
    for rid, text in runs:
        evs, _, _ = await run(http, url, "clean", text, run_id=rid)
        frames[rid] = [{"id": i, "event": v} for i, v in evs]
        live += _live_messages("clean", rid, text, evs)
    h = await history(http, url, "clean")
    assert [r["id"] for r in h["runs"]] == ["r1", "r2", "r3", "r4"]
    assert [r["input"] for r in h["runs"]] == [t for _, t in runs]
    assert [r["status"] for r in h["runs"]] == ["completed", "completed", "failed", "completed"]
    # the server stores exactly the frames it sent
    assert {r["id"]: r["frames"] for r in h["runs"]} == frames
    decoded = MyProtocol().decode_history(h, "clean")
    assert [m.to_json() for m in decoded.messages] == live
    assert decoded.active_run is None


async def test_history_of_a_running_run_lags_and_names_the_active_run(server):
    url, _, http = server
    async with http.post(
        f"{url}/sessions/s+lag=3+hold=2000/runs", json={"runId": "r1", "text": "long story"}
    ) as resp:
        _, end = await read_stream(resp, until=6)
        assert end == "open"
        (h,) = (await history(http, url, "s+lag=3+hold=2000"))["runs"]
        assert h["status"] == "running" and [f["id"] for f in h["frames"]] == ["e0", "e1", "e2"]
        decoded = MyProtocol().decode_history({"runs": [h]}, "s")
        assert decoded.active_run.run_id == "r1" and decoded.active_run.event_id == "e2"
        async with http.post(f"{url}/sessions/s+lag=3+hold=2000/runs/r1/stop") as stop:
            assert stop.status == 204


# ---------------------------------------------------------------------- bugs


async def test_history_ids(server):
    url, _, http = server
    evs, _, _ = await run(http, url, "history-ids", "hello", run_id="run-1")
    assert evs[0][1] == {"type": "started", "run": "run-1"}
    (h,) = (await history(http, url, "history-ids"))["runs"]
    assert h["id"].startswith("run_") and h["id"] != "run-1"
    assert h["frames"] == [{"id": i, "event": v} for i, v in evs]  # same content, another id


async def test_late_chunk(server):
    url, _, http = server
    evs, end, body = await run(http, url, "late-chunk", "hello")
    assert end == "eof"
    assert types(evs)[-2:] == ["done", "text"]
    assert body.endswith(
        b'id: e4\ndata: {"type":"done"}\n\nid: e5\ndata: {"type":"text","text":" (one more thing)"}\n\n'
    )


async def test_no_end(server):
    url, _, http = server
    evs, end, _ = await run(http, url, "no-end", "hello")
    assert end == "eof" and types(evs) == ["started", "text", "text", "text"]
    (h,) = (await history(http, url, "no-end"))["runs"]
    assert h["status"] == "running"


async def test_done_marker(server):
    url, _, http = server
    evs, end, body = await run(http, url, "done-marker", "hello")
    assert end == "eof" and types(evs) == ["started", "text", "text", "text", "[DONE]"]
    assert body.endswith(b"\n\ndata: [DONE]\n\n") and evs[-1][0] is None
    (h,) = (await history(http, url, "done-marker"))["runs"]
    assert h["status"] == "completed" and len(h["frames"]) == 4


async def test_tool_unsettled(server):
    url, _, http = server
    evs, _, _ = await run(http, url, "tool-unsettled", "use a tool")
    assert types(evs) == ["started", "text", "tool", "text", "done"]


async def test_stop_ignored(server):
    url, _, http = server
    async with http.post(
        f"{url}/sessions/stop-ignored/runs", json={"runId": "r1", "text": "slow"}
    ) as resp:
        await read_stream(resp, until=2)
        async with http.post(f"{url}/sessions/stop-ignored/runs/r1/stop") as stop:
            assert stop.status == 204
        rest, end = await read_stream(resp, timeout=0.3)
    assert (rest, end) == (b"", "open")  # acknowledged, silent, never ends
    (h,) = (await history(http, url, "stop-ignored"))["runs"]
    assert h["status"] == "running"


# ---------------------------------------------------------------------- cut, close, resume


async def test_cut_resets_the_first_stream_after_n_events(server):
    url, _, http = server
    evs, end, _ = await run(http, url, "s+cut=6", "a long story")
    assert end == "reset" and [i for i, _ in evs] == ["e0", "e1", "e2", "e3", "e4", "e5"]
    # a run that ends at or before N is not cut
    evs, end, _ = await run(http, url, "s+cut=6", "use a tool", run_id="r2")
    assert end == "eof" and types(evs)[-1] == "done"


async def test_after_a_cut_the_held_step_waits_for_a_reader(server):
    url, _, http = server
    sid = "s+cut=6+hold=20"
    _, end, _ = await run(http, url, sid, "a long story")
    assert end == "reset"
    await asyncio.sleep(0.3)  # far beyond hold: the tool result still waits for a reader
    (h,) = (await history(http, url, sid))["runs"]
    assert h["status"] == "running" and len(h["frames"]) == 6
    async with http.get(f"{url}/sessions/{sid}/runs/r1/events", params={"after": "e5"}) as resp:
        ids = [i for i, _ in events((await read_stream(resp))[0])]
    assert ids == ["e6", "e7", "e8", "e9"]


async def test_close_ends_the_first_stream_cleanly_after_n_events(server):
    url, _, http = server
    evs, end, _ = await run(http, url, "s+close=3", "a long story")
    assert end == "eof" and len(evs) == 3


async def _resume(http, url, sid, after, *, header=False):
    path = f"{url}/sessions/{sid}/runs/r1/events"
    kw = {"headers": {"Last-Event-ID": after}} if header else {"params": {"after": after}}
    async with http.get(path, **kw) as resp:
        assert resp.status == 200
        body, end = await read_stream(resp)
    return [i for i, _ in events(body)], end


@pytest.mark.parametrize(
    "bug, expected",
    [
        ("", ["e3", "e4", "e5", "e6", "e7", "e8", "e9"]),
        ("+resume-shuffle", ["e4", "e3", "e5", "e6", "e7", "e8", "e9"]),
        ("+resume-skip", ["e4", "e5", "e6", "e7", "e8", "e9"]),
    ],
    ids=["correct", "out-of-order", "skipping"],
)
async def test_resume_after_a_cut(server, bug, expected):
    url, _, http = server
    sid = f"s+cut=6{bug}"
    evs, end, _ = await run(http, url, sid, "a long story")
    assert end == "reset" and len(evs) == 6
    # While the run is still going: the replay, then live output to the end.
    ids, end = await _resume(http, url, sid, "e2")
    assert (ids, end) == (expected, "eof")
    # After it finished: the replay alone, with the same bug.
    ids, end = await _resume(http, url, sid, "e2", header=True)
    assert (ids, end) == (expected, "eof")


async def test_correct_resume_replays_exactly_what_was_sent(server):
    url, _, http = server
    first, _, _ = await run(http, url, "s+cut=4", "a long story")
    async with http.get(
        f"{url}/sessions/s+cut=4/runs/r1/events", params={"after": first[-1][0]}
    ) as resp:
        rest = events((await read_stream(resp))[0])
    (h,) = (await history(http, url, "s+cut=4"))["runs"]
    assert [{"id": i, "event": v} for i, v in first + rest] == h["frames"]


# ---------------------------------------------------------------------- subscription, control endpoint


async def test_subscription_carries_run_ids_on_every_event(server):
    url, _, http = server
    async with http.get(f"{url}/events", params={"sessionId": "sub"}) as sub:
        await sub.content.readuntil(b"\n\n")  # ": subscribed"
        async with http.post(
            f"{url}/send", json={"sessionId": "sub", "runId": "r1", "text": "hello"}
        ) as resp:
            assert resp.status == 202 and await resp.read() == b""
        body = b""
        while b'"done"' not in body:
            body += await asyncio.wait_for(sub.content.readany(), 5)
    evs = events(body)
    assert types(evs) == ["started", "text", "text", "text", "done"]
    assert all(v["run"] == "r1" for _, v in evs)
    assert [i for i, _ in evs] == ["e0", "e1", "e2", "e3", "e4"]
    (h,) = (await history(http, url, "sub"))["runs"]
    assert h["status"] == "completed" and "run" not in h["frames"][1]["event"]


async def test_path_subscription(server):
    url, _, http = server
    async with http.get(f"{url}/sessions/sub2/events") as sub:
        await sub.content.readuntil(b"\n\n")
        await run(http, url, "sub2", "hello")
        body = b""
        while b'"done"' not in body:
            body += await asyncio.wait_for(sub.content.readany(), 5)
    assert types(events(body)) == ["started", "text", "text", "text", "done"]


async def test_control_endpoint_sets_options_for_a_plain_session_id(server):
    url, _, http = server
    async with http.put(
        f"{url}/_demo/sessions/plain", json={"bugs": ["late-chunk"], "close": 0}
    ) as resp:
        assert resp.status == 200 and (await resp.json()) == {
            "session": "plain",
            "bugs": ["late-chunk"],
        }
    evs, _, _ = await run(http, url, "plain", "hello")
    assert types(evs)[-2:] == ["done", "text"]
    async with http.put(f"{url}/_demo/sessions/plain", json={"bugs": []}) as resp:
        assert (await resp.json())["bugs"] == []
    evs, _, _ = await run(http, url, "plain", "hello", run_id="r2")
    assert types(evs)[-1] == "done"
    async with http.put(f"{url}/_demo/sessions/plain", json={"bugs": ["nope"]}) as resp:
        assert resp.status == 400 and "unknown bug" in (await resp.json())["error"]
    async with http.get(f"{url}/_demo/sessions/resume-skip+cut=6") as resp:
        assert await resp.json() == {
            "session": "resume-skip+cut=6",
            "bugs": ["resume-skip"],
            "cut": 6,
        }


def test_demo_backend_command_serves_until_stopped():
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chatkit_trace.cli",
            "demo-backend",
            "--port",
            "0",
            "--pace-ms",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert "demo backend (myproto) on http://127.0.0.1:" in line
        url = line.split(" on ", 1)[1].split(";", 1)[0]

        async def get():
            async with aiohttp.ClientSession() as http:
                evs, end, _ = await run(http, url, "clean", "hi")
                return types(evs), end

        assert asyncio.run(get()) == (["started", "text", "text", "text", "done"], "eof")
    finally:
        proc.terminate()
        proc.wait(10)
    bad = subprocess.run(
        [sys.executable, "-m", "chatkit_trace.cli", "demo-backend", "--port", "70000"],
        check=False,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--port must be between" in bad.stderr
    assert json.loads(json.dumps(BUGS))  # the bug table is plain data (documented in --help)
