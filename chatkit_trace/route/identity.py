"""Identity: which session, run, cursor and target an exchange belongs to.

A route (:mod:`chatkit_trace.route.profiles`) names, for each id, an
ordered list of *sources*.  :meth:`Profile.match
<chatkit_trace.route.profiles.Profile.match>` evaluates the sources it can
see in the request (``path``, ``query``, ``header``, ``body``, ``constant``);
the first one that yields a value wins.  Sources that need more than the
request are resolved later, in this order:

1. ``response``: the JSON response body (a JSON pointer or dotted path) or a
   response header, by :func:`resolve_from_response`;
2. ``events``: the stream's events (their JSON, as the adapter sees it), by
   :func:`resolve_from_event`, one event at a time until every pending id
   is found (usually the first event);
3. what an :class:`IdentityTracker` knows from earlier exchanges and the
   deterministic derivations (``derived``), by :meth:`IdentityTracker.assign`.

Everything here is pure and cheap except :class:`IdentityTracker`, which holds
per-recording state and must see the exchanges in request order (the order of
their exchange indices), once each.

Derived ids (never random; ``run_id_source == "derived"``)
----------------------------------------------------------
* **run**: an exchange that starts a run (``run``, ``regenerate``, ``edit``)
  whose sources gave no run id gets ``run-{n}``: the n-th run (from 1)
  derived in its session, in request order.  A route's ``continue_when``
  conditions mark a request that continues the session's latest run instead
  (the OpenAI tool loop: the request whose last message has ``role: tool``
  is the same chatkit run as the one that asked for the tool).  On a route
  that does not start a run (``POST /sessions/{s}/stop``), a ``derived`` run
  is the session's latest run.
* **session** ``derived`` (scheme ``exchange``, the default): ``x{index}``,
  a session of its own named after the exchange index; scheme ``run``: the
  run id (Hermes: a ``POST /v1/runs`` without ``session_id`` is its own
  session, ``session_id == run_id``).
* **inherited session**: an exchange that names a run but no session (Hermes
  ``GET /v1/runs/{id}/events``, A2A ``tasks/cancel``) belongs to the session
  the run was first seen in (``session_source == "inherited"``), so every
  exchange of one run lands in one Core.
* **turns** (route option ``turns``): a run request whose run id comes from
  the request body and names a run already seen starts a new chatkit run of
  the same backend task, ``{id}:turn{k}`` (k = 2, 3 …; A2A input-required
  follow-ups); later exchanges naming ``{id}`` (resume, abort, status) refer
  to its latest turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..trace import Exchange

__all__ = [
    "Match",
    "IdentityTracker",
    "RUN_STARTS",
    "SOURCE_KINDS",
    "apply_match",
    "body_is_output",
    "output_frames",
    "compile_pointer",
    "lookup",
    "EVENT_ID_TRIES",
    "resolve_from_event",
    "resolve_from_event_frame",
    "resolve_from_frames",
    "resolve_from_response",
    "scalar_id",
]

#: Where an id can come from (a route's sources).
SOURCE_KINDS = ("path", "query", "header", "body", "response", "events", "constant", "derived")
#: Sources known from the request alone.
REQUEST_KINDS = frozenset({"path", "query", "header", "body", "constant"})
#: Capabilities that start a run (a run id is derived when the wire has none).
RUN_STARTS = frozenset({"run", "regenerate", "edit"})
#: The ids a route can name, and the Match attribute each fills.
ID_FIELDS = ("session", "run", "cursor", "target")

Pointer = tuple[str, ...]


# -- JSON pointers and dotted paths ---------------------------------------------------


def compile_pointer(spec: str) -> Pointer:
    """``/a/b/0`` (RFC 6901) or ``a.b.0`` (dotted; ``-1`` is the last item) as tokens.

    The empty string (and ``/``-less ``""``) is the whole document.
    """
    if spec == "":
        return ()
    if spec.startswith("/"):
        return tuple(t.replace("~1", "/").replace("~0", "~") for t in spec[1:].split("/"))
    return tuple(spec.split("."))


def lookup(doc: Any, pointer: Pointer) -> Any:
    """The value at ``pointer`` in ``doc``, or ``None`` when any step is missing."""
    cur = doc
    for tok in pointer:
        if isinstance(cur, dict):
            cur = cur.get(tok)
            if cur is None:
                return None
        elif isinstance(cur, list):
            try:
                i = int(tok)
            except ValueError:
                return None
            if -len(cur) <= i < len(cur):
                cur = cur[i]
            else:
                return None
        else:
            return None
    return cur


def scalar_id(value: Any) -> str | None:
    """An id from a JSON value: strings (non-empty) and integers; anything else is no id."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return None


