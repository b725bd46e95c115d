"""The R12 conformance suite on the ``openai`` adapter and a scripted backend.

The backend (``openai_backend.py``) streams real ``chat.completion.chunk``
SSE bytes; ``tool`` is the OpenAI tool loop (two requests under one run id),
``fail`` an ``{"error": …}`` frame, ``slow`` chunks until stopped; history is
chatkit's HistoryResult JSON written by the backend itself.
"""

from __future__ import annotations

import pytest

from chatkit_trace.adapters import CompletedUpdate, FailedUpdate, create_adapter
from chatkit_trace.adapters.openai import OpenAIProtocol
from chatkit_trace.testing import ConformanceHarness, run_adapter_conformance, run_scenario
from chatkit_trace.wire import DONE

from .openai_backend import TOOL_DEFS, create_backend


def _harness(subscribe: bool) -> ConformanceHarness:
    return ConformanceHarness(
        create_adapter=lambda kind: create_adapter(
            OpenAIProtocol(model="scripted", tools=TOOL_DEFS),
            **create_backend(kind, subscribe=subscribe),
        ),
        make_input=lambda text: {"text": text},
        capabilities={"regenerate": True, "history": True},
    )


NAMES = run_adapter_conformance("openai", _harness(subscribe=False))


def test_the_suite_defined_one_test_per_scenario():
    assert NAMES == [
        f"test_conformance_openai_{k}"
        for k in ("text", "tool", "fail", "slow", "regenerate", "history")
    ]


def test_fail_scenario_keeps_the_protocols_code():
    report = run_scenario(_harness(subscribe=False), "fail")
    assert not report.failures


@pytest.mark.parametrize(
    "kind",
    [
        "text",
        "tool",
        "fail",
        "slow",
        "regenerate",
        "history",
    ],
)
def test_conformance_openai_over_a_subscription(kind: str):
    """chatkit's run_id extension: run answers 202, events come through subscribe."""
    report = run_scenario(_harness(subscribe=True), kind)
    assert not report.failures, [str(c) for c in report.failures]


# --------------------------------------------------------------------------- broken variants


class DoneCompletes(OpenAIProtocol):
    """The commonest adapter mistake: treats ``[DONE]`` as success."""

    def decode_event(self, event, ctx):  # type: ignore[override]
        return [CompletedUpdate()] if event is DONE else super().decode_event(event, ctx)


class ToolCallsConclude(OpenAIProtocol):
    """Mistake 2: ends the run on ``finish_reason: tool_calls``."""

    def decode_event(self, event, ctx):  # type: ignore[override]
        out = super().decode_event(event, ctx)
        choices = event.get("choices") if isinstance(event, dict) else None
        if any(
            isinstance(c, dict) and c.get("finish_reason") == "tool_calls" for c in choices or ()
        ):
            out.append(CompletedUpdate())
        return out


class RawErrorObject(OpenAIProtocol):
    """Passes the error object through: no string code, the Core falls back to UNKNOWN."""

    def decode_event(self, event, ctx):  # type: ignore[override]
        out = super().decode_event(event, ctx)
        return [
            FailedUpdate(dict(event["error"], code=429)) if isinstance(u, FailedUpdate) else u
            for u in out
        ]


@pytest.mark.parametrize(
    ("protocol", "kind", "rules"),
    [
        (DoneCompletes, "tool", {"R3.8", "R6.5"}),
        (ToolCallsConclude, "tool", {"R3.8", "R6.5"}),
        (RawErrorObject, "fail", {"R5.3"}),
    ],
)
def test_the_suite_catches_broken_openai_adapters(
    protocol: type[OpenAIProtocol], kind: str, rules: set[str]
):
    harness = ConformanceHarness(
        create_adapter=lambda k: create_adapter(
            protocol(model="scripted", tools=TOOL_DEFS), **create_backend(k)
        ),
        make_input=lambda text: {"text": text},
        timeout=1.0,  # the broken runs never settle: the reader stopped at the bogus terminal
    )
    report = run_scenario(harness, kind)
    assert report.failed_rules & rules, [str(c) for c in report.checks]
