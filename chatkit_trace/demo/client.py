"""The demo's client: chat sessions driven through a URL with a real HTTP client.

Each browser page is a :class:`Page`: its own aiohttp connection pool, an
adapter made the way a user makes a custom one (``create_adapter(MyProtocol(),
run=…, abort=…, resume=…, history=…)`` whose capability functions call the
server, like the seed's ``use-my-adapter.ts``), and a
:class:`~chatkit_trace.runtime.ChatRuntime` driving chatkit's Core.  A reload
is a new page on the same session: it reads history and resumes the run
history reports active (R8.3).

:data:`DEMO_SESSIONS` are the sessions ``chatkit-trace demo`` plays against
the demo backend (:mod:`chatkit_trace.demo.backend`): a clean one, a clean
resume after a reset, and one per bug.  The session id spells its bugs (the
backend reads them from it); :attr:`DemoSession.expect` names the finding
codes (errors and warnings) the recording must show for it and
:attr:`DemoSession.allow` those it may show besides.

Against any URL (the demo backend, or a recording proxy in front of it)::

    python -m chatkit_trace.demo.client http://127.0.0.1:9000
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import aiohttp

from ..adapters import (
    AbortRequestArgs,
    Adapter,
    HistoryRequestArgs,
    ResumeRequestArgs,
    RunRequest,
    create_adapter,
)
from ..examples.my_protocol import MyProtocol
from ..runtime import ChatRuntime, Response

__all__ = [
    "DEMO_SESSIONS",
    "DemoSession",
    "Driver",
    "HttpChat",
    "Page",
    "SessionOutcome",
    "drive",
    "main",
]

STREAM_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=None)


class HttpChat:
    """The capability functions of one page: each calls the server with aiohttp.

    Streams come back as the aiohttp response itself (the runtime reads its
    SSE body); everything else is read at once into a
    :class:`~chatkit_trace.runtime.Response`.  ``send_subscribe`` switches
    ``run`` to ``POST /send`` (202, the answer comes through ``GET
    /events?sessionId=``).
    """

    def __init__(
        self,
        base_url: str,
        http: aiohttp.ClientSession,
        *,
        send_subscribe: bool = False,
        session_suffix: str = "",
    ) -> None:
        self.base = base_url.rstrip("/")
        self.http = http
        self.send_subscribe = send_subscribe
        #: appended to the session id in URLs (``+scenario=tool``: the demo backend's options)
        self.session_suffix = session_suffix
        self.open: list[aiohttp.ClientResponse] = []
        #: completed capability calls by name (run, abort, resume, history, subscribe)
        self.done: Counter[str] = Counter()
        self.in_flight = 0

    def _url(self, *parts: str) -> str:
        return self.base + "/" + "/".join(quote(p, safe="+=") for p in parts)

    def _sid(self, session_id: str) -> str:
        return session_id + self.session_suffix

    async def _call(
        self, name: str, method: str, url: str, *, json: Any = None, stream: bool = False
    ) -> Any:
        self.in_flight += 1
        try:
            resp = await self.http.request(
                method, url, json=json, headers={"Accept": "text/event-stream"} if stream else None
            )
            ctype = resp.headers.get("Content-Type", "")
            if stream and resp.status < 300 and ctype.startswith("text/event-stream"):
                self.open.append(resp)
                return resp
            try:
                body = await resp.read()
            finally:
                resp.release()
            return Response(resp.status, body, dict(resp.headers))
        finally:
            self.in_flight -= 1
            self.done[name] += 1

    async def run(self, req: RunRequest) -> Any:
        body = {
            "runId": req.run_id,
            **(req.body if isinstance(req.body, dict) else {"text": str(req.body)}),
        }
        if self.send_subscribe:
            return await self._call(
                "run",
                "POST",
                self._url("send"),
                json={"sessionId": self._sid(req.session_id), **body},
            )
        return await self._call(
            "run",
            "POST",
            self._url("sessions", self._sid(req.session_id), "runs"),
            json=body,
            stream=True,
        )

    async def abort(self, req: AbortRequestArgs) -> Any:
        return await self._call(
            "abort",
            "POST",
            self._url("sessions", self._sid(req.session_id), "runs", req.run_id, "stop"),
            json={},
        )

    async def resume(self, req: ResumeRequestArgs) -> Any:
        url = (
            self._url("sessions", self._sid(req.session_id), "runs", req.run_id, "events")
            + "?after="
            + quote(req.event_id, safe="")
        )
        return await self._call("resume", "GET", url, stream=True)

    async def history(self, req: HistoryRequestArgs) -> Any:
        return await self._call(
            "history", "GET", self._url("sessions", self._sid(req.session_id), "runs")
        )

    async def subscribe(self, args: Any) -> Any:
        sid = args["sessionId"] if isinstance(args, dict) else args.session_id
        return await self._call(
            "subscribe",
            "GET",
            self.base + "/events?sessionId=" + quote(self._sid(sid), safe=""),
            stream=True,
        )

    def adapter(self) -> Adapter:
        """``createMyAdapter({run, abort, resume, history})``: a custom adapter, made as a user makes one."""
        return create_adapter(
            MyProtocol(),
            run=self.run,
            abort=self.abort,
            resume=self.resume,
            history=self.history,
            subscribe=self.subscribe if self.send_subscribe else None,
        )

    async def close(self) -> None:
        for resp in self.open:
            resp.close()
        self.open.clear()


class Page:
    """One browser page on one chat session (``await Page.open(url, sid)``)."""

    def __init__(
        self, base_url: str, session_id: str, *, send_subscribe: bool = False, first_run: int = 1
    ) -> None:
        self.session_id = session_id
        self._next_run = first_run
        self.http = aiohttp.ClientSession(timeout=STREAM_TIMEOUT)
        self.chat = HttpChat(base_url, self.http, send_subscribe=send_subscribe)
        self.adapter = self.chat.adapter()
        self.runtime = ChatRuntime(self.adapter, session_id)
        self.closed = False

    async def send(self, text: str) -> str:
        """Send ``text`` as a new run; run ids are ``run-1``, ``run-2`` … per session
        (a reloaded page goes on counting), so a re-made demo keeps its fingerprints."""
        run_id = f"run-{self._next_run}"
        self._next_run += 1
        return await self.runtime.send({"text": text}, run_id=run_id)

    async def until(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        """Wait until ``predicate()`` holds; raise ``TimeoutError`` naming ``what``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            if loop.time() > deadline:
                raise TimeoutError(f"session {self.session_id}: timed out waiting for {what}")
            await asyncio.sleep(0.01)

    def status(self, run_id: str) -> str | None:
        """How the run stands in the page's UI, in the one vocabulary
        (:data:`chatkit_trace.trace.RUN_STATUSES`); None: the page does not show it."""
        from ..trace import run_status

        view = self.runtime.core.run_view(run_id)
        return None if view is None else run_status(view.status, view.connection)

    def text_of(self, run_id: str) -> str:
        for m in self.runtime.core.snapshot.messages:
            if m.id == f"assistant:{run_id}":
                return "".join(getattr(p, "text", "") or "" for p in m.parts)
        return ""

    async def settled(self, run_id: str, timeout: float = 10.0) -> str:
        if not await self.runtime.wait_settled(run_id, timeout):
            raise TimeoutError(
                f"session {self.session_id}: run {run_id} did not settle (status {self.status(run_id)})"
            )
        return self.status(run_id) or "?"

    async def quiet(self, timeout: float = 10.0, *, keep: int = 0) -> None:
        """Wait until no capability call is in flight and the runtime's tasks are done
        (``keep``: readers allowed to stay open, e.g. a subscription)."""
        tasks: set[Any] = getattr(self.runtime, "_tasks", set())
        await self.until(
            lambda: self.chat.in_flight == 0 and len(tasks) <= keep, timeout, "the page to go quiet"
        )

    async def close(self) -> None:
        """Close the page: release the runtime (cancels readers) and the connections."""
        if self.closed:
            return
        self.closed = True
        await self.runtime.close()
        await self.chat.close()
        await self.http.close()


