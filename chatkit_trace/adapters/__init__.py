"""Protocol adapters: wire events -> ProtocolUpdates -> facts (SPEC R2).

``create_adapter(protocol, run=…, history=…)`` is chatkit's createAdapter;
built-in protocols are ``openai``, ``adk``, ``a2a``, ``hermes`` and ``agui``
(:func:`load_protocol`).
"""

from ._factory import CAPABILITIES, Adapter, Decoded, SessionDecoder, create_adapter, updates_to_facts
from ._limits import HISTORY_IDS, LIMITS, PASSIVE_INPUT, TOOL_ARGS, TOOL_RESULT, fallback_error, fallback_sent
from ._protocol import (
    AbortRequestArgs,
    AdapterProtocol,
    DecodeContext,
    EncodeContext,
    EventIdentity,
    HistoryRequestArgs,
    ResumeRequestArgs,
    RunRequest,
    StreamEvent,
)
from ._registry import AdapterNotFound, available_protocols, load_protocol, register_protocol
from ._updates import (
    TERMINAL_UPDATES,
    CompletedUpdate,
    DeltaUpdate,
    FailedUpdate,
    InterruptedUpdate,
    MessageUpdate,
    PhaseUpdate,
    ProtocolUpdate,
    update_from_json,
    update_to_json,
)

__all__ = [
    "CAPABILITIES",
    "AbortRequestArgs",
    "Adapter",
    "AdapterNotFound",
    "AdapterProtocol",
    "CompletedUpdate",
    "DecodeContext",
    "Decoded",
    "DeltaUpdate",
    "EncodeContext",
    "EventIdentity",
    "FailedUpdate",
    "HistoryRequestArgs",
    "InterruptedUpdate",
    "HISTORY_IDS",
    "LIMITS",
    "PASSIVE_INPUT",
    "TOOL_ARGS",
    "MessageUpdate",
    "PhaseUpdate",
    "ProtocolUpdate",
    "ResumeRequestArgs",
    "RunRequest",
    "SessionDecoder",
    "StreamEvent",
    "TERMINAL_UPDATES",
    "TOOL_RESULT",
    "available_protocols",
    "create_adapter",
    "fallback_error",
    "fallback_sent",
    "load_protocol",
    "register_protocol",
    "update_from_json",
    "update_to_json",
    "updates_to_facts",
]
