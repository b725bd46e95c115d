"""``ChatRuntime``: drive a :class:`~chatkit_trace.core.ChatCore` through an adapter, live.

The Core is sans-IO; this is the asyncio loop around it that chatkit's
``ChatCoreRuntime`` + ``createAdapter`` provide in TypeScript: it executes
the Core's requests (dispatch, abort, resume) by calling the adapter's
capability functions, reads the streams they return, decodes every event
through the factory's :class:`~chatkit_trace.adapters.SessionDecoder` and
admits the facts.  Used by the conformance suite (R12), the demo client and
fixtures' scripted backends.

Rules it keeps:

* a direct run stream is read until an event decodes to a terminal update
  (R2.5a); a decode error ends the read (R2.5); a stream that runs dry
  leaves the outcome unknown and only marks the connection (R3.4);
* ``run`` resolving ``False`` or raising means "not accepted"; an accepted
  response (202/204, no body) means the answer comes through ``subscribe``
  (R2.2);
* after a stop is acknowledged and the adapter has ``history``, history is
  read to confirm the outcome (docs/decisions.md, open question 7), and a
  run settled that way has its reader cancelled (R13.5: releasing cancels
  the reader, it never asks the backend to stop);
* ``stop="close"`` is for protocols whose only stop is closing the run's
  stream (AG-UI, stock ADK): the Core gets the abort capability, and a stop
  cancels the run's reader (the backend sees its client go away) instead of
  calling an ``abort`` function; the outcome still comes only from a
  terminal event or history (R9.1).

The scripted backend contract (what capability functions receive and may
return) is documented in ``docs/adapters.md``: ``run`` / ``regenerate`` /
``edit`` get a :class:`~chatkit_trace.adapters.RunRequest`, ``abort`` an
:class:`~chatkit_trace.adapters.AbortRequestArgs`, ``resume`` a
:class:`~chatkit_trace.adapters.ResumeRequestArgs`, ``history`` a
:class:`~chatkit_trace.adapters.HistoryRequestArgs`; streams are a
:class:`Response` (bytes or an async iterator of bytes: SSE) or an async
iterable of events; ``False`` refuses, an exception is a failed call.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from .adapters._factory import Adapter, SessionDecoder
from .adapters._protocol import (
    AbortRequestArgs,
    EncodeContext,
    HistoryRequestArgs,
    ResumeRequestArgs,
    RunRequest,
    StreamEvent,
)
from .core import (
    AbortRequest,
    ChatCore,
    CommandResult,
    DispatchRequest,
    FactResult,
    InvalidMessageError,
    ResumeRequest,
)
from .errors import HTTPStatusError

__all__ = ["ChatRuntime", "Response", "HTTPStatusError", "stream_events"]


@dataclass
class Response:
    """A minimal HTTP response for scripted backends: ``body`` is bytes or an
    async iterable of byte chunks (an SSE stream)."""

    status: int = 200
    body: bytes | AsyncIterable[bytes] = b""
    headers: Mapping[str, str] | None = None

    async def chunks(self) -> AsyncIterator[bytes]:
        if isinstance(self.body, (bytes, bytearray)):
            if self.body:
                yield bytes(self.body)
            return
        async for chunk in self.body:
            yield chunk

    async def json(self) -> Any:
        import json

        data = b"".join([c async for c in self.chunks()])
        return json.loads(data or b"null")


def _is_response(result: Any) -> TypeGuard[Any]:
    return hasattr(result, "status") and (
        hasattr(result, "chunks") or hasattr(getattr(result, "content", None), "iter_any")
    )


async def _response_chunks(resp: Any) -> AsyncIterator[bytes]:
    if hasattr(resp, "chunks"):
        async for c in resp.chunks():
            yield c
    else:  # aiohttp.ClientResponse
        async for c in resp.content.iter_any():
            yield c


async def stream_events(result: Any) -> AsyncIterator[StreamEvent]:
    """Normalise a capability's stream result into :class:`StreamEvent` values.

    Accepts an async iterable of ``StreamEvent`` / ``{"data", "eventId"}`` /
    raw values, or a response-like (``status`` plus ``chunks()`` or aiohttp's
    ``content``) whose body is SSE: each event's ``data`` JSON is the event,
    its ``event:`` field is written into the object and its ``id:`` is the
    outer event id (R2.8).
    """
    if _is_response(result):
        from .wire import SSEParser, event_json

        parser = SSEParser()
        async for chunk in _response_chunks(result):
            for ev in parser.feed(chunk):
                yield _sse_to_event(ev, event_json)
        # An incomplete final event is never dispatched (WHATWG), so flush() only reports.
        parser.flush()
        return
    async for item in result:
        if isinstance(item, StreamEvent):
            yield item
        elif isinstance(item, Mapping) and "data" in item and set(item) <= {"data", "eventId"}:
            yield StreamEvent(item["data"], item.get("eventId"))
        else:
            yield StreamEvent(item)


class _DecodeFailure(Exception):
    pass


def _sse_to_event(ev: Any, event_json: Any) -> StreamEvent:
    from .wire import frame_from_sse

    value, error = event_json(frame_from_sse(ev, 0, 0, 0.0))
    if error is not None:
        raise _DecodeFailure(error.message)
    return StreamEvent(value, ev.id)


class ChatRuntime:
    """One session's Core driven through an adapter (chatkit's ``ChatCoreRuntime``)."""

    def __init__(
        self, adapter: Adapter, session_id: str, *, core: ChatCore | None = None, stop: str = "abort"
    ) -> None:
        if stop not in ("abort", "close"):
            raise ValueError(f"stop must be 'abort' or 'close', not {stop!r}")
        self.adapter = adapter
        self.session_id = session_id
        #: How a stop reaches the backend: the ``abort`` capability, or closing the run's stream.
        self.stop = stop
        caps = adapter.capabilities | {"abort"} if stop == "close" else adapter.capabilities
        self.core = core or ChatCore(session_id, capabilities=caps)
        self.decoder: SessionDecoder = adapter.decoder(session_id)
        self._readers: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._streams = itertools.count()
        self._runs = itertools.count(1)
        self._changed = asyncio.Event()
        self.core.subscribe(lambda _snap: self._changed.set())
        self.errors: list[tuple[str, BaseException]] = []
        self._subscription: asyncio.Task[None] | None = None
        #: Every fact admitted so far with its result, in order.
        self.fact_log: list[tuple[Any, FactResult]] = []
        #: Every event read from a run's stream, per run: ``(event, fallback id)``
        #: (the conformance suite decodes them again to prove ids stable, R4.3).
        self.event_log: dict[str, list[tuple[StreamEvent, str]]] = {}

    # ------------------------------------------------------------------ commands

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _pump(self) -> None:
        for req in self.core.take_requests():
            if isinstance(req, DispatchRequest):
                self._spawn(self._dispatch(req))
            elif isinstance(req, AbortRequest):
                self._spawn(self._abort(req))
            elif isinstance(req, ResumeRequest):
                self._spawn(self._resume(req))

    def new_run_id(self) -> str:
        """A fresh local run id (chatkit mints run ids on the client)."""
        return f"run-{next(self._runs)}-{uuid.uuid4().hex[:12]}"

    def _projection(self, input: Any, run_id: str) -> list[Any]:
        return self.decoder.project(input, run_id, tuple(self.core.snapshot.messages))

    async def send(self, input: Any, *, run_id: str | None = None) -> str:
        """Send ``input`` as a new local run; returns its run id."""
        run_id = run_id or self.new_run_id()
        result = self.core.send(run_id, input, project=self._projection(input, run_id))
        if not result.ok:
            raise RuntimeError(result.error)
        self._pump()
        await asyncio.sleep(0)
        return run_id

    async def abort(self, run_id: str) -> CommandResult:
        result = self.core.abort(run_id)
        self._pump()
        await asyncio.sleep(0)
        return result

    async def regenerate(self, *, target: str | None = None, run_id: str | None = None) -> str:
        run_id = run_id or self.new_run_id()
        view = self.core.run_view(target) if target else None
        input = view.input if view is not None else None
        result = self.core.regenerate(run_id, target=target, project=self._projection(input, run_id) if input else None)
        if not result.ok:
            raise RuntimeError(result.error)
        self._pump()
        await asyncio.sleep(0)
        return run_id

    async def edit(self, target: str, input: Any, *, run_id: str | None = None) -> str:
        run_id = run_id or self.new_run_id()
        result = self.core.edit(run_id, target=target, input=input, project=self._projection(input, run_id))
        if not result.ok:
            raise RuntimeError(result.error)
        self._pump()
        await asyncio.sleep(0)
        return run_id

    async def refresh_history(self) -> CommandResult:
        """``history.refresh()``: raises :class:`InvalidMessageError` on an invalid batch (R13.6)."""
        fn = self.adapter.functions.get("history")
        if fn is None:
            return CommandResult(False, "the adapter has no history capability")
        value = await fn(HistoryRequestArgs(self.session_id))
        if _is_response(value):
            if value.status >= 400:
                raise HTTPStatusError(value.status)
            value = await value.json()
        result = self.decoder.history(value)
        outcome = self.core.apply_history(result)
        if not outcome.ok and outcome.reason == "invalid-message":
            raise InvalidMessageError(outcome.rule or "invalid-message", source="history", detail=outcome.error)
        self._cancel_settled_readers()
        self._pump()
        return outcome

    async def resume_active_run(self) -> CommandResult:
        result = self.core.resume_active_run()
        self._pump()
        await asyncio.sleep(0)
        return result

    async def connect(self) -> None:
        """Open the session's subscription (R11.1): returns once it is listening."""
        fn = self.adapter.functions.get("subscribe")
        if fn is None or self._subscription is not None:
            return
        result = await fn({"sessionId": self.session_id})
        self._subscription = self._spawn(self._read_subscription(result))

    async def wait_for(self, predicate: Any, timeout: float = 5.0) -> bool:
        """Wait until ``predicate(snapshot)`` holds (bounded)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate(self.core.snapshot):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.05))
            except TimeoutError:
                pass
        return True

    async def wait_settled(self, run_id: str, timeout: float = 5.0) -> bool:
        return await self.wait_for(lambda s: (r := s.run(run_id)) is not None and r.terminal, timeout)

    async def close(self) -> None:
        """Release: cancel readers (never asks the backend to stop, R13.5)."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - release: a reader's own failure was reported when it happened
                pass
        self.core.dispose()

    # ------------------------------------------------------------------ internals

    def _admit(self, fact: Any) -> FactResult:
        result = self.core.admit(fact)
        self.fact_log.append((fact, result))
        return result

    def _error(self, where: str, err: BaseException) -> None:
        self.errors.append((where, err))
        self.adapter.report_error(where, err)

    async def _dispatch(self, req: DispatchRequest) -> None:
        fn = self.adapter.functions.get(req.via)
        if fn is None:
            self.core.dispatch_settled(req.run_id, False, f"no {req.via} function")
            self._pump()
            return
        try:
            body = self.adapter.encode(req.input, EncodeContext(self.session_id, req.run_id, req.messages))
            result = await fn(
                RunRequest(self.session_id, req.run_id, body, req.messages, req.target_run_id, req.input)
            )
            if _is_response(result) and result.status >= 400:
                raise HTTPStatusError(result.status)
        except Exception as err:  # noqa: BLE001 - a throw means "not completed" (R2.2)
            self._error(req.via, err)
            self.core.dispatch_settled(req.run_id, False, str(err))
            self._pump()
            return
        if result is False:
            self.core.dispatch_settled(req.run_id, False, "refused")
            self._pump()
            return
        self.core.dispatch_settled(req.run_id, True)
        if result is True or result is None or (_is_response(result) and result.status in (202, 204)):
            return  # the answer comes through subscribe
        task = self._spawn(self._read_run(req.run_id, result))
        self._readers[req.run_id] = task

    async def _read_run(self, run_id: str, result: Any) -> None:
        stream_no = next(self._streams)
        index = 0
        concluded = False
        try:
            async for ev in stream_events(result):
                self.event_log.setdefault(run_id, []).append((ev, f"{stream_no}:{index}"))
                decoded = self.decoder.decode(
                    ev.data, run_id=run_id, event_id=ev.event_id, fallback_id=f"{stream_no}:{index}"
                )
                index += 1
                for fact in decoded.facts:
                    self._admit(fact)
                if decoded.error is not None or decoded.terminal:
                    concluded = decoded.terminal
                    break
                view = self.core.run_view(run_id)
                if view is None or view.terminal:
                    concluded = True
                    break
        except _DecodeFailure as err:
            self._error("decode", err)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # noqa: BLE001 - an I/O error is a disconnect, not a failure (R3.4)
            self._error("stream", err)
        finally:
            self._readers.pop(run_id, None)
        if not concluded:
            view = self.core.run_view(run_id)
            if view is not None and not view.terminal:
                self.core.observe_connection(run_id=run_id, state="disconnected")
                # R3.4: with history, recovery is attempted (never an invented outcome).
                if "history" in self.adapter.functions:
                    try:
                        await self.refresh_history()
                    except Exception as err:  # noqa: BLE001 - adapter code: reported as an error fact, the runtime goes on (R3.4)
                        self._error("history", err)
        self._pump()

    async def _abort(self, req: AbortRequest) -> None:
        fn = self.adapter.functions.get("abort")
        if fn is None and self.stop == "close":
            await self._close_stream(req.run_id)
            return
        ok = False
        try:
            result = await fn(AbortRequestArgs(self.session_id, req.run_id)) if fn else None
            ok = fn is not None and result is not False and not (_is_response(result) and result.status >= 400)
        except Exception as err:  # noqa: BLE001 - a throw leaves the stop unknown (R9.4)
            self._error("abort", err)
        self.core.abort_settled(req.run_id, ok)
        if ok and "history" in self.adapter.functions:
            try:
                await self.refresh_history()
            except Exception as err:  # noqa: BLE001 - adapter code: reported as an error fact, the runtime goes on
                self._error("history", err)
        self._pump()

    async def _resume(self, req: ResumeRequest) -> None:
        fn = self.adapter.functions.get("resume")
        if fn is None:
            return
        try:
            result = await fn(ResumeRequestArgs(self.session_id, req.run_id, req.event_id))
            if _is_response(result) and result.status >= 400:
                raise HTTPStatusError(result.status)
        except Exception as err:  # noqa: BLE001 - adapter code: a failed resume is a disconnection, reported
            self._error("resume", err)
            self.core.observe_connection(run_id=req.run_id, state="disconnected")
            return
        if result is None or result is True:
            return
        task = self._spawn(self._read_run(req.run_id, result))
        self._readers[req.run_id] = task

    async def _close_stream(self, run_id: str) -> None:
        """Stop = close the stream: cancel the run's reader (the body's
        iterator is closed, so the backend sees its client go away).  The
        close itself always succeeds; what it did to the run only a terminal
        event or history can tell (R9.1)."""
        task = self._readers.pop(run_id, None)
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping a reader: its own failure was reported when it happened
                pass
        self.core.abort_settled(run_id, True)
        view = self.core.run_view(run_id)
        if view is not None and not view.terminal:
            self.core.observe_connection(run_id=run_id, state="disconnected")
            if "history" in self.adapter.functions:
                try:
                    await self.refresh_history()
                except Exception as err:  # noqa: BLE001 - adapter code: reported as an error fact, the runtime goes on (R9.1)
                    self._error("history", err)
        self._pump()

    def _cancel_settled_readers(self) -> None:
        for run_id, task in list(self._readers.items()):
            view = self.core.run_view(run_id)
            if view is None or view.terminal:
                task.cancel()
                self._readers.pop(run_id, None)
                self.decoder.release(run_id)

    async def _read_subscription(self, result: Any) -> None:
        stream_no = next(self._streams)
        index = 0
        try:
            async for ev in stream_events(result):
                decoded = self.decoder.route(ev.data, event_id=ev.event_id, fallback_id=f"{stream_no}:{index}")
                index += 1
                ident = decoded.identity
                if ident is None:
                    continue  # cannot route (R11.7)
                if ident.starts_run and self.core.run_view(ident.run_id) is None:
                    self.core.register_run(run_id=ident.run_id, session_id=ident.session_id)
                for fact in decoded.facts:
                    self._admit(fact)
                self._pump()
        except asyncio.CancelledError:
            raise
        except Exception as err:  # noqa: BLE001 - adapter code: a failed subscription is reported, the runtime goes on
            self._error("subscribe", err)
