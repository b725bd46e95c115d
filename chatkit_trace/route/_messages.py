"""A socket's client messages as chatkit commands (a shared socket's
``[[routes.messages]]``, docs/profiles.md "WebSocket"): the rules as stored
with each exchange of the route (``notes.identity.messages``), compiled once
and cached (:func:`message_rules`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._matcher import body_ok, compile_condition
from ._routes import Condition
from .identity import compile_pointer, lookup, scalar_id

__all__ = ["Command", "MessageRules", "message_rules"]

@dataclass(frozen=True, slots=True)
class Command:
    """A client message on a socket that a route's ``messages`` make a chatkit command."""

    capability: str  # run | abort | resubscribe | history
    #: Index of the rule in the route's ``messages``.
    rule: int
    name: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    #: ``run``: the run's body (the part of the message at ``input``, else the whole message).
    body: Any = None
    #: ``resubscribe``: the event id it resumes after.
    cursor: str | None = None


class MessageRules:
    """A route's client-message rules, compiled (:func:`message_rules`)."""

    __slots__ = ("rules",)

    def __init__(self, rules: Sequence[Mapping[str, Any]]) -> None:
        compiled = []
        for r in rules:
            compiled.append((
                str(r.get("capability")),
                r.get("name"),
                _json_conditions(r.get("match") or {}),
                tuple(compile_pointer(p) for p in r.get("session") or ()),
                tuple(compile_pointer(p) for p in r.get("run") or ()),
                compile_pointer(r["input"]) if isinstance(r.get("input"), str) else None,
                tuple(compile_pointer(p) for p in r.get("cursor") or ()),
                _json_conditions(r.get("reply") or {}),
            ))
        self.rules = tuple(compiled)

    def command(self, message: Any) -> Command | None:
        """The command a client message is (the first rule that matches), or None."""
        if not isinstance(message, dict | list):
            return None
        for i, (cap, name, match, session, run, input_, cursor, _reply) in enumerate(self.rules):
            if not body_ok(match, message):
                continue
            body = message
            if input_ is not None:
                body = lookup(message, input_)
            return Command(cap, i, name, _first_id(message, session), _first_id(message, run), body,
                           _first_id(message, cursor))
        return None

    def answers(self, rule: int, message: Any) -> bool:
        """Whether a server message is the reply of a command made by ``rule`` (history)."""
        reply = self.rules[rule][7]
        return bool(reply) and body_ok(reply, message)


def _first_id(doc: Any, pointers: tuple[tuple[str, ...], ...]) -> str | None:
    for p in pointers:
        v = scalar_id(lookup(doc, p))
        if v is not None:
            return v
    return None


def _json_conditions(conds: Mapping[str, Any]) -> tuple[tuple[tuple[str, ...], str, Any], ...]:
    out = []
    for k, v in conds.items():
        spec = Condition.model_validate(v) if isinstance(v, dict) else v
        out.append((compile_pointer(k), *compile_condition(spec, text=False)))
    return tuple(out)


_RULES_CACHE: dict[str, MessageRules] = {}


def message_rules(rules: Sequence[Mapping[str, Any]] | None) -> MessageRules | None:
    """The compiled form of a route's ``messages`` as stored with an exchange
    (``notes.identity.messages``), cached; None for no rules."""
    if not rules:
        return None
    key = json.dumps(rules, sort_keys=True, default=str)
    got = _RULES_CACHE.get(key)
    if got is None:
        if len(_RULES_CACHE) > 256:
            _RULES_CACHE.clear()
        got = _RULES_CACHE[key] = MessageRules(rules)
    return got
