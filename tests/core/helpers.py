"""Small builders for Core tests (a Playbook-like style: feed facts, expect results)."""

from __future__ import annotations

from typing import Any

from chatkit_trace.core import ChatCore, RuntimeMessage, TextPart, ToolCallPart
from chatkit_trace.core._values import ABSENT


def text_msg(mid: str, text: str = "hi", role: str = "assistant", pid: str = "text:0", run_id: str | None = None) -> RuntimeMessage:
    return RuntimeMessage(mid, role, (TextPart(pid, text),), run_id=run_id)


def tool_msg(mid: str, call_id: str = "c1", result: Any = ABSENT, status: Any = ABSENT) -> RuntimeMessage:
    return RuntimeMessage(
        mid, "assistant", (ToolCallPart(f"tool:{call_id}", call_id, "lookup", args={"q": 1}, result=result, status=status),)
    )


def running_core(*runs: str, capabilities: Any = ("abort", "history", "resume", "regenerate", "edit")) -> ChatCore:
    """A core with each run sent, dispatched and accepted (runs queue behind each other)."""
    core = ChatCore("s1", capabilities=capabilities, clock=lambda: 1000.0)
    for run in runs:
        assert core.send(run, {"text": f"input of {run}"}).ok
    for req in core.take_requests():
        core.dispatch_settled(req.run_id, True)
    return core


def settle(core: ChatCore) -> None:
    for req in core.take_requests():
        if hasattr(req, "via"):
            core.dispatch_settled(req.run_id, True)
