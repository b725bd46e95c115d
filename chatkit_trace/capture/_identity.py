"""The writer's identity step: each flow's route and ids
(:class:`chatkit_trace.route.Router`'s steps, one at a time as the parts of
a flow arrive), the final ids in request order."""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from ..route import apply_match
from ..wire import Frame
from ._recording import Flow, Recording

__all__ = ["Identity"]


class Identity:
    """Routes and ids of the recording's flows, in request order."""

    def __init__(self, rec: Recording) -> None:
        self.rec = rec
        self.queue: deque[Flow] = deque()  # flows in request order, until assigned
        #: the unmatched-stream hint was logged (once per recording)
        self.hinted = False

    def enqueue(self, st: Flow) -> None:
        """A new flow: its ids are assigned after those of the flows before it."""
        self.queue.append(st)

    def match(self, st: Flow) -> None:
        st.matched = True
        ex = st.ex
        st.match = self.rec.router.match(ex.method, st.raw_url, st.raw_headers, st.request_body)
        if st.match is not None:
            ex.notes["identity"] = "pending"

    def keep(self, st: Flow, transport: str | None, status: int | None = None) -> None:
        """A route for event streams only (``Route.streams_only``) lets a
        response of another kind go: the exchange stays a plain one (stored,
        not a run)."""
        if st.match is not None and not self.rec.router.keeps(st.match, transport, status):
            st.match = None
            if st.ex.notes.get("identity") == "pending":
                del st.ex.notes["identity"]

    def respond(self, st: Flow, status: int | None, headers: list[tuple[str, str]], body: bytes | None) -> None:
        """Ids from the response (its headers, a whole JSON body)."""
        if st.match is not None and not st.resolved:
            st.match = self.rec.router.respond(st.match, status, headers, body)
            st.resolved = True

    def on_frame(self, st: Flow, frame: Frame) -> None:
        """A frame of a flow whose ids are not assigned yet: the route may take them from the events."""
        if (st.match is not None and st.match.pending_events and st.event_tries < self.rec.tuning.event_id_tries
                and frame.direction == "in"):
            st.event_tries += 1
            st.match = self.rec.router.event(st.match, frame)

    def assign_ready(self, *, force: bool = False) -> None:
        """Final ids, in request order, for the flows whose ids are all known.

        :class:`IdentityTracker` must see exchanges in request order, each
        once, with the ids from the response and the events already filled
        in; a flow still waiting for those holds back the flows after it
        (their rows say ``notes.identity = "pending"`` meanwhile).  ``force``
        (shutdown) assigns everything with what is known.
        """
        rec = self.rec
        router = rec.router
        tries = rec.tuning.event_id_tries
        q = self.queue
        while q:
            st = q[0]
            m = st.match
            if not force and not st.ended:
                if not st.matched:
                    return
                if m is not None and not st.resolved:
                    return
                if m is not None and m.pending_events and st.event_tries < tries:
                    return
            q.popleft()
            st.assigned = True
            if m is None:
                continue
            if not st.resolved:
                st.match = m = router.respond(m, st.ex.status, st.response_headers, None)
            st.match = m = router.assign(m, st.ex.index)
            ex = st.ex
            ex.notes.pop("identity", None)
            apply_match(ex, m)
            st.dirty = True
            if ex.capability is not None:
                rec.touch(ex.session_id, st.frame_count)

    def hint_unmatched(self, st: Flow) -> None:
        """The first streamed response that matches no route: say so, and what it
        looks like (the sentence ``check`` says about such a trace).  The
        exchange is kept whatever the profile says; ``check --profile``
        decodes it later."""
        if self.hinted:
            return
        self.hinted = True
        from types import SimpleNamespace

        from .detect import describe_routes, guess_profile, unmatched_hint

        rec = self.rec
        ex = st.ex
        raw: Any = SimpleNamespace(method=ex.method, url=st.raw_url, request_headers=st.raw_headers,
                                   request_body=st.request_body, frames=(), transport=ex.transport)
        profile = rec.config.profile.name if rec.config.profile is not None else None
        guess = guess_profile([raw], exclude=profile)
        hint = unmatched_hint(profile, describe_routes([raw], counts=False), guess)
        later = f" --profile {guess.profiles[0]}" if len(guess.profiles) == 1 else " --profile …"
        rec.log(logging.WARNING, f"chatkit-trace: {hint} (the exchange is kept, undecoded: "
                f"`chatkit-trace check {rec.config.db}{later}` decodes it later)")
