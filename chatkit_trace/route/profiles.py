"""Route profiles: which HTTP exchange is which chatkit capability, and its ids.

A profile (docs/profiles.md) is a protocol adapter name, the Core's
capabilities, a list of routes and a redaction config.  Presets ship for
``openai``, ``adk``, ``a2a``, ``hermes`` and ``myproto`` (chatkit's example
routes); a user file (TOML or JSON) ``extends`` one and adds routes in front
of the preset's, or overrides anything else.

:meth:`Profile.match` runs on mitmproxy's event loop for every flow, so it
does no I/O and little work: routes are compiled once into regular
expressions and plain tuples, the URL is split by hand, the query string,
headers and JSON body are parsed only when a route asks for them, and at
most once per call.

Path patterns: literal text, ``{name}`` (one segment, or part of one, e.g.
``/tasks/{id}:cancel``), ``{name:path}`` (the rest, slashes included),
``*`` (any one segment) and ``**`` (any number of segments, none included):
``/**/chat/completions`` matches ``/v1/chat/completions`` and
``/chat/completions``.  A trailing slash is ignored; captured values are
percent-decoded.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast
from urllib.parse import unquote, unquote_plus

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from ..core import CORE_CAPABILITIES, PROFILE_CAPABILITIES
from ..errors import ChatkitTraceError, ProfileError, TraceInputError
from .identity import (
    ID_FIELDS,
    REQUEST_KINDS,
    SOURCE_KINDS,
    CompiledSource,
    IdPlan,
    Match,
    compile_pointer,
    lookup,
    scalar_id,
)

if TYPE_CHECKING:
    from ..adapters import Adapter

__all__ = [
    "CAPABILITIES",
    "CORE_CAPABILITIES",
    "Condition",
    "MESSAGE_COMMANDS",
    "Command",
    "MessageRule",
    "MessageRules",
    "message_rules",
    "Profile",
    "ProfileError",
    "PRESETS",
    "RedactConfig",
    "Route",
    "Source",
    "available_presets",
    "load_profile",
    "parse_profile",
]

#: What a route can be (trace.CAPABILITY_KINDS).
CAPABILITIES = PROFILE_CAPABILITIES  # chatkit_trace.core.Capability, in the profiles' order
PRESET_DIR = Path(__file__).with_name("presets")
#: Preset names (files ``presets/{name}.toml``).
PRESETS = ("openai", "adk", "a2a", "hermes", "agui", "myproto")


# -- models ------------------------------------------------------------------------------

_SHORT_KEY = {"path": "name", "query": "name", "header": "name", "body": "pointer", "response": "pointer",
              "events": "pointer", "constant": "value", "derived": "name"}


class Source(BaseModel):
    """Where one id comes from.

    ``{from = "path", name = "session"}``, ``{from = "query", name = "after"}``,
    ``{from = "header", name = "Last-Event-ID"}``, ``{from = "body", pointer =
    "params.message.contextId"}`` (a JSON pointer ``/a/b`` or a dotted path
    ``a.b``, ``-1`` for a list's last item; a list of pointers are
    alternatives), ``{from = "response", pointer = "run_id"}`` or ``{from =
    "response", name = "X-Session-Id"}`` (a response header), ``{from =
    "events", pointer = "invocationId"}``, ``{from = "constant", value =
    "default"}``, ``{from = "derived"}`` (``name`` = the scheme: ``sequence``
    for runs, ``exchange`` or ``run`` for sessions; identity.py).  A string
    ``"kind:arg"`` is short for the table: ``"path:session"``,
    ``"body:runId"``, ``"derived:run"``.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    from_: str = Field(alias="from")
    name: str | None = None
    pointer: str | list[str] | None = None
    value: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _short(cls, data: Any) -> Any:
        if isinstance(data, str):
            kind, sep, arg = data.partition(":")
            kind = kind.strip()
            out: dict[str, Any] = {"from": kind}
            if sep and kind in _SHORT_KEY:
                out[_SHORT_KEY[kind]] = arg.strip()
            elif sep:
                out["name"] = arg.strip()
            return out
        return data

    @field_validator("from_")
    @classmethod
    def _kind(cls, v: str) -> str:
        if v not in SOURCE_KINDS:
            raise ValueError(f"unknown source {v!r} (one of: {', '.join(SOURCE_KINDS)})")
        return v

    @model_validator(mode="after")
    def _complete(self) -> Source:
        k = self.from_
        if k in ("path", "query", "header") and not self.name:
            raise ValueError(f"a {k!r} source needs name = \"…\"")
        if k in ("body", "events") and self.pointer is None:
            raise ValueError(f"a {k!r} source needs pointer = \"…\" (a JSON pointer or dotted path)")
        if k == "response" and self.pointer is None and not self.name:
            raise ValueError("a 'response' source needs pointer = \"…\" (JSON body) or name = \"…\" (a header)")
        if k == "constant" and not self.value:
            raise ValueError("a 'constant' source needs value = \"…\"")
        if k == "derived" and self.name not in (None, "sequence", "exchange", "run"):
            raise ValueError(f"unknown derivation {self.name!r} (sequence, exchange or run)")
        return self

    def compile(self) -> CompiledSource:
        ptrs = self.pointer if isinstance(self.pointer, list) else [self.pointer] if self.pointer is not None else []
        name = self.name
        if self.from_ == "header" and name:
            name = name.lower()
        return CompiledSource(
            self.from_,
            name if self.from_ != "derived" else None,
            tuple(compile_pointer(p) for p in ptrs),
            self.value,
            (self.name or None) if self.from_ == "derived" else None,
        )


