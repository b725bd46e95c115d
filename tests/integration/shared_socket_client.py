"""An aiohttp client of the shared-socket backend (``shared_socket_backend.py``).

:class:`SocketClient` opens one WebSocket, reads every message in the
background and lets a step wait for a message it expects (bounded: a step
that waits longer than :data:`WAIT` fails the test, it never sleeps on luck).
:func:`scenario` is the traffic the integration tests record: two sessions
interleaved on one socket (``ok``, ``late``, ``remint``, ``noend``, ``stop``,
``fail``), their history over HTTP, one more ``noend`` run the socket closes
on, and a second socket whose backend drops it mid-run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

WAIT = 15.0

#: (session, run, mode) of the first socket's runs, in pairs started together.
PAIRS = (
    (("sess-a", "a-r1", "ok"), ("sess-b", "b-r1", "late")),
    (("sess-a", "a-r2", "remint"), ("sess-b", "b-r2", "noend")),
    (("sess-a", "a-r3", "stop"), ("sess-b", "b-r3", "fail")),
)
#: What each run of :func:`scenario` should be judged (warnings and errors).
EXPECTED = {
    ("sess-a", "a-r1"): set(),
    ("sess-b", "b-r1"): {"CK101"},
    ("sess-a", "a-r2"): {"CK201", "CK202"},
    ("sess-b", "b-r2"): {"CK116"},
    ("sess-a", "a-r3"): {"CK107"},
    ("sess-b", "b-r3"): set(),
    ("sess-a", "a-r4"): {"CK102"},
    ("sess-c", "c-r1"): {"CK103"},
}


@dataclass
class SocketClient:
    ws: aiohttp.ClientWebSocketResponse
    received: list[dict[str, Any]] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    close_code: int | None = None
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _reader: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            async for msg in self.ws:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    async with self._changed:
                        self.received.append(json.loads(msg.data))
                        self._changed.notify_all()
        finally:
            self.close_code = self.ws.close_code
            self.closed.set()
            async with self._changed:
                self._changed.notify_all()

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send_str(json.dumps(message))

    async def wait_for(self, pred: Callable[[dict[str, Any]], bool], count: int = 1) -> list[dict[str, Any]]:
        async def enough() -> list[dict[str, Any]]:
            async with self._changed:
                while True:
                    got = [m for m in self.received if pred(m)]
                    if len(got) >= count:
                        return got
                    if self.closed.is_set():
                        raise AssertionError(f"socket closed ({self.close_code}) before {count} expected message(s); got {got}")
                    await self._changed.wait()

        return await asyncio.wait_for(enough(), WAIT)

    async def wait_run(self, run_id: str, kind: str, count: int = 1) -> list[dict[str, Any]]:
        return await self.wait_for(lambda m: m.get("runId") == run_id and m.get("type") == kind, count)


def _ids(ids: dict[str, str] | None, run: str) -> str:
    return (ids or {}).get(run, run)


async def scenario(base: str, *, ids: dict[str, str] | None = None, drop: bool = True,
                   history: bool = True) -> dict[str, Any]:
    """Drive the backend at ``base`` (``http://host:port``); returns what the
    client saw: ``{"sockets": [messages…], "close_codes": […], "history": {sid: json}}``.
    ``ids`` maps the scenario's run ids to the ones to send (``serve`` gets new ones)."""
    ws_url = base.replace("http", "ws", 1) + "/ws"
    out: dict[str, Any] = {"sockets": [], "close_codes": [], "history": {}}
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(ws_url) as raw:
            c = SocketClient(raw)
            c.start()
            for sid in ("sess-a", "sess-b"):
                await c.send({"type": "subscribe", "sessionId": sid})
            for pair in PAIRS:
                for sid, run, mode in pair:
                    await c.send({"type": "run", "sessionId": sid, "runId": _ids(ids, run), "mode": mode,
                                  "input": {"text": f"question {run}"}})
                for sid, run, mode in pair:
                    rid = _ids(ids, run)
                    if mode == "stop":
                        await c.wait_run(rid, "text.delta", 2)
                        await c.send({"type": "stop", "sessionId": sid, "runId": rid})
                        await c.wait_run(rid, "run.completed")
                    elif mode == "noend":
                        await c.wait_run(rid, "text.delta", 3)
                    elif mode == "fail":
                        await c.wait_run(rid, "run.failed")
                    elif mode == "late":
                        await c.wait_run(rid, "text.delta", 4)
                    else:
                        await c.wait_run(rid, "run.completed")
            if history:
                for sid in ("sess-a", "sess-b"):
                    async with http.get(f"{base}/sessions/{sid}/history") as resp:
                        out["history"][sid] = await resp.json()
            rid = _ids(ids, "a-r4")
            await c.send({"type": "run", "sessionId": "sess-a", "runId": rid, "mode": "noend",
                          "input": {"text": "question a-r4"}})
            await c.wait_run(rid, "text.delta", 3)
            await raw.close()
            await asyncio.wait_for(c.closed.wait(), WAIT)
            out["sockets"].append(c.received)
            out["close_codes"].append(raw.close_code)
        if drop:
            async with http.ws_connect(ws_url) as raw:
                c = SocketClient(raw)
                c.start()
                await c.send({"type": "subscribe", "sessionId": "sess-c"})
                rid = _ids(ids, "c-r1")
                await c.send({"type": "run", "sessionId": "sess-c", "runId": rid, "mode": "drop",
                              "input": {"text": "question c-r1"}})
                await c.wait_run(rid, "text.delta", 2)
                await c.send({"type": "ping", "sessionId": "sess-c", "runId": rid})
                await asyncio.wait_for(c.closed.wait(), WAIT)
                out["sockets"].append(c.received)
                out["close_codes"].append(c.close_code)
    return out
