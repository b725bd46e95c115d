"""The Faults addon through mitmproxy's test helpers (taddons, tflow): options,
choosing rules, answering with an HTTP error, redirecting to the relay, and the
recorder storing what was done (``notes.fault``)."""

from __future__ import annotations

import json
import logging
import random
import time

import pytest
from mitmproxy import exceptions, http
from mitmproxy.test import taddons, tflow

from chatkit_trace.addons.fault_addon import Faults
from chatkit_trace.addons.fault_relay import FLOW_HEADER
from chatkit_trace.capture.recorder import Recorder
from chatkit_trace.store import TraceStore


def flow(
    method: str = "POST",
    path: str = "/sessions/s1/runs",
    body: bytes = b'{"runId": "r1", "text": "hi"}',
) -> http.HTTPFlow:
    f = tflow.tflow()
    f.request = http.Request.make(
        method, f"http://backend.test:8000{path}", body, {"content-type": "application/json"}
    )
    f.request.timestamp_start = time.time()
    f.response = None
    f.error = None
    return f


def configured(
    *rules: str, seed: int | None = 1, profile: str = "myproto"
) -> tuple[Faults, taddons.context]:
    a = Faults()
    tctx = taddons.context(a)
    opts = {"chatkit_fault": list(rules), "chatkit_profile": profile}
    if seed is not None:
        opts["chatkit_fault_seed"] = seed
    tctx.configure(a, **opts)
    return a, tctx


def test_options_and_the_shared_profile_option(caplog):
    rec, faults = Recorder(), Faults()
    with caplog.at_level(logging.WARNING), taddons.context(rec, faults) as tctx:
        assert tctx.options.chatkit_fault == [] and tctx.options.chatkit_fault_seed is None
        assert tctx.options.chatkit_profile == ""
    assert "Over-riding" not in caplog.text  # same signature as the recorder's option
    rec.done()


@pytest.mark.parametrize(
    "rules, profile, message",
    [
        (["cut:after=x"], "myproto", "chatkit_fault: fault rule 'cut:after=x'"),
        (["drop:at=1,capability=run"], "", "set chatkit_profile"),
        (["drop:at=1,session=s1"], "nosuchpreset", "needs a route profile"),
    ],
)
def test_bad_rules_stop_mitmproxy_with_one_line(rules, profile, message):
    a = Faults()
    with taddons.context(a) as tctx, pytest.raises(exceptions.OptionsError, match=message):
        tctx.configure(a, chatkit_fault=rules, chatkit_profile=profile)


def test_a_path_rule_needs_no_profile_and_a_seed_is_drawn_and_logged(caplog):
    with caplog.at_level(logging.INFO, logger="chatkit_trace.faults"):
        a, _ = configured("drop:at=1,path=/x", seed=None, profile="")
    assert a.profile is None and a.seed > 0
    assert f"replay with --set chatkit_fault_seed={a.seed}" in caplog.text


async def test_with_no_rule_nothing_is_touched():
    a, _ = configured()
    f = flow()
    before = f.request.get_state()
    await a.request(f)
    assert (
        f.request.get_state() == before and f.response is None and "chatkit_fault" not in f.metadata
    )


def test_targets_nth_and_routes_that_never_stream():
    a, _ = configured(
        "cut:after=1,capability=run,nth=2",
        "dup:at=1,session=s2",
        "http:status=500,capability=history",
    )
    chosen = [[r.text for r, _, _ in a.select(flow())] for _ in range(3)]
    assert chosen == [[], ["cut:after=1,capability=run,nth=2"], []]
    assert [r.text for r, _, _ in a.select(flow(path="/sessions/s2/runs"))] == [
        "dup:at=1,session=s2"
    ]
    hist = flow("GET", "/sessions/s2/runs", b"")
    # history never streams: stream rules skip it (and do not count it); an http rule still answers it
    assert [r.text for r, _, _ in a.select(hist)] == ["http:status=500,capability=history"]
    assert a.counts == [4, 1, 1]


def test_p_is_decided_by_the_seed():
    def applied(seed: int) -> list[int]:
        a, _ = configured("drop:at=1,p=0.5", seed=seed)
        return [i for i in range(1, 41) if a.select(flow())]

    first = applied(7)
    assert first == applied(7) and 5 < len(first) < 35
    assert first != applied(8)
    # the same generator the addon uses: (seed, rule index, exchange ordinal)
    assert first == [n for n in range(1, 41) if random.Random(f"7:0:{n}").random() < 0.5]


async def test_an_http_rule_answers_without_calling_the_backend():
    a, _ = configured("http:status=429,retry_after=2,capability=run", "drop:at=1")
    f = flow()
    await a.request(f)
    r = f.response
    assert r is not None and r.status_code == 429
    assert (
        r.headers["Retry-After"] == "2"
        and r.headers["X-Chatkit-Fault"] == "http:status=429,retry_after=2,capability=run"
    )
    assert json.loads(r.content)["error"]["code"] == 429
    notes = f.metadata["chatkit_fault"]
    assert notes["via"] == "proxy" and notes["seed"] == 1
    assert notes["applied"] == [
        {
            "rule": "http:status=429,retry_after=2,capability=run",
            "kind": "http",
            "status": 429,
            "retry_after": 2,
        }
    ]
    assert notes["not_applied"][0]["rule"] == "drop:at=1"


