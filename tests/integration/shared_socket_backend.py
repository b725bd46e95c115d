"""A real aiohttp backend with one shared WebSocket for many sessions.

The shape of chatkit's third way to send and receive (seed 003; the protocol
is ``chatkit_trace/examples/shared_socket.py``): a client opens ``/ws`` once,
subscribes to several sessions on it, starts runs with ``{"type": "run"}``
and stops them with ``{"type": "stop"}``; every event names its session, run
and event id, and goes to every socket subscribed to its session.  History is
``GET /sessions/{sid}/history`` over HTTP.

Each run message carries a ``mode`` (the bug the backend acts out for that run):

* ``ok``: started, three text deltas, completed;
* ``late``: one more delta after ``run.completed`` (history keeps it);
* ``remint``: history gives the answer another message id;
* ``noend``: no terminal event (history says completed);
* ``stop``: after the second delta the backend waits for the client's stop,
  then keeps producing (two more deltas) and completes;
* ``fail``: ``run.failed`` with a well-formed error;
* ``drop``: after the second delta (once the client pings that it has it)
  the backend drops the TCP connection of the socket that started the run,
  without a close frame.

Steps wait on messages, never on timing luck: a stop-mode run waits for the
stop (bounded), everything else runs at a fixed pace.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from .backend import ServerThread

PACE = 0.01
PIECES = ("Hello", " from", " the socket")


@dataclass
class _Session:
    sid: str
    sockets: list[web.WebSocketResponse] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    seq: int = 0


class SharedSocketBackend(ServerThread):
    """The backend on its own event loop in a thread (``url``, ``stop()``)."""

    name = "shared-socket-backend"

    def __init__(self) -> None:
        super().__init__()
        self.sessions: dict[str, _Session] = {}
        self.stops: dict[str, asyncio.Event] = {}
        #: Client messages as the backend received them, in order.
        self.received: list[dict[str, Any]] = []
        #: Every event the backend sent, per session, in order.
        self.sent: dict[str, list[dict[str, Any]]] = {}

    def routes(self, r: web.UrlDispatcher) -> None:
        r.add_get("/ws", self.ws)
        r.add_get("/sessions/{sid}/history", self.history)

    def session(self, sid: str) -> _Session:
        s = self.sessions.get(sid)
        if s is None:
            s = self.sessions[sid] = _Session(sid)
        return s

    # -- HTTP -------------------------------------------------------------------------

    async def history(self, request: web.Request) -> web.Response:
        s = self.session(request.match_info["sid"])
        runs = [{"id": rid, **info} for rid, info in s.runs.items()]
        return web.json_response({"sessionId": s.sid, "messages": s.messages, "runs": runs})

    # -- the socket -------------------------------------------------------------------

    async def ws(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            self.received.append(data)
            kind, sid = data.get("type"), str(data.get("sessionId", ""))
            if kind == "subscribe":
                self.session(sid).sockets.append(ws)
            elif kind == "run":
                task = asyncio.ensure_future(self._run(request, ws, sid, str(data["runId"]), data.get("input") or {},
                                                       str(data.get("mode", "ok"))))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            elif kind == "stop":
                self.stops.setdefault(str(data.get("runId")), asyncio.Event()).set()
            elif kind == "ping":
                self.stops.setdefault(f"ping:{data.get('runId')}", asyncio.Event()).set()
        for s in self.sessions.values():
            if ws in s.sockets:
                s.sockets.remove(ws)
        return ws

    async def _publish(self, s: _Session, run_id: str, event: dict[str, Any]) -> None:
        s.seq += 1
        event = {**event, "sessionId": s.sid, "runId": run_id, "eventId": f"{s.sid}:{s.seq}"}
        self.sent.setdefault(s.sid, []).append(event)
        for sock in list(s.sockets):
            if not sock.closed:
                await sock.send_str(json.dumps(event))

    async def _run(self, request: web.Request, ws: web.WebSocketResponse, sid: str, run_id: str, input: dict[str, Any],
                   mode: str) -> None:
        s = self.session(sid)
        mid = f"m-{run_id}"
        s.messages.append({"id": f"u-{run_id}", "role": "user", "runId": run_id, "text": str(input.get("text", ""))})
        answer = {"id": f"h-{run_id}" if mode == "remint" else mid, "role": "assistant", "runId": run_id, "text": ""}
        s.messages.append(answer)
        s.runs[run_id] = {"status": "running"}
        await self._publish(s, run_id, {"type": "run.started"})
        for i, piece in enumerate(PIECES):
            await asyncio.sleep(PACE)
            answer["text"] += piece
            await self._publish(s, run_id, {"type": "text.delta", "messageId": mid, "delta": piece})
            if i == 1 and mode == "stop":
                stop = self.stops.setdefault(run_id, asyncio.Event())
                await asyncio.wait_for(stop.wait(), 10)
                for extra in (" despite", " the stop"):
                    await asyncio.sleep(PACE)
                    answer["text"] += extra
                    await self._publish(s, run_id, {"type": "text.delta", "messageId": mid, "delta": extra})
            if i == 1 and mode == "drop":
                # once the client says it has the second delta (nothing in flight)
                ping = self.stops.setdefault(f"ping:{run_id}", asyncio.Event())
                await asyncio.wait_for(ping.wait(), 10)
                transport = request.transport
                if transport is not None:
                    transport.abort()  # no close frame: the client should see an abnormal close
                return
        await asyncio.sleep(PACE)
        if mode == "fail":
            error = {"code": "quota_exceeded", "message": "The model quota is used up."}
            s.runs[run_id] = {"status": "failed", "error": error}
            await self._publish(s, run_id, {"type": "run.failed", "error": error})
            return
        s.runs[run_id] = {"status": "completed"}
        if mode == "noend":
            return
        if mode == "late":
            answer["text"] += " (late)"
        await self._publish(s, run_id, {"type": "run.completed"})
        if mode == "late":
            await asyncio.sleep(PACE)
            await self._publish(s, run_id, {"type": "text.delta", "messageId": mid, "delta": " (late)"})


@contextmanager
def shared_socket_backend() -> Iterator[SharedSocketBackend]:
    b = SharedSocketBackend()
    b.start()
    try:
        yield b
    finally:
        b.stop()
