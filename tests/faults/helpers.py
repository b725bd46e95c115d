"""A real aiohttp client for the fault tests: SSE events with their arrival times."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from chatkit_trace.wire import SSEParser, make_decoder


@dataclass
class Got:
    status: int
    headers: dict[str, str]
    raw: bytes = b""
    #: (arrival time since the request was sent, SSE id, data)
    events: list[tuple[float, str | None, str]] = field(default_factory=list)
    #: None: a clean end; else what the client library said (a reset shows as a payload error)
    error: str | None = None
    decode_errors: list[Any] = field(default_factory=list)

    @property
    def ids(self) -> list[str | None]:
        return [e[1] for e in self.events]

    def json(self) -> list[Any]:
        out = []
        for _, _, data in self.events:
            try:
                out.append(json.loads(data))
            except ValueError:
                out.append(data)
        return out


async def request(
    method: str,
    url: str,
    *,
    json_body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 15.0,
) -> Got:
    """One request; an SSE body is decoded (Content-Encoding too) and parsed as it arrives."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    t = aiohttp.ClientTimeout(total=timeout)
    async with (
        aiohttp.ClientSession(auto_decompress=False, timeout=t) as s,
        s.request(method, url, json=json_body, headers=headers) as r,
    ):
        got = Got(r.status, dict(r.headers))
        decoder = make_decoder(r.headers.get("Content-Encoding"))
        parser = SSEParser()
        buf = bytearray()
        try:
            async for chunk in r.content.iter_any():
                now = loop.time() - t0
                buf += chunk
                for ev in parser.feed(decoder.decode(chunk)):
                    got.events.append((now, ev.id, ev.data))
                    if ev.error is not None:
                        got.decode_errors.append(ev.error)
        except aiohttp.ClientPayloadError as err:
            got.error = f"{type(err).__name__}: {err}"
        got.raw = bytes(buf)
        rest = decoder.flush()
        for ev in parser.feed(rest) + parser.flush():
            if ev.dispatched:
                got.events.append((loop.time() - t0, ev.id, ev.data))
        if decoder.error is not None:
            got.decode_errors.append(decoder.error)
        return got


async def run(base: str, sid: str, run_id: str = "r1", text: str = "hello", **kw: Any) -> Got:
    """``POST /sessions/{sid}/runs`` (the demo backend's run route)."""
    return await request(
        "POST", f"{base}/sessions/{sid}/runs", json_body={"runId": run_id, "text": text}, **kw
    )