# ---------------------------------------------------------------------- sessions


@dataclass
class SessionOutcome:
    session_id: str
    title: str
    expect: tuple[str, ...]
    allow: tuple[str, ...] = ()
    runs: list[tuple[str, str, str | None]] = field(
        default_factory=list
    )  # (run id, what, client status)
    error: str | None = None
    seconds: float = 0.0

    def add(self, page: Page, run_id: str, what: str) -> None:
        """Note what the page's Core shows for ``run_id`` now (None: it does not know the run)."""
        self.runs.append((run_id, what, page.status(run_id)))

    def statuses(self) -> str:
        """``completed, failed, …``: how each run ended in the UI."""
        return ", ".join(status or "not shown" for _, _, status in self.runs)


Steps = Callable[["Driver", "DemoSession", SessionOutcome], Awaitable[None]]


@dataclass(frozen=True)
class DemoSession:
    """One chat session the demo plays: its id spells the backend's bugs."""

    id: str
    title: str
    #: finding codes (errors and warnings) the recording must show for this session
    expect: tuple[str, ...]
    steps: Steps
    #: codes it may show besides (a consequence an analyzer may or may not report)
    allow: tuple[str, ...] = ()

    def accepts(self, found: Iterable[str]) -> bool:
        """Whether ``found`` (error and warning codes) is what this session should produce."""
        got = set(found)
        return set(self.expect) <= got <= set(self.expect) | set(self.allow)


