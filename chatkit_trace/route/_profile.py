"""A route profile: a protocol adapter's name, the Core's capabilities, its
routes and a redaction config (docs/profiles.md), validated once (pydantic)
and matched against every request (:meth:`Profile.match`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from ..core import CORE_CAPABILITIES
from ._matcher import Matcher
from ._routes import Route
from .identity import Match

__all__ = ["ALL_STREAMS_ROUTE", "PRESETS", "PRESET_DIR", "Profile", "RedactConfig"]

PRESET_DIR = Path(__file__).with_name("presets")


#: Preset names (files ``presets/{name}.toml``).
PRESETS = ("openai", "adk", "a2a", "hermes", "agui", "myproto")


#: The name of the one route of a profile made from an adapter without routes.
ALL_STREAMS_ROUTE = "all-streams"


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
        self._matcher = Matcher(self.routes)
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