# -- compiled sources -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompiledSource:
    """One source of one id, ready to evaluate (built from a profile's ``Source``)."""

    kind: str
    #: path parameter / query parameter / header name (lower case) / response header name.
    name: str | None = None
    #: body / response / events pointers, tried in order.
    pointers: tuple[Pointer, ...] = ()
    value: str | None = None
    #: derived scheme: ``sequence`` (runs), ``exchange`` or ``run`` (sessions).
    scheme: str | None = None


@dataclass(frozen=True, slots=True)
class IdPlan:
    """The compiled sources of one route, per id field (``session``, ``run`` …)."""

    session: tuple[CompiledSource, ...] = ()
    run: tuple[CompiledSource, ...] = ()
    cursor: tuple[CompiledSource, ...] = ()
    target: tuple[CompiledSource, ...] = ()
    turns: bool = False

    def sources(self, name: str) -> tuple[CompiledSource, ...]:
        return getattr(self, name)  # type: ignore[no-any-return]


_EMPTY_PLAN = IdPlan()
_NOTHING: frozenset[str] = frozenset()


# -- Match -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Match:
    """What a route says about one exchange.

    ``run_id_source`` / ``session_id_source`` say where each id came from:
    ``path``, ``query``, ``header``, ``body``, ``constant``, ``response``,
    ``events``, ``derived`` (see the module docstring) or, for sessions only,
    ``inherited``.  ``pending_response`` / ``pending_events`` name the id
    fields (``session``, ``run``, ``cursor``, ``target``) that may still come
    from the response or the events; ``None`` values there are not final.
    """

    capability: str
    session_id: str | None = None
    run_id: str | None = None
    run_id_source: str | None = None
    cursor: str | None = None
    target_run_id: str | None = None
    route_index: int = -1
    session_id_source: str | None = None
    #: The route's hint: True = the response streams, False = one JSON body,
    #: None = decide from the Content-Type.
    stream: bool | None = None
    #: What carries the output: ``auto`` (a streamed response's frames),
    #: ``body`` (the whole JSON response is the output: one frame),
    #: ``none`` (the response only acknowledges; the output comes elsewhere).
    output: str = "auto"
    #: The route's ``continue_when`` held: a derived run continues the
    #: session's latest run (OpenAI tool loop).
    continues: bool = False
    #: The route's name, if it has one.
    route: str | None = None
    #: The route matches only event-stream responses (``Route.streams_only``):
    #: the recorder and ``import`` drop the match when the response is not one.
    streams_only: bool = False
    #: What a history/status read covers (``session``, ``run``, ``page``); None for other routes.
    scope: str | None = None
    #: ``close``: closing this run stream is the UI's stop (``Route.stop``).
    stop: str | None = None
    pending_response: frozenset[str] = _NOTHING
    pending_events: frozenset[str] = _NOTHING
    plan: IdPlan = field(default=_EMPTY_PLAN, compare=False, repr=False)
    #: A subscription's ``events`` pointers for session and run, read per
    #: event (``(("session", (pointer, …)), …)``); None elsewhere.
    per_event: tuple[tuple[str, tuple[Pointer, ...]], ...] | None = field(default=None, compare=False, repr=False)
    #: A subscription's client-message rules (``Route.messages``, as JSON).
    messages: tuple[dict[str, Any], ...] | None = field(default=None, compare=False, repr=False)

    @property
    def pending(self) -> frozenset[str]:
        """Id fields that may still be filled from the response or the events."""
        return self.pending_response | self.pending_events

    def get(self, name: str) -> str | None:
        return getattr(self, _ATTR[name])  # type: ignore[no-any-return]

    def to_json(self) -> dict[str, Any]:
        return {
            "capability": self.capability,
            "route_index": self.route_index,
            "route": self.route,
            "session_id": self.session_id,
            "session_id_source": self.session_id_source,
            "run_id": self.run_id,
            "run_id_source": self.run_id_source,
            "cursor": self.cursor,
            "target_run_id": self.target_run_id,
        }


