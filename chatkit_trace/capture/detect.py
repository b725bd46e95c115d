"""Which preset profile a recording's traffic looks like.

``check`` names it when nothing in a trace matched the profile it was given,
and the recorder logs it the first time a streamed response matches no
route, with the same sentence (:func:`unmatched_hint`).  The guess asks the
presets themselves (their routes are the one description of each
protocol's endpoints): ``POST /run_sse`` is an ``adk`` route, ``POST
/v1/chat/completions`` an ``openai`` one, a JSON-RPC ``message/stream`` body
an ``a2a`` one, ``/v1/runs`` a ``hermes`` one and chatkit's example routes
(``/sessions/{id}/runs``, whose history read is a ``{"runs": [...]}``
HistoryResult) ``myproto``.  Where two presets match the same requests
(``/send`` and ``/events?sessionId=`` are in both ``openai`` and
``myproto``), the one whose adapter knows the recorded events wins; a tie
names both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

__all__ = ["Guess", "guess_profile", "route_label", "unmatched_hint", "describe_routes"]

_ID_SEGMENT = re.compile(r"^(?=.*\d)[A-Za-z0-9_.:~-]{6,}$|^\d+$|^[0-9a-f-]{8,}$", re.I)
_VERSION = re.compile(r"^v\d+(\.\d+)?$", re.I)


#: Path segments after which the next segment names one item (``/sessions/s1``).
_COLLECTIONS = frozenset({"sessions", "runs", "threads", "tasks", "users", "apps", "conversations", "chats", "agents",
                          "messages", "responses", "contexts"})


def route_label(method: str, path: str) -> str:
    """``POST /sessions/{id}/runs``: a request's method and path with ids replaced
    (id-like segments, and the segment after a collection name)."""
    segs: list[str] = []
    prev = ""
    for seg in (path or "/").split("?", 1)[0].split("/"):
        is_id = bool(seg) and not _VERSION.match(seg) and (
            bool(_ID_SEGMENT.match(seg)) or (prev.lower() in _COLLECTIONS and seg.lower() not in _COLLECTIONS)
        )
        segs.append("{id}" if is_id else seg)
        prev = seg
    return f"{method.upper()} {'/'.join(segs) or '/'}"


@dataclass
class Guess:
    """The presets the traffic looks like, best first (empty: none matched)."""

    profiles: tuple[str, ...] = ()
    #: preset -> how many of the exchanges its routes match
    matched: dict[str, int] = field(default_factory=dict)

    @property
    def best(self) -> str | None:
        return self.profiles[0] if len(self.profiles) == 1 else None

    def phrase(self) -> str:
        """``looks like openai`` / ``looks like openai or myproto`` / ``matches no preset either``."""
        if not self.profiles:
            return "matches none of the presets either"
        return "looks like " + " or ".join(self.profiles)


@cache
def _preset(name: str) -> Any:
    from ..route.profiles import load_profile

    return load_profile(name)


def _presets() -> tuple[str, ...]:
    from ..route.profiles import PRESETS

    return PRESETS


def _known_events(protocol: Any, frames: Sequence[Any]) -> int:
    """How many of ``frames`` the protocol calls a known event (``event_known``)."""
    if protocol is None or not protocol.implements("event_known"):
        return 0
    from ..wire import event_json

    n = 0
    for fr in frames[:64]:
        if getattr(fr, "direction", "in") != "in":
            continue
        value, err = event_json(fr)
        if err is not None or not isinstance(value, dict):
            continue
        try:
            n += bool(protocol.event_known(value))
        except Exception:  # noqa: BLE001 - a guess never fails
            pass
    return n


def _history_ok(protocol: Any, body: Any) -> bool:
    if protocol is None or not protocol.implements("decode_history") or body is None:
        return False
    try:
        protocol.decode_history(body, "s")
    except Exception:  # noqa: BLE001 - adapter code on a guess: a protocol that cannot decode it is no match
        return False
    return True


def guess_profile(exchanges: Iterable[Any], *, exclude: str | None = None) -> Guess:
    """The presets whose routes match ``exchanges`` (objects with ``method``,
    ``url``, ``request_headers``, ``request_body`` and optionally ``frames``
    and ``response_json()``), best first.

    Ranked by streamed exchanges matched, then by events and history bodies
    the preset's adapter understands, then by exchanges matched.  ``exclude``
    (the profile already tried) is left out.
    """
    from ..adapters import load_protocol

    exs = list(exchanges)
    scores: dict[str, tuple[int, int, int]] = {}
    matched: dict[str, int] = {}
    for name in _presets():
        if name == exclude:
            continue
        try:
            prof = _preset(name)
        except Exception:  # noqa: BLE001 - a guess: a preset that does not load is skipped
            continue
        streamed = understood = total = 0
        protocol = None
        for ex in exs:
            try:
                m = prof.match(ex.method, ex.url, ex.request_headers, ex.request_body)
            except Exception:  # noqa: BLE001 - a guess: a route that cannot match this exchange is no match
                m = None
            if m is None:
                continue
            total += 1
            frames = list(getattr(ex, "frames", None) or ())
            if frames or getattr(ex, "transport", None) in ("sse", "ndjson", "ws"):
                streamed += 1
            if protocol is None:
                try:
                    protocol = load_protocol(prof.protocol)
                except Exception:  # noqa: BLE001 - a guess: a protocol that does not load understands nothing
                    protocol = None
            understood += _known_events(protocol, frames)
            if m.capability == "history" and hasattr(ex, "response_json"):
                understood += _history_ok(protocol, ex.response_json())
        if total:
            scores[name] = (streamed, understood, total)
            matched[name] = total
    if not scores:
        return Guess((), matched)
    top = max(scores.values())
    best = tuple(n for n in _presets() if scores.get(n) == top)
    return Guess(best, matched)


def describe_routes(exchanges: Iterable[Any], limit: int = 3, *, counts: bool = True) -> str:
    """``POST /v1/chat/completions (6 exchanges, 52 frames), POST /v1/responses …``
    (``counts=False``: the routes alone)."""
    groups: dict[str, list[int]] = {}
    for ex in exchanges:
        label = route_label(ex.method, getattr(ex, "path", None) or _path(ex.url))
        rpc = _rpc_method(getattr(ex, "request_body", None))
        if rpc:
            label += f" {rpc}"
        g = groups.setdefault(label, [0, 0])
        g[0] += 1
        g[1] += len(getattr(ex, "frames", None) or ())
    items = sorted(groups.items(), key=lambda kv: (-kv[1][1], -kv[1][0], kv[0]))
    parts = []
    for label, (n, frames) in items[:limit]:
        what = f"{n} exchange{'s' if n != 1 else ''}"
        if frames:
            what += f", {frames} frame{'s' if frames != 1 else ''}"
        parts.append(f"{label} ({what})" if counts else label)
    if len(items) > limit:
        parts[-1] = f"{parts[-1]} and {len(items) - limit} more route{'s' if len(items) - limit != 1 else ''}"
    return ", ".join(parts)


def _rpc_method(body: Any) -> str | None:
    """A JSON-RPC request's method (A2A puts every call on one path)."""
    if not body or not isinstance(body, (bytes, str)) or body.lstrip()[:1] not in (b"{", "{"):
        return None
    import json

    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    method = doc.get("method") if isinstance(doc, dict) and "jsonrpc" in doc else None
    return method[:60] if isinstance(method, str) else None


def _path(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).path or "/"


def unmatched_hint(profile: str | None, routes: str, guess: Guess, *, not_understood: bool = False) -> str:
    """The one sentence ``check`` and the recorder say about traffic ``profile``
    did not match: ``POST /v1/chat/completions (…) matched no route of profile
    'adk'; it looks like openai: use --profile openai``.  ``not_understood``:
    the routes matched, but the profile's adapter understood none of their events."""
    if not profile:
        head = f"{routes} was recorded without a profile"
    elif not_understood:
        head = f"{routes} matched profile {profile!r}, but its adapter understood none of the events"
    else:
        head = f"{routes} matched no route of profile {profile!r}"
    if len(guess.profiles) == 1:
        return f"{head}; it looks like {guess.profiles[0]}: use --profile {guess.profiles[0]}"
    if guess.profiles:
        return f"{head}; it looks like {' or '.join(guess.profiles)}: use --profile " + " or --profile ".join(guess.profiles)
    return f"{head}; it matches none of the presets either: write a profile for it (docs/profiles.md)"