async def _clean(d: Driver, s: DemoSession, out: SessionOutcome) -> None:
    page = d.page(s.id)
    for text, what in (
        ("Hello, who are you?", "text"),
        ("Please use a tool to look it up", "tool"),
        ("This one should fail", "failure"),
    ):
        rid = await page.send(text)
        await page.settled(rid)
        out.add(page, rid, what)
    rid = await page.send("Take it slow")
    await page.until(lambda: page.text_of(rid).endswith("…"), 10, "the slow answer's text")
    await page.runtime.abort(rid)
    await page.settled(rid)
    await page.quiet()
    out.add(page, rid, "stop")
    # The stream is closed after 6 events (close=6): reload the page and resume.
    long_run = await page.send("Tell me a long story")
    await page.quiet()
    page = await d.reload(page)
    await page.runtime.refresh_history()
    await page.runtime.resume_active_run()
    await page.settled(long_run)
    await page.quiet()
    await (
        page.runtime.refresh_history()
    )  # refresh after the run: history must match the live answer
    out.add(page, long_run, "reload + resume after a clean cut")


async def _resume(d: Driver, s: DemoSession, out: SessionOutcome) -> None:
    """A long answer whose connection is reset after 6 events; the page reloads and resumes."""
    page = d.page(s.id)
    rid = await page.send("Tell me a long story")
    await page.quiet()
    page = await d.reload(page)
    await page.runtime.refresh_history()
    await page.runtime.resume_active_run()
    await page.settled(rid)
    await page.quiet()
    await page.runtime.refresh_history()
    out.add(page, rid, "reset, reload, resume")


async def _answer_then_reload(d: Driver, s: DemoSession, out: SessionOutcome) -> None:
    page = d.page(s.id)
    rid = await page.send("Hello, who are you?")
    await page.settled(rid)
    await page.quiet()
    out.add(page, rid, "answer")
    page = await d.reload(page)
    await page.runtime.refresh_history()
    out.add(page, rid, "after a reload")


def _one_run(text: str, what: str) -> Steps:
    async def steps(d: Driver, s: DemoSession, out: SessionOutcome) -> None:
        page = d.page(s.id)
        rid = await page.send(text)
        await page.quiet()
        out.add(page, rid, what)

    return steps


async def _stop_ignored(d: Driver, s: DemoSession, out: SessionOutcome) -> None:
    page = d.page(s.id)
    rid = await page.send("Take it slow")
    await page.until(lambda: page.text_of(rid).endswith("…"), 10, "the slow answer's text")
    await page.runtime.abort(rid)
    # The stop is acknowledged and history read; the stream stays open, silent.
    await page.until(
        lambda: page.chat.done["history"] >= 1 and page.chat.in_flight == 0,
        10,
        "the stop and history",
    )
    out.add(page, rid, "stop (acknowledged, never ends)")


async def _subscribe(d: Driver, s: DemoSession, out: SessionOutcome) -> None:
    page = d.page(s.id, send_subscribe=True)
    await page.runtime.connect()
    for text, what in (
        ("Hello over the subscription", "text via send + subscribe"),
        ("Use a tool", "tool via send + subscribe"),
    ):
        rid = await page.send(text)
        await page.settled(rid)
        out.add(page, rid, what)
    await page.quiet(keep=1)
    await page.runtime.refresh_history()


RESUME = "+cut=6+lag=3"