_ATTR = {"session": "session_id", "run": "run_id", "cursor": "cursor", "target": "target_run_id"}
_SOURCE_ATTR = {"session": "session_id_source", "run": "run_id_source"}


def _with(match: Match, values: dict[str, tuple[str, str]], pending_response: frozenset[str], pending_events: frozenset[str]) -> Match:
    changes: dict[str, Any] = {"pending_response": pending_response, "pending_events": pending_events}
    for name, (value, kind) in values.items():
        changes[_ATTR[name]] = value
        if name in _SOURCE_ATTR:
            changes[_SOURCE_ATTR[name]] = kind
    return replace(match, **changes)


def _find(doc: Any, pointers: tuple[Pointer, ...]) -> str | None:
    for p in pointers:
        v = scalar_id(lookup(doc, p))
        if v is not None:
            return v
    return None


def _json_body(headers: Sequence[tuple[str, str]] | Mapping[str, str] | None, body: bytes | str | None) -> Any:
    if not body:
        return None
    ctype = ""
    for k, v in _pairs(headers):
        if k.lower() == "content-type":
            ctype = v.lower()
            break
    if ctype and "json" not in ctype:
        return None
    if not ctype:
        head = body.lstrip()[:1]
        if head not in (b"{", b"[", "{", "["):
            return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _pairs(headers: Sequence[tuple[str, str]] | Mapping[str, str] | None) -> Iterable[tuple[str, str]]:
    if headers is None:
        return ()
    if isinstance(headers, Mapping):
        return headers.items()
    return headers


def resolve_from_response(
    match: Match,
    status: int | None,
    headers: Sequence[tuple[str, str]] | Mapping[str, str] | None,
    body: bytes | str | None,
) -> Match:
    """Fill ids whose source is ``response`` from a (JSON) response.

    ``response`` sources with ``name`` read a response header; with a
    pointer, the JSON body (bodies that are not JSON give nothing).  Returns
    ``match`` itself when nothing was pending; otherwise a new Match in
    which no field waits for the response any more.  ``status`` is not
    consulted: an error body that carries the id still names it.
    """
    if not match.pending_response:
        return match
    doc: Any = None
    parsed = False
    found: dict[str, tuple[str, str]] = {}
    for name in match.pending_response:
        for src in match.plan.sources(name):
            if src.kind != "response":
                continue
            if src.name is not None:
                lname = src.name.lower()
                value = next((v for k, v in _pairs(headers) if k.lower() == lname and v), None)
            else:
                if not parsed:
                    doc, parsed = _json_body(headers, body), True
                value = _find(doc, src.pointers) if doc is not None else None
            if value is not None:
                found[name] = (value, "response")
                break
    pending_events = match.pending_events - found.keys()
    return _with(match, found, _NOTHING, pending_events)


def resolve_from_event(match: Match, event: Any) -> Match:
    """Fill ids whose source is ``events`` from one decoded event (its JSON value).

    Feed the events of the exchange in order until ``match.pending_events``
    is empty; returns ``match`` itself when the event names none of them.
    """
    if not match.pending_events or not isinstance(event, dict | list):
        return match
    found: dict[str, tuple[str, str]] = {}
    for name in match.pending_events:
        for src in match.plan.sources(name):
            if src.kind == "events":
                value = _find(event, src.pointers)
                if value is not None:
                    found[name] = (value, "events")
                    break
    if not found:
        return match
    return _with(match, found, match.pending_response - found.keys(), match.pending_events - found.keys())


#: How many server frames are read for ids named by ``events`` sources (live and import alike).
EVENT_ID_TRIES = 64


def resolve_from_event_frame(match: Match, frame: Any) -> Match:
    """:func:`resolve_from_event` for one recorded frame (``wire.Frame``): a
    server frame's JSON as the adapter sees it (:func:`wire.event_json`);
    client messages and frames that are not JSON name nothing."""
    if getattr(frame, "direction", "in") != "in":
        return match
    from ..wire import event_json

    value, err = event_json(frame)
    return match if err is not None else resolve_from_event(match, value)


