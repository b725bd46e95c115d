"""``create_adapter``: chatkit's createAdapter in Python (SPEC R2.3-R2.8, R13.3).

The factory joins a protocol (:class:`AdapterProtocol`) with capability
functions and owns everything that is not protocol knowledge:

* **decode state** per (session, run), handed to ``decode_event`` as
  ``ctx.state`` and released at the run's terminal update or on unbinding
  (R2.7);
* **deduplication** by the outer event id (the SSE ``id:``) for every run
  that still holds decode state; terminal and unbinding clear the records
  (R13.3, R11.7).  Inner ids (ADK ``data.id``, Hermes ``seq``) never count;
* **routing** of interleaved subscription events by ``identify_event``
  (R2.6, R11.2): ``starts_run`` registers a passive run, ``ends_response``
  closes that run's reader but keeps the subscription;
* **fact event ids** (docs/architecture.md "Identity"): the outer event id when
  the wire has one, else a deterministic ``{stream}:{frame}``; ``#{n}``
  is appended when one event yields several facts;
* the rule that a stream that runs dry leaves the outcome unknown (R2.5,
  R3.4): the factory never invents a terminal fact.

The decoding half is sans-IO (:class:`SessionDecoder`), so recorded traffic
and live traffic go through exactly the same code.  The live half (calling
the capability functions) is driven by :class:`chatkit_trace.runtime.ChatRuntime`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from ..core import (
    CORE_CAPABILITIES,
    CompletedFact,
    DeltaFact,
    Fact,
    FailedFact,
    HistoryResult,
    InterruptedFact,
    MessageFact,
    PhaseFact,
    RuntimeMessage,
)
from ._protocol import AdapterProtocol, DecodeContext, EncodeContext, EventIdentity
from ._updates import (
    CompletedUpdate,
    DeltaUpdate,
    FailedUpdate,
    InterruptedUpdate,
    MessageUpdate,
    PhaseUpdate,
    ProtocolUpdate,
    update_from_json,
)

__all__ = ["Adapter", "create_adapter", "SessionDecoder", "Decoded", "updates_to_facts", "CAPABILITIES"]

CAPABILITIES = CORE_CAPABILITIES  # the Core's (chatkit_trace.core.Capability)
_TERMINAL = (CompletedUpdate, FailedUpdate, InterruptedUpdate)
_TERMINAL_TYPES = frozenset(_TERMINAL)


class Decoded(msgspec.Struct):
    """What one event became."""

    facts: list[Fact] = msgspec.field(default_factory=list)
    updates: list[ProtocolUpdate] = msgspec.field(default_factory=list)
    #: The event carried a terminal update: a direct run's reader stops here (R2.5a).
    terminal: bool = False
    #: Dropped by the factory: the outer event id was already seen for this run.
    duplicate: bool = False
    #: ``decode_event`` (or a transform) raised: the read ends here (R2.5).
    error: str | None = None
    #: Subscription routing (``identify_event``), when the event was routed.
    identity: EventIdentity | None = None
    run_id: str | None = None


def updates_to_facts(
    updates: list[ProtocolUpdate],
    *,
    session_id: str,
    run_id: str,
    event_id: str,
    source_sequence: int | float | None = None,
    position: Any = None,
    at: float | None = None,
) -> list[Fact]:
    """Turn one event's updates into facts with deterministic event ids."""
    if len(updates) == 1 and type(updates[0]) is DeltaUpdate:  # the streaming text case
        u: Any = updates[0]  # a DeltaUpdate (exact type: the dispatch below reads its fields)
        return [_delta_fact(session_id, run_id, event_id, source_sequence, position, at, u.message_id, u.part_id, u.delta)]
    many = len(updates) > 1
    facts: list[Fact] = []
    for n, u in enumerate(updates):
        make = _FACTS.get(type(u))
        if make is not None:
            eid = f"{event_id}#{n}" if many else event_id
            facts.append(make(u, session_id, run_id, eid, source_sequence, position, at))
    return facts


