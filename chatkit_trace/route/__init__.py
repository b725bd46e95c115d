"""route: which exchange is what: route profiles, identity, redaction, end classification.

The one routing layer (issue 15 step 3). The live recorder's writer, ``chatkit-trace
import``, redrive and the fault addon all classify traffic through it, so the
same bytes recorded live or imported from a HAR or flow file become the same
exchanges. What each exchange goes through, in this order::

    profile = load_profile("adk")                   # or a user file extending a preset
    redactor = Redactor(profile.redact)             # defaults on
    tracker = IdentityTracker()                     # one per recording
    match = profile.match(method, url, headers, body)        # None: a plain exchange
    match = resolve_from_response(match, status, headers, body)  # JSON responses
    match = resolve_from_event(match, event_json)   # per event while match.pending_events
    match = tracker.assign(match, exchange_index)   # in request order: final ids
    apply_match(exchange, match); exchange = redactor.redact_exchange(exchange)

Everything but the tracker is pure; ``Profile.match`` is microseconds and
does no I/O (it runs on the proxy's event loop). This package sits below the
replay engine (``pipeline`` reads a socket's identity notes with its pointer
helpers and message rules) and above the adapters (a profile names one).
"""

from .ends import EndKind, classify_end, proxy_answered, websocket_close_notes
from .identity import (
    EVENT_ID_TRIES,
    RUN_STARTS,
    SOURCE_KINDS,
    IdentityTracker,
    Match,
    apply_match,
    body_is_output,
    output_frames,
    resolve_from_event,
    resolve_from_frames,
    resolve_from_response,
)
from .profiles import (
    CAPABILITIES,
    CORE_CAPABILITIES,
    PRESETS,
    Profile,
    ProfileError,
    RedactConfig,
    Route,
    Source,
    available_presets,
    load_profile,
    parse_profile,
)
from .redact import REDACTED, Redactor, is_secret_name, redact_exchange
from .router import STREAMED, Router, make_redactor

__all__ = [
    "EVENT_ID_TRIES",
    "STREAMED",
    "EndKind",
    "Router",
    "classify_end",
    "make_redactor",
    "proxy_answered",
    "websocket_close_notes",
    "CAPABILITIES",
    "CORE_CAPABILITIES",
    "PRESETS",
    "REDACTED",
    "RUN_STARTS",
    "SOURCE_KINDS",
    "IdentityTracker",
    "Match",
    "Profile",
    "ProfileError",
    "RedactConfig",
    "Redactor",
    "Route",
    "Source",
    "apply_match",
    "available_presets",
    "body_is_output",
    "output_frames",
    "is_secret_name",
    "load_profile",
    "parse_profile",
    "redact_exchange",
    "resolve_from_event",
    "resolve_from_frames",
    "resolve_from_response",
]
