"""The run state machine, as data.

Two rules, after h11's ``_state.py``:

1. Every transition of a run's status, of a work item's status and of the
   abort record lives in the tables below; the runtime only looks them up.
   A fact or command whose (state, event) pair is not in a table is
   rejected ``invalid-transition`` (or, for a command, refused).
2. The tables do not know where an event came from (wire, history, UI);
   the runtime decides that.

Run status (``RUN_TRANSITIONS``)::

    send ──> queued ──dispatch──> running ──completed──> completed
               │                    │ ├────failed─────> failed
               │ cancel             │ └──interrupted──> interrupted
               v                    │      (calibrate: the same three, from history)
          interrupted  <────────────┘
    register_run / resume_active_run ──> running (origin remote)

Terminal states are sealed: every later fact is ``terminal-sealed`` (R3.5).
Independent of the status: ``phase`` (any non-terminal phase may follow any
other, R3.2a), ``connection`` (connected / disconnected / reconnecting,
R3.4: a disconnect never settles a run), ``dispatch`` (pending -> accepted,
or refused, which removes the run) and the abort record (R9.4):
``unknown`` on request, ``accepted`` when the backend acknowledged the stop
(output sealed from then on), ``confirmed`` when a terminal fact or history
settled the run.

``docs/core-state-machine.md`` is generated from these tables by
:func:`mermaid` and a test keeps it in sync.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "QUEUED",
    "RUNNING",
    "COMPLETED",
    "FAILED",
    "INTERRUPTED",
    "TERMINAL",
    "RUN_STATUSES",
    "RUN_TRANSITIONS",
    "OUTPUT_EVENTS",
    "ALLOWED_IN",
    "WORK_TRANSITIONS",
    "WORK_STATUSES",
    "CONNECTION_STATES",
    "ABORT_TRANSITIONS",
    "PHASES",
    "Capability",
    "CORE_CAPABILITIES",
    "PROFILE_CAPABILITIES",
    "Phase",
    "WorkStatus",
    "next_run_status",
    "mermaid",
]

QUEUED = "queued"
RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"
INTERRUPTED = "interrupted"
RUN_STATUSES = (QUEUED, RUNNING, COMPLETED, FAILED, INTERRUPTED)
TERMINAL = frozenset({COMPLETED, FAILED, INTERRUPTED})

#: The facts that carry a run's output (R2.4, R3.2a): admitted where the
#: table lets them keep the run's status (only ``running`` does).
OUTPUT_EVENTS = ("message", "delta", "phase", "work-item")

#: (status, event) -> new status: every fact and command that touches a
#: run's status, the output facts included (they keep it).
RUN_TRANSITIONS: dict[tuple[str, str], str] = {
    (QUEUED, "dispatch"): RUNNING,
    (QUEUED, "cancel"): INTERRUPTED,
    **{(RUNNING, event): RUNNING for event in OUTPUT_EVENTS},
    (RUNNING, "completed"): COMPLETED,
    (RUNNING, "failed"): FAILED,
    (RUNNING, "interrupted"): INTERRUPTED,
    (RUNNING, "calibrate-completed"): COMPLETED,
    (RUNNING, "calibrate-failed"): FAILED,
    (RUNNING, "calibrate-interrupted"): INTERRUPTED,
}

#: event -> the statuses in which the table allows it (:data:`RUN_TRANSITIONS`
#: read by event, once: the runtime's per-fact test is a set lookup).
ALLOWED_IN: dict[str, frozenset[str]] = {
    event: frozenset(s for (s, e) in RUN_TRANSITIONS if e == event) for event in {e for (_, e) in RUN_TRANSITIONS}
}



class WorkStatus(StrEnum):
    """A work item's (tool call's) status (R3.2a, R6.1)."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: Work item (tool call) statuses (R3.2a, R6.1), as plain strings.
WORK_STATUSES: tuple[str, ...] = tuple(s.value for s in WorkStatus)
WORK_TRANSITIONS: dict[tuple[str, str], str] = {
    ("running", "running"): "running",  # progress (partial result, title) on a running item
    ("running", "completed"): "completed",
    ("running", "failed"): "failed",
    ("running", "cancelled"): "cancelled",
}

CONNECTION_STATES = ("connected", "disconnected", "reconnecting")

#: abort.remote (R9.4): (state, event) -> state; ``None`` is "no stop requested".
ABORT_TRANSITIONS: dict[tuple[str | None, str], str] = {
    (None, "request"): "unknown",
    ("unknown", "ack"): "accepted",
    ("unknown", "ack-failed"): "unknown",
    ("unknown", "terminal"): "confirmed",
    ("accepted", "terminal"): "confirmed",
}



class Phase(StrEnum):
    """A run's phase (R3.2a RunPhase)."""

    IDLE = "idle"
    THINKING = "thinking"
    GENERATING = "generating"
    TOOL = "tool"
    AWAITING_INPUT = "awaiting-input"


#: RunPhase values (R3.2a), as plain strings.
PHASES: tuple[str, ...] = tuple(p.value for p in Phase)


class Capability(StrEnum):
    """Every capability name, defined once: the Core's eight (R2, R8-R10) and
    ``status``, a route's read of one run's status the Core has no command
    for (a route profile may name it)."""

    RUN = "run"
    SUBSCRIBE = "subscribe"
    RESUME = "resume"
    HISTORY = "history"
    STATUS = "status"
    ABORT = "abort"
    STEER = "steer"
    REGENERATE = "regenerate"
    EDIT = "edit"


#: The Core's capabilities, in the order the Core lists them (plain strings:
#: messages and argument checks print them as they always did).
CORE_CAPABILITIES: tuple[str, ...] = tuple(
    c.value
    for c in (
        Capability.RUN,
        Capability.SUBSCRIBE,
        Capability.RESUME,
        Capability.ABORT,
        Capability.STEER,
        Capability.REGENERATE,
        Capability.EDIT,
        Capability.HISTORY,
    )
)
#: Every capability a route profile may name, in the profiles' order.
PROFILE_CAPABILITIES: tuple[str, ...] = tuple(c.value for c in Capability)


def next_run_status(status: str, event: str) -> str | None:
    """The status after ``event``, or ``None`` when the table forbids it."""
    return RUN_TRANSITIONS.get((status, event))


def mermaid() -> str:
    """A mermaid state diagram of :data:`RUN_TRANSITIONS` (for the docs; a
    status's output facts, which keep it, drawn as one loop)."""
    lines = ["stateDiagram-v2", "    [*] --> queued: send", "    [*] --> running: register_run / resume"]
    loops: dict[str, list[str]] = {}
    for (src, event), dst in RUN_TRANSITIONS.items():
        if src == dst and event in OUTPUT_EVENTS:
            loops.setdefault(src, []).append(event)
            continue
        lines.append(f"    {src} --> {dst}: {event}")
    for src, events in loops.items():
        lines.append(f"    {src} --> {src}: {', '.join(events)}")
    for t in sorted(TERMINAL):
        lines.append(f"    {t} --> [*]")
    return "\n".join(lines) + "\n"