#: ProtocolUpdate type -> its fact (a dispatch table; an unknown type makes no fact).
_FACTS: dict[type, Callable[..., Fact]] = {
    DeltaUpdate: lambda u, s, r, e, q, p, a: DeltaFact(
        session_id=s, run_id=r, event_id=e, source_sequence=q, position=p, at=a,
        message_id=u.message_id, part_id=u.part_id, delta=u.delta,
    ),
    MessageUpdate: lambda u, s, r, e, q, p, a: MessageFact(
        session_id=s, run_id=r, event_id=e, source_sequence=q, position=p, at=a, message=u.message
    ),
    PhaseUpdate: lambda u, s, r, e, q, p, a: PhaseFact(
        session_id=s, run_id=r, event_id=e, source_sequence=q, position=p, at=a, phase=u.phase
    ),
    CompletedUpdate: lambda u, s, r, e, q, p, a: CompletedFact(
        session_id=s, run_id=r, event_id=e, source_sequence=q, position=p, at=a
    ),
    FailedUpdate: lambda u, s, r, e, q, p, a: FailedFact(
        session_id=s, run_id=r, event_id=e, source_sequence=q, position=p, at=a, error=u.error
    ),
    InterruptedUpdate: lambda u, s, r, e, q, p, a: InterruptedFact(
        session_id=s, run_id=r, event_id=e, source_sequence=q, position=p, at=a, reason=u.reason
    ),
}
_UPDATE_TYPES = frozenset(_FACTS)
#: the facts' positional constructors (core._values.quick_init adds ``_make``; the type system cannot see it)
_delta_fact: Callable[..., DeltaFact] = DeltaFact._make  # type: ignore[attr-defined]
_message_fact: Callable[..., MessageFact] = MessageFact._make  # type: ignore[attr-defined]


