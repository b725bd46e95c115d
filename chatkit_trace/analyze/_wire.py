"""What the protocol's own wire shows, for findings to say next to chatkit's
words (decisions.md 279): "no completed, failed or interrupted" is chatkit's
model; the backend's developer reads ``finish_reason``, ``[DONE]``,
``run.completed``.  The words come from the adapter
(:attr:`~chatkit_trace.adapters.AdapterProtocol.wire_terms`,
:meth:`~chatkit_trace.adapters.AdapterProtocol.wire_name`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..wire import event_json
from ._context import Context

__all__ = ["wire_event", "wire_terms", "wire_end", "wire_sentence"]

#: chatkit's conclusions, in the order findings name them.
CONCLUSIONS = ("completed", "failed", "interrupted")


def wire_terms(ctx: Context) -> Mapping[str, str]:
    """The adapter's glossary of chatkit's words on its wire (may be empty)."""
    terms = getattr(ctx.protocol, "wire_terms", None)
    return terms if isinstance(terms, Mapping) else {}


def wire_event(ctx: Context, ref: str | None) -> str | None:
    """The frame ``ref`` (``"exchange:frame"``) in its wire's words, or None."""
    if not ref or ":" not in ref:
        return None
    a, _, b = ref.partition(":")
    try:
        ex = ctx.exchanges.get(int(a))
        index = int(b)
    except ValueError:
        return None
    if ex is None:
        return None
    frame = next((f for f in ex.frames if f.index == index), None)
    if frame is None:
        return None
    value, err = event_json(frame)
    if err is not None or value is None:
        return None
    name = getattr(ctx.protocol, "wire_name", None)
    try:
        said = name(value) if callable(name) else None
    except Exception:  # noqa: BLE001 - a custom adapter's hook must not break a finding
        return None
    return said if isinstance(said, str) and said else None


def wire_end(ctx: Context, kinds: tuple[str, ...] = CONCLUSIONS) -> str | None:
    """How this protocol concludes a run as ``kinds``, in its own words:
    "completed: `run.completed`; failed: `run.failed` …"; None when the
    adapter does not say."""
    terms = wire_terms(ctx)
    said = [f"{k}: {terms[k]}" for k in kinds if terms.get(k)]
    return "; ".join(said) if said else None


def wire_sentence(ctx: Context, last: str | None = None, *, kinds: tuple[str, ...] = CONCLUSIONS, what: Any = None) -> str:
    """" On the wire (hermes): the last event was `message.delta`; this
    protocol concludes a run with …" (empty when there is nothing to say).
    ``what`` names the event at ``last`` (default: "the last event")."""
    parts = []
    event = wire_event(ctx, last)
    if event:
        parts.append(f"{what or 'the last event'} was `{event}`")
    end = wire_end(ctx, kinds)
    if end:
        parts.append(f"a run concludes with {end}")
    if not parts:
        return ""
    name = getattr(ctx.protocol, "name", None) or "the protocol"
    return f" On the {name} wire: " + "; ".join(parts) + "."
