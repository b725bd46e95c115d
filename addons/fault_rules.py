"""Fault rules: the compact syntax of ``--set chatkit_fault=…`` (docs/faults.md).

A rule is ``KIND`` or ``KIND:KEY=VALUE,KEY=VALUE…``; several rules go in
several ``--set chatkit_fault=…`` (mitmproxy collects them into a list) or
in one value separated by ``;``.  Keys are the kind's parameters and the
target keys every kind shares::

    cut:after=5,mode=reset,capability=run,nth=1
    cut:after=1.5s,mode=close,path=/v1/chat/completions
    delay:by=200ms,jitter=100ms,capability=run
    stall:for=2s,after=3,session=s1
    dup:at=3    drop:at=2    swap:at=4    corrupt:at=2,how=utf8
    http:status=429,retry_after=2,capability=run,nth=2

Event numbers count the events the *backend* sent on that exchange, from 1
(SSE events with data, NDJSON lines, server WebSocket messages).  Durations
always carry a unit (``250ms``, ``2s``), so ``after=5`` (events) and
``after=5s`` (time) cannot be confused.

Pure Python, no mitmproxy import: the addon, ``chatkit-trace record`` (to
reject a bad rule before mitmproxy starts) and the tests all use it.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatkit_trace.errors import FaultRuleError

__all__ = [
    "KINDS",
    "STREAM_KINDS",
    "TARGET_KEYS",
    "FaultRuleError",
    "Rule",
    "Target",
    "parse_duration",
    "parse_rule",
    "parse_rules",
]

#: kind -> {parameter: help}; "" marks a required parameter in the help text.
KINDS: dict[str, dict[str, str]] = {
    "cut": {
        "after": "N events (cut right after the backend's N-th event; 0: before the first) or a duration (2s)",
        "mode": "reset (drop the connection, the default) or close (end the response cleanly)",
    },
    "delay": {
        "by": "how long each event is held (250ms, 1s)",
        "jitter": "plus a random 0..jitter per event (seeded; default 0ms)",
        "from": "first event delayed (default 1)",
    },
    "stall": {
        "for": "how long the stream stops (2s)",
        "after": "after the N-th event (default 0: before the first)",
    },
    "dup": {"at": "the event sent twice (same outer id)"},
    "drop": {"at": "the event never sent"},
    "swap": {"at": "the event sent after the next one"},
    "corrupt": {
        "at": "the event damaged",
        "how": "json (truncate its JSON, the default) or utf8 (invalid UTF-8 bytes)",
    },
    "http": {
        "status": "the status answered instead of calling the backend (429, 500, 503 …; default 503)",
        "retry_after": "Retry-After seconds (default 1 for 429 and 503)",
    },
}
REQUIRED: dict[str, tuple[str, ...]] = {
    "cut": ("after",),
    "delay": ("by",),
    "stall": ("for",),
    "dup": ("at",),
    "drop": ("at",),
    "swap": ("at",),
    "corrupt": ("at",),
    "http": (),
}
#: kinds that act on the response stream (through the relay); ``http`` answers instead.
STREAM_KINDS = frozenset(KINDS) - {"http"}
TARGET_KEYS: dict[str, str] = {
    "capability": "the route profile's capability (run, resume, subscribe, history, abort …)",
    "route": "the route profile's route name (run, resume, chat-completions …)",
    "path": "a glob on the URL path (* matches anything, / included): /sessions/*/runs",
    "method": "the HTTP method",
    "session": "a glob on the session id the request names",
    "run": "a glob on the run id the request names",
    "nth": "only the N-th exchange this rule's target matches (from 1)",
    "p": "apply with this probability per matching exchange (0..1, seeded)",
}
PROFILE_KEYS = ("capability", "route", "session", "run")


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s)")


def parse_duration(text: str) -> float:
    """``250ms`` -> 0.25, ``2s`` / ``1.5s`` -> seconds.  A unit is required."""
    m = _DURATION.fullmatch(text.strip().lower())
    if not m:
        raise ValueError(f"{text!r} is not a duration: give a unit, e.g. 250ms or 2s")
    value = float(m.group(1))
    return value / 1000.0 if m.group(2) == "ms" else value


def _count(text: str, *, least: int) -> int:
    if not re.fullmatch(r"\d+", text.strip()):
        raise ValueError(f"{text!r} is not a whole number")
    n = int(text)
    if n < least:
        raise ValueError(f"{n} is below {least}")
    return n


@dataclass(frozen=True)
class Target:
    """Which exchanges a rule applies to (every key given must hold)."""

    capability: str | None = None
    route: str | None = None
    path: str | None = None
    method: str | None = None
    session: str | None = None
    run: str | None = None
    nth: int | None = None
    p: float | None = None

    @property
    def needs_profile(self) -> bool:
        return any(getattr(self, k) is not None for k in PROFILE_KEYS)

    def matches(self, method: str, path: str, match: Any) -> bool:
        """Whether an exchange is one of the target's (``nth`` and ``p`` aside).

        ``match`` is the route profile's :class:`~chatkit_trace.route.identity.Match`
        for the request, or None (no profile, or no route matched).
        """
        if self.method is not None and method.upper() != self.method:
            return False
        if self.path is not None and not fnmatch.fnmatchcase(path, self.path):
            return False
        if self.needs_profile:
            if match is None:
                return False
            if self.capability is not None and match.capability != self.capability:
                return False
            if self.route is not None and match.route != self.route:
                return False
            if self.session is not None and not _glob(match.session_id, self.session):
                return False
            if self.run is not None and not _glob(match.run_id, self.run):
                return False
        return True


def _glob(value: str | None, pattern: str) -> bool:
    return value is not None and fnmatch.fnmatchcase(value, pattern)


@dataclass(frozen=True)
class Rule:
    """One parsed rule.  ``text`` is the rule as written (whitespace trimmed)."""

    text: str
    kind: str
    target: Target = field(default_factory=Target)
    #: cut: after this many events (None: after ``seconds``)
    after_events: int | None = None
    #: cut: after this long; stall: for this long; delay: by this long
    seconds: float = 0.0
    mode: str = "reset"
    jitter: float = 0.0
    #: delay: first event delayed; stall: after this event (0: before the first)
    start: int = 1
    #: dup, drop, swap, corrupt: the event
    at: int = 0
    how: str = "json"
    status: int = 503
    retry_after: int | None = None

    @property
    def acts_on_stream(self) -> bool:
        return self.kind in STREAM_KINDS

    def describe(self) -> str:
        """What the rule does, in a few words (log lines)."""
        k = self.kind
        if k == "cut":
            when = (
                f"after {self.after_events} events"
                if self.after_events is not None
                else f"after {self.seconds:g}s"
            )
            return f"cut ({self.mode}) {when}"
        if k == "delay":
            jit = f" + up to {self.jitter * 1000:g}ms" if self.jitter else ""
            return f"delay events from #{self.start} by {self.seconds * 1000:g}ms{jit}"
        if k == "stall":
            return f"stall {self.seconds:g}s after event {self.start}"
        if k == "corrupt":
            return f"corrupt event #{self.at} ({self.how})"
        if k == "http":
            return f"answer HTTP {self.status}" + (
                f" (Retry-After: {self.retry_after})" if self.retry_after is not None else ""
            )
        return f"{k} event #{self.at}"


def parse_rule(text: str) -> Rule:
    """One rule (``KIND[:KEY=VALUE,…]``) -> :class:`Rule`; raises :class:`FaultRuleError`."""
    spec = text.strip()
    if not spec:
        raise FaultRuleError("empty fault rule")
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    if kind not in KINDS:
        raise FaultRuleError(
            f"fault rule {spec!r}: unknown kind {kind!r} (known: {', '.join(KINDS)})"
        )
    values: dict[str, str] = {}
    for item in rest.split(",") if rest.strip() else ():
        key, eq, value = item.partition("=")
        key = key.strip().lower().replace("-", "_")
        if not eq or not key:
            raise FaultRuleError(f"fault rule {spec!r}: {item.strip()!r} is not KEY=VALUE")
        if key in values:
            raise FaultRuleError(f"fault rule {spec!r}: {key} given twice")
        if key not in KINDS[kind] and key not in TARGET_KEYS:
            known = ", ".join([*KINDS[kind], *TARGET_KEYS])
            raise FaultRuleError(
                f"fault rule {spec!r}: unknown key {key!r} for {kind} (known: {known})"
            )
        values[key] = value.strip()
    missing = [k for k in REQUIRED[kind] if k not in values]
    if missing:
        raise FaultRuleError(
            f"fault rule {spec!r}: {kind} needs {', '.join(f'{k}=' for k in missing)}"
        )
    try:
        return _build(spec, kind, values)
    except ValueError as err:
        raise FaultRuleError(f"fault rule {spec!r}: {err}") from None


def _build(spec: str, kind: str, v: dict[str, str]) -> Rule:
    t: dict[str, Any] = {}
    for key in ("capability", "route", "path", "session", "run"):
        if key in v:
            if not v[key]:
                raise ValueError(f"{key}= is empty")
            t[key] = v[key]
    if "capability" in t:
        t["capability"] = t["capability"].lower()
    if "method" in v:
        if not re.fullmatch(r"[A-Za-z]+", v["method"]):
            raise ValueError(f"method={v['method']!r} is not an HTTP method")
        t["method"] = v["method"].upper()
    if "nth" in v:
        t["nth"] = _keyed("nth", lambda s: _count(s, least=1), v["nth"])
    if "p" in v:
        try:
            p = float(v["p"])
        except ValueError:
            raise ValueError(f"p={v['p']!r} is not a probability") from None
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p={v['p']} is not between 0 and 1")
        t["p"] = p
    r: dict[str, Any] = {"text": spec, "kind": kind, "target": Target(**t)}
    if kind == "cut":
        after = v["after"]
        if re.fullmatch(r"\s*\d+\s*", after):
            r["after_events"] = int(after)
        else:
            r["seconds"] = _keyed("after", parse_duration, after)
        mode = v.get("mode", "reset").lower()
        if mode not in ("reset", "close"):
            raise ValueError(f"mode={mode!r}: use reset or close")
        r["mode"] = mode
    elif kind == "delay":
        r["seconds"] = _keyed("by", parse_duration, v["by"])
        r["jitter"] = _keyed("jitter", parse_duration, v.get("jitter", "0ms"))
        r["start"] = _keyed("from", lambda s: _count(s, least=1), v.get("from", "1"))
    elif kind == "stall":
        r["seconds"] = _keyed("for", parse_duration, v["for"])
        r["start"] = _keyed("after", lambda s: _count(s, least=0), v.get("after", "0"))
    elif kind in ("dup", "drop", "swap", "corrupt"):
        r["at"] = _keyed("at", lambda s: _count(s, least=1), v["at"])
        if kind == "corrupt":
            how = v.get("how", "json").lower()
            if how not in ("json", "utf8"):
                raise ValueError(f"how={how!r}: use json or utf8")
            r["how"] = how
    elif kind == "http":
        status = _keyed("status", lambda s: _count(s, least=400), v.get("status", "503"))
        if status > 599:
            raise ValueError(f"status={status}: give an error status (400-599)")
        r["status"] = status
        if "retry_after" in v:
            r["retry_after"] = _keyed("retry_after", lambda s: _count(s, least=0), v["retry_after"])
        elif status in (429, 503):
            r["retry_after"] = 1
    return Rule(**r)


def _keyed(key: str, fn: Any, value: str) -> Any:
    try:
        return fn(value)
    except ValueError as err:
        raise ValueError(f"{key}={value}: {err}") from None


def split_specs(values: Iterable[str]) -> list[str]:
    """Option values -> rule texts (``;`` and line ends separate rules too)."""
    out: list[str] = []
    for value in values:
        for part in re.split(r"[;\n]", value):
            if part.strip():
                out.append(part.strip())
    return out


def parse_rules(values: Sequence[str] | str) -> list[Rule]:
    """Every rule of the option's values; the first bad one raises :class:`FaultRuleError`."""
    if isinstance(values, str):
        values = [values]
    return [parse_rule(s) for s in split_specs(values)]
