"""mitmweb with the addon: the options are real (listed, typed, set), and a
finished run's flows are marked and commented with its summary."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import pytest

from .backend import free_port
from .client import fetch
from .proxy import ADDON, BIN, Proc

pytestmark = pytest.mark.mitmdump


async def _web_json(session: aiohttp.ClientSession, base: str, path: str):
    async with session.get(base + path) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def test_mitmweb_lists_the_options_and_marks_finished_runs(server, tmp_path, procs):
    port, web_port = free_port(), free_port()
    argv = [
        str(BIN / "mitmweb"), "--listen-host", "127.0.0.1", "-p", str(port), "--web-host", "127.0.0.1",
        "--web-port", str(web_port), "--no-web-open-browser", "--mode", f"reverse:{server.url}",
        "-s", str(ADDON), "--set", f"chatkit_db={tmp_path / 'trace.db'}", "--set", "chatkit_profile=myproto",
        "--set", "chatkit_queue=777",
    ]
    p = Proc(argv, port=port)
    procs.append(p)
    p.wait_ready()
    assert p.wait_for("Web server listening at", 20), p.output
    web = re.search(r"Web server listening at (http://\S+)", p.output).group(1)
    base = web.split("?", 1)[0].rstrip("/")
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as s:
        async with s.get(web) as r:  # mitmproxy 12: the token in the URL sets the auth cookie
            assert r.status == 200
        options = await _web_json(s, base, "/options.json")
        for name in ("chatkit_profile", "chatkit_db", "chatkit_redact", "chatkit_keep_secrets", "chatkit_max_db_mb",
                     "chatkit_max_age", "chatkit_queue", "chatkit_derive"):
            assert name in options and options[name]["help"].startswith("chatkit")
        assert options["chatkit_queue"]["value"] == 777 and options["chatkit_queue"]["type"] == "int"
        await fetch("POST", f"http://127.0.0.1:{port}/sessions/s1/runs?n=5", json={"runId": "w1"})
        await fetch("GET", f"http://127.0.0.1:{port}/sessions/s1/runs")
        flows = []
        for _ in range(100):
            flows = await _web_json(s, base, "/flows.json")
            run = [f for f in flows if f["request"]["path"].startswith("/sessions/s1/runs?") and f["request"]["method"] == "POST"]
            if run and run[0]["marked"]:
                break
            await asyncio.sleep(0.1)
        [run] = run
        assert run["marked"] and "session s1 run w1: completed" in run["comment"], run
        [hist] = [f for f in flows if f["request"]["method"] == "GET"]
        assert hist["response"]["contentLength"]  # ordinary JSON stays unstreamed: mitmweb shows it
        assert not hist["marked"]
    assert p.stop() == 0
