"""A real aiohttp backend of the ``myproto`` preset's *separate endpoints* shape.

chatkit's second way to send and receive: ``POST /api/chat/send`` starts a
run (``202 {"runId": …}``: the client mints the run id, the backend mints
one when the body has none), and one long-lived subscription per session,
``GET /api/chat/events?sessionId=S``, carries every event of every run of
the session, runs other clients started included.  Every event is one SSE
``id:`` (a session-wide counter: 1, 2, 3 …) plus one ``data:`` JSON line
naming its run (``{"type": "text", "run": "r1", "text": "One "}``); the
stream opens with ``retry:`` so a browser's ``EventSource`` reconnects
quickly, and a reconnect's ``Last-Event-ID`` (or ``?lastEventId=``) is
honoured: the stream replays the session's events after that id, then goes
on live.  ``GET /api/chat/sessions/{sid}/runs`` is the history
(``{"runs": [{id, status, input, created_at, frames: [{id, event}]}]}``).

Options per session (``PUT /_test/sessions/{sid}``, JSON):

* ``close_after``: event ids after which the subscription stream ends
  cleanly (the server closes it: an ``EventSource`` reconnects by itself);
* ``mode``: what a reconnect replays: ``correct`` (everything after the
  cursor), ``replay`` (the bug: from the start of the session, ignoring the
  cursor) or ``skip`` (the bug: the first event after the cursor is lost);
* ``answer``: the text chunks every run answers with;
* ``pace``: seconds between a run's events;
* ``input_on_start``: the ``started`` event carries the run's input (how
  the protocol can carry another client's input);
* ``history_answer``: the bug: history keeps these text chunks instead of
  the ones the stream sent (a refresh changes the answer: CK201).

``GET /page?sid=S`` is a page that subscribes with a real ``EventSource``
and sends with ``fetch`` (``window.send(runId, text)``,
``window.readHistory()``); what it received is in ``window.got``.
The backend runs on its own event loop in a thread, listening on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .backend import ServerThread

MODES = ("correct", "replay", "skip")
RETRY_MS = 200

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>subscription</title></head>
<body><pre id="log"></pre>
<script>
const sid = new URLSearchParams(location.search).get("sid");
window.got = []; window.opens = 0; window.errors = 0; window.sends = [];
const es = new EventSource("/api/chat/events?sessionId=" + encodeURIComponent(sid));
window.es = es;
es.onopen = () => { window.opens += 1; };
es.onerror = () => { window.errors += 1; };
es.onmessage = (e) => {
  const data = JSON.parse(e.data);
  window.got.push({id: e.lastEventId, data});
  document.getElementById("log").textContent += e.lastEventId + " " + e.data + "\\n";
};
window.send = async (runId, text) => {
  const body = {sessionId: sid, text};
  if (runId) body.runId = runId;
  const r = await fetch("/api/chat/send", {method: "POST", headers: {"content-type": "application/json"},
                                           body: JSON.stringify(body)});
  const reply = r.status === 202 ? await r.json() : null;
  window.sends.push({status: r.status, reply});
  return reply;
};
window.readHistory = async () => (await fetch("/api/chat/sessions/" + encodeURIComponent(sid) + "/runs")).json();
window.doneOf = (run) => window.got.some((e) => e.data.run === run && e.data.type === "done");
</script></body></html>
"""


@dataclass
class Options:
    close_after: list[int] = field(default_factory=list)
    mode: str = "correct"
    answer: list[str] = field(default_factory=lambda: ["One ", "two ", "three"])
    pace: float = 0.02
    input_on_start: bool = False
    history_answer: list[str] | None = None


@dataclass
class Run:
    id: str
    input: str
    created_at: int
    status: str = "running"
    frames: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Session:
    id: str
    options: Options = field(default_factory=Options)
    #: every event of the session: (id, event with its run)
    log: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    runs: dict[str, Run] = field(default_factory=dict)
    listeners: set[asyncio.Queue[tuple[int, dict[str, Any]] | None]] = field(default_factory=set)
    closed_at: set[int] = field(default_factory=set)


def sse(eid: int, event: dict[str, Any]) -> bytes:
    return f"id: {eid}\ndata: {json.dumps(event)}\n\n".encode()