Scalar = str | int | float | bool | None


class Condition(BaseModel):
    """A condition written as a table: ``{present = true}``, ``{regex = "…"}``, ``{any = […]}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    present: bool | None = None
    regex: str | None = None
    any: list[Scalar] | None = None

    @field_validator("regex")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as err:
                raise ValueError(f"bad regular expression {v!r}: {err}") from None
        return v


CondValue = Any


def _conditions(v: Any) -> Any:
    """Check a table of conditions; values become scalars, lists or :class:`Condition`."""
    if not isinstance(v, dict):
        raise ValueError("must be a table of name = condition")
    out: dict[str, Any] = {}
    for k, c in v.items():
        if isinstance(c, dict):
            try:
                out[k] = Condition.model_validate(c)
            except ValidationError as err:
                e = err.errors(include_url=False)[0]
                what = "unknown key" if e["type"] == "extra_forbidden" else e["msg"].removeprefix("Value error, ")
                where = ".".join(str(x) for x in e["loc"])
                raise ValueError(f"{k}: {where + ': ' if where else ''}{what}") from None
        elif isinstance(c, list):
            if not all(x is None or isinstance(x, str | int | float | bool) for x in c):
                raise ValueError(f"{k}: a list of conditions holds only strings, numbers, booleans or null")
            out[k] = c
        elif c is None or isinstance(c, str | int | float | bool):
            out[k] = c
        else:
            raise ValueError(f"{k}: a condition is a value, a list of values or a table")
    return out


def _sources(v: Any) -> Any:
    if v is None:
        return []
    if isinstance(v, str | dict):
        return [v]
    return v


#: What a client message on a socket can be (``Route.messages``).
MESSAGE_COMMANDS = ("run", "abort", "resubscribe", "history")


def _pointers(v: Any) -> Any:
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    return v


class MessageRule(BaseModel):
    """Which client messages on a socket (a ``subscribe`` route) are chatkit
    commands, and where their ids are (docs/profiles.md, "WebSocket").

    ``match`` holds conditions on the message's JSON (as a route's ``body``
    conditions); ``session``, ``run`` and ``cursor`` are JSON pointers (or
    dotted paths) into the message, alternatives in order; ``input`` is the
    part of a ``run`` message that carries the run's body (default: the whole
    message); ``reply`` (``history`` only) holds conditions that tell the
    server message answering it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    capability: str
    name: str | None = None
    match: dict[str, CondValue]
    session: list[str] = Field(default_factory=list)
    run: list[str] = Field(default_factory=list)
    input: str | None = None
    cursor: list[str] = Field(default_factory=list)
    reply: dict[str, CondValue] = Field(default_factory=dict)

    @field_validator("session", "run", "cursor", mode="before")
    @classmethod
    def _norm_pointers(cls, v: Any) -> Any:
        return _pointers(v)

    @field_validator("match", "reply", mode="before")
    @classmethod
    def _norm_conditions(cls, v: Any) -> Any:
        return _conditions(v)

    @field_validator("capability")
    @classmethod
    def _capability(cls, v: str) -> str:
        if v not in MESSAGE_COMMANDS:
            raise ValueError(f"unknown command {v!r} (a client message is one of: {', '.join(MESSAGE_COMMANDS)})")
        return v

    @model_validator(mode="after")
    def _complete(self) -> MessageRule:
        if not self.match:
            raise ValueError("match: give at least one condition on the message (e.g. match = { type = \"run\" })")
        if self.capability == "history" and not self.reply:
            raise ValueError("reply: a history command needs the conditions of the server message that answers it")
        if self.reply and self.capability != "history":
            raise ValueError("reply: only a history command has a reply")
        if self.input is not None and self.capability != "run":
            raise ValueError("input: only a run command carries input")
        if self.cursor and self.capability != "resubscribe":
            raise ValueError("cursor: only a resubscribe command carries a cursor")
        if self.capability in ("run", "abort") and not self.run:
            raise ValueError(f"run: a {self.capability} command names its run (run = \"runId\")")
        return self

    def to_json(self) -> dict[str, Any]:
        """The rule as stored with each exchange of its route (``notes.identity.messages``)."""
        return {
            "capability": self.capability,
            "name": self.name,
            "match": {k: _cond_json(v) for k, v in self.match.items()},
            "session": list(self.session),
            "run": list(self.run),
            "input": self.input,
            "cursor": list(self.cursor),
            "reply": {k: _cond_json(v) for k, v in self.reply.items()},
        }


def _cond_json(v: Any) -> Any:
    return v.model_dump(exclude_none=True) if isinstance(v, Condition) else v


