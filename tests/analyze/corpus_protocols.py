"""A test protocol whose wire events spell out their ProtocolUpdates.

``{"updates": [<chatkit ProtocolUpdate JSON>...], "run"?: id, "starts"?: bool,
"ends"?: bool, "session"?: id, "seq"?: n}``: lets the corpus express any fact
sequence as real SSE frames, for codes the example protocol cannot reach.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chatkit_trace.adapters import AdapterProtocol, EventIdentity
from chatkit_trace.core import history_from_json


class UpdatesProtocol(AdapterProtocol):
    name = "updates"

    def encode_input(self, input, ctx):
        return input

    def decode_input(self, body):
        if isinstance(body, Mapping) and isinstance(body.get("text"), str):
            return {"text": body["text"], "project": body.get("project", True)}
        return None

    def project_input(self, input, ctx):
        if isinstance(input, Mapping) and input.get("project", True):
            return [{"id": f"user:{ctx.run_id}", "role": "user", "parts": [{"id": "text", "type": "text", "text": input["text"]}]}]
        return []

    def decode_event(self, event: Any, ctx):
        if isinstance(event, Mapping):
            return list(event.get("updates", []))
        return []

    def event_known(self, event):
        return isinstance(event, Mapping) and "updates" in event

    def identify_event(self, event):
        if isinstance(event, Mapping) and event.get("run"):
            return EventIdentity(event["run"], event.get("session"), bool(event.get("starts")), bool(event.get("ends")))
        return None

    def event_sequence(self, event):
        return event.get("seq") if isinstance(event, Mapping) else None

    def decode_history(self, value, session_id):
        return history_from_json(value)


from chatkit_trace.examples.shared_socket import SharedSocket  # noqa: E402


class SharedSocketNoProjection(SharedSocket):
    """The shared-socket example without ``project_input`` (CK303 on a socket)."""

    name = "shared-socket-no-projection"

    def project_input(self, input: Any, ctx: Any) -> list[Any]:
        return []