class SessionDecoder:
    """Events of one session -> facts, sans-IO (the factory's decoding half)."""

    def __init__(self, adapter: Adapter, session_id: str) -> None:
        self.adapter = adapter
        self.session_id = session_id
        self._state: dict[str, dict[str, Any]] = {}
        self._seen: dict[str, set[str]] = {}
        #: Runs whose reader ended at a terminal update (their state was released).
        self.finished: set[str] = set()

    def state(self, run_id: str) -> dict[str, Any]:
        st = self._state.get(run_id)
        if st is None:
            st = self._state[run_id] = {}
        return st

    def holds_state(self, run_id: str) -> bool:
        return run_id in self._state

    def release(self, run_id: str) -> None:
        """Unbind a run: drop its decode state and dedup records (R2.7, R13.3)."""
        self._state.pop(run_id, None)
        self._seen.pop(run_id, None)

    def decode(
        self,
        event: Any,
        *,
        run_id: str,
        event_id: str | None = None,
        fallback_id: str,
        at: float | None = None,
        source: str = "stream",
    ) -> Decoded:
        """Decode one event of ``run_id``'s stream into facts."""
        return self.decode_frame(event, run_id, event_id, fallback_id, at, source)

    def decode_frame(
        self, event: Any, run_id: str, event_id: str | None, fallback_id: str | None, at: float | None, source: str = "stream"
    ) -> Decoded:
        """:meth:`decode` with positional arguments (the replay's hot path);
        ``fallback_id`` may be None when ``event_id`` is given."""
        # long-function: once per recorded frame (issue 18): dedup, decode, updates and the one-update fast paths inline
        if event_id is not None:
            seen = self._seen.get(run_id)
            if seen is not None and event_id in seen:
                return Decoded(duplicate=True, run_id=run_id)
            if seen is None:
                self._seen[run_id] = {event_id}
            else:
                seen.add(event_id)
        adapter = self.adapter
        protocol = adapter.protocol
        # A run whose reader ended at its terminal keeps no state: later frames
        # (decoded only in the shadow) get a throwaway dict (R2.7).
        state = self._state.get(run_id)
        if state is None:
            state = {} if run_id in self.finished else self.state(run_id)
        ctx = DecodeContext(self.session_id, run_id, event_id, state, source)
        try:
            raw = protocol.decode_event(event, ctx)
            # exact types (`type(u) is X`, not isinstance: a subclass goes through update_from_json)
            updates: list[Any]
            if type(raw) is list and len(raw) == 1 and type(raw[0]) in _UPDATE_TYPES:
                updates = raw  # the usual answer, one update: kept as it is (no copy; nothing here changes it)
            else:
                updates = [u if type(u) in _UPDATE_TYPES else update_from_json(u) for u in raw or ()]
            if adapter.transform_output is not None:
                updates = [update_from_json(u) for u in adapter.transform_output(updates, event, ctx) or ()]
        except Exception as err:  # noqa: BLE001 - a decode error ends the read (R2.5)
            adapter.report_error("decode", err)
            return Decoded(error=f"{type(err).__name__}: {err}", run_id=run_id)
        if not updates:
            return Decoded([], updates, False, False, None, None, run_id)
        seq = None
        if adapter.has_sequence:
            try:
                seq = protocol.event_sequence(event)
            except Exception:  # noqa: BLE001 - adapter code: an event without a readable sequence has none
                seq = None
        eid = event_id if event_id is not None else fallback_id
        u = updates[0]
        if len(updates) == 1:
            kind = type(u)
            if kind is DeltaUpdate:  # streaming text: one delta, never terminal
                fact: Fact = _delta_fact(self.session_id, run_id, eid, seq, event_id, at, u.message_id, u.part_id, u.delta)
                return Decoded([fact], updates, False, False, None, None, run_id)
            if kind is MessageUpdate:  # a protocol that resends the whole message: one, never terminal
                fact = _message_fact(self.session_id, run_id, eid, seq, event_id, at, u.message)
                return Decoded([fact], updates, False, False, None, None, run_id)
        facts = updates_to_facts(
            updates, session_id=self.session_id, run_id=run_id, event_id=eid,  # type: ignore[arg-type]
            source_sequence=seq, position=event_id, at=at,
        )
        terminal = False
        for u in updates:
            if type(u) in _TERMINAL_TYPES or isinstance(u, _TERMINAL):
                terminal = True
                self.release(run_id)
                self.finished.add(run_id)
                break
        return Decoded(facts, updates, terminal, False, None, None, run_id)

    def route(
        self,
        event: Any,
        *,
        event_id: str | None = None,
        fallback_id: str,
        at: float | None = None,
        identity: EventIdentity | None = None,
    ) -> Decoded:
        """A subscription event: find its run with ``identify_event``, then decode.

        An event without identity cannot be routed (R11.7): it comes back with
        ``identity=None`` and no facts.  An event naming another session comes
        back with that identity and no facts (the caller reports wrong-session).
        ``identity``: the event's identity when the caller already has it (a
        socket's events: ``identify_event`` completed by the route's per-event
        sources).
        """
        if identity is None:
            try:
                identity = self.adapter.protocol.identify_event(event)
            except Exception as err:  # noqa: BLE001 - adapter code: reported (report_error) and decoded as an error
                self.adapter.report_error("identify", err)
                return Decoded(error=f"{type(err).__name__}: {err}")
        if identity is None:
            return Decoded()
        if identity.session_id is not None and identity.session_id != self.session_id:
            return Decoded(identity=identity, run_id=identity.run_id)
        out = self.decode(event, run_id=identity.run_id, event_id=event_id, fallback_id=fallback_id, at=at)
        out.identity = identity
        # endsResponse closes this run's reader, never concludes it (R2.6); the
        # decode state stays until the terminal update or unbinding (R2.7), so
        # the OpenAI tool loop's next response continues the same answer.
        return out

    def project(self, input: Any, run_id: str, messages: tuple[RuntimeMessage, ...] = ()) -> list[RuntimeMessage]:
        protocol = self.adapter.protocol
        if not protocol.implements("project_input"):
            return []
        return list(protocol.project_input(input, EncodeContext(self.session_id, run_id, messages)) or ())

    def history(self, value: Any) -> HistoryResult:
        """``decode_history`` (R8): raises what the protocol raises.  Runs
        history reports still running get the decode state the protocol
        derives from it (``history_state``), unless a stream already holds
        state for them."""
        protocol = self.adapter.protocol
        result = protocol.decode_history(value, self.session_id)
        if protocol.implements("history_state"):
            for run_id, state in (protocol.history_state(value, self.session_id) or {}).items():
                if run_id not in self._state and run_id not in self.finished:
                    self._state[run_id] = dict(state)
        return result


