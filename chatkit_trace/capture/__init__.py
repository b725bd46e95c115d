"""capture: the live recorder (mitmproxy addon, writer and deriver processes) and ``import``.

How traffic is classified (profiles, identity, redaction, end kinds) is
:mod:`chatkit_trace.route`; the names below are re-exported from it for the
callers that import them from here.
"""

from ..route.identity import (
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
from ..route.profiles import (
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
from ..route.redact import REDACTED, Redactor, is_secret_name, redact_exchange

__all__ = [
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
