"""A scripted OpenAI-compatible backend for the R12 conformance suite.

Two halves, as in a real deployment:

* :class:`ScriptedModel` is the model server: it answers a
  ``/v1/chat/completions`` request body with real ``chat.completion.chunk``
  SSE bytes (``data: {…}`` lines, ``data: [DONE]``, an ``{"error": …}`` frame
  for a failure).  In the ``tool`` scenario it asks for a tool call until the
  body carries the tool's result, then answers (the OpenAI tool loop, §1.4).
* :func:`tool_loop` is the client glue the ``run`` capability stands for
  (chatkit's tool loop): it sends the run's body, and after ``finish_reason:
  tool_calls`` runs the tools, sends the continuation request **under the
  same run** and hands the adapter the tool-results event read from that
  request body (:func:`~chatkit_trace.adapters.openai.tool_results_event`).

History is chatkit's ``HistoryResult`` JSON, written by the backend from what
it streamed with the documented id scheme (``user:{runId}``,
``assistant:{runId}``, ``text:{n}``, ``tool:{id}``), independently of the
adapter's code, so the R8.4 check really compares two implementations.

``create_backend(kind, subscribe=False)``: with ``subscribe=True`` every
chunk carries chatkit's ``run_id`` extension, a ``run.started`` frame comes
first, ``run`` answers 202 and the events arrive through ``subscribe``
(each with an outer event id).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from chatkit_trace.adapters import AbortRequestArgs, HistoryRequestArgs, RunRequest, StreamEvent
from chatkit_trace.adapters.openai import tool_results_event
from chatkit_trace.runtime import Response, stream_events

__all__ = ["FAIL_ERROR", "TOOLS", "ScriptedModel", "create_backend", "tool_loop"]

FAIL_ERROR = {
    "message": "Too many requests. Please retry after a short wait.",
    "type": "rate_limit_error",
    "param": None,
    "code": "rate_limit_exceeded",
}
#: The client-side tools the glue can run.
TOOLS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "lookup": lambda args: {"hits": 1, "q": args.get("q")}
}
TOOL_DEFS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def _sse(obj: Any) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


class ScriptedModel:
    """The model server of one scenario: request body -> SSE byte stream."""

    def __init__(self, kind: str, *, tick: float = 0.01) -> None:
        self.kind = kind
        self.tick = tick
        self.calls = 0

    def _chunk(
        self, cid: str, delta: dict[str, Any], finish: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "scripted",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }

    @staticmethod
    def _tool_result(body: Mapping[str, Any]) -> Any:
        msgs = body.get("messages") or []
        return next((m for m in reversed(msgs) if m.get("role") == "tool"), None)

    def script(self, body: Mapping[str, Any]) -> list[Any]:
        """The frames of one response: chunk dicts, ``"[DONE]"``, ``("error", obj)``, ``("slow",)``."""
        self.calls += 1
        cid = f"chatcmpl-scripted{self.calls}"
        c = self._chunk
        head = [c(cid, {"role": "assistant", "content": ""})]
        usage = {
            **c(cid, {}),
            "choices": [],
            "usage": {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9},
        }
        if self.kind == "fail":
            return [*head, c(cid, {"content": "Partial "}), ("error", {"error": FAIL_ERROR})]
        if self.kind == "slow":
            return [*head, c(cid, {"content": "Working on it"}), ("slow", cid)]
        if self.kind == "tool":
            if self._tool_result(body) is None:
                return [
                    *head,
                    c(cid, {"content": "Let me look that up."}),
                    c(
                        cid,
                        {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call-1",
                                    "type": "function",
                                    "function": {"name": "lookup", "arguments": ""},
                                }
                            ]
                        },
                    ),
                    c(cid, {"tool_calls": [{"index": 0, "function": {"arguments": '{"q": '}}]}),
                    c(cid, {"tool_calls": [{"index": 0, "function": {"arguments": '"a"}'}}]}),
                    c(cid, {}, "tool_calls"),
                    usage,
                    "[DONE]",
                ]
            return [
                *head,
                c(cid, {"content": "Found 1 result."}),
                c(cid, {}, "stop"),
                usage,
                "[DONE]",
            ]
        return [
            *head,
            c(cid, {"content": "This is "}),
            c(cid, {"content": "the answer"}),
            c(cid, {}, "stop"),
            usage,
            "[DONE]",
        ]


def _tool_calls(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The client's own accumulation of tool-call fragments (by index)."""
    calls: dict[int, dict[str, Any]] = {}
    for ch in chunks:
        for choice in ch.get("choices") or []:
            for tc in (choice.get("delta") or {}).get("tool_calls") or []:
                call = calls.setdefault(
                    tc.get("index", 0), {"id": None, "name": None, "arguments": ""}
                )
                call["id"] = call["id"] or tc.get("id")
                fn = tc.get("function") or {}
                call["name"] = call["name"] or fn.get("name")
                call["arguments"] += fn.get("arguments") or ""
    return [calls[i] for i in sorted(calls)]