def resolve_from_frames(match: Match, frames: Iterable[Any], limit: int = EVENT_ID_TRIES) -> Match:
    """:func:`resolve_from_event_frame` over recorded frames, in order: the
    first ``limit`` server frames, stopping once nothing is pending (the
    live writer reads the same frames as they arrive)."""
    tries = 0
    for frame in frames:
        if not match.pending_events or tries >= limit:
            break
        if getattr(frame, "direction", "in") == "in":
            tries += 1
            match = resolve_from_event_frame(match, frame)
    return match


# -- state across exchanges ----------------------------------------------------------------


class IdentityTracker:
    """Per-recording identity state: inherited sessions, turns, derived ids.

    One instance per recording (or import).  Call :meth:`assign` once per
    matched exchange, **in request order** (exchange index order), with the
    match after :func:`resolve_from_response` / :func:`resolve_from_event`.
    The same traffic in the same order always yields the same ids, whether
    recorded live or imported.
    """

    def __init__(self) -> None:
        #: run id (as on the wire, and as assigned) -> its session.
        self.run_session: dict[str, str] = {}
        #: run id on the wire -> the chatkit run of its latest turn.
        self.alias: dict[str, str] = {}
        self.turn_count: dict[str, int] = {}
        #: session (or "") -> how many runs were derived in it.
        self.derived_runs: dict[str, int] = {}
        #: session (or "") -> its latest run (any source).
        self.last_run: dict[str, str] = {}
        #: run ids seen starting a run (wire ids).
        self.started: set[str] = set()

    def assign(self, match: Match, exchange_index: int) -> Match:
        # long-function: the identity steps of one exchange in the order the module docstring gives them
        """The final ids of one exchange (see the module docstring)."""
        cap = match.capability
        plan = match.plan
        session, ssrc = match.session_id, match.session_id_source
        run, rsrc = match.run_id, match.run_id_source
        target = match.target_run_id
        wire_run = run
        starts = cap in RUN_STARTS
        # turns of one backend task (A2A): a body id that names a known run
        if run is not None:
            if starts and plan.turns and rsrc == "body" and run in self.started:
                k = self.turn_count.get(run, 1) + 1
                self.turn_count[run] = k
                new = f"{run}:turn{k}"
                self.alias[run] = new
                run = new
            elif not starts and run in self.alias:
                run = self.alias[run]
        if target is not None and target in self.alias:
            target = self.alias[target]
        # a run's session, from an earlier exchange of the same run
        if session is None and run is not None:
            inherited = self.run_session.get(run) or (self.run_session.get(wire_run) if wire_run else None)
            if inherited is not None:
                session, ssrc = inherited, "inherited"
        schemes = [s.scheme or "exchange" for s in plan.session if s.kind == "derived"]
        if session is None and "exchange" in schemes:
            session, ssrc = f"x{exchange_index}", "derived"
        # a derived run: the n-th of its session, or the latest one continued;
        # a route that only names "the current run" (stop, status) means the latest
        if run is None and (starts or any(s.kind == "derived" for s in plan.run)):
            key = session or ""
            last = self.last_run.get(key)
            if not starts:
                run = last
            elif match.continues and last is not None:
                run = last
            else:
                n = self.derived_runs.get(key, 0) + 1
                self.derived_runs[key] = n
                run = f"run-{n}"
            rsrc = "derived" if run is not None else rsrc
        if session is None and "run" in schemes and run is not None:
            session, ssrc = run, "derived"
        # remember
        if run is not None:
            if starts:
                self.last_run[session or ""] = run
                if wire_run is not None:
                    self.started.add(wire_run)
                self.started.add(run)
            if session is not None:
                self.run_session.setdefault(run, session)
                if wire_run is not None:
                    self.run_session.setdefault(wire_run, session)
        if (session, ssrc, run, rsrc, target) == (
            match.session_id, match.session_id_source, match.run_id, match.run_id_source, match.target_run_id
        ):
            return match
        return replace(
            match, session_id=session, session_id_source=ssrc, run_id=run, run_id_source=rsrc, target_run_id=target
        )


