"""A Hypothesis state machine over the Core: UI commands, live facts and
history reads (refreshes and older pages) against a backend model (issue 12).

The backend keeps the conversation as the server would: one turn per run in
the order it ran (runs another client made included), the answer as it
stored it (which may hold text the live stream never delivered), the run's
outcome, and it truncates the same range as regenerate/edit (SPEC R10.2).
Invariants, after every step:

* runs are in conversation order: along ``snapshot.runs``, the first message
  of each run comes after the first message of the run before it;
* message ids are unique, at most one run runs, the snapshot's JSON round
  trip is lossless;

and in the rules:

* a history read shows history's messages in history's order; a run that is
  settled (by a fact, or by this very read) shows history's content; a run
  still active keeps its live content (seed 000 §9, §12: "history 可补齐最终内容");
* regenerate/edit never removes content before its target, the adapter gets
  exactly that content as ``messages`` (seed 000 §10.3), and a refusal puts
  everything back;
* a rejected fact changes nothing; a fact for a settled run is
  ``terminal-sealed``; a repeated event id is ``duplicate-event``;
* published snapshots never change (checked at teardown).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from chatkit_trace.core import AbortRequest, ChatCore, DispatchRequest, message_from_json
from chatkit_trace.core import FactRejectReason as R

TEXTS = st.text(alphabet="abc xyz", min_size=1, max_size=4)
TERMINAL = ("completed", "failed", "interrupted")


@dataclass
class Turn:
    """One run as the backend stores it."""

    run_id: str
    user_text: str
    origin: str = "local"
    text: str = ""  # the stored answer
    answer: bool = False
    tool: str | None = None  # None | running | completed
    status: str = "running"
    stop: bool = False

    def messages(self) -> list[dict]:
        rid = self.run_id
        out = [{"id": f"u:{rid}", "role": "user", "runId": rid, "parts": [{"id": f"u:{rid}:0", "type": "text", "text": self.user_text}]}]
        if self.answer:
            out.append({"id": f"a:{rid}", "role": "assistant", "runId": rid, "parts": [{"id": f"a:{rid}:0", "type": "text", "text": self.text}]})
        if self.tool is not None:
            out.append(tool_message(rid, self.tool == "completed") | {"runId": rid})
        return out

    def snapshot(self) -> dict:
        snap = {"id": self.run_id, "origin": self.origin, "status": self.status, "phase": "idle", "workItems": {}}
        if self.status == "failed":
            snap["error"] = {"code": "E_BACKEND", "message": "The backend failed."}
        if self.status == "interrupted" and self.stop:
            snap["interruptReason"] = "abort"
        return snap


def tool_message(rid: str, done: bool) -> dict:
    part = {"id": f"t:{rid}:0", "type": "tool-call", "toolCallId": f"c:{rid}", "toolName": "lookup", "args": {"q": rid}}
    if done:
        part["result"] = {"rows": 1}
    return {"id": f"t:{rid}", "role": "assistant", "parts": [part]}


def user_projection(rid: str, text: str) -> list[dict]:
    return [{"id": f"u:{rid}", "role": "user", "parts": [{"id": f"u:{rid}:0", "type": "text", "text": text}]}]


def dumped(msg) -> str:
    return json.dumps(msg.to_json() if hasattr(msg, "to_json") else msg, sort_keys=True)


class CoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.core = ChatCore("s1", capabilities={"abort", "history", "regenerate", "edit"}, clock=lambda: 0.0)
        self.published: list[tuple[object, str]] = []
        self.core.subscribe(lambda snap: self.published.append((snap, json.dumps(snap.to_json(), sort_keys=True))))
        self.turns: dict[str, Turn] = {}  # the backend's conversation, in order
        self.inputs: dict[str, str] = {}  # runs this page started, with their input
        self.cancelled: set[str] = set()
        self.accepted_events: dict[str, list[str]] = {}
        self.live_tool: dict[str, bool] = {}  # run -> the tool the Core saw is settled
        self.n = 0
        self.page = 2
        self.page_from: str | None = None  # first turn of the oldest page shown

    # -------------------------------------------------------------- helpers

    def new_id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def event(self, run_id: str) -> str:
        return self.new_id("e")

    def drain(self) -> None:
        for _ in range(100):
            requests = self.core.take_requests()
            if not requests:
                return
            for req in requests:
                self.answer(req, accept=True)

    def answer(self, req, accept: bool) -> None:
        if isinstance(req, DispatchRequest):
            if accept:
                if req.via != "run":
                    self.truncate(req.target_run_id)
                self.turns[req.run_id] = Turn(req.run_id, req.input["text"])
            assert self.core.dispatch_settled(req.run_id, accept).ok
        elif isinstance(req, AbortRequest):
            self.turns[req.run_id].stop = True
            self.core.abort_settled(req.run_id, True)

    def truncate(self, target: str | None) -> None:
        order = list(self.turns)
        assert target in order, f"the backend never ran {target}"
        self.turns = {rid: self.turns[rid] for rid in order[: order.index(target)]}

    def running(self):
        view = self.core.snapshot.active_run
        return (view, self.turns[view.id]) if view is not None else (None, None)

    def admit(self, run_id: str, call) -> object:
        """Admit one fact; a rejected fact changes nothing, a settled run's fact is sealed."""
        before = self.core.snapshot
        was = before.run(run_id)
        event = self.event(run_id)
        result = call(event)
        if not result.accepted:
            assert self.core.snapshot is before, result
        else:
            self.accepted_events.setdefault(run_id, []).append(event)
        if was is not None and was.terminal:
            assert result.reason is R.TERMINAL_SEALED
        return result

    # -------------------------------------------------------------- UI commands

    @rule(text=TEXTS)
    def send(self, text: str) -> None:
        rid = self.new_id("r")
        assert self.core.send(rid, {"text": text}, project=user_projection(rid, text)).ok
        self.inputs[rid] = text
        self.drain()

    @rule()
    def stop(self) -> None:
        view, _ = self.running()
        if view is not None:
            assert self.core.abort(view.id).ok
            self.drain()

    @rule(i=st.integers(0, 9))
    def cancel_queued(self, i: int) -> None:
        queued = [r.id for r in self.core.snapshot.runs if r.status == "queued"]
        if queued:
            rid = queued[i % len(queued)]
            assert self.core.abort(rid).ok
            self.cancelled.add(rid)
            assert self.core.snapshot.run(rid).status == "interrupted"

    @rule(pick=st.one_of(st.none(), st.integers(0, 9)), edit=st.booleans(), refuse=st.booleans(), text=TEXTS)
    def rerun(self, pick, edit: bool, refuse: bool, text: str) -> None:
        core = self.core
        prior = core.snapshot
        runs = [r.id for r in prior.runs]
        candidates = [rid for rid in runs if rid not in self.cancelled]
        if pick is None:
            target = None
            expected = candidates[-1] if candidates else None  # R10.2: the last turn
        else:
            if not candidates:
                return
            target = expected = candidates[pick % len(candidates)]
        new = self.new_id("r")
        via = "edit" if edit else "regenerate"
        input_text = text if edit else self.inputs.get(expected or "")
        project = user_projection(new, input_text) if input_text is not None else None
        if edit:
            if target is None:
                target = expected
            result = core.edit(new, target=target, input={"text": text}, project=project) if target is not None else None
        else:
            result = core.regenerate(new, target=target, project=project)
        refused = (
            any(r.active for r in prior.runs)
            or expected is None
            or (via == "regenerate" and expected not in self.inputs)  # a history run's input is unknown
        )
        if result is None:
            return
        if refused:
            assert not result.ok, result
            assert core.snapshot is prior
            return
        assert result.ok, result.error
        # Everything before the target stays, unchanged and in order (R10.2).
        cut = set(runs[runs.index(expected) :])
        msgs = list(prior.messages)
        cut_at = next((i for i, m in enumerate(msgs) if m.run_id in cut), len(msgs))
        kept = msgs[:cut_at]
        (req,) = core.take_requests()
        assert isinstance(req, DispatchRequest) and req.via == via and req.target_run_id == expected
        assert list(req.messages) == kept  # "messages 是目标轮之前的会话消息"
        snap = core.snapshot
        assert list(snap.messages)[: len(kept)] == kept
        assert [m.id for m in snap.messages[len(kept) :]] == [f"u:{new}"]
        assert [r.id for r in snap.runs] == runs[: runs.index(expected)] + [new]
        self.inputs[new] = input_text
        self.answer(req, accept=not refuse)
        if refuse:  # the adapter said no: the removed content comes back unchanged
            after = core.snapshot
            assert [dumped(m) for m in after.messages] == [dumped(m) for m in prior.messages]
            assert [r.id for r in after.runs] == runs
            del self.inputs[new]
        self.drain()

    # -------------------------------------------------------------- live facts

    @rule(delta=TEXTS)
    def stream(self, delta: str) -> None:
        view, turn = self.running()
        if view is None:
            return
        rid = view.id
        mid = f"a:{rid}"
        if self.core.snapshot.message(mid) is None:
            message = {"id": mid, "role": "assistant", "parts": [{"id": f"{mid}:0", "type": "text", "text": delta}]}
            result = self.admit(rid, lambda e: self.core.emit_message(run_id=rid, event_id=e, message=message))
        else:
            result = self.admit(
                rid, lambda e: self.core.emit_delta(run_id=rid, event_id=e, message_id=mid, part_id=f"{mid}:0", delta=delta)
            )
        # accepted, or after the acknowledged stop output-sealed (R9.4)
        assert result.accepted or result.reason is R.OUTPUT_SEALED, result
        turn.text += delta  # the backend produced it either way
        turn.answer = True

    @rule(extra=TEXTS)
    def backend_only_output(self, extra: str) -> None:
        """Text the backend stores but the live stream never delivered."""
        _, turn = self.running()
        if turn is not None:
            turn.text += extra
            turn.answer = True

    @rule(done=st.booleans())
    def tool(self, done: bool) -> None:
        view, turn = self.running()
        if view is None or (turn.tool == "completed") or (turn.tool is None and done):
            return
        rid = view.id
        result = self.admit(rid, lambda e: self.core.emit_message(run_id=rid, event_id=e, message=tool_message(rid, done)))
        turn.tool = "completed" if done else "running"
        if result.accepted:
            self.live_tool[rid] = done

    @rule(kind=st.sampled_from(TERMINAL))
    def terminal(self, kind: str) -> None:
        view, turn = self.running()
        if view is None:
            return
        rid = view.id
        if kind == "completed":
            result = self.admit(rid, lambda e: self.core.emit_completed(run_id=rid, event_id=e))
            if not result.accepted:
                # a tool the Core saw running and no acknowledged stop (R6.5)
                assert result.reason is R.ACTIVE_WORK and self.live_tool.get(rid) is False
                assert not (view.abort is not None and view.abort.output_sealed)
        elif kind == "failed":
            error = {"code": "E_BACKEND", "message": "The backend failed."}
            result = self.admit(rid, lambda e: self.core.emit_failed(run_id=rid, event_id=e, error=error))
            assert result.accepted
        else:
            result = self.admit(rid, lambda e: self.core.emit_interrupted(run_id=rid, event_id=e))
            assert result.accepted
        turn.status = kind
        self.drain()

    @rule(i=st.integers(0, 9))
    def late_fact(self, i: int) -> None:
        settled = [r.id for r in self.core.snapshot.runs if r.terminal]
        if settled:
            rid = settled[i % len(settled)]
            self.admit(rid, lambda e: self.core.emit_completed(run_id=rid, event_id=e))

    @rule()
    def repeated_event(self) -> None:
        view, _ = self.running()
        if view is None or not self.accepted_events.get(view.id):
            return
        before = self.core.snapshot
        event = self.accepted_events[view.id][-1]
        result = self.core.emit_phase(run_id=view.id, event_id=event, phase="thinking")
        assert result.reason is R.DUPLICATE_EVENT and self.core.snapshot is before

    # -------------------------------------------------------------- history

    @precondition(lambda self: not any(r.active for r in self.core.snapshot.runs) and not any(t.status == "running" for t in self.turns.values()))
    @rule(text=TEXTS)
    def another_client(self, text: str) -> None:
        """Another client ran a turn: the Core learns of it from history only."""
        rid = self.new_id("x")
        self.turns[rid] = Turn(rid, text, origin="remote", text=f"re {text}", answer=True, status="completed")

    @rule(settle=st.booleans(), final=TEXTS, paged=st.booleans())
    def refresh(self, settle: bool, final: str, paged: bool) -> None:
        core = self.core
        if settle:
            for turn in self.turns.values():
                if turn.status == "running":  # the backend finished it; only history says so
                    turn.status = "interrupted" if turn.stop else "completed"
                    turn.text += final
                    turn.answer = True
        turns = list(self.turns.values())
        shown = turns[-self.page :] if paged and len(turns) > self.page else turns
        messages = [m for t in shown for m in t.messages()]
        running = [t.run_id for t in shown if t.status == "running"]
        history = {
            "messages": messages,
            "runSnapshots": [t.snapshot() for t in shown if t.status in TERMINAL],
            "activeRun": {"runId": running[0]} if running else None,
            "hasMore": len(shown) < len(turns),
        }
        prior = core.snapshot
        assert core.apply_history(history).ok
        self.page_from = shown[0].run_id if len(shown) < len(turns) else None
        snap = core.snapshot
        named = {t.run_id for t in shown}
        for view in prior.runs:
            if snap.run(view.id) is None:
                # a settled run the read does not name goes with its messages
                # (decisions.md 272); an older page brings it back as history's,
                # without its input (seed 000 §10.3: "从历史里读出来的轮次没有输入")
                assert view.terminal and view.id not in named, view
                self.inputs.pop(view.id, None)
        ids = [m["id"] for m in messages]
        assert [m.id for m in snap.messages][: len(ids)] == ids  # history's messages, history's order
        for m in messages:
            view = snap.run(m["runId"])
            got = snap.message(m["id"])
            if view is not None and view.active and prior.message(m["id"]) is not None:
                assert dumped(got) == dumped(prior.message(m["id"]))  # live content wins while it streams
            else:
                # settled (by a fact, or by this read): history's content
                assert dumped(got) == dumped(message_from_json(m)), (m["id"], view)
        for t in shown:
            if t.status not in TERMINAL:
                continue
            view, was = snap.run(t.run_id), prior.run(t.run_id)
            assert view is not None and view.status == t.status  # a run history reports finished is settled
            if was is not None and was.active and t.stop:
                assert view.abort.remote == "confirmed"  # R9.4: history confirmed the stop
        self.drain()

    @precondition(lambda self: self.page_from is not None and self.core.snapshot.history.has_more)
    @rule()
    def load_more(self) -> None:
        order = list(self.turns)
        if self.page_from not in order:
            return  # the page it continued was regenerated away
        older = [self.turns[rid] for rid in order[: order.index(self.page_from)]]
        page = older[-self.page :]
        shown = {m.id for m in self.core.snapshot.messages}
        messages = [m for t in page for m in t.messages()]
        if any(m["id"] in shown for m in messages):
            return
        prior = self.core.snapshot
        result = self.core.load_more(
            {
                "messages": messages,
                "runSnapshots": [t.snapshot() for t in page if t.status in TERMINAL],
                "hasMore": len(page) < len(older),
            }
        )
        assert result.ok, result.error
        snap = self.core.snapshot
        assert [m.id for m in snap.messages] == [m["id"] for m in messages] + [m.id for m in prior.messages]
        for t in page:
            if t.status in TERMINAL:
                assert snap.run(t.run_id) is not None and snap.run(t.run_id).terminal  # failure cards come back
        self.page_from = page[0].run_id if page and len(page) < len(older) else None

    # -------------------------------------------------------------- invariants

    @invariant()
    def runs_are_in_conversation_order(self) -> None:
        snap = self.core.snapshot
        first: dict[str, int] = {}
        for i, m in enumerate(snap.messages):
            if m.run_id is not None:
                first.setdefault(m.run_id, i)
        starts = [first[r.id] for r in snap.runs if r.id in first]
        assert starts == sorted(starts), [(r.id, first.get(r.id)) for r in snap.runs]

    @invariant()
    def one_run_at_a_time_and_unique_ids(self) -> None:
        snap = self.core.snapshot
        assert sum(1 for r in snap.runs if r.status == "running") <= 1
        ids = [m.id for m in snap.messages]
        assert len(ids) == len(set(ids))
        assert len({r.id for r in snap.runs}) == len(snap.runs)

    @invariant()
    def json_round_trip_is_lossless(self) -> None:
        snap = self.core.snapshot
        data = json.loads(json.dumps(snap.to_json()))
        assert [message_from_json(m) for m in data["messages"]] == list(snap.messages)
        assert [(r["id"], r["status"]) for r in data["runs"]] == [(r.id, r.status) for r in snap.runs]

    def teardown(self) -> None:
        for snap, text in self.published:
            assert json.dumps(snap.to_json(), sort_keys=True) == text


CoreMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestCoreStateMachine = CoreMachine.TestCase