class Route(BaseModel):
    """One endpoint: which capability it is and where its ids come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    capability: str
    method: str | list[str] = "*"
    path: str
    name: str | None = None
    #: Conditions on query parameters: value, list of values (any of),
    #: ``true``/``false`` (present/absent), or a Condition table.
    query: dict[str, CondValue] = Field(default_factory=dict)
    #: Conditions on request headers (names are case-insensitive), as for ``query``.
    headers: dict[str, CondValue] = Field(default_factory=dict)
    #: Conditions on the JSON request body: pointer -> JSON value, list of
    #: values (any of) or a Condition table (``{present = true}``).
    body: dict[str, CondValue] = Field(default_factory=dict)
    session: list[Source] = Field(default_factory=list)
    run: list[Source] = Field(default_factory=list)
    cursor: list[Source] = Field(default_factory=list)
    target: list[Source] = Field(default_factory=list)
    #: The addon's hint: the response streams (True), is one JSON body
    #: (False), or decide by Content-Type (None).
    stream: bool | None = None
    #: What carries the run's output: ``auto`` (a streamed response's
    #: frames; a 2xx JSON error envelope too), ``body`` (the whole JSON
    #: response, one frame), ``items`` (one frame per item of a JSON array
    #: response) or ``none`` (the response only acknowledges).
    output: Literal["auto", "body", "items", "none"] = "auto"
    #: Body conditions under which a derived run id continues the session's
    #: latest run instead of starting a new one (the OpenAI tool loop).
    continue_when: dict[str, CondValue] = Field(default_factory=dict)
    #: A run id from the body that names a run already seen starts a new
    #: turn of it (``{id}:turn{k}``; A2A input-required follow-ups).
    turns: bool = False
    #: Match only exchanges whose response is an event stream (SSE, NDJSON or
    #: a WebSocket); other responses on this route stay plain exchanges.  The
    #: catch-all route of a profile made from an adapter name uses it.
    streams_only: bool = False
    #: What a ``history`` (or ``status``) read covers: ``session`` (the whole
    #: conversation: ADK session, chatkit HistoryResult), ``run`` (one run or
    #: task: A2A ``tasks/get``, Hermes ``GET /v1/runs/{id}``) or ``page`` (a
    #: part of the session: ``loadMore``).  Default: ``page`` when the route
    #: has a cursor, ``run`` when it names a run, else ``session``.
    scope: Literal["session", "run", "page"] | None = None
    #: Client messages that are chatkit commands (a shared socket: ``run``,
    #: ``abort``, ``resubscribe``, ``history``); only on a ``subscribe`` route.
    messages: list[MessageRule] = Field(default_factory=list)
    #: How the UI stops a run streamed on this route: ``close`` when closing
    #: the stream is the stop (the protocol has no stop request: stock ADK
    #: ``/run_sse``, OpenAI chat completions and Responses streams, the Hermes
    #: session chat stream, AG-UI).  A client that leaves such a stream
    #: mid-run is then the UI's stop, not a broken connection.  None: the
    #: profile's ``abort`` route stops runs.
    stop: Literal["close"] | None = None
    description: str | None = None

    @field_validator("session", "run", "cursor", "target", mode="before")
    @classmethod
    def _norm_sources(cls, v: Any) -> Any:
        return _sources(v)

    @field_validator("query", "headers", "body", "continue_when", mode="before")
    @classmethod
    def _norm_conditions(cls, v: Any) -> Any:
        return _conditions(v)

    @field_validator("capability")
    @classmethod
    def _capability(cls, v: str) -> str:
        if v not in CAPABILITIES:
            raise ValueError(f"unknown capability {v!r} (one of: {', '.join(CAPABILITIES)})")
        return v

    @field_validator("method")
    @classmethod
    def _method(cls, v: str | list[str]) -> str | list[str]:
        items = [v] if isinstance(v, str) else v
        if not items:
            raise ValueError("empty method list")
        for m in items:
            if m != "*" and not re.fullmatch(r"[A-Za-z]+", m):
                raise ValueError(f"bad HTTP method {m!r}")
        return v.upper() if isinstance(v, str) else [m.upper() for m in v]

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        compile_path(v)  # raises ValueError with the reason
        return v

    @model_validator(mode="after")
    def _path_names(self) -> Route:
        _, names = compile_path(self.path)
        for fname in ID_FIELDS:
            for src in getattr(self, fname):
                if src.from_ == "path" and src.name not in names:
                    have = ", ".join(names) or "none"
                    raise ValueError(
                        f"{fname}: path parameter {src.name!r} is not in path {self.path!r} (it has: {have})"
                    )
        for fname in ("cursor", "target"):
            for src in getattr(self, fname):
                if src.from_ == "derived":
                    raise ValueError(f"{fname}: a {fname} cannot be derived")
        for src in self.session:
            if src.from_ == "derived" and src.name == "sequence":
                raise ValueError("session: a session is derived from 'exchange' or 'run', not 'sequence'")
        for src in self.run:
            if src.from_ == "derived" and src.name not in (None, "sequence"):
                raise ValueError("run: a run is derived by 'sequence' only")
        if self.scope is not None and self.capability not in ("history", "status"):
            raise ValueError(f"scope: only a history or status route has a scope (this one is {self.capability!r})")
        if self.scope == "run" and not self.run:
            raise ValueError("scope: a 'run' scope needs the route to name its run (run = …)")
        if self.messages and self.capability != "subscribe":
            raise ValueError(f"messages: only a subscribe route (a socket) takes client messages as commands "
                             f"(this one is {self.capability!r})")
        if self.stop is not None and self.capability not in ("run", "regenerate", "edit", "resume"):
            raise ValueError(f"stop: only a route that streams a run can be stopped by closing it (this one is {self.capability!r})")
        return self

    @property
    def read_scope(self) -> str | None:
        """What a read on this route covers (``scope``, or its default); None for other routes."""
        if self.capability not in ("history", "status"):
            return None
        if self.scope is not None:
            return self.scope
        if self.cursor:
            return "page"
        return "run" if self.run else "session"




class RedactConfig(BaseModel):
    """What to redact before anything is stored (chatkit_trace.route.redact).

    The defaults (Authorization, Cookie, api_key, token, password …) are on
    unless ``keep_secrets = true``; ``headers``, ``query`` and ``fields``
    add names (case-insensitive; fields at any depth of a JSON or form
    body), ``names`` adds a name to all three.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    keep_secrets: bool = False
    headers: list[str] = Field(default_factory=list)
    query: list[str] = Field(default_factory=list)
    fields: list[str] = Field(default_factory=list)
    names: list[str] = Field(default_factory=list)

    def extend(self, spec: str | Sequence[str] | None) -> RedactConfig:
        """More names, as the addon's ``chatkit_redact`` option gives them.

        ``spec`` is a comma-separated string or a list; each item is a name
        for headers, query and fields alike, or prefixed ``header:``,
        ``query:`` or ``field:``; the item ``keep`` (or ``none``) turns the
        defaults off (``keep_secrets``).
        """
        items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec or ()) if s.strip()]
        h, q, f, n = list(self.headers), list(self.query), list(self.fields), list(self.names)
        keep = self.keep_secrets
        for item in items:
            kind, sep, name = item.partition(":")
            if not sep:
                if item.lower() in ("keep", "none", "keep_secrets"):
                    keep = True
                else:
                    n.append(item)
            elif kind.lower() in ("header", "headers"):
                h.append(name)
            elif kind.lower() in ("query", "param", "params"):
                q.append(name)
            elif kind.lower() in ("field", "fields", "body"):
                f.append(name)
            else:
                n.append(item)
        return RedactConfig(keep_secrets=keep, headers=h, query=q, fields=f, names=n)