class SubscriptionBackend(ServerThread):
    """The server (see the module docstring); use :func:`subscription_backend`."""

    name = "subscription-backend"

    def __init__(self) -> None:
        super().__init__()
        self.sessions: dict[str, Session] = {}
        #: every subscription request: (session, cursor it carried, mode applied)
        self.subscriptions: list[tuple[str, str | None, str]] = []

    # -- lifecycle ---------------------------------------------------------------------

    def routes(self, r: web.UrlDispatcher) -> None:
        r.add_get("/page", self.page)
        r.add_post("/api/chat/send", self.send)
        r.add_get("/api/chat/events", self.events)
        r.add_get("/api/chat/sessions/{sid}/runs", self.history)
        r.add_put("/_test/sessions/{sid}", self.set_options)

    async def closing(self) -> None:
        for s in self.sessions.values():
            for q in list(s.listeners):
                q.put_nowait(None)
        await super().closing()

    def configure(self, sid: str, **options: Any) -> None:
        """Set a session's options from the test's thread."""

        async def _set() -> None:
            s = self.session(sid)
            s.options = Options(**{**s.options.__dict__, **options})

        asyncio.run_coroutine_threadsafe(_set(), self.loop).result(10)

    def start_run_direct(self, sid: str, run_id: str, text: str) -> None:
        """A run another client started (not through the proxy): a passive run for the page."""
        asyncio.run_coroutine_threadsafe(self._start_run(sid, run_id, text), self.loop).result(10)

    # -- the session's event sequence -------------------------------------------------

    def session(self, sid: str) -> Session:
        s = self.sessions.get(sid)
        if s is None:
            s = self.sessions[sid] = Session(sid)
        return s

    def _emit(self, s: Session, run: Run, event: dict[str, Any]) -> None:
        eid = len(s.log) + 1
        event = {**event, "run": run.id}
        s.log.append((eid, event))
        run.frames.append({"id": str(eid), "event": {k: v for k, v in event.items() if k != "run"}})
        for q in list(s.listeners):
            q.put_nowait((eid, event))

    async def _start_run(self, sid: str, run_id: str, text: str) -> Run:
        s = self.session(sid)
        run = s.runs[run_id] = Run(run_id, text, int(time.time() * 1000))
        task = asyncio.ensure_future(self._play(s, run))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return run

    async def _play(self, s: Session, run: Run) -> None:
        o = s.options
        started: dict[str, Any] = {"type": "started"}
        if o.input_on_start:
            started["input"] = {"text": run.input}
        self._emit(s, run, started)
        for chunk in o.answer:
            await asyncio.sleep(o.pace)
            self._emit(s, run, {"type": "text", "text": chunk})
        await asyncio.sleep(o.pace)
        run.status = "completed"
        self._emit(s, run, {"type": "done"})

    # -- handlers ----------------------------------------------------------------------

    async def page(self, request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def send(self, request: web.Request) -> web.Response:
        body = await request.json()
        sid = body.get("sessionId")
        if not isinstance(sid, str) or not sid:
            return web.json_response({"error": "sessionId is required"}, status=400)
        s = self.session(sid)
        run_id = body.get("runId") or f"srv-{len(s.runs) + 1}"
        await self._start_run(sid, str(run_id), str(body.get("text", "")))
        # Accepted: the answer comes through the subscription (R2.2).
        return web.json_response({"runId": run_id}, status=202)

    async def events(self, request: web.Request) -> web.StreamResponse:
        sid = request.query.get("sessionId")
        if not sid:
            return web.json_response({"error": "sessionId is required"}, status=400)
        s = self.session(sid)
        cursor = request.headers.get("Last-Event-ID") or request.query.get("lastEventId")
        mode = s.options.mode if cursor else "correct"
        self.subscriptions.append((sid, cursor, mode))
        # The replay and the registration happen in one step (no await between):
        # nothing the session emits meanwhile is lost or sent twice.
        if cursor is None:
            backlog: list[tuple[int, dict[str, Any]]] = []
        elif mode == "replay":
            backlog = list(s.log)
        else:
            after = int(cursor) + (1 if mode == "skip" else 0)
            backlog = [(i, e) for i, e in s.log if i > after]
        q: asyncio.Queue[tuple[int, dict[str, Any]] | None] = asyncio.Queue()
        for item in backlog:
            q.put_nowait(item)
        s.listeners.add(q)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        try:
            await resp.prepare(request)
            await resp.write(f"retry: {RETRY_MS}\n\n".encode())
            while True:
                item = await q.get()
                if item is None:
                    break
                eid, event = item
                await resp.write(sse(eid, event))
                if eid in s.options.close_after and eid not in s.closed_at:
                    s.closed_at.add(eid)
                    break  # the server ends the stream: the EventSource reconnects by itself
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass  # the client went away, or the server is stopping
        finally:
            s.listeners.discard(q)
        return resp

    async def history(self, request: web.Request) -> web.Response:
        s = self.session(request.match_info["sid"])
        return web.json_response(
            {
                "runs": [
                    {"id": r.id, "status": r.status, "input": r.input, "created_at": r.created_at,
                     "frames": self._history_frames(s, r)}
                    for r in s.runs.values()
                ]
            }
        )

    @staticmethod
    def _history_frames(s: Session, run: Run) -> list[dict[str, Any]]:
        chunks = iter(s.options.history_answer or ())
        out = []
        for f in run.frames:
            if s.options.history_answer is not None and f["event"].get("type") == "text":
                f = {"id": f["id"], "event": {**f["event"], "text": next(chunks, "")}}
            out.append(f)
        return out

    async def set_options(self, request: web.Request) -> web.Response:
        body = await request.json()
        s = self.session(request.match_info["sid"])
        s.options = Options(**{**s.options.__dict__, **body})
        return web.json_response(s.options.__dict__)


@contextmanager
def subscription_backend() -> Iterator[SubscriptionBackend]:
    b = SubscriptionBackend()
    b.start()
    try:
        yield b
    finally:
        b.stop()
