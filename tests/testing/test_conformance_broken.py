"""The conformance suite catches each way the rules forbid an adapter to be broken.

Every variant below breaks the seed's "my protocol" adapter (or its backend)
in one way; the suite must fail on exactly the check that names the broken
rule, and the intact adapter must pass every check of the same scenario.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from chatkit_trace.adapters import CompletedUpdate, DeltaUpdate, FailedUpdate, MessageUpdate, create_adapter
from chatkit_trace.core import RuntimeMessage, TextPart
from chatkit_trace.examples import my_backend
from chatkit_trace.examples.my_protocol import MyProtocol
from chatkit_trace.testing import ConformanceHarness, run_scenario


class NoProjection(MyProtocol):
    """Neither projects the user input nor has a backend that echoes it (R4.5)."""

    def project_input(self, input, ctx):  # type: ignore[override]
        return []

    def implements(self, hook: str) -> bool:
        return hook != "project_input" and super().implements(hook)


class RandomIds(MyProtocol):
    """Mints a random assistant id per decode: live and history differ (R4.3, R8.4)."""

    def decode_event(self, event, ctx):  # type: ignore[override]
        out = []
        for u in super().decode_event(event, ctx):
            if isinstance(u, MessageUpdate):
                key = "random-id"
                ctx.state.setdefault(key, f"assistant-{uuid.uuid4().hex[:8]}")
                m = u.message
                u = MessageUpdate(RuntimeMessage(ctx.state[key], m.role, m.parts, m.run_id))
            out.append(u)
        return out


class MalformedError(MyProtocol):
    """Reports the failure without a usable code (R5.3 -> UNKNOWN)."""

    def decode_event(self, event, ctx):  # type: ignore[override]
        if isinstance(event, dict) and event.get("type") == "error":
            return [FailedUpdate({"msg": event.get("message")})]
        return super().decode_event(event, ctx)


class SwallowsFailure(MyProtocol):
    """Decodes the error event to nothing: the fail scenario never ends failed."""

    def decode_event(self, event, ctx):  # type: ignore[override]
        if isinstance(event, dict) and event.get("type") == "error":
            return []
        return super().decode_event(event, ctx)


class ForgetsToolResults(MyProtocol):
    """Ignores tool results: the run completes with a running tool (R6.5, active-work)."""

    def decode_event(self, event, ctx):  # type: ignore[override]
        if isinstance(event, dict) and event.get("type") == "tool_result":
            return []
        return super().decode_event(event, ctx)


class DeltaToWrongPart(MyProtocol):
    """Appends text to a part that does not exist (invalid-transition, R3.8)."""

    def decode_event(self, event, ctx):  # type: ignore[override]
        updates = list(super().decode_event(event, ctx))
        if isinstance(event, dict) and event.get("type") == "text" and ctx.state.get("sent"):
            return [DeltaUpdate(f"assistant:{ctx.run_id}", "text:99", event["text"])]
        ctx.state["sent"] = True
        return updates


class ReusesSegmentIds(MyProtocol):
    """Puts a new text segment under an old part id, duplicating a part id (R4.2, invalid-message)."""

    def decode_event(self, event, ctx):  # type: ignore[override]
        out = []
        for u in super().decode_event(event, ctx):
            if isinstance(u, MessageUpdate):
                parts = tuple(TextPart("text:0", p.text) if isinstance(p, TextPart) else p for p in u.message.parts)
                u = MessageUpdate(RuntimeMessage(u.message.id, u.message.role, parts, u.message.run_id))
            out.append(u)
        return out


class CompletesOnTextEnd(MyProtocol):
    """Invents `completed` on every text event, then completes again (terminal-sealed, R3.8)."""

    def decode_event(self, event, ctx):  # type: ignore[override]
        updates = list(super().decode_event(event, ctx))
        return updates + [CompletedUpdate()] if updates and not isinstance(updates[-1], CompletedUpdate) else updates


def backend_without_abort(kind: str) -> dict[str, Any]:
    caps = my_backend.create_backend(kind)
    caps.pop("abort")
    return caps


def backend_ignoring_stop(kind: str) -> dict[str, Any]:
    caps = my_backend.create_backend(kind)

    async def abort(request):  # acknowledges, but history keeps saying "running"
        return my_backend.Response(204)

    caps["abort"] = abort
    return caps


def backend_without_history(kind: str) -> dict[str, Any]:
    caps = my_backend.create_backend(kind)
    caps.pop("history")
    return caps


def backend_keeping_old_runs(kind: str) -> dict[str, Any]:
    return my_backend.create_backend(kind, truncate=False)


def harness(protocol: type[MyProtocol] = MyProtocol, backend=my_backend.create_backend) -> ConformanceHarness:
    return ConformanceHarness(
        create_adapter=lambda kind: create_adapter(protocol(), **backend(kind)),
        make_input=lambda text: {"text": text},
        capabilities={"regenerate": True, "history": True},
        timeout=2.0,
    )


BROKEN = [
    # (variant, scenario, the rule whose check must fail)
    (NoProjection, my_backend.create_backend, "text", "R4.5"),
    (RandomIds, my_backend.create_backend, "text", "R8.4"),
    (MalformedError, my_backend.create_backend, "fail", "R5.3"),
    # With history the runtime recovers the failure from it (R3.4), so the
    # swallowed error is only caught when nothing else can tell the outcome.
    (SwallowsFailure, backend_without_history, "fail", "R5.3"),
    (ForgetsToolResults, my_backend.create_backend, "tool", "R6.5"),
    (ForgetsToolResults, my_backend.create_backend, "tool", "R3.8"),
    (DeltaToWrongPart, my_backend.create_backend, "text", "R3.8"),
    (ReusesSegmentIds, my_backend.create_backend, "tool", "R3.8"),
    (CompletesOnTextEnd, my_backend.create_backend, "tool", "R8.4"),
    (MyProtocol, backend_ignoring_stop, "slow", "R9.3"),
    (MyProtocol, backend_keeping_old_runs, "regenerate", "R10.2"),
]


@pytest.mark.parametrize(
    "protocol, backend, scenario, rule",
    BROKEN,
    ids=[f"{p.__name__}-{b.__name__}-{s}-{r}" for p, b, s, r in BROKEN],
)
def test_broken_adapter_is_caught_by_the_right_check(protocol, backend, scenario, rule):
    report = run_scenario(harness(protocol, backend), scenario)
    assert rule in report.failed_rules, [str(c) for c in report.checks]
    message = next(c.message for c in report.failures if c.rule == rule)
    assert message  # each failing check says what it expected


@pytest.mark.parametrize("scenario", ["text", "tool", "fail", "slow", "regenerate", "history"])
def test_the_intact_adapter_passes_every_check(scenario):
    report = run_scenario(harness(), scenario)
    assert not report.failures, [str(c) for c in report.failures]
    assert report.checks  # and did check something


def test_generated_test_fails_with_a_message_naming_the_rule():
    from chatkit_trace.testing.conformance import _make_test

    test = _make_test(harness(NoProjection), "text")
    with pytest.raises(AssertionError, match=r"^\[R4\.5\]"):
        test()


# -- issue 19: what the suite let through -------------------------------------------------


class ClockIds(MyProtocol):
    """Names the answer ``msg-{time.time()}``: stable within a decode, new on every other (R4.3)."""

    def decode_event(self, event, ctx):  # type: ignore[override]
        import time

        out = []
        for u in super().decode_event(event, ctx):
            if isinstance(u, MessageUpdate):
                m = u.message
                u = MessageUpdate(RuntimeMessage(ctx.state.setdefault("id", f"msg-{time.time()}"), m.role, m.parts, m.run_id))
            out.append(u)
        return out


class NeverConcludes(MyProtocol):
    """Decodes ``done`` to nothing: only history can settle the run (R3.4)."""

    def decode_event(self, event, ctx):  # type: ignore[override]
        if isinstance(event, dict) and event.get("type") == "done":
            return []
        return super().decode_event(event, ctx)


class TextAfterDone(MyProtocol):
    """Emits a delta after ``completed`` in the same event (R3.5)."""

    def decode_event(self, event, ctx):  # type: ignore[override]
        updates = list(super().decode_event(event, ctx))
        if any(isinstance(u, CompletedUpdate) for u in updates):
            return updates + [DeltaUpdate(f"assistant:{ctx.run_id}", "text:0", "!")]
        return updates


class EncodeRaises(MyProtocol):
    def encode_input(self, input, ctx):  # type: ignore[override]
        raise KeyError("model")


@pytest.mark.parametrize("backend", [my_backend.create_backend, backend_without_history], ids=["history", "no-history"])
@pytest.mark.parametrize(
    ("protocol", "scenario", "rule"),
    [(ClockIds, "text", "R4.3"), (NeverConcludes, "text", "R3.4"), (NeverConcludes, "tool", "R3.4"), (TextAfterDone, "text", "R3.5")],
    ids=["clock-ids", "never-concludes", "never-concludes-tool", "text-after-done"],
)
def test_issue19_bugs_are_caught_with_and_without_history(protocol, backend, scenario, rule):
    report = run_scenario(harness(protocol, backend), scenario)
    assert rule in report.failed_rules, str(report)
    if protocol is TextAfterDone:
        assert "R3.8" not in report.failed_rules  # one rejection, one rule: the one it breaks


def test_history_calibration_is_not_a_terminal_from_the_stream():
    report = run_scenario(harness(NeverConcludes), "text")
    check = next(c for c in report.failures if c.rule == "R3.4")
    assert "only history calibration settled it (completed)" in check.message


def test_a_scenario_fails_with_a_check_never_an_exception():
    for scenario in ("text", "regenerate", "slow"):
        report = run_scenario(harness(EncodeRaises), scenario)
        assert report.failures, str(report)
    report = run_scenario(harness(NeverConcludes, backend_without_history), "regenerate")
    assert {"R3.4", "R10.2"} <= report.failed_rules and "R12" not in report.failed_rules, str(report)


def test_an_exception_is_a_check_that_names_the_step():
    import asyncio

    from chatkit_trace.testing.conformance import _scenario

    class DecodeRaises(MyProtocol):
        def project_input(self, input, ctx):  # type: ignore[override]
            raise RuntimeError("boom")

    report = asyncio.run(_scenario(harness(DecodeRaises), "text"))
    [check] = report.failures
    assert check.rule == "R12" and "while sending the input" in check.message and "RuntimeError: boom" in check.message


def test_an_undeclared_abort_skips_slow_with_a_line(capsys):
    report = run_scenario(harness(MyProtocol, backend_without_abort), "slow")
    assert report.skipped and "declares no abort capability" in report.skipped and "stop='close'" in report.skipped
    assert not report.checks
    from chatkit_trace.testing.conformance import _make_test

    with pytest.raises(pytest.skip.Exception, match="slow: the adapter declares no abort capability"):
        _make_test(harness(MyProtocol, backend_without_abort), "slow")()


def test_undeclared_optional_scenarios_are_skipped_tests_with_their_reason():
    from chatkit_trace.testing import run_adapter_conformance

    ns: dict = {}
    h = harness()
    h.capabilities = {}
    names = run_adapter_conformance("mine", h, ns)
    assert names == [f"test_conformance_mine_{k}" for k in ("text", "tool", "fail", "slow")]
    with pytest.raises(pytest.skip.Exception, match="regenerate: regenerate is not declared"):
        ns["test_conformance_mine_regenerate"]()


def test_undeclared_optional_scenarios_can_be_left_out():
    """A suite whose backend cannot offer regenerate/history defines no test for them (no skip to count)."""
    from chatkit_trace.testing import run_adapter_conformance

    ns: dict = {}
    h = harness()
    h.capabilities = {}
    names = run_adapter_conformance("mine", h, ns, undeclared="omit")
    assert names == [f"test_conformance_mine_{k}" for k in ("text", "tool", "fail", "slow")]
    assert sorted(ns) == sorted(names)
    with pytest.raises(ValueError, match="undeclared must be one of skip, omit"):
        run_adapter_conformance("mine", h, {}, undeclared="hide")
