r"""A route, as a profile file writes it: which capability an endpoint is and
where its ids come from (docs/profiles.md).

The pydantic models of one route (:class:`Route`, its id :class:`Source`\ s,
its :class:`Condition`\ s, a socket's :class:`MessageRule`\ s) and the path
patterns they are matched with.  Path patterns: literal text, ``{name}`` (one
segment, or part of one, e.g. ``/tasks/{id}:cancel``), ``{name:path}`` (the
rest, slashes included), ``*`` (any one segment) and ``**`` (any number of
segments, none included): ``/**/chat/completions`` matches
``/v1/chat/completions`` and ``/chat/completions``.  A trailing slash is
ignored; captured values are percent-decoded.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..core import PROFILE_CAPABILITIES
from .identity import ID_FIELDS, SOURCE_KINDS, CompiledSource, compile_pointer

__all__ = ["CAPABILITIES", "MESSAGE_COMMANDS", "Condition", "MessageRule", "Route", "Source", "compile_path"]

#: What a route can be (trace.CAPABILITY_KINDS).
CAPABILITIES = PROFILE_CAPABILITIES  # chatkit_trace.core.Capability, in the profiles' order


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
