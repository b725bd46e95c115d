"""The demo backend: the seed's "my protocol" over real HTTP, with bugs you can switch on.

An aiohttp server (``chatkit-trace demo-backend``, and what ``chatkit-trace
demo`` records) that speaks :mod:`chatkit_trace.examples.my_protocol`:

=======================================================  ====================================
``POST /sessions/{sid}/runs``  ``{runId?, text}``        run: an SSE stream of the run
``GET  /sessions/{sid}/runs/{rid}/events?after=ID``      resume after event ``ID`` (or the
                                                         ``Last-Event-ID`` header)
``POST /sessions/{sid}/runs/{rid}/stop``                 stop: 204, the run ends interrupted
``GET  /sessions/{sid}/runs``                            history ``{"runs": [{id, status,
                                                         input, created_at, frames, error?}]}``
``GET  /sessions/{sid}/events``, ``GET /events?sessionId=``  the session's subscription: every
                                                         event of every run, each with ``run``
``POST /send`` ``{sessionId, runId?, text}``             start a run whose answer comes only
                                                         through the subscription (202)
``GET|PUT /_demo/sessions/{sid}``                        read or set a session's options (JSON)
``GET /``                                                what this server speaks (JSON)
=======================================================  ====================================

Every event is ``id: e<N>`` plus ``data: <JSON>``; ``N`` counts the run's
events from ``e0`` (``started``).  The backend stores the frames it sends and
history returns them, so history is isomorphic with the live stream.

**Scenario by keyword** in the user's text (first match): ``fail`` (a
remote failure), ``slow`` (one chunk of text, then nothing until stopped),
``long`` or ``story`` (a longer answer with a tool call whose result takes
``hold`` ms, and waits for a reader if the run's stream was cut and nobody
resumed yet: made for cutting and resuming), ``tool`` (one tool call), else
a text answer.

**Options per session**, so one process serves a clean session next to
buggy ones: the session id is split on ``+`` and every part that names an
option switches it on (``clean``, ``history-ids+1``, ``resume-skip+cut=6+lag=3``);
other parts are just labels.  ``PUT /_demo/sessions/{sid}`` with a JSON
object sets the same options for a session id that does not spell them.

Bugs (each off by default; the finding each one produces):

* ``history-ids``: history lists each run under a server id
  (``run_<hash>``), not the run id the live stream used (CK201, CK202);
* ``late-chunk``: one more text chunk right after ``done`` (CK101);
* ``no-end``: the stream ends cleanly without ``done``/``error`` and the
  run stays ``running`` in history forever (CK102);
* ``done-marker``: ``data: [DONE]`` instead of the ``done`` event (CK104);
* ``tool-unsettled``: the tool call never gets its ``tool_result`` but the
  run completes (CK105);
* ``stop-ignored``: a stop is answered 204 but the run goes on, silently,
  and never ends (CK106);
* ``resume-shuffle``: a resume replays its first two events swapped (CK404);
* ``resume-skip``: a resume skips the first event after the cursor (CK404).

Behaviour (not bugs): ``cut=N`` resets the connection of a run's first
stream after ``N`` events (CK103 records it; resume to recover),
``close=N`` ends that stream cleanly after ``N`` events instead (the way a
proxy's response timeout does), ``lag=N`` makes history of a *running* run
list all but its last ``N`` frames (a write-behind store, so a reloaded
page resumes from an event it has already seen), ``pace=MS`` the delay
before each event (server default ``--pace-ms``), ``hold=MS`` how long the
``long`` scenario's tool takes, ``scenario=KIND`` plays that scenario
whatever the text says (for suites that always send the same text).  ``cut`` and ``close`` only act on a stream
that still has events to send after the ``N``-th.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from aiohttp import web

from ..errors import UsageError

__all__ = [
    "BEHAVIOURS",
    "BUGS",
    "DemoBackend",
    "SessionOptions",
    "add_parser",
    "parse_options",
    "run",
    "running_backend",
    "scenario_for",
    "script",
    "serve",
    "sse",
]

#: bug option -> (finding codes it produces, what it does).
BUGS: dict[str, tuple[str, str]] = {
    "history-ids": ("CK201 CK202", "history lists each run under a server id, not the live run id"),
    "late-chunk": ("CK101", "one more text chunk right after the done event"),
    "no-end": (
        "CK102",
        "the stream ends cleanly without a conclusion; history says running forever",
    ),
    "done-marker": ("CK104", "data: [DONE] instead of the done event"),
    "tool-unsettled": ("CK105", "the tool call never gets a result, yet the run completes"),
    "stop-ignored": ("CK106", "stop is answered 204 but the run never ends"),
    "resume-shuffle": ("CK404", "a resume replays its first two events swapped"),
    "resume-skip": ("CK404", "a resume skips the first event after the cursor"),
}

#: numeric option -> what it does.
BEHAVIOURS: dict[str, str] = {
    "cut": "reset the connection of a run's first stream after N events",
    "close": "end a run's first stream cleanly after N events",
    "lag": "history of a running run lists all but its last N frames",
    "pace": "milliseconds before each event",
    "hold": "milliseconds the long scenario's tool takes",
}

SCENARIOS = ("text", "tool", "fail", "slow", "long")


@dataclass(frozen=True)
class SessionOptions:
    """What one session does: bugs (off by default) and behaviours."""

    history_ids: bool = False
    late_chunk: bool = False
    no_end: bool = False
    done_marker: bool = False
    tool_unsettled: bool = False
    stop_ignored: bool = False
    resume_shuffle: bool = False
    resume_skip: bool = False
    cut: int = 0
    close: int = 0
    lag: int = 0
    pace: float | None = None
    hold: float | None = None
    #: every run of the session plays this scenario, whatever the text says
    scenario: str | None = None

    def bugs(self) -> list[str]:
        return [name for name in BUGS if getattr(self, name.replace("-", "_"))]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"bugs": self.bugs()}
        for name in BEHAVIOURS:
            value = getattr(self, name)
            if value:
                out[name] = value
        if self.scenario:
            out["scenario"] = self.scenario
        return out


def _number(name: str, value: Any) -> float:
    try:
        n = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"option {name} needs a number, not {value!r}") from None
    if n < 0:
        raise ValueError(f"option {name} must be >= 0, not {value!r}")
    return n


def parse_options(session_id: str) -> SessionOptions:
    """The options a session id spells: its ``+``-separated parts naming an option."""
    values: dict[str, Any] = {}
    for part in session_id.split("+"):
        name, eq, value = part.partition("=")
        if not eq and name in BUGS:
            values[name.replace("-", "_")] = True
        elif eq and name in BEHAVIOURS:
            try:
                n = _number(name, value)
            except ValueError:
                continue  # a label that happens to look like an option
            values[name] = n if name in ("pace", "hold") else int(n)
        elif eq and name == "scenario" and value in SCENARIOS:
            values["scenario"] = value
    return SessionOptions(**values)


def options_from_json(value: Any, base: SessionOptions | None = None) -> SessionOptions:
    """``{"bugs": [...], "cut": 6, ...}`` -> options (raises ValueError on anything unknown)."""
    if not isinstance(value, Mapping):
        # a bad request body: a ValueError like the others (answered 400)
        raise ValueError('expected a JSON object like {"bugs": ["late-chunk"], "cut": 6}')  # noqa: TRY004
    values: dict[str, Any] = (
        {f.name: getattr(base, f.name) for f in fields(SessionOptions)} if base else {}
    )
    for key, item in value.items():
        if key == "bugs":
            if not isinstance(item, list) or not all(isinstance(b, str) for b in item):
                raise ValueError("bugs must be a list of bug names")
            for b in BUGS:
                values[b.replace("-", "_")] = False
            for b in item:
                if b not in BUGS:
                    raise ValueError(f"unknown bug {b!r}; known: {', '.join(BUGS)}")
                values[b.replace("-", "_")] = True
        elif key == "scenario":
            if item is not None and item not in SCENARIOS:
                raise ValueError(f"unknown scenario {item!r}; known: {', '.join(SCENARIOS)}")
            values["scenario"] = item
        elif key in BEHAVIOURS:
            if item is None:
                values[key] = None if key in ("pace", "hold") else 0
            else:
                n = _number(key, item)
                values[key] = n if key in ("pace", "hold") else int(n)
        else:
            raise ValueError(
                f"unknown option {key!r}; known: bugs, scenario, {', '.join(BEHAVIOURS)}"
            )
    return SessionOptions(**values)


# ---------------------------------------------------------------------- scenarios


def scenario_for(text: str) -> str:
    """The scenario a user's text asks for (keywords, first match wins)."""
    t = text.lower()
    if "fail" in t:
        return "fail"
    if "slow" in t:
        return "slow"
    if "long" in t or "story" in t:
        return "long"
    if "tool" in t:
        return "tool"
    return "text"


