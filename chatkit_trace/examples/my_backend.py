"""An in-memory scripted backend for the "my protocol" example (the seed's
conformance test backend, in Python).

``create_backend(kind)`` returns the capability functions for
:func:`~chatkit_trace.adapters.create_adapter`; the backend acts out one R12
scenario: ``text`` (a normal answer), ``tool`` (one tool call), ``fail`` (a
remote failure), ``slow`` (streams until stopped).  Runs and their frames
are kept in memory so ``history`` can answer, and regenerate/edit truncate
the target run and everything after it, as R10.2 requires of a backend.

Every stream is a :class:`~chatkit_trace.runtime.Response` whose body is
real SSE bytes (``id:`` + ``data:``), so the factory's SSE path is used.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from ..adapters import AbortRequestArgs, HistoryRequestArgs, RunRequest
from ..runtime import Response
from .my_protocol import input_text

__all__ = ["script", "create_backend", "sse_bytes"]


def script(kind: str) -> list[dict[str, Any]]:
    """The events of one scenario (after ``started``)."""
    if kind == "fail":
        return [{"type": "error", "code": "RATE_LIMITED", "message": "Too many requests", "retryable": True}]
    if kind == "slow":
        return [{"type": "text", "text": "Working on it"}]
    if kind == "tool":
        return [
            {"type": "text", "text": "Let me look that up."},
            {"type": "tool", "id": "call-1", "name": "lookup", "args": {"q": "a"}},
            {"type": "tool_result", "id": "call-1", "result": {"hits": 1}},
            {"type": "text", "text": "Found 1 result."},
            {"type": "done"},
        ]
    return [{"type": "text", "text": "This is "}, {"type": "text", "text": "the answer"}, {"type": "done"}]


def sse_bytes(frame: dict[str, Any]) -> bytes:
    head = f"id: {frame['id']}\n" if frame.get("id") is not None else ""
    return (head + "data: " + json.dumps(frame["event"]) + "\n\n").encode()


async def _stream(frames: list[dict[str, Any]], keep_open: bool) -> AsyncIterator[bytes]:
    for frame in frames:
        yield sse_bytes(frame)
        await asyncio.sleep(0)
    if keep_open:
        await asyncio.Event().wait()  # until the reader is cancelled


def create_backend(
    kind: str,
    *,
    script_for: Callable[[str], list[dict[str, Any]]] = script,
    truncate: bool = True,
) -> dict[str, Any]:
    """Capability functions acting out scenario ``kind``."""
    runs: list[dict[str, Any]] = []

    async def run(request: RunRequest) -> Response:
        events = [{"type": "started", "run": request.run_id}, *script_for(kind)]
        frames = [{"id": f"e{i}", "event": ev} for i, ev in enumerate(events)]
        status = {"fail": "failed", "slow": "running"}.get(kind, "completed")
        record: dict[str, Any] = {
            "id": request.run_id,
            "status": status,
            "input": input_text(request.body),
            "created_at": int(time.time() * 1000),
            "frames": frames,
        }
        if kind == "fail":
            record["error"] = {"code": "RATE_LIMITED", "message": "Too many requests"}
        runs.append(record)
        return Response(200, _stream(frames, keep_open=kind == "slow"), {"content-type": "text/event-stream"})

    async def rerun(request: RunRequest) -> Response:
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
        return Response(200, json.dumps({"runs": runs}).encode(), {"content-type": "application/json"})

    return {"run": run, "regenerate": rerun, "edit": rerun, "abort": abort, "history": history}
