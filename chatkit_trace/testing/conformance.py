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
failure) and ``slow`` (streams until stopped); ``regenerate`` and
``history`` (refresh after a run) run when declared in ``capabilities`` (the
``history`` checks also run whenever the adapter has the capability).  A
scenario whose capability is not declared is skipped with a line saying so
(``slow`` needs ``abort``, or ``stop="close"`` for a protocol whose stop is
closing the stream); ``run_adapter_conformance(..., undeclared="omit")``
defines no test for an undeclared ``regenerate``/``history`` instead.

Each check is one assertion whose message starts with the rule it enforces:

* R3.4: the text, tool and fail runs end by a terminal update *from the
  stream*; a run that history calibration had to settle after the scripted
  stream ended fails here (the terminal must come from the stream);
* R3.5: no fact after the terminal (a ``terminal-sealed`` rejection);
* R3.8: no other rejection but the idempotent ones;
* R4.3: the same scripted events decoded again, live-shaped and
  history-shaped, give the same message and part ids, and no id the
  adapter made up looks generated from time or randomness;
* R4.5: the user message is visible before the answer;
* R5.3: a failure is a well-formed RunError, not ``UNKNOWN``;
* R6.5: a tool-call part with an id; no tool left running;
* R8.4: refresh keeps ids, types and content (without history: a JSON round
  trip);
* R9.3: a stop while running ends interrupted, no run active after;
* R10.2: regenerate replaces the old run, the new run has one user message
  and its answer (several answer messages when ``multi_message_answers``),
  no id repeats.

A scenario never raises: an exception inside it (the adapter, the backend,
a command the Core refused) becomes a failed check naming the step.  Like
chatkit's, this suite checks generic behaviour only (R13.11): it does not
replace tests against the real backend.

:func:`run_scenario` runs one scenario and returns its report, for code
that wants to inspect the checks (e.g. to prove a broken adapter is caught).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..adapters import Adapter, DeltaUpdate, MessageUpdate
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
ALL_SCENARIOS = SCENARIOS + OPTIONAL_SCENARIOS
STOPS = ("abort", "close")

#: Ids that look minted from the clock or a random source (the CK203 pattern).
_GENERATED = re.compile(
    r"(?i)(?:[0-9a-f]{8}-[0-9a-f]{4}-[14][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"  # UUID v1/v4
    r"|(?<![0-9a-z])[0-7][0-9a-hjkmnp-tv-z]{25}(?![0-9a-z])"  # ULID
    r"|(?<![\d.])1[5-9]\d{11}(?:\.\d+)?(?![\d.])"  # epoch milliseconds
    r"|(?<![\d.])1[5-9]\d{8}(?:\.\d+)?(?![\d.])"  # epoch seconds (time.time())
    r"|[0-9a-f]{24,})"  # long random hex
)

#: The rule a non-idempotent rejection breaks (others: R3.8, R3.6's list).
_REJECTION_RULES = {"terminal-sealed": "R3.5"}


