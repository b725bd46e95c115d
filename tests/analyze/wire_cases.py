"""Traces written as HTTP traffic and identified by a real route profile.

Each protocol's cases are built from what its wire really carries (request
bodies, SSE events, history JSON), and every exchange is classified by the
protocol's preset profile exactly as the recorder and ``import`` do, so the
history route's scope comes from the profile, not from the test.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chatkit_trace.analyze import analyze
from chatkit_trace.route import IdentityTracker, apply_match, load_profile
from chatkit_trace.route.identity import body_is_output, resolve_from_frames, resolve_from_response
from chatkit_trace.trace import Exchange, frames_from_body
from chatkit_trace.wire import body_frame, replace_frame

CAPTURES = Path(__file__).resolve().parents[2] / "recordings" / "captures"


@dataclass
class Call:
    method: str
    path: str
    body: Any = None
    #: SSE events (dicts become ``data:`` JSON lines; a str is a raw data value).
    sse: list[Any] | None = None
    #: A JSON response body (history, status, cancel reply, ...).
    json: Any = None
    raw: bytes | None = None
    t: float = 0.0
    #: Seconds between events (or per-event times with ``times``).
    spacing: float = 0.01
    times: list[float] | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    end: str = "complete"


def sse_bytes(events: list[Any]) -> bytes:
    out = []
    for ev in events:
        out.append("data: " + (ev if isinstance(ev, str) else json.dumps(ev)) + "\n\n")
    return "".join(out).encode()


def build(calls: list[Call], protocol: str) -> tuple[list[Exchange], Any]:
    """Exchanges of ``calls``, identified by the ``protocol`` preset; and its adapter."""
    profile = load_profile(protocol)
    exchanges: list[Exchange] = []
    for i, c in enumerate(calls):
        headers = [("Host", "127.0.0.1:8000"), ("Content-Type", "application/json"), *c.headers.items()]
        body = None if c.body is None else (c.body if isinstance(c.body, bytes) else json.dumps(c.body).encode())
        ex = Exchange(i, c.method, f"http://127.0.0.1:8000{c.path}", started_at=c.t, request_headers=headers,
                      request_body=body, status=c.status)
        if c.sse is not None or c.raw is not None:
            data = c.raw if c.raw is not None else sse_bytes(c.sse or [])
            frames = frames_from_body(data, i, transport="sse", at=c.t + c.spacing, spacing=c.spacing)
            if c.times is not None:
                frames = [replace_frame(f, at=at) for f, at in zip(frames, c.times, strict=False)]
            ex.frames, ex.transport, ex.end = frames, "sse", c.end
            ex.response_headers = [("content-type", "text/event-stream")]
            ex.ended_at = (frames[-1].at if frames else c.t) + 0.001
        else:
            ex.response_body = json.dumps(c.json).encode() if c.json is not None else b""
            ex.response_headers = [("content-type", "application/json")]
            ex.ended_at = c.t + 0.001
        exchanges.append(ex)
    tracker = IdentityTracker()
    for ex in sorted(exchanges, key=lambda e: e.index):
        m = profile.match(ex.method, ex.url, ex.request_headers, ex.request_body)
        if m is not None:
            if ex.response_body:
                m = resolve_from_response(m, ex.status, ex.response_headers, ex.response_body)
                if not ex.frames:
                    try:
                        doc = json.loads(ex.response_body)
                    except ValueError:
                        doc = None
                    if body_is_output(m, ex.status, doc):
                        ex.frames = [body_frame(ex.response_body, ex.index, ex.ended_at or ex.started_at)]
                        ex.transport, ex.end = "body", "complete"
            m = resolve_from_frames(m, ex.frames)
            m = tracker.assign(m, ex.index)
        apply_match(ex, m)
    return exchanges, profile.create_adapter()


def run(calls: list[Call], protocol: str):
    """(replay, findings) of ``calls`` under ``protocol``'s preset profile."""
    exchanges, adapter = build(calls, protocol)
    return analyze(exchanges, adapter)


def codes(findings) -> list[str]:
    return sorted({f.code for f in findings} - {"CK401", "CK203", "CK601", "CK602"})


def capture_calls(name: str, protocol: str, *, t: float = 0.0) -> list[Call]:
    """The steps of a committed real-server capture as calls (bytes as captured)."""
    doc = json.loads((CAPTURES / protocol / f"{name}.exchange.json").read_text())
    out = []
    for step in doc["steps"]:
        req, resp = step["request"], step["response"]
        data = (CAPTURES / protocol / resp["body_file"]).read_bytes()
        stream = resp["body_file"].endswith(".sse")
        elapsed = float(resp.get("elapsed_s") or 0.0)
        body = req.get("body")
        hdrs = req["headers"] if isinstance(req["headers"], dict) else dict(req["headers"])
        keep = {k: v for k, v in hdrs.items() if k.lower() not in ("host", "content-length", "content-type")}
        call = Call(req["method"], req["path"], body, raw=data if stream else None, t=t, headers=keep,
                    end="client-gone" if resp.get("ended_by") == "client" else "complete")
        if stream:
            n = max(len(frames_from_body(data, 0)), 1)
            call.spacing = max(elapsed, 0.01) / n
        else:
            call.json = json.loads(data) if data else None
        out.append(call)
        t += max(elapsed, 0.001) + 0.01
    return out
