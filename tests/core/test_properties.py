"""Property-based tests over random fact sequences (hypothesis, bounded examples)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatkit_trace.core import (
    ChatCore,
    CompletedFact,
    DeltaFact,
    FailedFact,
    InterruptedFact,
    MessageFact,
    PhaseFact,
    ReasoningPart,
    RuntimeMessage,
    TextPart,
    ToolCallPart,
    WorkItem,
    WorkItemFact,
    message_from_json,
)
from chatkit_trace.core import (
    FactRejectReason as R,
)
from chatkit_trace.core._values import ABSENT

RUNS = ["r1", "r2", "r3"]
EVENTS = [f"e{i}" for i in range(6)]
MIDS = ["a", "b"]
PIDS = ["p0", "p1"]

texts = st.text(alphabet="abc xyz", max_size=4)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def parts(draw):
    pid = draw(st.sampled_from(PIDS))
    kind = draw(st.sampled_from(["text", "reasoning", "tool"]))
    if kind == "text":
        return TextPart(pid, draw(texts))
    if kind == "reasoning":
        return ReasoningPart(pid, draw(texts))
    result = draw(st.one_of(st.just(ABSENT), json_values))
    return ToolCallPart(pid, f"c-{pid}", "tool", args={"q": draw(texts)}, result=result)


@st.composite
def messages(draw):
    ps = draw(st.lists(parts(), max_size=2, unique_by=lambda p: p.id))
    return RuntimeMessage(draw(st.sampled_from(MIDS)), draw(st.sampled_from(["assistant", "user", "system"])), tuple(ps))


@st.composite
def facts(draw):
    common = dict(
        session_id=draw(st.sampled_from(["s1", "s1", "s1", "s2"])),
        run_id=draw(st.sampled_from(RUNS)),
        event_id=draw(st.sampled_from(EVENTS + [None])),
        source_sequence=draw(st.one_of(st.none(), st.integers(0, 5))),
    )
    kind = draw(st.sampled_from(["message", "delta", "delta", "phase", "work", "completed", "failed", "interrupted"]))
    if kind == "message":
        return MessageFact(message=draw(messages()), **common)
    if kind == "delta":
        return DeltaFact(message_id=draw(st.sampled_from(MIDS)), part_id=draw(st.sampled_from(PIDS)), delta=draw(texts), **common)
    if kind == "phase":
        return PhaseFact(phase=draw(st.sampled_from(["idle", "thinking", "generating", "bogus"])), **common)
    if kind == "work":
        return WorkItemFact(
            work_item=WorkItem(draw(st.sampled_from(["w1", "w2", ""])), draw(st.sampled_from(["running", "completed", "failed"]))),
            **common,
        )
    if kind == "completed":
        return CompletedFact(**common)
    if kind == "failed":
        return FailedFact(error=draw(st.one_of(json_values, st.just({"code": "E", "message": "m"}))), **common)
    return InterruptedFact(**common)


@st.composite
def steps(draw):
    """Facts interleaved with a few commands that change run state."""
    n = draw(st.integers(1, 40))
    out = []
    for _ in range(n):
        if draw(st.integers(0, 9)) == 0:
            out.append(("cmd", draw(st.sampled_from(["register", "abort", "ack", "disconnect"])), draw(st.sampled_from(RUNS))))
        else:
            out.append(("fact", draw(facts())))
    return out


def fresh_core():
    core = ChatCore("s1", capabilities={"abort", "history"}, clock=lambda: 0.0)
    core.send("r1", {"text": "hi"})
    for req in core.take_requests():
        core.dispatch_settled(req.run_id, True)
    core.register_run(run_id="r2")
    return core


def run_step(core, step):
    if step[0] == "fact":
        return core.admit(step[1])
    _, cmd, run = step
    if cmd == "register":
        return core.register_run(run_id=run)
    if cmd == "abort":
        return core.abort(run)
    if cmd == "ack":
        return core.abort_settled(run, True)
    return core.observe_connection(run_id=run, state="disconnected")


SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(steps())
def test_nothing_is_accepted_after_a_terminal_fact(seq):
    core = fresh_core()
    sealed = set()
    for step in seq:
        result = run_step(core, step)
        if step[0] != "fact":
            continue
        fact = step[1]
        if fact.session_id == "s1" and fact.run_id in sealed:
            assert not result.accepted
            if fact.event_id:
                assert result.reason is R.TERMINAL_SEALED
        if result.accepted and isinstance(fact, (CompletedFact, FailedFact, InterruptedFact)):
            sealed.add(fact.run_id)
    for run in sealed:
        assert core.snapshot.run(run).terminal


@SETTINGS
@given(steps())
def test_published_snapshots_never_change(seq):
    core = fresh_core()
    published = []
    core.subscribe(lambda snap: published.append((snap, json.dumps(snap.to_json(), sort_keys=True))))
    for step in seq:
        run_step(core, step)
    for snap, dumped in published:
        assert json.dumps(snap.to_json(), sort_keys=True) == dumped


@SETTINGS
@given(steps())
def test_duplicate_event_ids_are_always_idempotent(seq):
    core = fresh_core()
    accepted: dict[str, set[str]] = {}
    for step in seq:
        if step[0] == "fact":
            fact = step[1]
            version = core.snapshot.version
            run = core.snapshot.run(fact.run_id)
            dup = fact.session_id == "s1" and fact.event_id in accepted.get(fact.run_id, set())
            result = run_step(core, step)
            if dup and run is not None and not run.terminal:
                assert result.reason is R.DUPLICATE_EVENT
                assert core.snapshot.version == version  # and nothing changed
            if result.accepted:
                accepted.setdefault(fact.run_id, set()).add(fact.event_id)
        else:
            run_step(core, step)


@SETTINGS
@given(steps())
def test_rejected_facts_change_nothing(seq):
    core = fresh_core()
    for step in seq:
        before = core.snapshot
        result = run_step(core, step)
        if step[0] == "fact" and not result.accepted:
            assert core.snapshot is before


@SETTINGS
@given(steps())
def test_snapshot_json_round_trip_is_lossless(seq):
    core = fresh_core()
    for step in seq:
        run_step(core, step)
    snap = core.snapshot
    data = json.loads(json.dumps(snap.to_json()))
    assert [message_from_json(m) for m in data["messages"]] == list(snap.messages)
    assert [r["id"] for r in data["runs"]] == [r.id for r in snap.runs]
    assert [r["status"] for r in data["runs"]] == [r.status for r in snap.runs]