@dataclass
class ConformanceHarness:
    """How the suite makes an adapter and an input (chatkit's harness).

    ``create_adapter(kind)`` returns an adapter whose capability functions
    act out scenario ``kind`` (``text``, ``tool``, ``fail``, ``slow``,
    ``regenerate``); ``make_input(text)`` the chat input for a user text.
    ``capabilities`` declares the optional scenarios (``{"regenerate":
    True, "history": True}``).  ``stop`` says how the protocol stops a run:
    ``"abort"`` (the adapter's ``abort`` capability asks the backend) or
    ``"close"`` (closing the run's stream is the stop; the suite closes it).
    ``multi_message_answers``: the protocol answers in several messages
    (AG-UI: one per text message, tool results folded in), so the R10.2 check
    accepts more than one answer message per run.  ``settles_by_history``:
    the protocol's streams carry no conclusion at all (stock ADK ``/run_sse``),
    so only history settles a run; R3.4 then accepts a run history settled,
    with a note (never declare it to hide a missing terminal update).
    """

    create_adapter: Callable[[str], Adapter]
    make_input: Callable[[str], Any]
    capabilities: Mapping[str, bool] = field(default_factory=dict)
    #: Seconds any one wait may take before the scenario fails.
    timeout: float = 5.0
    stop: str = "abort"
    multi_message_answers: bool = False
    settles_by_history: bool = False

    def __post_init__(self) -> None:
        if self.stop not in STOPS:
            raise ValueError(f"stop must be one of {', '.join(STOPS)}, not {self.stop!r}")


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
    #: Why the scenario did not run (an undeclared capability), or None.
    skipped: str | None = None
    #: Lines worth reading that are not checks (what a declared limitation costs).
    notes: list[str] = field(default_factory=list)

    def check(self, rule: str, ok: bool, message: str) -> bool:
        self.checks.append(Check(rule, bool(ok), message))
        return bool(ok)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def failed_rules(self) -> set[str]:
        return {c.rule for c in self.failures}

    def __str__(self) -> str:
        if self.skipped:
            return f"{self.scenario}: skipped: {self.skipped}"
        lines = [f"{self.scenario}:"] + [f"  {c}" for c in self.checks] + [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


class _Step(Exception):
    """Ends a scenario early: the check explaining why is already recorded."""


class _Recorder:
    def __init__(self, rt: ChatRuntime) -> None:
        self.snapshots: list[Snapshot] = [rt.core.snapshot]
        rt.core.subscribe(self.snapshots.append)


# -- checks ----------------------------------------------------------------------------


def _check_rejections(report: ScenarioReport, rt: ChatRuntime) -> None:
    """R3.8 (and R3.5 for output after the terminal): no rejection but the idempotent ones."""
    by_rule: dict[str, list[str]] = {}
    for f, r in rt.fact_log:
        if not r.violation:
            continue
        reason = r.reason.value if r.reason is not None else "?"
        line = f"{type(f).__name__}({f.event_id}) rejected {reason}" + (f" ({r.detail})" if r.detail else "")
        by_rule.setdefault(_REJECTION_RULES.get(reason, "R3.8"), []).append(line)
    sealed = by_rule.pop("R3.5", [])
    if sealed:
        report.check(
            "R3.5",
            False,
            "no fact may follow the run's terminal (the adapter emitted output after the terminal update; "
            "emit it before): " + "; ".join(sealed[:5]),
        )
    bad = by_rule.get("R3.8", [])
    report.check(
        "R3.8",
        not bad,
        "no fact may be rejected except idempotently" + (": " + "; ".join(bad[:5]) if bad else ""),
    )


def _check_stream_terminal(
    report: ScenarioReport, rt: ChatRuntime, run_id: str, what: str, harness: ConformanceHarness
) -> None:
    """R3.4: the run's terminal came from the stream, not from history calibration."""
    from ..core import CompletedFact, FailedFact, InterruptedFact

    terminal = [
        f for f, r in rt.fact_log if f.run_id == run_id and isinstance(f, (CompletedFact, FailedFact, InterruptedFact)) and r.accepted
    ]
    view = rt.core.snapshot.run(run_id)
    status = view.status if view else None
    if terminal:
        report.check("R3.4", True, f"the {what} run ends by a terminal update from its stream")
    elif view is not None and view.terminal and harness.settles_by_history:
        report.check("R3.4", True, f"the {what} run was settled by history (declared: settles_by_history)")
        report.notes.append(
            f"the {what} run's stream carried no conclusion; history settled it ({status}): until a refresh the "
            "UI shows it running (declared settles_by_history)"
        )
    elif view is not None and view.terminal:
        report.check(
            "R3.4",
            False,
            f"the {what} run's stream ended without a terminal update; only history calibration settled it "
            f"({status}): terminal facts must come from the stream (the scripted stream ended, so the UI's "
            "reader saw no conclusion)",
        )
    else:
        report.check(
            "R3.4",
            False,
            f"the {what} run's stream ended without a terminal update and nothing settled it (status: {status}): "
            "decode the protocol's end of run into completed / failed / interrupted",
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
                + ("" if ok else f" (first answer snapshot had roles {roles}: implement project_input)"),
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


def _ids_from_updates(updates: list[Any]) -> dict[str, list[str]]:
    """Message id -> part ids, as the updates build them (no Core needed)."""
    out: dict[str, list[str]] = {}
    for u in updates:
        if isinstance(u, MessageUpdate):
            out[u.message.id] = [p.id for p in u.message.parts]
        elif isinstance(u, DeltaUpdate):
            parts = out.setdefault(u.message_id, [])
            if u.part_id not in parts:
                parts.append(u.part_id)
    return out


def _redecode(rt: ChatRuntime, run_id: str, source: str) -> dict[str, list[str]]:
    decoder = rt.adapter.decoder(rt.session_id)
    updates: list[Any] = []
    for ev, fallback in rt.event_log.get(run_id, []):
        decoded = decoder.decode(ev.data, run_id=run_id, event_id=ev.event_id, fallback_id=fallback, source=source)
        if decoded.error is not None:
            break
        updates.extend(decoded.updates)
        if decoded.terminal:
            break
    return _ids_from_updates(updates)


def _check_r43(report: ScenarioReport, rt: ChatRuntime, run_id: str) -> None:
    """R4.3 without history: decode the same scripted events twice more
    (live-shaped and history-shaped) and compare the ids; and no id the
    adapter made up may look generated from time or randomness."""
    events = rt.event_log.get(run_id, [])
    if not events:
        return
    live = {m.id: [p.id for p in m.parts] for m in rt.core.snapshot.messages if m.run_id == run_id and m.role != "user"}
    problems = []
    for source in ("stream", "history"):
        again = _redecode(rt, run_id, source)
        again = {k: v for k, v in again.items() if k in live or k not in {m.id for m in rt.core.snapshot.messages}}
        if again != live:
            problems.append(f"decoded again ({source}-shaped) the same events give {again}, live gave {live}")
    blob = json.dumps([ev.data for ev, _ in events], default=str)
    minted = []
    for mid, parts in live.items():
        for ident in [mid, *parts]:
            if not isinstance(ident, str):
                continue
            rest = ident.replace(run_id, "").replace(rt.session_id, "")
            m = _GENERATED.search(rest)
            if m is not None and m.group(0) not in blob:
                minted.append(ident)
    if minted:
        problems.append(
            f"ids {minted[:4]} look generated from time or randomness and come from no event: build them from "
            "the protocol's content (message ids the backend sends, the run id, a segment counter)"
        )
    report.check(
        "R4.3",
        not problems,
        "ids come from protocol content: the same events always give the same message and part ids"
        + (": " + "; ".join(problems) if problems else ""),
    )


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


# -- scenarios ----------------------------------------------------------------------------


def skip_reason(harness: ConformanceHarness, kind: str, adapter: Adapter | None = None) -> str | None:
    """Why scenario ``kind`` cannot run with this harness, or None."""
    if kind not in ALL_SCENARIOS:
        raise ValueError(f"unknown scenario {kind!r} (one of: {', '.join(ALL_SCENARIOS)})")
    if kind == "slow" and harness.stop == "abort":
        if adapter is None:
            adapter = harness.create_adapter("slow")
        if "abort" not in adapter.capabilities:
            return (
                "the adapter declares no abort capability, so a running run cannot be stopped (R9.2); "
                "declare stop='close' in the harness if closing the stream is the protocol's stop"
            )
    if kind == "regenerate" and not harness.capabilities.get("regenerate"):
        return "regenerate is not declared (capabilities={'regenerate': True} when the backend truncates, R10.2)"
    if kind == "history" and not harness.capabilities.get("history"):
        if adapter is None:
            adapter = harness.create_adapter("text")
        if "history" not in adapter.capabilities:
            return "the adapter declares no history capability (R8.4 is checked by a JSON round trip instead)"
    return None


async def _start(harness: ConformanceHarness, kind: str) -> tuple[ChatRuntime, _Recorder]:
    adapter = harness.create_adapter(kind)
    rt = ChatRuntime(adapter, f"conformance-{kind}", stop=harness.stop)
    rec = _Recorder(rt)
    await rt.connect()
    return rt, rec


async def _slow(report: ScenarioReport, harness: ConformanceHarness, rt: ChatRuntime, run_id: str) -> None:
    got_output = await rt.wait_for(
        lambda s: any(m.run_id == run_id and m.role == "assistant" for m in s.messages), harness.timeout
    )
    report.check("R9.3", got_output, "the slow scenario must stream output before the stop")
    result = await rt.abort(run_id)
    how = "closing the stream" if harness.stop == "close" else "abort"
    report.check("R9.3", result.ok, f"a stop ({how}) while running must be accepted ({result.error})")
    has_history = "history" in rt.adapter.functions
    if harness.stop == "close" and not has_history:
        await rt.wait_for(lambda s: (r := s.run(run_id)) is not None and r.abort is not None and r.abort.remote != "unknown", harness.timeout)
        view = rt.core.snapshot.run(run_id)
        status = view.status if view else None
        report.check(
            "R3.4",
            status in ("running", "interrupted"),
            f"closing the stream must not make an outcome up (status: {status})",
        )
        report.notes.append(
            "stop = close the stream and no history: nothing confirms the stop, so the run's outcome stays "
            f"unknown (status {status}) and it keeps its execution slot until a terminal event or a refresh "
            "settles it (R9.1, R13.4); R9.3's 'ends interrupted' is not checked"
        )
        _check_rejections(report, rt)
        return
    await rt.wait_settled(run_id, harness.timeout)
    view = rt.core.snapshot.run(run_id)
    status = view.status if view else None
    report.check("R9.3", status == "interrupted", f"a stop while running must end interrupted (status: {status})")
    report.check("R9.3", rt.core.snapshot.active_run is None, "no run may be active after the stop settled")
    _check_rejections(report, rt)


async def _regenerate(report: ScenarioReport, harness: ConformanceHarness, rt: ChatRuntime, run_id: str) -> None:
    try:
        new_id = await rt.regenerate(target=run_id)
    except Exception as err:  # noqa: BLE001 - backend code: a refusal is the check's verdict (R10.2)
        report.check("R10.2", False, f"regenerate was refused: {err}")
        raise _Step from None
    settled = await rt.wait_settled(new_id, harness.timeout)
    _check_stream_terminal(report, rt, new_id, "regenerated", harness)
    live = snap = rt.core.snapshot
    if "history" in rt.adapter.functions:
        await rt.refresh_history()
        snap = rt.core.snapshot
    ids = [m.id for m in snap.messages]
    left = [m.id for m in snap.messages if m.run_id == run_id]
    report.check("R10.2", not left, f"after regenerate the old run's messages must be gone (left: {left})")
    new_view = snap.run(new_id) or live.run(new_id)
    report.check(
        "R10.2",
        settled and new_view is not None and new_view.status == "completed",
        f"the regenerated run must complete (status: {new_view.status if new_view else None})",
    )
    # the run's messages as the UI showed them (a history need not say which run a message belongs to)
    roles = [m.role for m in live.messages if m.run_id == new_id]
    users, answers = roles.count("user"), len([r for r in roles if r in ("assistant", "tool")])
    if harness.multi_message_answers:
        ok = users == 1 and answers >= 1
        want = "one user message and its answer (one or more messages)"
    else:
        ok = users == 1 and answers == 1 and len(roles) == 2
        want = "one user message and one answer (declare multi_message_answers=True if the protocol answers in several messages)"
    report.check("R10.2", ok, f"the new run must have {want} (roles: {sorted(roles)})")
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    report.check("R10.2", not dupes, f"no message id may repeat ({dupes})")
    _check_rejections(report, rt)


async def _scenario(harness: ConformanceHarness, kind: str) -> ScenarioReport:
    # long-function: one conformance scenario, step by step as the spec lists them
    report = ScenarioReport(kind)
    base = "regenerate" if kind == "regenerate" else ("text" if kind == "history" else kind)
    step = "creating the adapter"
    rt: ChatRuntime | None = None
    try:
        rt, rec = await _start(harness, base)
        why = skip_reason(harness, kind, rt.adapter)
        if why is not None:
            report.skipped = why
            return report
        step = "sending the input"
        run_id = await rt.send(harness.make_input("hello"))
        if kind == "slow":
            step = "stopping the slow run"
            await _slow(report, harness, rt, run_id)
            return report
        step = "waiting for the run to settle"
        await rt.wait_settled(run_id, harness.timeout)
        view = rt.core.snapshot.run(run_id)
        status = view.status if view else None
        _check_rejections(report, rt)
        _check_r45(report, rec, run_id)
        _check_stream_terminal(report, rt, run_id, base, harness)
        step = "decoding the scripted events again"
        _check_r43(report, rt, run_id)
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
        report.check(
            "R3.4", view is not None and status == "completed", f"the {base} scenario must end completed (status: {status})"
        )
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
            step = "refreshing history"
            await _check_r84(report, rt, run_id)
        if kind == "regenerate":
            if view is None or not view.terminal:
                report.check("R10.2", False, f"cannot regenerate: the first run never settled (status: {status})")
                return report
            step = "regenerating"
            await _regenerate(report, harness, rt, run_id)
        return report
    except _Step:
        return report
    except Exception as err:  # noqa: BLE001 - a scenario fails with a check, never an exception
        where = traceback.extract_tb(err.__traceback__)[-1]
        report.check(
            "R12",
            False,
            f"the {kind} scenario raised while {step}: {type(err).__name__}: {err} "
            f"(at {where.filename.rsplit('/', 1)[-1]}:{where.lineno} in {where.name})",
        )
        return report
    finally:
        if rt is not None:
            try:
                await rt.close()
            except Exception:  # noqa: BLE001 - closing after the scenario: its report is already made
                pass


def run_scenario(harness: ConformanceHarness, kind: str) -> ScenarioReport:
    """Run one scenario (``text``, ``tool``, ``fail``, ``slow``, ``regenerate``,
    ``history``) in a fresh event loop and return its report."""
    try:
        return asyncio.run(asyncio.wait_for(_scenario(harness, kind), harness.timeout * 6))
    except TimeoutError:
        report = ScenarioReport(kind)
        report.check("R12", False, f"the {kind} scenario did not finish within {harness.timeout * 6:.0f} s")
        return report


def _scenarios_for(harness: ConformanceHarness) -> list[str]:
    kinds = list(SCENARIOS)
    for extra in OPTIONAL_SCENARIOS:
        if harness.capabilities.get(extra):
            kinds.append(extra)
    return kinds


def _make_test(harness: ConformanceHarness, kind: str) -> Callable[[], None]:
    def test() -> None:
        report = run_scenario(harness, kind)
        if report.skipped:
            import pytest

            pytest.skip(f"{kind}: {report.skipped}")
        failed = [check for check in report.checks if not check.ok]
        if failed:
            # an explicit raise, not ``assert``: the package must behave the
            # same under ``python -O`` and under pytest's assertion rewriting
            raise AssertionError("; ".join(f"[{c.rule}] {c.message}" for c in failed))
        for note in report.notes:
            print(f"{kind}: note: {note}")

    return test


def _make_skip(kind: str, reason: str) -> Callable[[], None]:
    def test() -> None:
        import pytest

        pytest.skip(f"{kind}: {reason}")

    return test


#: What :func:`run_adapter_conformance` does with a scenario the harness does
#: not declare: ``skip`` (a skipped test whose reason says what to declare) or
#: ``omit`` (no test at all).
UNDECLARED = ("skip", "omit")


def run_adapter_conformance(
    name: str, harness: ConformanceHarness, namespace: dict[str, Any] | None = None, *, undeclared: str = "skip"
) -> list[str]:
    """Define one pytest test per scenario in the caller's module; returns the
    names of the scenarios that run.  A scenario whose capability is not
    declared (``regenerate``, ``history`` not in ``capabilities``) is defined
    as a skipped test whose reason says what to declare, or, with
    ``undeclared="omit"``, not defined at all: a suite whose backend cannot
    offer the scenario (it cannot truncate a session, it has no history)
    then has no test that can only be skipped."""
    if undeclared not in UNDECLARED:
        raise ValueError(f"undeclared must be one of {', '.join(UNDECLARED)}, not {undeclared!r}")
    ns = namespace if namespace is not None else sys._getframe(1).f_globals
    slug = re.sub(r"\W+", "_", name).strip("_").lower() or "adapter"
    names = []
    for kind in ALL_SCENARIOS:
        test_name = f"test_conformance_{slug}_{kind}"
        if kind in _scenarios_for(harness):
            test = _make_test(harness, kind)
            names.append(test_name)
        elif undeclared == "omit":
            continue
        else:
            test = _make_skip(kind, skip_reason(harness, kind) or "not declared")
        test.__name__ = test_name
        test.__doc__ = f"{name}: R12 conformance scenario {kind!r}"
        ns[test_name] = test
    return names