def _finish(chunks: list[dict[str, Any]]) -> str | None:
    for ch in reversed(chunks):
        for choice in ch.get("choices") or []:
            if choice.get("finish_reason"):
                return str(choice["finish_reason"])
    return None


async def tool_loop(
    send: Callable[[dict[str, Any]], Awaitable[Any]],
    body: dict[str, Any],
    run_id: str,
    *,
    tools: Mapping[str, Callable[[dict[str, Any]], Any]] = TOOLS,
    on_result: Callable[[str, Any], None] | None = None,
    max_turns: int = 4,
) -> AsyncIterator[StreamEvent]:
    """chatkit's OpenAI tool loop as a stream of one run's events.

    ``send(body)`` returns the model server's response (SSE bytes).  Every
    event of every response is yielded; after ``finish_reason: tool_calls``
    the tools run, the continuation body (the assistant's ``tool_calls`` plus
    one ``role: tool`` message per call) is sent under the same run, and the
    tool-results event read from that body is yielded first.
    """
    for _ in range(max_turns):
        resp = await send(body)
        chunks: list[dict[str, Any]] = []
        async for ev in stream_events(resp):
            if isinstance(ev.data, dict):
                chunks.append(ev.data)
            yield ev
        if _finish(chunks) != "tool_calls":
            return
        calls = _tool_calls(chunks)
        messages = list(body["messages"])
        messages.append(
            {
                "role": "assistant",
                "content": "".join(
                    (ch["choices"][0].get("delta") or {}).get("content") or ""
                    for ch in chunks
                    if ch.get("choices")
                )
                or None,
                "tool_calls": [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c["arguments"]},
                    }
                    for c in calls
                ],
            }
        )
        for c in calls:
            result = tools[c["name"]](json.loads(c["arguments"] or "{}"))
            if on_result is not None:
                on_result(c["id"], result)
            messages.append(
                {"role": "tool", "tool_call_id": c["id"], "content": json.dumps(result)}
            )
        body = {**body, "messages": messages}
        event = tool_results_event(body, run_id)
        if event is not None:
            yield StreamEvent(event)


class _Bus:
    """The session channel of subscribe mode: buffered, one queue per listener."""

    def __init__(self) -> None:
        self.queues: list[asyncio.Queue[StreamEvent]] = []
        self.n = 0

    def publish(self, data: Any) -> None:
        self.n += 1
        for q in self.queues:
            q.put_nowait(StreamEvent(data, f"event-{self.n}"))

    def listen(self) -> AsyncIterator[StreamEvent]:
        """Listening starts now (R11.1: buffered before subscribe returns)."""
        q: asyncio.Queue[StreamEvent] = asyncio.Queue()
        self.queues.append(q)

        async def events() -> AsyncIterator[StreamEvent]:
            try:
                while True:
                    yield await q.get()
            finally:
                self.queues.remove(q)

        return events()