def apply_match(exchange: Exchange, match: Match | None) -> None:
    """Write a match's identity onto an :class:`~chatkit_trace.trace.Exchange` (in place).

    ``None`` leaves the exchange unmatched (capability ``None``: stored as a
    plain exchange and ignored by analysis).  The route and the session's
    source go into ``notes["identity"]``.
    """
    if match is None:
        exchange.capability = None
        return
    exchange.capability = match.capability
    exchange.session_id = match.session_id
    exchange.run_id = match.run_id
    exchange.run_id_source = match.run_id_source if match.run_id is not None else None
    exchange.cursor = match.cursor
    exchange.target_run_id = match.target_run_id
    note: dict[str, Any] = {"route": match.route_index}
    if match.route:
        note["route_name"] = match.route
    if match.scope:
        note["scope"] = match.scope
    if match.stop:
        note["stop"] = match.stop
    if match.session_id_source:
        note["session_source"] = match.session_id_source
    unresolved = sorted(f for f in match.pending if match.get(f) is None)
    if unresolved:
        note["unresolved"] = unresolved
    if match.per_event:
        note["events"] = {name: [list(p) for p in ptrs] for name, ptrs in match.per_event}
    if match.messages:
        note["messages"] = [dict(m) for m in match.messages]
    exchange.notes = {**exchange.notes, "identity": note}


#: Capabilities whose exchange carries a run's (or a session's) output.
OUTPUT_CAPABILITIES = frozenset({"run", "resume", "regenerate", "edit", "subscribe"})


def body_is_output(match: Match | None, status: int | None, body_json: Any) -> bool:
    """Whether a non-streamed JSON response is the exchange's output (``body`` frames).

    The recorder and ``import`` use the same rule, so they store the same
    frames: only on output capabilities and only for HTTP success (a failed
    call is refused, R2.2); the route's ``output = "body"`` (one frame: A2A
    ``message/send``) or ``"items"`` (one frame per item of a JSON array:
    ADK ``POST /run``) says yes, ``"none"`` says no (Hermes's ``202
    {"run_id"}``); ``"auto"`` says yes only for an error envelope (a JSON
    object with a top-level ``error``, e.g. A2A's JSON-RPC error answered as
    ``application/json`` instead of a stream), so the adapter can report the
    failure.
    """
    if match is None or match.capability not in OUTPUT_CAPABILITIES:
        return False
    if status is None or status >= 400 or body_json is None:
        return False
    if match.output in ("body", "items"):
        return True
    if match.output == "none":
        return False
    return isinstance(body_json, dict) and body_json.get("error") is not None


def output_frames(match: Match | None, status: int | None, body: bytes | None, exchange_index: int, at: float,
                  *, first_index: int = 0) -> list[Any]:
    """The ``body`` frames of a non-streamed response (:func:`body_is_output`), else ``[]``.

    ``output = "items"`` and a JSON array: one frame per item, each the
    item's exact bytes with its offsets in the body (an ADK ``/run`` reply
    is the list of the events ``/run_sse`` would have streamed); otherwise
    one frame holding the whole body.  Decoded bytes in, frames out: the
    recorder and ``import`` call this with the same arguments.
    """
    if not body:
        return []
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return []
    if not body_is_output(match, status, doc):
        return []
    from ..wire import body_frame

    assert match is not None
    if match.output == "items" and isinstance(doc, list):
        spans = _item_spans(body)
        if spans is not None:
            return [body_frame(body[s:e], exchange_index, at, index=first_index + i, start=s)
                    for i, (s, e) in enumerate(spans)]
    return [body_frame(body, exchange_index, at, index=first_index)]


_WS = " \t\r\n"


def _item_spans(body: bytes) -> list[tuple[int, int]] | None:
    """Byte spans of the items of a JSON array body (None if it is not one)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    decoder = json.JSONDecoder()
    spans: list[tuple[int, int]] = []
    i = len(text) - len(text.lstrip(_WS))
    if i >= len(text) or text[i] != "[":
        return None
    i += 1
    byte = len(text[:i].encode("utf-8"))
    pos = i
    while True:
        j = pos
        while j < len(text) and text[j] in _WS:
            j += 1
        if j < len(text) and text[j] == "]":
            return spans
        if spans:
            if j >= len(text) or text[j] != ",":
                return None
            j += 1
            while j < len(text) and text[j] in _WS:
                j += 1
        try:
            _, end = decoder.raw_decode(text, j)
        except ValueError:
            return None
        start_b = byte + len(text[pos:j].encode("utf-8"))
        end_b = start_b + len(text[j:end].encode("utf-8"))
        spans.append((start_b, end_b))
        pos, byte = end, end_b
