"""The adapter conformance suite (SPEC R12): chatkit's ``runAdapterConformance``.

In a test module::

    from chatkit_trace.testing import ConformanceHarness, run_adapter_conformance

    run_adapter_conformance(
        "my-backend",
        ConformanceHarness(
            create_adapter=lambda kind: create_adapter(MyProtocol(), **create_backend(kind)),
            make_input=lambda text: {"text": text},
            capabilities={"regenerate": True},
        ),
    )

This defines one pytest test per scenario in the calling module
(``test_conformance_my_backend_text`` …).  The harness backend acts out
``text`` (a normal answer), ``tool`` (one tool call), ``fail`` (a remote
failure) and ``slow`` (streams until aborted); ``regenerate`` and
``history`` (refresh after a run) run when declared in ``capabilities`` (the
``history`` checks also run whenever the adapter has the capability).

Each check is one assertion whose message starts with its rule: R3.8 (no
rejection but the idempotent ones), R4.5 (the user message is visible before
the answer), R5.3 (a failure is a well-formed RunError, not ``UNKNOWN``),
R6.5 (a tool-call part with an id; no tool left running), R8.4 (refresh
keeps ids, types and content; without history, JSON round trip), R9.3
(abort while running ends interrupted; no active run after), R10.2
(regenerate replaces the old run; no id repeats).  Like chatkit's, this
suite checks generic behaviour only (R13.11): it does not replace tests
against the real backend.

:func:`run_scenario` runs one scenario and returns its checks, for code that
wants to inspect them (e.g. to prove a broken adapter is caught).
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..adapters import Adapter
from ..core import (
    InvalidMessageError,
    RunError,
    Snapshot,
    ToolCallPart,
    get_tool_call_status,
    message_from_json,
)
from ..runtime import ChatRuntime

__all__ = ["ConformanceHarness", "Check", "ScenarioReport", "run_scenario", "run_adapter_conformance", "SCENARIOS"]

SCENARIOS = ("text", "tool", "fail", "slow")
OPTIONAL_SCENARIOS = ("regenerate", "history")


@dataclass
class ConformanceHarness:
    """How the suite makes an adapter and an input (chatkit's harness)."""

    create_adapter: Callable[[str], Adapter]
    make_input: Callable[[str], Any]
    capabilities: Mapping[str, bool] = field(default_factory=dict)
    #: Seconds any one wait may take before the scenario fails.
    timeout: float = 5.0


@dataclass(frozen=True)
class Check:
    rule: str
    ok: bool
    message: str

    def __str__(self) -> str:
        return f"[{self.rule}] {'ok' if self.ok else 'FAILED'}: {self.message}"


@dataclass
class ScenarioReport:
    scenario: str
    checks: list[Check] = field(default_factory=list)

    def check(self, rule: str, ok: bool, message: str) -> bool:
        self.checks.append(Check(rule, bool(ok), message))
        return bool(ok)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def failed_rules(self) -> set[str]:
        return {c.rule for c in self.failures}


class _Recorder:
    def __init__(self, rt: ChatRuntime) -> None:
        self.snapshots: list[Snapshot] = [rt.core.snapshot]
        rt.core.subscribe(self.snapshots.append)


def _violations(rt: ChatRuntime) -> list[str]:
    return [
        f"{type(f).__name__}({f.event_id}) rejected {r.reason}" + (f" ({r.detail})" if r.detail else "")
        for f, r in rt.fact_log
        if r.violation
    ]


def _check_r38(report: ScenarioReport, rt: ChatRuntime) -> None:
    bad = _violations(rt)
    report.check(
        "R3.8",
        not bad,
        "no fact may be rejected except idempotently" + (": " + "; ".join(bad[:5]) if bad else ""),
    )


def _check_r45(report: ScenarioReport, rec: _Recorder, run_id: str) -> None:
    for snap in rec.snapshots:
        roles = [m.role for m in snap.messages if m.run_id == run_id]
        if "assistant" in roles or "tool" in roles:
            first_answer = next(i for i, r in enumerate(roles) if r in ("assistant", "tool"))
            ok = "user" in roles[:first_answer]
            report.check(
                "R4.5",
                ok,
                "the user message must be in the snapshot before the answer"
                + ("" if ok else f" (first answer snapshot had roles {roles})"),
            )
            return
    final = [m.role for m in rec.snapshots[-1].messages if m.run_id == run_id]
    report.check("R4.5", "user" in final, f"the user message must be visible (roles seen: {final})")


def _visible(msg: Any) -> list[tuple[str, str, Any]]:
    out = []
    for p in msg.parts:
        data = p.to_json()
        data.pop("id", None)
        out.append((p.id, p.type, data))
    return out


async def _check_r84(report: ScenarioReport, rt: ChatRuntime, run_id: str) -> None:
    before = {m.id: m for m in rt.core.snapshot.messages if m.run_id == run_id}
    if "history" in rt.adapter.functions:
        try:
            await rt.refresh_history()
        except InvalidMessageError as err:
            report.check("R8.4", False, f"history refresh was rejected as a whole batch: {err}")
            return
        after = {m.id: m for m in rt.core.snapshot.messages}
        problems = []
        for mid, msg in before.items():
            if msg.role != "assistant":
                continue
            other = after.get(mid)
            if other is None:
                problems.append(f"assistant message {mid!r} is not in history (ids: {sorted(after)})")
            elif _visible(other) != _visible(msg):
                problems.append(f"assistant message {mid!r} differs: live {_visible(msg)} vs history {_visible(other)}")
        if not any(m.role == "assistant" for m in before.values()):
            problems.append("the run produced no assistant message to compare")
        report.check(
            "R8.4",
            not problems,
            "after a refresh the assistant's message id, part ids, types and content stay the same"
            + (": " + "; ".join(problems) if problems else ""),
        )
    else:
        problems = [mid for mid, m in before.items() if message_from_json(m.to_json()) != m]
        report.check(
            "R8.4",
            not problems,
            "without history, settled messages survive a JSON round trip unchanged"
            + (f": {problems}" if problems else ""),
        )


async def _start(harness: ConformanceHarness, kind: str) -> tuple[ChatRuntime, _Recorder]:
    adapter = harness.create_adapter(kind)
    rt = ChatRuntime(adapter, f"conformance-{kind}")
    rec = _Recorder(rt)
    await rt.connect()
    return rt, rec


async def _scenario(harness: ConformanceHarness, kind: str) -> ScenarioReport:
    report = ScenarioReport(kind)
    base = "regenerate" if kind == "regenerate" else ("text" if kind == "history" else kind)
    rt, rec = await _start(harness, base)
    try:
        run_id = await rt.send(harness.make_input("hello"))
        if kind == "slow":
            got_output = await rt.wait_for(
                lambda s: any(m.run_id == run_id and m.role == "assistant" for m in s.messages), harness.timeout
            )
            report.check("R9.3", got_output, "the slow scenario must stream output before the abort")
            result = await rt.abort(run_id)
            report.check("R9.3", result.ok, f"abort while running must be accepted ({result.error})")
            await rt.wait_settled(run_id, harness.timeout)
            view = rt.core.snapshot.run(run_id)
            status = view.status if view else None
            report.check("R9.3", status == "interrupted", f"abort while running must end interrupted (status: {status})")
            report.check(
                "R9.3",
                rt.core.snapshot.active_run is None,
                "no run may be active after the abort settled",
            )
            _check_r38(report, rt)
            return report
        settled = await rt.wait_settled(run_id, harness.timeout)
        view = rt.core.snapshot.run(run_id)
        status = view.status if view else None
        _check_r38(report, rt)
        _check_r45(report, rec, run_id)
        if kind == "fail":
            report.check("R5.3", status == "failed", f"the fail scenario must end failed (status: {status})")
            err = view.error if view else None
            ok = isinstance(err, RunError) and bool(err.code) and err.code != "UNKNOWN" and bool(err.message)
            report.check(
                "R5.3",
                ok,
                f"the failure must be a well-formed RunError whose code is not UNKNOWN (got {err!r})",
            )
            return report
        report.check("R3.4", settled and status == "completed", f"the {base} scenario must end completed (status: {status})")
        if kind == "tool":
            parts = [
                p
                for m in rt.core.snapshot.messages
                if m.run_id == run_id
                for p in m.parts
                if isinstance(p, ToolCallPart)
            ]
            report.check(
                "R6.5", any(p.tool_call_id for p in parts), "the tool scenario must show a tool-call part with a toolCallId"
            )
            running = [p.tool_call_id for p in parts if get_tool_call_status(p) == "running"]
            report.check(
                "R6.5",
                not running,
                f"the tool scenario must conclude with no running tool left (running: {running}, status: {status})",
            )
        if kind in ("text", "tool", "history"):
            await _check_r84(report, rt, run_id)
        if kind == "regenerate":
            new_id = await rt.regenerate(target=run_id)
            settled = await rt.wait_settled(new_id, harness.timeout)
            snap = rt.core.snapshot
            if "history" in rt.adapter.functions:
                await rt.refresh_history()
                snap = rt.core.snapshot
            ids = [m.id for m in snap.messages]
            left = [m.id for m in snap.messages if m.run_id == run_id]
            report.check("R10.2", not left, f"after regenerate the old run's messages must be gone (left: {left})")
            new_view = snap.run(new_id)
            report.check(
                "R10.2",
                settled and new_view is not None and new_view.status == "completed",
                f"the regenerated run must complete (status: {new_view.status if new_view else None})",
            )
            roles = sorted(m.role for m in snap.messages if m.run_id == new_id)
            report.check(
                "R10.2", roles == ["assistant", "user"], f"the new run must have one user message and one answer ({roles})"
            )
            dupes = sorted({i for i in ids if ids.count(i) > 1})
            report.check("R10.2", not dupes, f"no message id may repeat ({dupes})")
            _check_r38(report, rt)
        return report
    finally:
        await rt.close()


def run_scenario(harness: ConformanceHarness, kind: str) -> ScenarioReport:
    """Run one scenario (``text``, ``tool``, ``fail``, ``slow``, ``regenerate``,
    ``history``) in a fresh event loop and return its checks."""
    return asyncio.run(asyncio.wait_for(_scenario(harness, kind), harness.timeout * 6))


def _scenarios_for(harness: ConformanceHarness) -> list[str]:
    kinds = list(SCENARIOS)
    for extra in OPTIONAL_SCENARIOS:
        if harness.capabilities.get(extra):
            kinds.append(extra)
    return kinds


def _make_test(harness: ConformanceHarness, kind: str) -> Callable[[], None]:
    def test() -> None:
        report = run_scenario(harness, kind)
        failed = [check for check in report.checks if not check.ok]
        if failed:
            # an explicit raise, not ``assert``: the package must behave the
            # same under ``python -O`` and under pytest's assertion rewriting
            raise AssertionError("; ".join(f"[{c.rule}] {c.message}" for c in failed))

    return test


def run_adapter_conformance(
    name: str, harness: ConformanceHarness, namespace: dict[str, Any] | None = None
) -> list[str]:
    """Define one pytest test per scenario in the caller's module; returns their names."""
    ns = namespace if namespace is not None else sys._getframe(1).f_globals
    slug = re.sub(r"\W+", "_", name).strip("_").lower() or "adapter"
    names = []
    for kind in _scenarios_for(harness):
        test = _make_test(harness, kind)
        test.__name__ = f"test_conformance_{slug}_{kind}"
        test.__doc__ = f"{name}: R12 conformance scenario {kind!r}"
        ns[test.__name__] = test
        names.append(test.__name__)
    return names