#: The sessions ``chatkit-trace demo`` plays, in the order it reports them.
DEMO_SESSIONS: tuple[DemoSession, ...] = (
    DemoSession(
        "clean+close=6+lag=3",
        "text, tool, failure, stop, reload + resume after a clean cut, refresh",
        (),
        _clean,
    ),
    DemoSession(
        "subscribe", "send + session subscription (run ids on every event), refresh", (), _subscribe
    ),
    DemoSession(
        "resume" + RESUME,
        "connection reset mid-answer, reload, correct resume",
        ("CK103",),
        _resume,
    ),
    # CK202 when the analyzer pairs the renamed run's messages by content (myproto derives message ids from run ids).
    DemoSession(
        "history-ids",
        "bug: history names runs with server ids",
        ("CK201",),
        _answer_then_reload,
        ("CK202",),
    ),
    DemoSession(
        "late-chunk",
        "bug: a chunk after the done event",
        ("CK101",),
        _one_run("Hello, who are you?", "text"),
    ),
    DemoSession(
        "no-end",
        "bug: the stream stops without a conclusion",
        ("CK102",),
        _one_run("Hello, who are you?", "text"),
    ),
    DemoSession(
        "done-marker",
        "bug: [DONE] instead of the done event",
        ("CK104",),
        _one_run("Hello, who are you?", "text"),
    ),
    DemoSession(
        "tool-unsettled",
        "bug: a tool call that never settles",
        ("CK105",),
        _one_run("Please use a tool", "tool"),
    ),
    DemoSession(
        "stop-ignored", "bug: stop acknowledged, the run never ends", ("CK106",), _stop_ignored
    ),
    DemoSession(
        "resume-shuffle" + RESUME, "bug: resume replays out of order", ("CK103", "CK404"), _resume
    ),
    DemoSession("resume-skip" + RESUME, "bug: resume skips an event", ("CK103", "CK404"), _resume),
)


class Driver:
    """Plays sessions against ``base_url``; pages stay open until :meth:`close`
    (so a stream the backend never ends is still open when the recording stops)."""

    def __init__(self, base_url: str, *, timeout: float = 20.0) -> None:
        self.base_url = base_url
        self.timeout = timeout
        self.pages: list[Page] = []

    def page(self, session_id: str, *, send_subscribe: bool = False) -> Page:
        p = Page(self.base_url, session_id, send_subscribe=send_subscribe)
        self.pages.append(p)
        return p

    async def reload(self, page: Page) -> Page:
        """The user reloads: the old page goes away, a new one opens on the same session."""
        await page.close()
        new = self.page(page.session_id, send_subscribe=page.chat.send_subscribe)
        new._next_run = page._next_run
        return new

    async def play(self, session: DemoSession) -> SessionOutcome:
        out = SessionOutcome(session.id, session.title, session.expect, session.allow)
        started = time.monotonic()
        try:
            await asyncio.wait_for(session.steps(self, session, out), self.timeout)
        except TimeoutError:
            out.error = f"timed out after {self.timeout:.0f} s"
        except Exception as err:  # noqa: BLE001 - one session's failure is reported, the others go on
            out.error = f"{type(err).__name__}: {err}"
        out.seconds = time.monotonic() - started
        return out

    async def play_all(
        self, sessions: Iterable[DemoSession] = DEMO_SESSIONS
    ) -> list[SessionOutcome]:
        """Play ``sessions`` concurrently (each is its own user)."""
        return list(await asyncio.gather(*(self.play(s) for s in sessions)))

    async def close(self) -> None:
        for p in self.pages:
            try:
                await p.close()
            except Exception:  # noqa: BLE001, S110 - closing is best effort
                pass
        self.pages.clear()

    async def __aenter__(self) -> Driver:  # noqa: PYI034
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def drive(
    base_url: str, sessions: Sequence[DemoSession] = DEMO_SESSIONS, *, timeout: float = 20.0
) -> list[SessionOutcome]:
    """Play ``sessions`` against ``base_url`` and close every page."""
    async with Driver(base_url, timeout=timeout) as d:
        return await d.play_all(sessions)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m chatkit_trace.demo.client URL", file=sys.stderr)
        return 2
    outcomes = asyncio.run(drive(args[0]))
    for o in outcomes:
        runs = ", ".join(f"{what}: {status}" for _, what, status in o.runs)
        print(f"{o.session_id:<32} {o.seconds:5.2f}s  {o.error or runs}")
    return 1 if any(o.error for o in outcomes) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
