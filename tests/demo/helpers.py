"""Helpers for the demo tests: read the demo backend's SSE bytes with a real aiohttp client."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp


def events(body: bytes) -> list[tuple[str | None, Any]]:
    """``id:`` + ``data:`` blocks -> ``[(id, JSON value or raw string)]`` (comments skipped)."""
    out: list[tuple[str | None, Any]] = []
    for block in body.decode("utf-8").split("\n\n"):
        if not block.strip():
            continue
        eid, data = None, None
        for line in block.split("\n"):
            if line.startswith("id: "):
                eid = line[4:]
            elif line.startswith("data: "):
                data = line[6:]
        if data is None:
            continue
        try:
            value: Any = json.loads(data)
        except ValueError:
            value = data
        out.append((eid, value))
    return out


def types(evs: list[tuple[str | None, Any]]) -> list[str]:
    return [v["type"] if isinstance(v, dict) else v for _, v in evs]


async def read_stream(
    resp: aiohttp.ClientResponse, *, until: int | None = None, timeout: float = 5.0
) -> tuple[bytes, str]:
    """Read a response body: ``(bytes, how it ended)`` where the end is ``eof``,
    ``reset`` (the connection broke mid-body) or ``open`` (still open once
    ``until`` events arrived, or after ``timeout``)."""
    body = b""
    try:
        async with asyncio.timeout(timeout):
            async for chunk in resp.content.iter_any():
                body += chunk
                if until is not None and body.count(b"\n\n") >= until:
                    # give the server a moment to send more (it should not)
                    try:
                        async with asyncio.timeout(0.2):
                            more = await resp.content.readany()
                    except TimeoutError:
                        return body, "open"
                    if not more:
                        return body, "eof"
                    body += more
            return body, "eof"
    except aiohttp.ClientPayloadError:
        return body, "reset"
    except TimeoutError:
        return body, "open"


async def run(
    http: aiohttp.ClientSession, url: str, sid: str, text: str, run_id: str = "r1", **kw: Any
) -> tuple[list[tuple[str | None, Any]], str, bytes]:
    """POST a run and read its stream: ``(events, end, raw bytes)``."""
    async with http.post(
        f"{url}/sessions/{sid}/runs", json={"runId": run_id, "text": text}
    ) as resp:
        assert resp.status == 200, await resp.text()
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        body, end = await read_stream(resp, **kw)
    return events(body), end, body


async def history(http: aiohttp.ClientSession, url: str, sid: str) -> dict[str, Any]:
    async with http.get(f"{url}/sessions/{sid}/runs") as resp:
        assert resp.status == 200
        return await resp.json()
