"""chatkit's Core, re-implemented in Python: standard library only (SPEC R1.3).

Facts in, results and snapshots out, no I/O (as h11 does for HTTP/1.1)::

    from chatkit_trace.core import ChatCore, TextPart, RuntimeMessage

    core = ChatCore("s1", capabilities={"abort", "history"})
    core.send("r1", {"text": "hi"}, project=[user_message])
    core.dispatch_settled("r1", True)
    core.emit_message(run_id="r1", event_id="e1", message=RuntimeMessage(
        "assistant:r1", "assistant", (TextPart("text:0", "Hel"),)))
    core.emit_delta(run_id="r1", event_id="e2", message_id="assistant:r1",
                    part_id="text:0", delta="lo")
    core.emit_completed(run_id="r1", event_id="e3")
    core.snapshot.to_json()

The run state machine is drawn in ``docs/core-state-machine.md``; the
admission order is rule R3.6a of ``docs/rules.md``.
"""

from ._errors import ChatkitTraceError, HistoryFormatError, InvalidMessageError
from ._facts import (
    ACCEPTED,
    FACT_KINDS,
    IDEMPOTENT_REASONS,
    OUTPUT_KINDS,
    TERMINAL_KINDS,
    CompletedFact,
    DeltaFact,
    Fact,
    FactRejectReason,
    FactResult,
    FailedFact,
    InterruptedFact,
    MessageFact,
    PhaseFact,
    WorkItemFact,
    fact_from_json,
    is_run_error,
    rejected,
    to_run_error,
)
from ._model import (
    ROLES,
    RUN_PHASES,
    TOOL_STATUSES,
    AbortRecord,
    ActiveRun,
    DataPart,
    HistoryResult,
    HistoryRunSnapshot,
    MediaPart,
    ReasoningPart,
    RunError,
    RuntimeMessage,
    RuntimePart,
    SessionInfo,
    TextPart,
    ToolCallPart,
    WorkItem,
    get_tool_call_status,
    history_from_json,
    message_from_json,
    part_from_json,
    run_error_from_json,
    work_item_from_json,
)
from ._pvec import PVec
from ._runtime import (
    CAPABILITY_NAMES,
    AbortRequest,
    ChatCore,
    CommandResult,
    DispatchRequest,
    ResumeRequest,
    RuntimeEvent,
)
from ._sessions import SessionRouter
from ._snapshot import AbortView, HistoryView, RunView, Snapshot
from ._state import CORE_CAPABILITIES, PROFILE_CAPABILITIES, Capability, Phase, WorkStatus
from ._state import TERMINAL as TERMINAL_STATUSES
from ._validate import BUILTIN_DATA_KINDS, RULES, check_history, check_message, coerce_tool_errors, is_valid_data_kind
from ._values import ABSENT, AbsentType, FrozenDict, freeze, thaw

__all__ = [
    "ABSENT",
    "ACCEPTED",
    "AbortRecord",
    "AbortRequest",
    "AbortView",
    "AbsentType",
    "ActiveRun",
    "BUILTIN_DATA_KINDS",
    "CAPABILITY_NAMES",
    "CORE_CAPABILITIES",
    "Capability",
    "ChatCore",
    "ChatkitTraceError",
    "CommandResult",
    "CompletedFact",
    "DataPart",
    "DeltaFact",
    "DispatchRequest",
    "FACT_KINDS",
    "Fact",
    "FactRejectReason",
    "FactResult",
    "FailedFact",
    "FrozenDict",
    "HistoryFormatError",
    "HistoryResult",
    "HistoryRunSnapshot",
    "HistoryView",
    "IDEMPOTENT_REASONS",
    "InterruptedFact",
    "InvalidMessageError",
    "MediaPart",
    "MessageFact",
    "OUTPUT_KINDS",
    "PROFILE_CAPABILITIES",
    "PVec",
    "Phase",
    "PhaseFact",
    "ROLES",
    "RULES",
    "RUN_PHASES",
    "ReasoningPart",
    "ResumeRequest",
    "RunError",
    "RunView",
    "RuntimeEvent",
    "RuntimeMessage",
    "RuntimePart",
    "SessionInfo",
    "SessionRouter",
    "Snapshot",
    "TERMINAL_KINDS",
    "TERMINAL_STATUSES",
    "TOOL_STATUSES",
    "TextPart",
    "ToolCallPart",
    "WorkItem",
    "WorkItemFact",
    "WorkStatus",
    "check_history",
    "check_message",
    "coerce_tool_errors",
    "fact_from_json",
    "freeze",
    "get_tool_call_status",
    "history_from_json",
    "is_valid_data_kind",
    "message_from_json",
    "part_from_json",
    "rejected",
    "run_error_from_json",
    "thaw",
    "is_run_error",
    "to_run_error",
    "work_item_from_json",
]