#: a step: (event, delay kind) where the kind is "pace" or "hold"; None = wait until stopped.
Step = tuple[dict[str, Any], str] | None


def script(kind: str, text: str = "", opts: SessionOptions = SessionOptions()) -> list[Step]:
    # long-function: a scenario's events in order, each bug switched in where it happens
    """The events of a scenario after ``started`` (with the session's bugs applied)."""
    if kind == "fail":
        steps: list[Step] = [
            ({"type": "text", "text": "Let me think"}, "pace"),
            (
                {
                    "type": "error",
                    "code": "RATE_LIMITED",
                    "message": "Too many requests, try again in a minute",
                    "retryable": True,
                },
                "pace",
            ),
        ]
    elif kind == "slow":
        # One chunk, then nothing until stopped: no output can race the stop's acknowledgement.
        steps = [({"type": "text", "text": "Working on it…"}, "pace"), None]
    elif kind == "tool":
        steps = [
            ({"type": "text", "text": "Let me look that up."}, "pace"),
            ({"type": "tool", "id": "call-1", "name": "lookup", "args": {"q": text[:40]}}, "pace"),
            (
                {
                    "type": "tool_result",
                    "id": "call-1",
                    "result": {"hits": 1, "title": "chatkit-trace"},
                },
                "pace",
            ),
            ({"type": "text", "text": "Found 1 result: chatkit-trace."}, "pace"),
            ({"type": "done"}, "pace"),
        ]
    elif kind == "long":
        steps = [
            ({"type": "text", "text": "Once upon a time"}, "pace"),
            ({"type": "text", "text": ", a proxy"}, "pace"),
            ({"type": "text", "text": " recorded"}, "pace"),
            ({"type": "text", "text": " every frame."}, "pace"),
            (
                {
                    "type": "tool",
                    "id": "call-1",
                    "name": "lookup_ending",
                    "args": {"story": "proxy"},
                },
                "pace",
            ),
            ({"type": "tool_result", "id": "call-1", "result": {"ending": "happy"}}, "hold"),
            ({"type": "text", "text": " It lived happily"}, "pace"),
            ({"type": "text", "text": " ever after."}, "pace"),
            ({"type": "done"}, "pace"),
        ]
    else:
        said = text.strip() or "nothing"
        steps = [
            ({"type": "text", "text": "You said: "}, "pace"),
            ({"type": "text", "text": f"“{said[:60]}”."}, "pace"),
            ({"type": "text", "text": " This answer streamed through chatkit-trace."}, "pace"),
            ({"type": "done"}, "pace"),
        ]
    if opts.tool_unsettled:
        steps = [s for s in steps if s is None or s[0]["type"] != "tool_result"]
    if opts.no_end or opts.done_marker:
        steps = [s for s in steps if s is None or s[0]["type"] not in ("done", "error")]
    return steps