class Profile(BaseModel):
    """A route profile (docs/profiles.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    protocol: str
    description: str = ""
    #: The Core's capabilities; by default every Core capability a route has.
    capabilities: list[str] = Field(default_factory=list)
    routes: list[Route]
    redact: RedactConfig = Field(default_factory=RedactConfig)

    _matcher: Any = PrivateAttr(default=None)
    #: The adapter spec this profile was made from (``--profile
    #: my_pkg.protocol:MyProtocol``), or None for a preset or a file.
    _adapter_spec: str | None = PrivateAttr(default=None)

    @field_validator("protocol")
    @classmethod
    def _protocol(cls, v: str) -> str:
        if ":" in v:
            return v
        from ..adapters import available_protocols

        known = available_protocols()
        if v not in known:
            raise ValueError(f"no adapter named {v!r} (installed: {', '.join(known)}; or a module path like pkg.mod:Class)")
        return v

    @field_validator("capabilities")
    @classmethod
    def _caps(cls, v: list[str]) -> list[str]:
        for c in v:
            if c not in CORE_CAPABILITIES:
                raise ValueError(f"unknown capability {c!r} (the Core's: {', '.join(CORE_CAPABILITIES)})")
        return v

    @model_validator(mode="after")
    def _defaults(self) -> Profile:
        if not self.routes:
            raise ValueError("routes: a profile needs at least one route")
        if not self.capabilities:
            # a socket's command messages count as the capabilities they are
            commands = {"resubscribe": "subscribe"}
            have = {r.capability for r in self.routes} | {commands.get(m.capability, m.capability)
                                                          for r in self.routes for m in r.messages}
            caps = sorted(have & set(CORE_CAPABILITIES) | {"run"}, key=CORE_CAPABILITIES.index)
            object.__setattr__(self, "capabilities", caps)
        self._matcher = _Matcher(self.routes)
        return self

    # -- matching ----------------------------------------------------------------------

    def match(
        self,
        method: str,
        url: str,
        headers: Sequence[tuple[str, str]] | Mapping[str, str] | None = (),
        body: bytes | str | None = None,
    ) -> Match | None:
        """The first route that matches this request, with the ids the request carries.

        ``url`` is a full URL or a path with its query.  ``body`` ``None``
        means "no body (yet)": routes with body conditions do not match.
        Ids from the response or the events are ``None`` here and listed in
        ``Match.pending``; see :mod:`chatkit_trace.route.identity`.
        """
        return self._matcher.match(method, url, headers, body)  # type: ignore[no-any-return]

    def create_adapter(self) -> Any:
        """The profile's adapter: ``create_adapter(load_protocol(protocol), <capabilities>=True)``.

        Capabilities the protocol cannot support (subscribe without
        ``identify_event``, history without ``decode_history``) are left out.
        """
        from ..adapters import create_adapter, load_protocol

        protocol = load_protocol(self.protocol)
        caps: dict[str, Any] = {c: True for c in self.capabilities if c != "run"}
        if "subscribe" in caps and not protocol.implements("identify_event"):
            del caps["subscribe"]
        if "history" in caps and not protocol.implements("decode_history"):
            del caps["history"]
        return create_adapter(protocol, **caps)

    @property
    def adapter_spec(self) -> str | None:
        """The adapter name or ``module:Class`` this profile was made from
        (``--profile agui-custom``, ``--profile my_pkg.protocol:MyProtocol``),
        or None for a preset or a profile file."""
        return self._adapter_spec

    @property
    def records_every_stream(self) -> bool:
        """Made from an adapter without routes of its own: its one route
        takes every streamed response of the upstream as a run."""
        return any(r.name == ALL_STREAMS_ROUTE for r in self.routes)

    def describe(self) -> list[tuple[int, str, str, str]]:
        """``(index, capability, method, path)`` per route, for tables."""
        out = []
        for i, r in enumerate(self.routes):
            m = r.method if isinstance(r.method, str) else "|".join(r.method)
            out.append((i, r.capability, m, r.path))
        return out


# -- path patterns ---------------------------------------------------------------------

_TOKEN = re.compile(r"\{([^{}]*)\}")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def compile_path(pattern: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """A path pattern as a regular expression and its parameter names.

    Use it with :func:`path_match`: a pattern that starts with ``/**/`` is
    compiled without that prefix and *searched* (a literal start makes that
    a fast substring scan); every other pattern is anchored at the start.
    """
    if not pattern.startswith("/"):
        raise ValueError(f"path pattern {pattern!r} must start with '/'")
    names: list[str] = []
    body = pattern.strip("/")
    segments = body.split("/") if body else []
    search = len(segments) > 1 and segments[0] == "**"
    out = [] if search else ["^"]
    for i, seg in enumerate(segments):
        if seg == "**":
            if search and i == 0:
                continue
            out.append("(?:/[^/]*)*" if i < len(segments) - 1 else "(?:/.*)?")
            continue
        out.append("/")
        if seg == "*":
            out.append("[^/]+")
            continue
        if seg == "":
            raise ValueError(f"path pattern {pattern!r} has an empty segment ('//')")
        pos = 0
        for m in _TOKEN.finditer(seg):
            out.append(re.escape(seg[pos:m.start()]))
            pname, _, kind = m.group(1).partition(":")
            if not _IDENT.fullmatch(pname):
                raise ValueError(f"bad parameter {m.group(0)!r} in path pattern {pattern!r}")
            if pname in names:
                raise ValueError(f"parameter {pname!r} appears twice in path pattern {pattern!r}")
            if kind == "path":
                if i != len(segments) - 1 or m.end() != len(seg):
                    raise ValueError(f"{m.group(0)!r} must end the path pattern {pattern!r}")
                out.append(f"(?P<{pname}>.+?)")
            elif kind == "":
                out.append(f"(?P<{pname}>[^/]+)")
            else:
                raise ValueError(f"unknown parameter type {kind!r} in {m.group(0)!r} (only :path)")
            names.append(pname)
            pos = m.end()
        rest = seg[pos:]
        if "{" in rest or "}" in rest:
            raise ValueError(f"unbalanced braces in path pattern {pattern!r}")
        out.append(re.escape(rest))
    out.append("/?$" if out != ["^"] else "/?$")
    regex = re.compile("".join(out))
    return _Search(regex) if search else regex, tuple(names)  # type: ignore[return-value]


class _Search:
    """A compiled pattern whose ``match`` searches (patterns that start with ``/**/``)."""

    __slots__ = ("match", "pattern")

    def __init__(self, regex: re.Pattern[str]) -> None:
        self.match = regex.search
        self.pattern = regex.pattern


# -- the matcher -----------------------------------------------------------------------

_MISSING = object()


def _cond(spec: Any, *, text: bool) -> tuple[str, Any]:
    """A compiled condition: (op, arg).  ``text``: compare as strings (query, headers)."""
    if isinstance(spec, Condition):
        if spec.present is not None:
            return ("present" if spec.present else "absent", None)
        if spec.regex is not None:
            return ("regex", re.compile(spec.regex))
        if spec.any is not None:
            return _cond(spec.any, text=text)
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
    body = tuple((compile_pointer(k), *_cond(v, text=False)) for k, v in r.body.items())
    cont = tuple((compile_pointer(k), *_cond(v, text=False)) for k, v in r.continue_when.items())
    return _Compiled(
        index=i,
        capability=r.capability,
        methods=methods,
        regex=regex,
        query=tuple((k, *_cond(v, text=True)) for k, v in r.query.items()),
        headers=tuple((k.lower(), *_cond(v, text=True)) for k, v in r.headers.items()),
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


class _Matcher:
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
        return isinstance(other, _Matcher)

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
            if c.body and not _body_ok(c.body, doc):
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
        continues = bool(c.continue_when) and doc is not None and doc is not _MISSING and _body_ok(c.continue_when, doc)
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


def _body_ok(conds: tuple[tuple[tuple[str, ...], str, Any], ...], doc: Any) -> bool:
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


# -- client messages as commands (a socket) ------------------------------------------------


@dataclass(frozen=True, slots=True)
class Command:
    """A client message on a socket that a route's ``messages`` make a chatkit command."""

    capability: str  # run | abort | resubscribe | history
    #: Index of the rule in the route's ``messages``.
    rule: int
    name: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    #: ``run``: the run's body (the part of the message at ``input``, else the whole message).
    body: Any = None
    #: ``resubscribe``: the event id it resumes after.
    cursor: str | None = None


