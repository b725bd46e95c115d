"""A real aiohttp client that keeps the raw (still content-encoded) bytes it receives."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import aiohttp


@dataclass
class Received:
    status: int
    headers: dict[str, str]
    raw: bytes
    error: str | None = None
    times: list[float] = field(default_factory=list)  # monotonic arrival time of each chunk


async def fetch(
    method: str,
    url: str,
    *,
    json: Any = None,
    data: bytes | None = None,
    headers: dict[str, str] | None = None,
    proxy: str | None = None,
    timeout: float = 30.0,
    stop_after: int | None = None,
    on_first: Any = None,
) -> Received:
    """One request; the body's raw bytes as they came (no decompression).

    ``stop_after``: close the connection after that many bytes (client gone).
    ``on_first``: awaited once after the first chunk arrived (e.g. release a held stream).
    """
    t = aiohttp.ClientTimeout(total=timeout)
    async with aiohttp.ClientSession(auto_decompress=False, timeout=t) as s:
        async with s.request(method, url, json=json, data=data, headers=headers, proxy=proxy) as r:
            out = Received(r.status, dict(r.headers), b"")
            buf = bytearray()
            loop = asyncio.get_running_loop()
            try:
                async for chunk in r.content.iter_any():
                    buf += chunk
                    out.times.append(loop.time())
                    if on_first is not None and len(out.times) == 1:
                        await on_first()
                    if stop_after is not None and len(buf) >= stop_after:
                        r.close()
                        break
            except aiohttp.ClientPayloadError as err:
                out.error = f"{type(err).__name__}: {err}"
            out.raw = bytes(buf)
            return out