def sse(frame_id: str | None, event: Any) -> bytes:
    """One SSE event: ``id:`` + ``data:`` (``event`` is JSON, or a raw string like ``[DONE]``)."""
    head = f"id: {frame_id}\n" if frame_id is not None else ""
    data = (
        event
        if isinstance(event, str)
        else json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    )
    return (head + "data: " + data + "\n\n").encode("utf-8")


TERMINAL = ("done", "error")


# ---------------------------------------------------------------------- state


@dataclass
class Run:
    id: str
    session: Session
    input: str
    scenario: str
    created_at: int
    history_id: str
    status: str = "running"
    frames: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, str] | None = None
    #: the stream ends here although the run may not have concluded (no-end, done-marker)
    closed: bool = False
    marker: bool = False
    stop_requested: bool = False
    task: asyncio.Task[None] | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    streams: int = 0
    #: streams writing this run right now
    attached: int = 0

    @property
    def ended(self) -> bool:
        return self.closed or self.status != "running"

    def notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self) -> None:
        await self._changed.wait()

    def append(self, event: dict[str, Any]) -> dict[str, Any]:
        frame = {"id": f"e{len(self.frames)}", "event": event}
        self.frames.append(frame)
        if event.get("type") == "done":
            self.status = "completed"
        elif event.get("type") == "error":
            self.status = "failed"
            self.error = {
                "code": str(event.get("code", "")),
                "message": str(event.get("message", "")),
            }
        self.session.publish(self, frame)
        self.notify()
        return frame

    def to_history(self, lag: int) -> dict[str, Any]:
        frames = self.frames
        if self.status == "running" and lag:
            frames = frames[: max(1, len(frames) - lag)]
        out: dict[str, Any] = {
            "id": self.history_id,
            "status": self.status,
            "input": self.input,
            "created_at": self.created_at,
            "frames": frames,
        }
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass
class Session:
    id: str
    options: SessionOptions
    runs: dict[str, Run] = field(default_factory=dict)
    listeners: set[asyncio.Queue[tuple[Run, dict[str, Any]] | None]] = field(default_factory=set)

    def publish(self, run: Run, frame: dict[str, Any]) -> None:
        for q in self.listeners:
            q.put_nowait((run, frame))


