"""Load a corpus case (a small trace written as JSON) into exchanges.

A case::

    {"description": "...", "protocol": "myproto", "capabilities": [...],
     "exchanges": [
        {"capability": "run", "session": "s1", "run": "r1", "t": 0.0,
         "status": 200, "end": "complete", "request": {...}, "spacing": 0.01,
         "sse": [{"id": "e0", "data": {...}}, {"data": "[DONE]"}, {"raw": "data: {x\\n\\n"}]},
        {"capability": "history", "session": "s1", "t": 5, "json": {...}}],
     (an exchange's ``identity`` is what its profile route recorded, e.g.
      ``{"stop": "close"}``; ``notes`` are the recorder's notes, e.g. its
      ``gaps``; ``max_line`` is the recorder's longest line)
     "expect": ["CK101"], "decisive": {"CK101": "0:4"}}

``sse`` items become real SSE bytes parsed by the wire layer; ``at`` on an
item overrides its time.  ``ws`` items are WebSocket messages, ``{"in": …}``
(server to client) or ``{"out": …}`` (client to server); ``"profile": FILE``
classifies the exchange with that profile file's routes, as the recorder
would (a socket's per-event sources and command rules).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chatkit_trace.adapters import create_adapter, load_protocol
from chatkit_trace.trace import Exchange
from chatkit_trace.wire import SSEParser, frame_from_sse, ws_frame

CORPUS = Path(__file__).parent / "corpus"


def sse_item(item: dict[str, Any]) -> bytes:
    if "raw" in item:
        return item["raw"].encode()
    out = ""
    if item.get("event"):
        out += f"event: {item['event']}\n"
    if item.get("id") is not None:
        out += f"id: {item['id']}\n"
    data = item["data"]
    out += "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"
    return out.encode()


def build_exchange(index: int, spec: dict[str, Any]) -> Exchange:
    t = float(spec.get("t", index))
    spacing = float(spec.get("spacing", 0.01))
    ex = Exchange(
        index,
        spec.get("method", "POST" if spec.get("capability") in ("run", "abort", "regenerate", "edit") else "GET"),
        spec.get("url", f"http://backend/{spec.get('capability', 'x')}/{spec.get('session', '')}"),
        started_at=t,
        ended_at=spec.get("ended_at"),
        request_body=json.dumps(spec["request"]).encode() if "request" in spec else None,
        status=spec.get("status", 200),
        response_body=json.dumps(spec["json"]).encode() if "json" in spec else None,
        transport="sse" if "sse" in spec else "ws" if "ws" in spec else None,
        end=spec.get("end", "complete" if "sse" in spec or "ws" in spec else None),
        error=spec.get("error"),
        capability=spec.get("capability"),
        session_id=spec.get("session"),
        run_id=spec.get("run"),
        cursor=spec.get("cursor"),
        target_run_id=spec.get("target"),
        notes={"identity": spec["identity"]} if "identity" in spec else {},
    )
    ex.notes.update(spec.get("notes") or {})  # the recorder's marks (its gaps: CK702)
    if "sse" in spec:
        parser = SSEParser(max_line=int(spec.get("max_line", 64 * 1024 * 1024)))  # the recorder's limit (CK703)
        frames = []
        at = t + spacing
        for item in spec["sse"]:
            at = float(item.get("at", at))
            for ev in parser.feed(sse_item(item)):
                frames.append(frame_from_sse(ev, index, len(frames), at))
            at += spacing
        for ev in parser.flush():
            frames.append(frame_from_sse(ev, index, len(frames), at))
        ex.frames = frames
        if ex.ended_at is None:
            ex.ended_at = at
    if "ws" in spec:
        at = t + spacing
        for k, item in enumerate(spec["ws"]):
            at = float(item.get("at", at))
            out = "out" in item
            data = item["out"] if out else item["in"]
            text = data if isinstance(data, str) else json.dumps(data)
            ex.frames.append(ws_frame(text.encode(), True, out, at, index, k))
            at += spacing
        if ex.ended_at is None:
            ex.ended_at = at
        ex.status = spec.get("status", 101)
        if "close_code" in spec:
            ex.notes["close_code"] = spec["close_code"]
    if "profile" in spec:
        from chatkit_trace.route import IdentityTracker, apply_match, load_profile, resolve_from_frames

        m = load_profile(str(Path(__file__).resolve().parents[2] / spec["profile"])).match(
            ex.method, ex.url, [], ex.request_body)
        if m is not None:
            m = IdentityTracker().assign(resolve_from_frames(m, ex.frames), index)
        apply_match(ex, m)
    return ex


def load_case(path: Path) -> tuple[dict[str, Any], list[Exchange], Any]:
    case = json.loads(path.read_text())
    exchanges = [build_exchange(i, spec) for i, spec in enumerate(case["exchanges"])]
    caps = case.get("capabilities", ["abort", "history", "resume", "subscribe", "regenerate", "edit"])
    adapter = create_adapter(load_protocol(case.get("protocol", "myproto")), **{c: True for c in caps})
    return case, exchanges, adapter
