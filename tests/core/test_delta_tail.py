"""Deltas kept back in the Core's tail (issue 18) read the same as deltas
written at once: every snapshot, old or new, holds the text the facts made.

The Core appends consecutive deltas to one part's chunk buffer and writes the
part into the message list only when the list is read.  Here random runs of
deltas, message facts, snapshots and pickles are compared with the text a
plain string concatenation gives.
"""

from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from chatkit_trace.core import ChatCore, ReasoningPart, RuntimeMessage, TextPart

from .helpers import running_core


def clock() -> float:  # module-level: the Core pickles with it
    return 1000.0


def picklable_core() -> ChatCore:
    core = ChatCore("s1", clock=clock)
    assert core.send("r1", {"text": "go"}).ok
    for req in core.take_requests():
        core.dispatch_settled(req.run_id, True)
    return core

PARTS = [("a", "text:0"), ("a", "r:1"), ("b", "text:0")]

step = st.one_of(
    st.tuples(st.just("delta"), st.sampled_from(PARTS), st.sampled_from(["x", "yz", "", "\u00e9"])),
    st.tuples(st.just("snapshot"), st.none(), st.none()),
    st.tuples(st.just("resend"), st.sampled_from(["a", "b"]), st.sampled_from(["fresh", "same"])),
    st.tuples(st.just("pickle"), st.none(), st.none()),
)


def texts(snapshot) -> dict[tuple[str, str], str]:
    return {(m.id, p.id): p.text for m in snapshot.messages for p in m.parts}


def message(mid: str, want: dict[tuple[str, str], str]) -> RuntimeMessage:
    if mid == "a":
        return RuntimeMessage("a", "assistant", (TextPart("text:0", want["a", "text:0"]), ReasoningPart("r:1", want["a", "r:1"])))
    return RuntimeMessage("b", "assistant", (TextPart("text:0", want["b", "text:0"]),))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(step, max_size=40))
def test_snapshots_hold_the_text_the_facts_made(steps):
    core = picklable_core()
    want = {key: "start" for key in PARTS}
    for mid in ("a", "b"):
        assert core.emit_message(run_id="r1", event_id=f"m-{mid}", message=message(mid, want)).accepted
    taken: list[tuple[object, dict[tuple[str, str], str]]] = []
    for n, (kind, arg, value) in enumerate(steps):
        if kind == "delta":
            mid, pid = arg
            result = core.emit_delta(run_id="r1", event_id=f"d{n}", message_id=mid, part_id=pid, delta=value)
            assert result.accepted == bool(value)
            want[arg] += value
        elif kind == "snapshot":
            snap = core.snapshot
            assert texts(snap) == want
            taken.append((snap, dict(want)))
        elif kind == "resend":
            if value == "fresh":
                for key in want:
                    if key[0] == arg:
                        want[key] = f"fresh{n}"
            result = core.emit_message(run_id="r1", event_id=f"m{n}", message=message(arg, want))
            assert result.accepted == (value == "fresh")
        else:
            core = pickle.loads(pickle.dumps(core))
    assert texts(core.snapshot) == want
    for snap, then in taken:  # an older snapshot keeps the text it had
        assert texts(snap) == then


def test_a_delta_kept_back_is_still_checked_against_its_message_run():
    core = running_core("r1", "r2")
    core.emit_message(run_id="r1", event_id="m", message=RuntimeMessage("a", "assistant", (TextPart("text:0", "hi"),), run_id="r1"))
    assert core.emit_delta(run_id="r1", event_id="d1", message_id="a", part_id="text:0", delta="!").accepted
    # the next delta to the same part takes the tail's path: the same rules
    other = core.emit_delta(run_id="r2", event_id="d2", message_id="a", part_id="text:0", delta="?")
    assert not other.accepted
    assert core.emit_delta(run_id="r1", event_id="d3", message_id="a", part_id="text:0", delta=1).reason.value == "invalid-transition"  # type: ignore[arg-type]
    assert core.emit_delta(run_id="r1", event_id="d4", message_id="a", part_id="text:0", delta="").reason.value == "no-change"
    assert core.snapshot.messages[-1].parts[0].text == "hi!"


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(st.text(max_size=3), max_size=6), st.integers(0, 6), st.lists(st.text(max_size=3), max_size=6))
def test_extend_is_append_of_each_chunk(first, older, chunks):
    """An adapter's growing part is written with extend: the same part the appends
    gave, from the newest version of a text or from an older one (a branch)."""

    def history() -> list[TextPart]:
        versions = [TextPart("t", "x")]
        for c in first:
            versions.append(versions[-1].append(c))
        return versions

    a, b = history(), history()
    k = min(older, len(a) - 1)
    appended = a[k]
    for c in chunks:
        appended = appended.append(c)
    extended = b[k].extend(list(chunks))
    assert extended == appended
    assert (extended.text, extended.chunk_count, extended.text_length) == (appended.text, appended.chunk_count, appended.text_length)
    # the versions the branch started from keep their text
    assert [v.text for v in b] == ["x" + "".join(first[:j]) for j in range(len(b))]
