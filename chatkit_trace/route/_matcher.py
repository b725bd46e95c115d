"""A profile's routes compiled for :meth:`Profile.match
<chatkit_trace.route.profiles.Profile.match>`.

``match`` runs on mitmproxy's event loop for every flow, so it does no I/O
and little work: routes are compiled once into regular expressions and plain
tuples, the URL is split by hand, the query string, headers and JSON body are
parsed only when a route asks for them, and at most once per call.  The
conditions compiled here (:func:`compile_condition`, :func:`body_ok`) also
serve a socket's client-message rules (:mod:`._messages`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import unquote, unquote_plus

from ._routes import Condition, Route, compile_path
from .identity import ID_FIELDS, REQUEST_KINDS, IdPlan, Match, compile_pointer, lookup, scalar_id

__all__ = ["Matcher", "body_ok", "compile_condition"]

_MISSING = object()


def compile_condition(spec: Any, *, text: bool) -> tuple[str, Any]:
    """A compiled condition: (op, arg).  ``text``: compare as strings (query, headers)."""
    if isinstance(spec, Condition):
        if spec.present is not None:
            return ("present" if spec.present else "absent", None)
        if spec.regex is not None:
            return ("regex", re.compile(spec.regex))
        if spec.any is not None:
            return compile_condition(spec.any, text=text)
        return ("present", None)
    if isinstance(spec, bool) and text:
        return ("present" if spec else "absent", None)
    if isinstance(spec, list):
        vals = tuple(str(v) if text else v for v in spec)
        return ("in", vals)
    return ("eq", str(spec) if text and spec is not None else spec)


def _check(op: str, arg: Any, value: Any) -> bool:
    if op == "present":
        return value is not _MISSING
    if op == "absent":
        return value is _MISSING
    if value is _MISSING:
        return False
    if op == "eq":
        return bool(value == arg and type(value) is type(arg)) or (
            isinstance(value, int | float) and not isinstance(value, bool) and isinstance(arg, int | float)
            and not isinstance(arg, bool) and value == arg
        )
    if op == "in":
        return any(_check("eq", a, value) for a in arg)
    if op == "regex":
        return isinstance(value, str) and arg.search(value) is not None
    return False


@dataclass(slots=True)
class _Compiled:
    index: int
    capability: str
    methods: frozenset[str] | None
    regex: re.Pattern[str]
    query: tuple[tuple[str, str, Any], ...]
    headers: tuple[tuple[str, str, Any], ...]
    body: tuple[tuple[tuple[str, ...], str, Any], ...]
    continue_when: tuple[tuple[tuple[str, ...], str, Any], ...]
    plan: IdPlan
    needs_query: bool
    needs_headers: bool
    needs_body: bool
    stream: bool | None
    output: str
    name: str | None
    streams_only: bool
    scope: str | None
    stop: str | None
    #: id fields with response / events sources.
    later_response: frozenset[str]
    later_events: frozenset[str]
    #: A subscribe route's ``events`` pointers for session and run, read per message.
    per_event: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] | None
    #: A subscribe route's client-message rules (MessageRule.to_json).
    messages: tuple[dict[str, Any], ...] | None


def _compile_route(i: int, r: Route) -> _Compiled:
    regex, _ = compile_path(r.path)
    methods = None
    ms = [r.method] if isinstance(r.method, str) else r.method
    if "*" not in ms:
        methods = frozenset(ms)
    plan = IdPlan(
        session=tuple(s.compile() for s in r.session),
        run=tuple(s.compile() for s in r.run),
        cursor=tuple(s.compile() for s in r.cursor),
        target=tuple(s.compile() for s in r.target),
        turns=r.turns,
    )
    srcs = [s for f in ID_FIELDS for s in plan.sources(f)]
    subscribe = r.capability == "subscribe"
    body = tuple((compile_pointer(k), *compile_condition(v, text=False)) for k, v in r.body.items())
    cont = tuple((compile_pointer(k), *compile_condition(v, text=False)) for k, v in r.continue_when.items())
    return _Compiled(
        index=i,
        capability=r.capability,
        methods=methods,
        regex=regex,
        query=tuple((k, *compile_condition(v, text=True)) for k, v in r.query.items()),
        headers=tuple((k.lower(), *compile_condition(v, text=True)) for k, v in r.headers.items()),
        body=body,
        continue_when=cont,
        plan=plan,
        needs_query=bool(r.query) or any(s.kind == "query" for s in srcs),
        needs_headers=bool(r.headers) or any(s.kind == "header" for s in srcs),
        needs_body=bool(body) or bool(cont) or any(s.kind == "body" for s in srcs),
        stream=r.stream,
        output=r.output,
        name=r.name,
        streams_only=r.streams_only,
        scope=r.read_scope,
        stop=r.stop,
        later_response=frozenset(f for f in ID_FIELDS if any(s.kind == "response" for s in plan.sources(f))),
        # On a subscription (a socket) the run is per event, never the exchange's.
        later_events=frozenset(f for f in ID_FIELDS if any(s.kind == "events" for s in plan.sources(f))
                               and not (subscribe and f == "run")),
        per_event=_per_event(plan) if subscribe else None,
        messages=tuple(m.to_json() for m in r.messages) or None,
    )


def _per_event(plan: IdPlan) -> tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] | None:
    """The ``events`` pointers of a subscription's session and run: on a
    subscription every event names its own (a shared socket carries several
    sessions), so they are read per event."""
    out = []
    for f in ("session", "run"):
        ptrs = tuple(p for s in plan.sources(f) if s.kind == "events" for p in s.pointers)
        if ptrs:
            out.append((f, ptrs))
    return tuple(out) or None


def _split_url(url: str) -> tuple[str, str]:
    """(path, query) of a full URL or of a path; no fragment."""
    h = url.find("#")
    if h >= 0:
        url = url[:h]
    if not url.startswith("/"):
        s = url.find("://")
        if s >= 0:
            p = url.find("/", s + 3)
            q = url.find("?", s + 3)
            if p < 0 or (0 <= q < p):
                return "/", (url[q + 1:] if q >= 0 else "")
            url = url[p:]
    q = url.find("?")
    if q >= 0:
        return url[:q] or "/", url[q + 1:]
    return url or "/", ""


def _parse_query(qs: str) -> dict[str, str]:
    out: dict[str, str] = {}
    if not qs:
        return out
    for pair in qs.split("&"):
        if not pair:
            continue
        k, _, v = pair.partition("=")
        k = unquote_plus(k) if ("%" in k or "+" in k) else k
        if k not in out:
            out[k] = unquote_plus(v) if ("%" in v or "+" in v) else v
    return out


class Matcher:
    __slots__ = ("routes", "header_names")

    def __init__(self, routes: Sequence[Route]) -> None:
        self.routes = tuple(_compile_route(i, r) for i, r in enumerate(routes))
        names: set[str] = set()
        for c in self.routes:
            names.update(h for h, _, _ in c.headers)
            for f in ID_FIELDS:
                names.update(s.name for s in c.plan.sources(f) if s.kind == "header" and s.name)
        self.header_names = frozenset(names)

    def __eq__(self, other: object) -> bool:  # derived from the routes, which profiles compare
        return isinstance(other, Matcher)

    __hash__ = None  # type: ignore[assignment]

    def match(
        self,
        method: str,
        url: str,
        headers: Sequence[tuple[str, str]] | Mapping[str, str] | None,
        body: bytes | str | None,
    ) -> Match | None:
        method = method.upper()
        path, qs = _split_url(url)
        query: dict[str, str] | None = None
        hdrs: dict[str, str] | None = None
        doc: Any = _MISSING  # parsed body; None = no JSON body
        for c in self.routes:
            if c.methods is not None and method not in c.methods:
                continue
            m = c.regex.match(path)
            if m is None:
                continue
            if c.needs_query and query is None:
                query = _parse_query(qs)
            if c.needs_headers and hdrs is None:
                hdrs = self._headers(headers)
            if c.needs_body and doc is _MISSING:
                doc = _body_json(body)
            if c.query and not all(_check(op, arg, query.get(k, _MISSING)) for k, op, arg in c.query):  # type: ignore[union-attr]
                continue
            if c.headers and not all(_check(op, arg, hdrs.get(k, _MISSING)) for k, op, arg in c.headers):  # type: ignore[union-attr]
                continue
            if c.body and not body_ok(c.body, doc):
                continue
            return self._ids(c, m, query, hdrs, doc)
        return None

    def _headers(self, headers: Sequence[tuple[str, str]] | Mapping[str, str] | None) -> dict[str, str]:
        out: dict[str, str] = {}
        if not headers or not self.header_names:
            return out
        pairs = headers.items() if isinstance(headers, Mapping) else headers
        want = self.header_names
        for k, v in pairs:
            if isinstance(k, bytes):
                k = k.decode("latin-1")
                v = v.decode("latin-1") if isinstance(v, bytes) else v
            lk = k.lower()
            if lk in want and lk not in out:
                out[lk] = v
        return out

    def _ids(self, c: _Compiled, m: re.Match[str], query: dict[str, str] | None, hdrs: dict[str, str] | None, doc: Any) -> Match:
        values: dict[str, str | None] = {}
        kinds: dict[str, str | None] = {}
        pend_r: set[str] = set()
        pend_e: set[str] = set()
        for fname in ID_FIELDS:
            value: str | None = None
            kind: str | None = None
            for s in c.plan.sources(fname):
                k = s.kind
                if k not in REQUEST_KINDS:
                    continue
                if k == "path":
                    raw = m.group(cast(str, s.name))  # a path source names its placeholder
                    value = unquote(raw) if "%" in raw else raw
                elif k == "query":
                    value = (query or {}).get(s.name) or None  # type: ignore[arg-type]
                elif k == "header":
                    value = (hdrs or {}).get(s.name) or None  # type: ignore[arg-type]
                elif k == "body":
                    if doc is not None and doc is not _MISSING:
                        for p in s.pointers:
                            value = scalar_id(lookup(doc, p))
                            if value is not None:
                                break
                else:  # constant
                    value = s.value
                if value is not None:
                    kind = k
                    break
            values[fname], kinds[fname] = value, kind
            if value is None:
                if fname in c.later_response:
                    pend_r.add(fname)
                if fname in c.later_events:
                    pend_e.add(fname)
        continues = bool(c.continue_when) and doc is not None and doc is not _MISSING and body_ok(c.continue_when, doc)
        return Match(
            capability=c.capability,
            session_id=values["session"],
            run_id=values["run"],
            run_id_source=kinds["run"],
            cursor=values["cursor"],
            target_run_id=values["target"],
            route_index=c.index,
            session_id_source=kinds["session"],
            stream=c.stream,
            output=c.output,
            continues=continues,
            route=c.name,
            streams_only=c.streams_only,
            scope=c.scope,
            stop=c.stop,
            pending_response=frozenset(pend_r),
            pending_events=frozenset(pend_e),
            plan=c.plan,
            per_event=c.per_event,
            messages=c.messages,
        )


def _body_json(body: bytes | str | None) -> Any:
    if not body:
        return None
    head = body[:1] if isinstance(body, bytes | str) else b""
    if head not in (b"{", b"[", "{", "[") and body.lstrip()[:1] not in (b"{", b"[", "{", "["):
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def body_ok(conds: tuple[tuple[tuple[str, ...], str, Any], ...], doc: Any) -> bool:
    if doc is None or doc is _MISSING:
        return False
    for ptr, op, arg in conds:
        value = _lookup_present(doc, ptr)
        if not _check(op, arg, value):
            return False
    return True


def _lookup_present(doc: Any, ptr: tuple[str, ...]) -> Any:
    cur = doc
    for tok in ptr:
        if isinstance(cur, dict):
            if tok not in cur:
                return _MISSING
            cur = cur[tok]
        elif isinstance(cur, list):
            try:
                i = int(tok)
            except ValueError:
                return _MISSING
            if not -len(cur) <= i < len(cur):
                return _MISSING
            cur = cur[i]
        else:
            return _MISSING
    return cur
