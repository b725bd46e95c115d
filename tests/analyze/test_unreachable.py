"""CK109 and CK111 cannot come from recorded traffic through create_adapter
(ProtocolUpdates have no work items, and the factory always gives facts an
event id), but a custom low-level adapter can cause them: tested on
replays whose facts are admitted directly."""

from __future__ import annotations

from chatkit_trace.adapters import create_adapter
from chatkit_trace.analyze import analyze_replay
from chatkit_trace.core import ChatCore, CompletedFact, WorkItem, WorkItemFact
from chatkit_trace.examples.my_protocol import MyProtocol
from chatkit_trace.pipeline import FactRecord, Replay, SessionReplay


def replay_of(*facts) -> Replay:
    adapter = create_adapter(MyProtocol())
    core = ChatCore("s1")
    core.register_run(run_id="r1")
    rep = Replay()
    rep.sessions["s1"] = SessionReplay("s1", core, adapter.decoder("s1"))
    for i, fact in enumerate(facts):
        rep.facts.append(FactRecord(i, fact, core.admit(fact), 0, i, core.snapshot.version))
    return rep


def codes(rep):
    return sorted({f.code for f in analyze_replay(rep, [], create_adapter(MyProtocol()))})


def test_ck109_work_item_without_id():
    rep = replay_of(WorkItemFact(session_id="s1", run_id="r1", event_id="e1", work_item=WorkItem("")))
    assert codes(rep) == ["CK109"]


def test_ck111_fact_without_event_id():
    rep = replay_of(CompletedFact(session_id="s1", run_id="r1", event_id=None))
    assert codes(rep) == ["CK111"]


def test_clean_direct_facts_report_nothing():
    rep = replay_of(
        WorkItemFact(session_id="s1", run_id="r1", event_id="e1", work_item=WorkItem("w", "completed")),
        CompletedFact(session_id="s1", run_id="r1", event_id="e2"),
    )
    assert codes(rep) == []