class MessageRules:
    """A route's client-message rules, compiled (:func:`message_rules`)."""

    __slots__ = ("rules",)

    def __init__(self, rules: Sequence[Mapping[str, Any]]) -> None:
        compiled = []
        for r in rules:
            compiled.append((
                str(r.get("capability")),
                r.get("name"),
                _json_conditions(r.get("match") or {}),
                tuple(compile_pointer(p) for p in r.get("session") or ()),
                tuple(compile_pointer(p) for p in r.get("run") or ()),
                compile_pointer(r["input"]) if isinstance(r.get("input"), str) else None,
                tuple(compile_pointer(p) for p in r.get("cursor") or ()),
                _json_conditions(r.get("reply") or {}),
            ))
        self.rules = tuple(compiled)

    def command(self, message: Any) -> Command | None:
        """The command a client message is (the first rule that matches), or None."""
        if not isinstance(message, dict | list):
            return None
        for i, (cap, name, match, session, run, input_, cursor, _reply) in enumerate(self.rules):
            if not _body_ok(match, message):
                continue
            body = message
            if input_ is not None:
                body = lookup(message, input_)
            return Command(cap, i, name, _first_id(message, session), _first_id(message, run), body,
                           _first_id(message, cursor))
        return None

    def answers(self, rule: int, message: Any) -> bool:
        """Whether a server message is the reply of a command made by ``rule`` (history)."""
        reply = self.rules[rule][7]
        return bool(reply) and _body_ok(reply, message)