def create_backend(kind: str, *, subscribe: bool = False, truncate: bool = True) -> dict[str, Any]:
    """Capability functions acting out scenario ``kind`` (text, tool, fail, slow)."""
    model = ScriptedModel(kind)
    runs: list[dict[str, Any]] = []
    bus = _Bus()

    def record_for(run_id: str) -> dict[str, Any]:
        return next(r for r in runs if r["id"] == run_id)

    def note(rec: dict[str, Any], frame: Any) -> None:
        """What the backend streamed, written into its own history record."""
        if not isinstance(frame, dict):
            return
        for choice in frame.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                parts = rec["parts"]
                if parts and parts[-1]["type"] == "text" and not rec["closed"]:
                    parts[-1]["text"] += delta["content"]
                else:
                    parts.append(
                        {"id": f"text:{rec['segments']}", "type": "text", "text": delta["content"]}
                    )
                    rec["segments"] += 1
                    rec["closed"] = False
            for tc in delta.get("tool_calls") or []:
                if tc.get("id"):
                    rec["parts"].append(
                        {
                            "id": f"tool:{tc['id']}",
                            "type": "tool-call",
                            "toolCallId": tc["id"],
                            "toolName": tc["function"]["name"],
                            "_args": "",
                        }
                    )
                    rec["closed"] = True
                for p in rec["parts"]:
                    if p.get("_args") is not None and (tc.get("id") in (None, p["toolCallId"])):
                        p["_args"] += (tc.get("function") or {}).get("arguments") or ""
            if choice.get("finish_reason"):
                rec["closed"] = True
                for p in rec["parts"]:
                    if "_args" in p:
                        p["args"] = json.loads(p.pop("_args") or "{}")
                if choice["finish_reason"] == "stop":
                    rec["status"] = "completed"
        if frame.get("error"):
            rec["status"] = "failed"
            rec["error"] = {"code": FAIL_ERROR["code"], "message": "Too many requests."}

    def tool_result(rec: dict[str, Any], call_id: str, result: Any) -> None:
        for p in rec["parts"]:
            if p.get("toolCallId") == call_id:
                p["result"] = result
        rec["closed"] = True

    async def model_response(body: dict[str, Any], rec: dict[str, Any]) -> Response:
        frames = model.script(body)

        async def chunks() -> AsyncIterator[bytes]:
            for frame in frames:
                if rec["status"] == "interrupted":
                    break
                if isinstance(frame, tuple) and frame[0] == "slow":
                    n = 0
                    while rec["status"] == "running":
                        await asyncio.sleep(model.tick)
                        if rec["status"] != "running":
                            break
                        tick = model._chunk(frame[1], {"content": f" {n}"})
                        if subscribe:
                            tick["run_id"] = rec["id"]
                        note(rec, tick)
                        yield _sse(tick)
                        n += 1
                    await asyncio.Event().wait()  # stopped: the connection stays open
                if isinstance(frame, tuple) and frame[0] == "error":
                    note(rec, frame[1])
                    yield _sse({**frame[1], **({"run_id": rec["id"]} if subscribe else {})})
                    return  # closed with no [DONE]
                if frame == "[DONE]":
                    yield _sse(b"[DONE]")
                    continue
                if subscribe:
                    frame = {**frame, "run_id": rec["id"]}
                note(rec, frame)
                yield _sse(frame)
                await asyncio.sleep(0)

        return Response(200, chunks(), {"content-type": "text/event-stream"})

    async def run(request: RunRequest) -> Any:
        body = dict(request.body)
        last = body["messages"][-1]
        rec: dict[str, Any] = {
            "id": request.run_id,
            "status": "running",
            "input": last.get("content") if last.get("role") == "user" else "",
            "createdAt": int(time.time() * 1000),
            "parts": [],
            "segments": 0,
            "closed": False,
        }
        runs.append(rec)
        loop = tool_loop(
            lambda b: model_response(b, rec),
            body,
            request.run_id,
            on_result=lambda cid, result: tool_result(rec, cid, result),
        )
        if not subscribe:
            if kind == "tool":
                return loop  # several responses: an async iterable of StreamEvents
            return await model_response(body, rec)  # one response: its SSE bytes

        async def pump() -> None:
            bus.publish({"run_id": request.run_id, "type": "run.started"})
            async for ev in loop:
                if isinstance(ev.data, dict):  # [DONE] has no run identity: not on the channel
                    bus.publish(ev.data)

        task = asyncio.ensure_future(pump())
        rec["task"] = task
        await asyncio.sleep(0)
        return Response(202)

    async def rerun(request: RunRequest) -> Any:
        nonlocal runs
        if truncate:
            ids = [r["id"] for r in runs]
            if request.target_run_id in ids:
                runs = runs[: ids.index(request.target_run_id)]
        return await run(request)

    async def abort(request: AbortRequestArgs) -> Response:
        for r in runs:
            if r["id"] == request.run_id and r["status"] == "running":
                r["status"] = "interrupted"
        return Response(204)

    async def history(request: HistoryRequestArgs) -> Response:
        messages: list[dict[str, Any]] = []
        snapshots: list[dict[str, Any]] = []
        active = None
        for r in runs:
            messages.append(
                {
                    "id": f"user:{r['id']}",
                    "role": "user",
                    "parts": [{"id": "text", "type": "text", "text": r["input"]}],
                    "runId": r["id"],
                }
            )
            parts = [{k: v for k, v in p.items() if not k.startswith("_")} for p in r["parts"]]
            if parts:
                messages.append(
                    {
                        "id": f"assistant:{r['id']}",
                        "role": "assistant",
                        "parts": parts,
                        "runId": r["id"],
                    }
                )
            if r["status"] == "running":
                active = {"runId": r["id"]}
                continue
            snap: dict[str, Any] = {
                "id": r["id"],
                "origin": "remote",
                "status": r["status"],
                "phase": "idle",
                "createdAt": r["createdAt"],
                "workItems": {},
            }
            if "error" in r:
                snap["error"] = r["error"]
            if r["status"] == "interrupted":
                snap["interruptReason"] = "protocol"
            snapshots.append(snap)
        status = (
            "running"
            if active
            else ("error" if runs and runs[-1]["status"] == "failed" else "idle")
        )
        result = {
            "messages": messages,
            "runSnapshots": snapshots,
            "activeRun": active,
            "session": {"id": request.session_id, "status": status},
            "hasMore": False,
        }
        return Response(200, json.dumps(result).encode(), {"content-type": "application/json"})

    caps: dict[str, Any] = {
        "run": run,
        "regenerate": rerun,
        "edit": rerun,
        "abort": abort,
        "history": history,
    }
    if subscribe:

        async def subscribe_fn(_args: Any) -> AsyncIterator[StreamEvent]:
            return bus.listen()

        caps["subscribe"] = subscribe_fn
    return caps