class DemoBackend:
    """The demo backend's state and routes (``app()`` builds the aiohttp application)."""

    def __init__(
        self, *, pace_ms: float = 5.0, hold_ms: float = 300.0, unwatched_s: float = 30.0
    ) -> None:
        self.pace_ms = pace_ms
        self.hold_ms = hold_ms
        self.unwatched_s = unwatched_s
        self.sessions: dict[str, Session] = {}
        self._configured: dict[str, SessionOptions] = {}
        self._minted = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = asyncio.Event()

    # -- state -------------------------------------------------------------------

    def session(self, sid: str) -> Session:
        s = self.sessions.get(sid)
        if s is None:
            opts = self._configured.get(sid) or parse_options(sid)
            s = self.sessions[sid] = Session(sid, opts)
        return s

    def start_run(self, sid: str, run_id: str | None, text: str) -> Run:
        s = self.session(sid)
        if not run_id:
            self._minted += 1
            run_id = f"r{self._minted}"
        if run_id in s.runs:
            raise web.HTTPConflict(
                text=json.dumps({"error": f"run {run_id} exists"}), content_type="application/json"
            )
        history_id = (
            f"run_{hashlib.sha1(run_id.encode()).hexdigest()[:10]}"
            if s.options.history_ids
            else run_id
        )
        kind = s.options.scenario or scenario_for(text)
        run = Run(run_id, s, text, kind, int(time.time() * 1000), history_id)
        s.runs[run_id] = run
        run.append({"type": "started", "run": run_id})
        run.task = asyncio.ensure_future(self._produce(run, script(kind, text, s.options)))
        self._tasks.add(run.task)
        run.task.add_done_callback(self._tasks.discard)
        return run

    def _delay(self, run: Run, kind: str) -> float:
        o = run.session.options
        if kind == "hold":
            return (o.hold if o.hold is not None else self.hold_ms) / 1000.0
        return (o.pace if o.pace is not None else self.pace_ms) / 1000.0

    async def _produce(self, run: Run, steps: list[Step]) -> None:
        o = run.session.options
        for step in steps:
            if step is None:  # slow: nothing more until stopped
                await asyncio.Event().wait()
                return
            event, delay = step
            await asyncio.sleep(self._delay(run, delay))
            if delay == "hold":
                await self._until_watched(run)
            if run.ended:
                return
            run.append(dict(event))
        if o.done_marker:
            run.marker = True
            run.status = "completed"  # the backend believes it finished
            run.notify()
        elif run.status == "running":
            run.closed = True  # no-end: the stream stops, the run stays running
            run.notify()

    async def _until_watched(self, run: Run) -> None:
        """A held step waits for a reader when nobody watches the run (its stream was cut
        and the client has not resumed yet), up to ``unwatched_s``: so a resume always
        finds the run still going, however slow the client."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.unwatched_s
        while not run.attached and not run.session.listeners and loop.time() < deadline:
            await asyncio.sleep(0.01)

    def stop(self, run: Run) -> None:
        run.stop_requested = True
        if run.session.options.stop_ignored or run.status != "running":
            return
        if run.task is not None:
            run.task.cancel()
        run.status = "interrupted"
        run.notify()

    def history(self, sid: str) -> dict[str, Any]:
        s = self.session(sid)
        return {"runs": [r.to_history(s.options.lag) for r in s.runs.values()]}

    # -- streams -----------------------------------------------------------------

    async def _write_frames(
        self, request: web.Request, run: Run, start: int, *, first: bool, resume: bool
    ) -> web.StreamResponse:
        o = run.session.options
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        run.streams += 1
        run.attached += 1
        limit = (o.cut or o.close) if first else 0
        written = 0
        pending: list[dict[str, Any]] = []
        i = start
        if resume:
            # The replay: everything after the cursor the run has so far; then live.
            pending = list(run.frames[start:])
            i = len(run.frames)
            if o.resume_skip and pending:
                pending = pending[1:]
            if o.resume_shuffle and len(pending) >= 2:
                pending[0], pending[1] = pending[1], pending[0]
        try:
            while True:
                if pending:
                    batch, pending = pending, []
                else:
                    batch, i = run.frames[i:], len(run.frames)
                if not batch:
                    if run.ended:
                        break
                    await run.changed()
                    continue
                for frame in batch:
                    kind = frame["event"].get("type")
                    data = sse(frame["id"], frame["event"])
                    if o.late_chunk and kind == "done":
                        data += sse(
                            f"e{len(run.frames)}", {"type": "text", "text": " (one more thing)"}
                        )
                    await resp.write(data)
                    written += 1
                    last = kind in TERMINAL or (run.ended and frame is run.frames[-1])
                    if limit and written == limit and not last:
                        if o.cut:
                            _reset(request)
                        else:
                            await resp.write_eof()
                        return resp  # (finally: detached)
            if run.marker:
                await resp.write(sse(None, "[DONE]"))
            await resp.write_eof()
        except ConnectionResetError:
            pass  # the client went away
        finally:
            run.attached -= 1
        return resp

    # -- routes ------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application()
        r = app.router
        r.add_get("/", self.h_index)
        r.add_get("/healthz", self.h_health)
        r.add_post("/sessions/{sid}/runs", self.h_run)
        r.add_get("/sessions/{sid}/runs", self.h_history)
        r.add_get("/sessions/{sid}/runs/{rid}/events", self.h_resume)
        r.add_post("/sessions/{sid}/runs/{rid}/stop", self.h_stop)
        r.add_get("/sessions/{sid}/events", self.h_subscribe)
        r.add_get("/events", self.h_subscribe)
        r.add_post("/send", self.h_send)
        r.add_get("/_demo/sessions/{sid}", self.h_options)
        r.add_put("/_demo/sessions/{sid}", self.h_options)
        app.on_shutdown.append(self._on_shutdown)
        return app

    async def _on_shutdown(self, app: web.Application) -> None:
        self._closing.set()
        for s in self.sessions.values():
            for q in list(s.listeners):
                q.put_nowait(None)
            for run in s.runs.values():
                run.closed = True
                run.notify()
        for t in list(self._tasks):
            t.cancel()

    async def h_index(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "protocol": "myproto",
                "routes": [
                    "POST /sessions/{sid}/runs {runId?, text}",
                    "GET /sessions/{sid}/runs/{rid}/events?after=EVENT_ID",
                    "POST /sessions/{sid}/runs/{rid}/stop",
                    "GET /sessions/{sid}/runs",
                    "GET /sessions/{sid}/events",
                    "GET /events?sessionId=SID",
                    "POST /send {sessionId, runId?, text}",
                    "GET|PUT /_demo/sessions/{sid}",
                ],
                "scenarios": {
                    "fail": "fail",
                    "slow": "slow",
                    "long": "long or story",
                    "tool": "tool",
                    "text": "anything else",
                },
                "bugs": {k: {"codes": v[0], "does": v[1]} for k, v in BUGS.items()},
                "options": {
                    **BEHAVIOURS,
                    "scenario": "every run of the session plays this scenario",
                },
            }
        )

    async def h_health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            raise _bad("the body must be JSON") from None
        if not isinstance(body, dict) or not isinstance(body.get("text", ""), str):
            raise _bad('the body must be {"runId"?: string, "text": string}')
        return body

    async def h_run(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        run_id = body.get("runId")
        run = self.start_run(
            request.match_info["sid"], str(run_id) if run_id else None, body.get("text", "")
        )
        return await self._write_frames(request, run, 0, first=True, resume=False)

    async def h_send(self, request: web.Request) -> web.Response:
        # Accepted, no body: the answer comes through the subscription (R2.2).
        body = await self._body(request)
        sid = body.get("sessionId")
        if not isinstance(sid, str) or not sid:
            raise _bad("sessionId is required")
        run_id = body.get("runId")
        self.start_run(sid, str(run_id) if run_id else None, body.get("text", ""))
        return web.Response(status=202)

    def _run(self, request: web.Request) -> Run:
        s = self.sessions.get(request.match_info["sid"])
        run = s.runs.get(request.match_info["rid"]) if s else None
        if run is None:
            raise web.HTTPNotFound(
                text=json.dumps({"error": "no such run"}), content_type="application/json"
            )
        return run

    async def h_resume(self, request: web.Request) -> web.StreamResponse:
        run = self._run(request)
        after = request.query.get("after") or request.headers.get("Last-Event-ID")
        start = 0
        if after:
            ids = [f["id"] for f in run.frames]
            if after not in ids:
                raise web.HTTPNotFound(
                    text=json.dumps({"error": f"unknown event id {after}"}),
                    content_type="application/json",
                )
            start = ids.index(after) + 1
        return await self._write_frames(request, run, start, first=False, resume=True)

    async def h_stop(self, request: web.Request) -> web.Response:
        self.stop(self._run(request))
        return web.Response(status=204)

    async def h_history(self, request: web.Request) -> web.Response:
        return web.json_response(self.history(request.match_info["sid"]))

    async def h_subscribe(self, request: web.Request) -> web.StreamResponse:
        sid = request.match_info.get("sid") or request.query.get("sessionId")
        if not sid:
            raise _bad("sessionId is required")
        s = self.session(sid)
        q: asyncio.Queue[tuple[Run, dict[str, Any]] | None] = asyncio.Queue()
        s.listeners.add(q)
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        try:
            await resp.prepare(request)
            await resp.write(b": subscribed\n\n")
            while True:
                item = await q.get()
                if item is None:
                    break
                run, frame = item
                await resp.write(sse(frame["id"], {**frame["event"], "run": run.id}))
            await resp.write_eof()
        except ConnectionResetError:
            pass  # the client went away
        finally:
            s.listeners.discard(q)
        return resp

    async def h_options(self, request: web.Request) -> web.Response:
        sid = request.match_info["sid"]
        if request.method == "PUT":
            try:
                body = await request.json()
                opts = options_from_json(body, self._configured.get(sid) or parse_options(sid))
            except ValueError as err:
                raise _bad(str(err)) from None
            self._configured[sid] = opts
            if sid in self.sessions:
                self.sessions[sid].options = opts
        s = self.sessions.get(sid)
        opts = s.options if s else (self._configured.get(sid) or parse_options(sid))
        return web.json_response({"session": sid, **opts.to_json()})


def _bad(message: str) -> web.HTTPBadRequest:
    return web.HTTPBadRequest(text=json.dumps({"error": message}), content_type="application/json")


def _reset(request: web.Request) -> None:
    """Drop the connection without ending the response (a reset, not a clean end)."""
    transport = request.transport
    if transport is not None:
        transport.abort()


# ---------------------------------------------------------------------- serving


@contextlib.asynccontextmanager
async def running_backend(
    host: str = "127.0.0.1", port: int = 0, *, pace_ms: float = 5.0, hold_ms: float = 300.0
) -> AsyncIterator[tuple[str, DemoBackend]]:
    """Serve a :class:`DemoBackend` on ``host:port`` (0: a free port); yields ``(url, backend)``."""
    backend = DemoBackend(pace_ms=pace_ms, hold_ms=hold_ms)
    runner = web.AppRunner(
        backend.app(), access_log=None, handle_signals=False, shutdown_timeout=0.5
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    bound = sockets[0].getsockname()[1] if sockets else port
    try:
        yield f"http://{host}:{bound}", backend
    finally:
        await runner.cleanup()


async def serve(host: str, port: int, *, pace_ms: float, hold_ms: float) -> None:
    async with running_backend(host, port, pace_ms=pace_ms, hold_ms=hold_ms) as (url, _backend):
        print(f"chatkit-trace demo backend (myproto) on {url}; Ctrl-C to stop", flush=True)
        print(
            f"  record it: chatkit-trace record --profile myproto --upstream {url} --port 9000 --db demo.db",
            flush=True,
        )
        print(
            f"  bugs per session id, e.g. POST {url}/sessions/late-chunk/runs: {', '.join(BUGS)}",
            flush=True,
        )
        await asyncio.Event().wait()


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo-backend",
        help="serve the demo backend (chatkit's example protocol, with switchable bugs) until Ctrl-C",
        description="Serve the demo chat backend that `chatkit-trace demo` records: the seed's example protocol "
        "(profile myproto) with resume, history, stop and a session subscription. The user's text picks the "
        "scenario: 'fail', 'slow' (until stopped), 'long' or 'story' (a tool call to cut and resume around), "
        "'tool', else a text answer. Bugs are switched on per "
        "session by naming them in the session id, split on '+' (e.g. late-chunk, resume-skip+cut=6+lag=3): "
        + ", ".join(f"{k} ({v[0]})" for k, v in BUGS.items())
        + "; behaviours: "
        + ", ".join(f"{k}=N ({v})" for k, v in BEHAVIOURS.items())
        + ", scenario=KIND (every run plays KIND). GET / lists it all as JSON.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port (default 0: a free one, printed)")
    p.add_argument(
        "--pace-ms",
        type=float,
        default=5.0,
        metavar="MS",
        help="delay before each event (default 5)",
    )
    p.add_argument(
        "--hold-ms",
        type=float,
        default=300.0,
        metavar="MS",
        help="how long the long scenario's tool takes (default 300)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:

    if not 0 <= args.port < 65536:
        raise UsageError(f"--port must be between 0 and 65535, not {args.port}")
    if args.pace_ms < 0 or args.hold_ms < 0:
        raise UsageError("--pace-ms and --hold-ms must be >= 0")
    try:
        asyncio.run(serve(args.host, args.port, pace_ms=args.pace_ms, hold_ms=args.hold_ms))
    except OSError as err:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {err}") from None
    return 0