def _first_id(doc: Any, pointers: tuple[tuple[str, ...], ...]) -> str | None:
    for p in pointers:
        v = scalar_id(lookup(doc, p))
        if v is not None:
            return v
    return None


def _json_conditions(conds: Mapping[str, Any]) -> tuple[tuple[tuple[str, ...], str, Any], ...]:
    out = []
    for k, v in conds.items():
        spec = Condition.model_validate(v) if isinstance(v, dict) else v
        out.append((compile_pointer(k), *_cond(spec, text=False)))
    return tuple(out)


_RULES_CACHE: dict[str, MessageRules] = {}


def message_rules(rules: Sequence[Mapping[str, Any]] | None) -> MessageRules | None:
    """The compiled form of a route's ``messages`` as stored with an exchange
    (``notes.identity.messages``), cached; None for no rules."""
    if not rules:
        return None
    key = json.dumps(rules, sort_keys=True, default=str)
    got = _RULES_CACHE.get(key)
    if got is None:
        if len(_RULES_CACHE) > 256:
            _RULES_CACHE.clear()
        got = _RULES_CACHE[key] = MessageRules(rules)
    return got


# -- loading ------------------------------------------------------------------------------


def available_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such profile file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ProfileError(f"{path}: cannot read it ({err})") from None
    return _parse_text(text, str(path), json_first=path.suffix.lower() == ".json")


def _parse_text(text: str, where: str, *, json_first: bool) -> dict[str, Any]:
    if json_first or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as err:
            raise ProfileError(f"{where}: not valid JSON ({err})") from None
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise ProfileError(f"{where}: not valid TOML ({err})") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: a profile is a table (TOML) or an object (JSON), not {type(data).__name__}")
    return data


def _loc(loc: Sequence[int | str], raw: Any) -> str:
    """``('routes', 2, 'run', 0, 'from')`` -> ``routes[2].run.from`` (the [0] only if the file had a list)."""
    out = ""
    cur = raw
    for part in loc:
        if isinstance(part, int):
            if isinstance(cur, list):
                out += f"[{part}]"
                cur = cur[part] if part < len(cur) else None
            # else: a single table the validator wrapped in a list
            continue
        if part in ("function-after", "function-before", "function-wrap") or "[" in str(part):
            continue  # union / validator branches pydantic names in locations
        key = "from" if part == "from_" else str(part)
        out += ("." if out else "") + key
        cur = cur.get(key) if isinstance(cur, dict) else None
    return out


