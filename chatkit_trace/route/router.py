"""The routing steps of one recording, in their one order: :class:`Router`.

Every recorder of traffic classifies an exchange through a :class:`Router`:
the live writer step by step as the exchange's parts arrive
(:meth:`Router.match`, :meth:`Router.keeps`, :meth:`Router.respond`,
:meth:`Router.output`, :meth:`Router.event`, :meth:`Router.assign`), the
importer and redrive all at once for an exchange whose traffic is complete
(:meth:`Router.route`).  The steps, in order:

1. **match** the request (method, URL, headers and the decoded body) against
   the profile's routes (:meth:`Profile.match`); None is a plain exchange;
2. **keep** the match only if the route may carry this transport (a
   ``streams_only`` route keeps event streams and WebSockets only);
3. **respond**: ids from the response headers and, for a whole (JSON) body,
   the body (:func:`resolve_from_response`); a non-streamed body that is the
   run's output becomes ``body`` frames (:func:`output_frames`);
4. **events**: ids from the first :data:`EVENT_ID_TRIES` server frames
   (:func:`resolve_from_event`);
5. **assign** the final ids in request order (:class:`IdentityTracker`) and
   write them onto the exchange (:func:`apply_match`).

Redaction never changes what is matched: the steps read the raw request
and response, and what is stored is redacted afterwards
(:func:`make_redactor`; the importer learns every secret first, the writer
redacts each part as it arrives).  How the exchange ended is
:func:`chatkit_trace.route.ends.classify_end`; which transport a response
is, :func:`chatkit_trace.wire.content_transport`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .identity import (
    EVENT_ID_TRIES,
    IdentityTracker,
    Match,
    apply_match,
    output_frames,
    resolve_from_event_frame,
    resolve_from_frames,
    resolve_from_response,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..trace import Exchange
    from ..wire import Frame
    from .profiles import Profile
    from .redact import Redactor

__all__ = ["EVENT_ID_TRIES", "STREAMED", "Router", "make_redactor"]

#: Transports that stream events (a ``streams_only`` route keeps only these).
STREAMED = ("sse", "ndjson", "ws")

#: Request or response headers: (name, value) pairs (str, or bytes as mitmproxy holds them) or a mapping.
Headers = Sequence[tuple[Any, Any]] | Mapping[str, str] | None


class Router:
    """One recording's routing: a profile (or None: nothing matches) and the
    identity state its exchanges build up in request order."""

    def __init__(self, profile: Profile | None) -> None:
        self.profile = profile
        self.tracker = IdentityTracker()

    # -- the steps, one at a time (the live writer) --------------------------------------------

    def match(self, method: str, url: str, headers: Headers, body: bytes | str | None) -> Match | None:
        """Step 1: the route of a request, with the ids the request carries."""
        if self.profile is None:
            return None
        return self.profile.match(method, url, headers, body)

    @staticmethod
    def keeps(match: Match | None, transport: str | None, status: int | None = None) -> bool:
        """Step 2: whether ``match`` stands for a response of this transport
        (a 101 is a WebSocket before its first message)."""
        if match is None:
            return False
        return not match.streams_only or transport in STREAMED or status == 101

    @staticmethod
    def respond(match: Match, status: int | None, headers: Headers, body: bytes | None) -> Match:
        """Step 3: ids from the response (``body`` None for a stream: headers only)."""
        return resolve_from_response(match, status, headers, body)

    @staticmethod
    def output(match: Match | None, status: int | None, body: bytes | None, index: int, at: float,
               *, first_index: int = 0) -> list[Any]:
        """Step 3: the ``body`` frames of a whole response that is the run's output, else ``[]``."""
        return output_frames(match, status, body, index, at, first_index=first_index)

    @staticmethod
    def event(match: Match, frame: Frame) -> Match:
        """Step 4: ids from one server frame (client messages name nothing here)."""
        return resolve_from_event_frame(match, frame)

    def assign(self, match: Match, index: int) -> Match:
        """Step 5: the final ids (call once per matched exchange, in request order)."""
        return self.tracker.assign(match, index)

    # -- a complete exchange at once (import, redrive) ---------------------------------------

    def resolve(self, ex: Exchange, *, output: bool = True) -> Match | None:
        """Steps 1-4 for an exchange whose traffic is complete.  ``output``: a
        whole body that is the run's output becomes the exchange's ``body``
        frames (in place)."""
        m = self.match(ex.method, ex.url, ex.request_headers, ex.request_body)
        if m is None or not self.keeps(m, ex.transport, ex.status):
            return None
        m = self.respond(m, ex.status, ex.response_headers, ex.response_body)
        if output and ex.response_body is not None and ex.transport is None and not ex.frames:
            frames = self.output(m, ex.status, ex.response_body, ex.index, ex.ended_at or ex.started_at)
            if frames:
                ex.frames = frames
                ex.transport = "body"
                ex.end = ex.end or "complete"
        return self.events(m, ex.frames)

    @staticmethod
    def events(match: Match, frames: Iterable[Frame]) -> Match:
        """Step 4 over recorded frames: the first :data:`EVENT_ID_TRIES` server frames, as live."""
        return resolve_from_frames(match, frames, EVENT_ID_TRIES)

    def route(self, ex: Exchange) -> None:
        """Steps 1-5 for the next exchange in request order (in place)."""
        m = self.resolve(ex)
        if m is not None:
            m = self.assign(m, ex.index)
        apply_match(ex, m)

    def route_all(self, exchanges: Iterable[Exchange]) -> list[Exchange]:
        """:meth:`route` for every exchange, in request order (exchange index)."""
        out = sorted(exchanges, key=lambda e: e.index)
        for ex in out:
            self.route(ex)
        return out


def make_redactor(profile: Profile | None, extra: str | Sequence[str] | None) -> Redactor | None:
    """The redactor: the profile's rules (or the defaults) plus extra names
    (the addon's ``chatkit_redact``, ``import --redact``); None when the rules
    keep secrets."""
    from .redact import Redactor

    redactor = Redactor.from_config(profile.redact if profile is not None else None, extra)
    return None if redactor.keep_secrets else redactor
