"""The three deliberate bugs of issue 19, each in an otherwise correct AG-UI
adapter (importable as ``tests.adapters.agui_broken:TimeIds`` … so ``check
--profile`` can re-decode recorded traffic with them)."""

from __future__ import annotations

import time

from chatkit_trace.adapters import CompletedUpdate, DeltaUpdate, MessageUpdate
from chatkit_trace.adapters.agui import AGUIProtocol
from chatkit_trace.core import RuntimeMessage


class TimeIds(AGUIProtocol):
    """Names each answer message ``msg-{time.time()}`` (R4.3: ids from the clock)."""

    name = "agui-time-ids"

    def decode_event(self, event, ctx):
        names = ctx.state.setdefault("names", {})
        out = []
        for u in super().decode_event(event, ctx):
            if isinstance(u, MessageUpdate):
                m = u.message
                new = names.setdefault(m.id, f"msg-{time.time()}")
                u = MessageUpdate(RuntimeMessage(new, m.role, m.parts, run_id=m.run_id))
            elif isinstance(u, DeltaUpdate):
                u = DeltaUpdate(names.get(u.message_id, u.message_id), u.part_id, u.delta)
            out.append(u)
        return out

    def decode_history(self, value, session_id):
        result = super().decode_history(value, session_id)
        from dataclasses import replace

        return replace(
            result,
            messages=tuple(
                m if m.role == "user" else RuntimeMessage(f"msg-{time.time()}", m.role, m.parts, run_id=m.run_id)
                for m in result.messages
            ),
        )


class LateDelta(AGUIProtocol):
    """Holds text back and flushes it after the terminal update (R3.5)."""

    name = "agui-late-delta"

    def decode_event(self, event, ctx):
        held = ctx.state.setdefault("held", [])
        updates = list(super().decode_event(event, ctx))
        kept = []
        for u in updates:
            if isinstance(u, DeltaUpdate):
                held.append(u)
            else:
                kept.append(u)
        if any(isinstance(u, CompletedUpdate) for u in kept):
            return kept + held  # the bug: the held text goes out after `completed`
        return kept


class NoTerminal(AGUIProtocol):
    """Never turns RUN_FINISHED into a terminal update (R3.4)."""

    name = "agui-no-terminal"

    def decode_event(self, event, ctx):
        if isinstance(event, dict) and event.get("type") == "RUN_FINISHED":
            return []
        return super().decode_event(event, ctx)