def _format_errors(err: ValidationError, raw: dict[str, Any], where: str) -> str:
    parts = []
    seen = set()
    for e in err.errors(include_url=False):
        loc = _loc(e["loc"], raw)
        msg = e["msg"]
        for prefix in ("Value error, ", "Assertion failed, "):
            if msg.startswith(prefix):
                msg = msg[len(prefix):]
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        elif e["type"] == "missing":
            msg = "required key is missing"
        line = f"{loc}: {msg}" if loc else msg
        if line not in seen:
            seen.add(line)
            parts.append(line)
    shown = parts[:3] + ([f"… and {len(parts) - 3} more"] if len(parts) > 3 else [])
    return f"{where}: " + "; ".join(shown)


def _merge(base: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """A user file on top of the profile it extends (user routes first)."""
    out = dict(base)
    replace_routes = bool(user.get("replace_routes", False))
    for k, v in user.items():
        if k in ("extends", "replace_routes"):
            continue
        if k == "routes":
            if not isinstance(v, list):
                out["routes"] = v  # validation reports it
            else:
                out["routes"] = list(v) + ([] if replace_routes else list(base.get("routes") or []))
        elif k == "redact" and isinstance(v, dict) and isinstance(base.get("redact"), dict):
            merged = dict(base["redact"])
            for rk, rv in v.items():
                if isinstance(rv, list) and isinstance(merged.get(rk), list):
                    merged[rk] = list(merged[rk]) + list(rv)
                else:
                    merged[rk] = rv
            out["redact"] = merged
        else:
            out[k] = v
    return out


def _resolve(name_or_path: str, *, relative_to: Path | None, seen: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    """The raw (merged) profile data and where it came from."""
    if name_or_path in PRESETS or (
        "/" not in name_or_path and "." not in name_or_path and (PRESET_DIR / f"{name_or_path}.toml").is_file()
    ):
        where = f"preset {name_or_path!r}"
        data = _parse_text((PRESET_DIR / f"{name_or_path}.toml").read_text(encoding="utf-8"), where, json_first=False)
    else:
        path = Path(name_or_path).expanduser()
        if relative_to is not None and not path.is_absolute():
            path = relative_to / path
        if not path.is_file() and _names_adapter(name_or_path):
            return _adapter_profile(name_or_path, seen)
        if not path.exists() and "/" not in name_or_path and not path.suffix:
            from ..adapters import available_protocols

            raise ProfileError(
                f"no profile named {name_or_path!r}: presets are {', '.join(available_presets())}; "
                f"adapters are {', '.join(available_protocols())}; or give a .toml/.json file or an adapter "
                "as module:Class (e.g. my_pkg.protocol:MyProtocol)"
            )
        where = str(path)
        data = _read(path)
    key = where
    if key in seen:
        raise ProfileError(f"{where}: extends itself ({' -> '.join((*seen, key))})")
    ext = data.get("extends")
    if ext is not None:
        if not isinstance(ext, str) or not ext:
            raise ProfileError(f"{where}: extends: must be a preset name or a file path")
        rel = None if where.startswith("preset ") else Path(where).parent
        try:
            base, _ = _resolve(ext, relative_to=rel, seen=(*seen, key))
        except ProfileError as err:
            raise ProfileError(f"{where}: extends: {err}") from None
        own_name = "name" in data
        data = _merge(base, data)
        if not own_name:
            data["name"] = Path(where).stem if not where.startswith("preset ") else base.get("name")
    elif "replace_routes" in data:
        raise ProfileError(f"{where}: replace_routes: only means something with extends")
    return data, where


#: The name of the one route of a profile made from an adapter without routes.
ALL_STREAMS_ROUTE = "all-streams"


def _names_adapter(spec: str) -> bool:
    """``module:attribute``, or a registered / entry-point adapter name."""
    if ":" in spec and "/" not in spec and not spec.startswith(":"):
        return True
    if "/" in spec or spec.endswith((".toml", ".json")):
        return False
    from ..adapters import available_protocols

    return spec in available_protocols()


def _adapter_profile(spec: str, seen: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    """The profile of an adapter named by ``spec``: the profile file the
    adapter ships (``AdapterProtocol.profile``, relative to its module), or
    one route that takes every streamed response of the upstream as a run of
    its own (session and run ids from a JSON body's usual names when it has
    them)."""
    from ..adapters import AdapterNotFound, load_protocol

    where = f"adapter {spec!r}"
    try:
        protocol = load_protocol(spec)
    except AdapterNotFound as err:
        raise ProfileError(
            f"{err} (chatkit-trace imports adapters in its own environment, {sys.executable}: "
            "install the adapter there, e.g. pip install -e ./my_adapter)"
        ) from None
    except Exception as err:  # noqa: BLE001 - an adapter module that fails to import
        raise ProfileError(f"{where}: importing it failed: {type(err).__name__}: {err}") from None
    own = getattr(protocol, "profile", None)
    if own:
        import inspect

        module_file = inspect.getsourcefile(type(protocol)) or ""
        path = Path(own) if Path(own).is_absolute() else Path(module_file).parent / own
        data, file_where = _resolve(str(path), relative_to=None, seen=(*seen, where))
        data = dict(data)
        data.setdefault("protocol", spec)
        return data, f"{where} ({file_where})"
    name = protocol.name if protocol.name and protocol.name != "custom" else spec
    return {
        "name": name,
        "protocol": spec,
        "description": f"adapter {spec} without routes: every streamed response of the upstream is a run",
        "capabilities": ["run"],
        "routes": [
            {
                "name": ALL_STREAMS_ROUTE,
                "capability": "run",
                "method": "*",
                "path": "/**",
                "session": [
                    "body:threadId", "body:thread_id", "body:sessionId", "body:session_id",
                    "header:X-Session-Id", "derived:exchange",
                ],
                "run": ["body:runId", "body:run_id", "derived"],
                "streams_only": True,
            }
        ],
    }, where


def parse_profile(data: Mapping[str, Any], where: str = "profile") -> Profile:
    """A :class:`Profile` from already-parsed data (no ``extends``); errors as :class:`ProfileError`."""
    raw = dict(data)
    try:
        return Profile.model_validate(raw)
    except ValidationError as err:
        raise ProfileError(_format_errors(err, raw, where)) from None


def load_profile(name_or_path: str, overrides: str | None = None) -> Profile:
    """A preset by name (``openai``, ``adk``, ``a2a``, ``hermes``, ``agui``,
    ``myproto``), a file, or an adapter: a registered or entry-point adapter
    name, or ``module:Class`` (the profile the adapter ships, else one route
    that records every streamed response of the upstream as a run).

    A file (``.toml`` or ``.json``) may say ``extends = "adk"`` (a preset or
    another file, relative to it): its ``routes`` come first, then the
    base's (``replace_routes = true`` drops the base's); ``redact`` lists
    are added; anything else replaces the base's.

    ``overrides`` is applied last, the same way: a file path, or inline TOML
    / JSON text (``'routes = [{capability = "run", method = "POST", path =
    "/chat"}]'``).  Errors are :class:`ProfileError` naming the file and the
    key: ``my.toml: routes[2].run.from: unknown source 'bodyy' …``.
    """
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise ProfileError("no profile given: name a preset (" + ", ".join(available_presets()) + ") or a file")
    data, where = _resolve(name_or_path.strip(), relative_to=None, seen=())
    adapter_spec = name_or_path.strip() if where.startswith("adapter ") else None
    if overrides:
        opath = Path(overrides).expanduser()
        if "\n" not in overrides and "=" not in overrides and not overrides.lstrip().startswith("{"):
            if not opath.is_file():
                raise ProfileError(f"{overrides}: no such profile overrides file")
            odata, owhere = _read(opath), str(opath)
        else:
            owhere = "profile overrides"
            odata = _parse_text(overrides, owhere, json_first=overrides.lstrip().startswith("{"))
        if "extends" in odata:
            raise ProfileError(f"{owhere}: extends: overrides always apply to the loaded profile")
        name = data.get("name")
        data = _merge(data, odata)
        if "name" not in odata:
            data["name"] = name
        where = f"{where} + {owhere}"
    profile = parse_profile(data, where)
    profile._adapter_spec = adapter_spec
    return profile


# -- a trace's adapter -------------------------------------------------------------------


def resolve_adapter(profile: str | None, meta: dict[str, Any]) -> tuple[Adapter, frozenset[str], str | None]:
    """The adapter and Core capabilities for a trace (``profile`` overrides the meta).

    ``chatkit_trace.loading.resolve_adapter`` is this function (its old home)."""
    from ..adapters import create_adapter, load_protocol

    protocol_name = meta.get("protocol")
    caps = meta.get("capabilities")
    name = profile or meta.get("profile")
    recordings = meta.get("recordings")
    if not protocol_name and isinstance(recordings, list) and recordings and isinstance(recordings[-1], dict):
        # A recording made before the top-level keys existed names its profile here.
        last = recordings[-1]
        protocol_name = last.get("protocol")
        name = name or last.get("profile")
    if profile is not None:
        try:
            prof = load_profile(profile)
            protocol_name, name = prof.protocol, prof.name
            if prof.adapter_spec is None or not caps:
                caps = sorted(prof.capabilities)
            # else: an adapter named alone re-decodes the trace with the
            # capabilities it was recorded with (only the protocol changes)
        except ImportError:
            protocol_name = profile
        except ChatkitTraceError:
            raise  # load_profile knows presets, files and adapters: its message lists them
    if not protocol_name:
        raise TraceInputError(
            "the trace does not say which protocol it was recorded with: pass --profile (openai, adk, a2a, hermes, ...)"
        )
    protocol = load_protocol(protocol_name)
    capabilities = frozenset(caps) if caps else frozenset({"abort", "history", "resume", "subscribe", "regenerate", "edit"})
    wanted: dict[str, Any] = {c: True for c in capabilities if c != "run"}
    adapter = create_adapter(protocol, **wanted)
    return adapter, capabilities | {"run"}, name
