"""Route profiles: which HTTP exchange is which chatkit capability, and its ids.

A profile (docs/profiles.md) is a protocol adapter name, the Core's
capabilities, a list of routes and a redaction config.  This module is the
face of four, one concern each: a route's model and path patterns
(:mod:`._routes`), the profile's model (:mod:`._profile`), the compiled
matcher (:mod:`._matcher`), a socket's client messages (:mod:`._messages`)
and loading (:mod:`._load`).  Presets ship for
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

from ..core import CORE_CAPABILITIES
from ..errors import ProfileError
from ._load import ResolvedProfile, available_presets, load_profile, parse_profile, resolve_adapter
from ._messages import Command, MessageRules, message_rules
from ._profile import ALL_STREAMS_ROUTE, PRESET_DIR, PRESETS, Profile, RedactConfig
from ._routes import CAPABILITIES, MESSAGE_COMMANDS, Condition, MessageRule, Route, Source, compile_path

__all__ = [
    "ALL_STREAMS_ROUTE",
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
    "PRESET_DIR",
    "RedactConfig",
    "ResolvedProfile",
    "Route",
    "Source",
    "available_presets",
    "compile_path",
    "load_profile",
    "parse_profile",
    "resolve_adapter",
]