Capability = Callable[..., Any]


class Adapter:
    """What :func:`create_adapter` returns: a protocol plus its capabilities."""

    def __init__(
        self,
        protocol: AdapterProtocol,
        functions: Mapping[str, Capability | bool | None],
        *,
        transform_input: Callable[[Any, Any], Any] | None = None,
        transform_output: Callable[[list[ProtocolUpdate], Any, DecodeContext], Iterable[Any]] | None = None,
        accepted_file_types: Iterable[str] | None = None,
        on_error: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        if not isinstance(protocol, AdapterProtocol):
            raise TypeError("protocol must be an AdapterProtocol instance")
        for hook in ("encode_input", "decode_event"):
            if not protocol.implements(hook):
                raise TypeError(f"protocol {protocol.name!r} must implement {hook}")
        unknown = set(functions) - set(CAPABILITIES)
        if unknown:
            raise TypeError(f"unknown capabilities {sorted(unknown)}; known: {', '.join(CAPABILITIES)}")
        self.protocol = protocol
        self.functions: dict[str, Capability] = {
            k: v for k, v in functions.items() if callable(v) and not isinstance(v, bool)
        }
        self.capabilities: frozenset[str] = frozenset(k for k, v in functions.items() if v) | {"run"}
        if "subscribe" in self.capabilities and not protocol.implements("identify_event"):
            raise TypeError("identify_event is required when subscribe is configured (R2.3)")
        if "history" in self.capabilities and not protocol.implements("decode_history"):
            raise TypeError("decode_history is required when history is configured (R2.3)")
        self.transform_input = transform_input
        self.transform_output = transform_output
        self.accepted_file_types = tuple(accepted_file_types) if accepted_file_types else None
        self.on_error = on_error
        self.has_sequence = protocol.implements("event_sequence")
        self.errors: list[tuple[str, BaseException]] = []

    @property
    def name(self) -> str:
        return self.protocol.name

    def report_error(self, capability: str, err: BaseException) -> None:
        self.errors.append((capability, err))
        if self.on_error is not None:
            try:
                self.on_error(capability, err)
            except Exception:  # noqa: BLE001 - onError must not break decoding
                pass

    def decoder(self, session_id: str) -> SessionDecoder:
        """Per-session decoding state (R10.1: never on the adapter instance)."""
        return SessionDecoder(self, session_id)

    def encode(self, input: Any, ctx: EncodeContext) -> Any:
        body = self.protocol.encode_input(input, ctx)
        if self.transform_input is not None:
            body = self.transform_input(body, ctx)
        return body

    def __repr__(self) -> str:
        return f"<Adapter {self.name} capabilities={sorted(self.capabilities)}>"


def create_adapter(
    protocol: AdapterProtocol,
    *,
    run: Capability | bool | None = True,
    subscribe: Capability | bool | None = None,
    resume: Capability | bool | None = None,
    abort: Capability | bool | None = None,
    steer: Capability | bool | None = None,
    regenerate: Capability | bool | None = None,
    edit: Capability | bool | None = None,
    history: Capability | bool | None = None,
    transform_input: Callable[[Any, Any], Any] | None = None,
    transform_output: Callable[[list[ProtocolUpdate], Any, DecodeContext], Iterable[Any]] | None = None,
    accepted_file_types: Iterable[str] | None = None,
    on_error: Callable[[str, BaseException], None] | None = None,
) -> Adapter:
    """chatkit's ``createAdapter``: a protocol plus capability functions.

    A capability is an (async) function, ``True`` to declare it without a
    function (decoding recorded traffic, where the recording answered the
    calls), or ``None``/``False`` for absent (R2.1).
    """
    return Adapter(
        protocol,
        {
            "run": run,
            "subscribe": subscribe,
            "resume": resume,
            "abort": abort,
            "steer": steer,
            "regenerate": regenerate,
            "edit": edit,
            "history": history,
        },
        transform_input=transform_input,
        transform_output=transform_output,
        accepted_file_types=accepted_file_types,
        on_error=on_error,
    )