async def test_a_stream_rule_redirects_to_the_relay_and_the_request_line_comes_back():
    a, _ = configured("drop:at=2,capability=run")
    f = flow()
    host_header = f.request.host_header
    try:
        await a.request(f)
        assert a.relay is not None and a.relay.running
        assert (f.request.host, f.request.port, f.request.scheme) == (
            "127.0.0.1",
            a.relay.port,
            "http",
        )
        assert f.request.host_header == host_header  # the backend still sees its own Host
        assert f.request.headers[FLOW_HEADER] == f.id and f.id in a.relay.plans
        f.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
        a.responseheaders(f)
        assert (f.request.host, f.request.port) == (
            "backend.test",
            8000,
        ) and FLOW_HEADER not in f.request.headers
        a.response(f)
        assert f.id not in a.relay.plans
        assert f.metadata["chatkit_fault"]["via"] == "relay"
    finally:
        if a.relay is not None:
            await a.relay.stop()


async def test_a_failure_inside_never_reaches_mitmproxy(caplog):
    a, _ = configured("drop:at=1")

    def boom(_f):
        raise RuntimeError("injected")

    a.select = boom  # type: ignore[method-assign]
    f = flow()
    with caplog.at_level(logging.WARNING, logger="chatkit_trace.faults"):
        await a.request(f)
        await a.request(flow())
    assert f.response is None and f.request.host == "backend.test"
    assert caplog.text.count("error in request") == 1


def test_the_recorder_stores_what_the_faults_addon_did(tmp_path):
    rec = Recorder()
    db = tmp_path / "t.db"
    with taddons.context(rec) as tctx:
        tctx.configure(rec, chatkit_db=str(db), chatkit_profile="myproto")
        f = flow()
        f.metadata["chatkit_fault"] = {
            "rules": ["cut:after=1"],
            "applied": [{"kind": "cut", "event": 1, "frame": 0}],
        }
        rec.requestheaders(f)
        rec.request(f)
        f.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
        f.response.headers.pop("content-length", None)
        rec.responseheaders(f)
        f.response.stream(b'id: e0\ndata: {"type": "started", "run": "r1"}\n\n')
        f.error = tflow.terr(
            "HTTP/1 protocol error: peer closed connection without sending complete message body"
        )
        rec.error(f)
        rec.done()
    [ex] = TraceStore(db, readonly=True).exchanges()
    assert ex.end == "reset" and ex.notes["fault"]["applied"] == [
        {"kind": "cut", "event": 1, "frame": 0}
    ]


async def test_the_relay_answers_502_for_a_dead_backend_and_drops_the_exchange_on_its_own_bug(
    caplog,
):
    import aiohttp
    from aiohttp import web

    from chatkit_trace.addons.fault_relay import Plan, Relay
    from chatkit_trace.addons.fault_rules import parse_rule
    from tests.integration.backend import free_port

    async def hello(request):
        return web.Response(text="data: 1\n\n", content_type="text/event-stream")

    app = web.Application()
    app.router.add_get("/x", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    relay = Relay()
    await relay.start()
    try:
        dead = Plan("dead", "http", "127.0.0.1", free_port(), [], {})
        buggy = Plan(
            "buggy", "http", "127.0.0.1", port, [(parse_rule("drop:at=1"), None), None], {}
        )  # type: ignore[list-item]
        relay.plans.update(dead=dead, buggy=buggy)
        async with aiohttp.ClientSession() as s:
            async with s.get(
                f"http://127.0.0.1:{relay.port}/x", headers={FLOW_HEADER: "dead"}
            ) as r:
                assert r.status == 502 and "unreachable" in (await r.json())["error"]
            async with s.get(
                f"http://127.0.0.1:{relay.port}/x", headers={FLOW_HEADER: "nobody"}
            ) as r:
                assert r.status == 502 and "no fault plan" in (await r.json())["error"]
            url = f"http://127.0.0.1:{relay.port}/x"
            with (
                caplog.at_level(logging.WARNING, logger="chatkit_trace.faults"),
                pytest.raises(aiohttp.ClientError),
            ):
                async with s.get(url, headers={FLOW_HEADER: "buggy"}) as r:
                    await r.read()
        assert "relay_error" in dead.notes and "TypeError" in buggy.notes["relay_error"]
        assert "relay error" in caplog.text
    finally:
        await relay.stop()
        await runner.cleanup()


def test_the_entry_script_loads_under_mitmproxys_made_up_module_name():
    from chatkit_trace.addons import faults_path

    with taddons.context() as tctx:
        module = tctx.script(faults_path())
        assert module.__name__ == "__mitmproxy_script__.faults"  # absolute imports only
        [addon] = module.addons
        assert type(addon) is Faults


def test_run_and_route_targets_read_the_request_through_the_profile():
    a, _ = configured(
        "drop:at=1,run=keep-*",
        "dup:at=1,route=resume",
        "swap:at=1,method=GET,path=/sessions/*/runs/*",
    )
    assert [r.text for r, _, _ in a.select(flow(body=b'{"runId": "keep-1", "text": "x"}'))] == [
        "drop:at=1,run=keep-*"
    ]
    assert a.select(flow(body=b'{"runId": "other", "text": "x"}')) == []
    resume = flow("GET", "/sessions/s1/runs/keep-2/events?after=e3", b"")
    assert [r.text for r, _, _ in a.select(resume)] == [
        "drop:at=1,run=keep-*",
        "dup:at=1,route=resume",
        "swap:at=1,method=GET,path=/sessions/*/runs/*",
    ]
