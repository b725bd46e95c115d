"""A socket several sessions share, in the replay (issue 20): each frame to the
session it names, client messages as commands, the end of its runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chatkit_trace.adapters import AdapterProtocol, EventIdentity, create_adapter, load_protocol
from chatkit_trace.derive import split_shared
from chatkit_trace.examples.shared_socket import SharedSocket
from chatkit_trace.pipeline import multiplexed, replay, socket_sessions
from chatkit_trace.route import IdentityTracker, ProfileError, apply_match, load_profile, resolve_from_frames
from chatkit_trace.route.profiles import parse_profile
from chatkit_trace.trace import Exchange
from chatkit_trace.wire import ws_frame

ROOT = Path(__file__).resolve().parents[2]
PROFILE = load_profile(str(ROOT / "chatkit_trace" / "examples" / "shared_socket.toml"))
SEQ: dict[str, int] = {}


def ev(sid: str, rid: str, kind: str, **kw: Any) -> tuple[str, dict[str, Any]]:
    SEQ[sid] = SEQ.get(sid, 0) + 1
    return "in", {"type": kind, **kw, "sessionId": sid, "runId": rid, "eventId": f"{sid}:{SEQ[sid]}"}


def out(**kw: Any) -> tuple[str, dict[str, Any]]:
    return "out", kw


def socket(items: list[tuple[str, Any]], *, profile: Any = PROFILE, end: str = "complete", index: int = 0) -> Exchange:
    ex = Exchange(index, "GET", "http://backend/ws", started_at=1.0, ended_at=9.0, status=101, transport="ws", end=end)
    for k, (d, body) in enumerate(items):
        text = body if isinstance(body, str) else json.dumps(body)
        ex.frames.append(ws_frame(text.encode(), True, d == "out", 1.0 + 0.01 * (k + 1), index, k))
    m = profile.match("GET", ex.url, [], None)
    apply_match(ex, IdentityTracker().assign(resolve_from_frames(m, ex.frames), index))
    return ex


def adapter() -> Any:
    return PROFILE.create_adapter()


def test_each_frame_goes_to_the_session_it_names_and_commands_make_local_runs():
    SEQ.clear()
    ex = socket([
        out(type="subscribe", sessionId="s1"), out(type="subscribe", sessionId="s2"),
        out(type="run", sessionId="s1", runId="r1", input={"text": "hi"}),
        out(type="run", sessionId="s2", runId="r2", input={"text": "salut"}),
        ev("s1", "r1", "run.started"), ev("s2", "r2", "run.started"),
        ev("s2", "r2", "text.delta", messageId="m2", delta="Bonjour"), ev("s1", "r1", "text.delta", messageId="m1", delta="Hello"),
        ev("s1", "r1", "run.completed"), out(type="ping"), ev("s2", "r2", "run.completed"),
    ])
    assert multiplexed(ex) and socket_sessions(ex, adapter()) == ["s1", "s2"]
    rep = replay([ex], adapter(), capabilities=PROFILE.capabilities)
    assert sorted(rep.sessions) == ["s1", "s2"]
    for sid, run, text in (("s1", "r1", "hi"), ("s2", "r2", "salut")):
        snap = rep.sessions[sid].core.snapshot
        view = snap.run(run)
        assert (view.status, view.origin) == ("completed", "local")
        assert [m.id for m in snap.messages] == [f"user:{run}", f"m{run[-1]}"]
        assert snap.messages[0].parts[0].text == text  # the run message's input, projected (R4.5)
    assert not [f for f in rep.facts if not f.result.accepted]
    by_frame = {fr.frame_index: fr for fr in rep.frames}
    for k, f in enumerate(ex.frames):
        named = json.loads(f.text).get("sessionId")
        assert by_frame[k].session_id == (named or "s1"), k  # the ping names none: the socket's first session
    assert by_frame[2].command.capability == "run" and by_frame[9].command is None
    assert by_frame[6].event_id == "s2:2"  # the event's own id (a WebSocket has no SSE id)
    # one session at a time, each frame in exactly one of them
    parts = [replay([ex], adapter(), capabilities=PROFILE.capabilities, only={sid}) for sid in ("s1", "s2")]
    seen = [fr.frame_index for p in parts for fr in p.frames]
    assert sorted(seen) == list(range(len(ex.frames)))
    assert [sorted(p.sessions) for p in parts] == [["s1"], ["s2"]]
    # what export and serve take of one session: its own frames, indexes kept
    views = split_shared([ex], adapter())
    assert [(v.session_id, [f.index for f in v.frames]) for v in views] == [
        ("s1", [0, 2, 4, 7, 8, 9]), ("s2", [1, 3, 5, 6, 10])]
    assert not any(multiplexed(v) for v in views)


def test_the_session_comes_from_identify_event_when_the_profile_has_no_pointer():
    SEQ.clear()
    plain = parse_profile({"name": "p", "protocol": "chatkit_trace.examples.shared_socket:SharedSocket",
                           "routes": [{"capability": "subscribe", "path": "/ws", "session": "derived:exchange"}]})
    ex = socket([ev("s1", "r1", "run.started"), ev("s2", "r2", "run.started"), ev("s2", "r2", "run.completed")],
                profile=plain)
    assert multiplexed(ex)
    rep = replay([ex], adapter(), capabilities=["run", "subscribe"])
    assert sorted(rep.sessions) == ["s1", "s2"]
    assert rep.sessions["s2"].core.snapshot.run("r2").status == "completed"
    assert rep.sessions["s1"].core.snapshot.run("r1").origin == "remote"  # no run message: a passive run (R2.6)


def test_a_socket_of_one_session_still_rejects_another_sessions_event():
    SEQ.clear()
    fixed = parse_profile({"name": "p", "protocol": "chatkit_trace.examples.shared_socket:SharedSocket",
                           "routes": [{"capability": "subscribe", "path": "/ws", "session": {"from": "constant", "value": "s1"}}]})
    ex = socket([ev("s1", "r1", "run.started"), ev("s2", "r2", "run.started")], profile=fixed)
    assert not multiplexed(ex)
    rep = replay([ex], adapter(), capabilities=["run", "subscribe"])
    assert [fr.state for fr in rep.frames] == ["admitted", "wrong-session"]


def test_history_stop_and_resubscribe_messages_on_the_socket():
    SEQ.clear()
    answer = {"type": "history", "sessionId": "s1", "messages": [
        {"id": "u-r1", "role": "user", "runId": "r1", "text": "hi"},
        {"id": "m1", "role": "assistant", "runId": "r1", "text": "Hello"}], "runs": [{"id": "r1", "status": "completed"}]}
    ex = socket([
        out(type="run", sessionId="s1", runId="r1", input={"text": "hi"}),
        ev("s1", "r1", "run.started"), ev("s1", "r1", "text.delta", messageId="m1", delta="Hello"),
        out(type="stop", sessionId="s1", runId="r1"),
        out(type="history", sessionId="s1"), ("in", answer),
        out(type="subscribe", sessionId="s1", after="s1:2"),
    ])
    rep = replay([ex], adapter(), capabilities=PROFILE.capabilities)
    s = rep.sessions["s1"]
    view = s.core.snapshot.run("r1")
    assert view.abort is not None  # the stop message was the UI's stop (R9)
    [h] = s.history
    assert (h.exchange_index, h.frame_index, h.scope) == (0, 5, "session")
    assert view.status == "completed" and s.runs["r1"].settled_by == "history"
    states = {fr.frame_index: fr for fr in rep.frames}
    assert states[5].state == "history"
    assert states[6].command.capability == "resubscribe" and states[6].command.cursor == "s1:2"


@pytest.mark.parametrize("route, error", [
    ({"capability": "run", "path": "/ws", "messages": [{"capability": "run", "match": {"type": "run"}, "run": "runId"}]},
     "only a subscribe route"),
    ({"capability": "subscribe", "path": "/ws", "messages": [{"capability": "run", "match": {}, "run": "runId"}]},
     "match: give at least one condition"),
    ({"capability": "subscribe", "path": "/ws", "messages": [{"capability": "history", "match": {"type": "h"}}]},
     "reply: a history command needs"),
    ({"capability": "subscribe", "path": "/ws", "messages": [{"capability": "abort", "match": {"type": "stop"}}]},
     "run: a abort command names its run"),
    ({"capability": "subscribe", "path": "/ws", "messages": [{"capability": "steer", "match": {"type": "x"}}]},
     "unknown command 'steer'"),
])
def test_message_rules_are_checked_with_a_clear_message(route, error):
    with pytest.raises(ProfileError, match=error):
        parse_profile({"name": "p", "protocol": "myproto", "routes": [route]}, "team.toml")


def test_a_socket_routes_commands_count_as_capabilities():
    assert set(PROFILE.capabilities) == {"run", "subscribe", "abort", "history"}


class _NoSession(AdapterProtocol):
    """identify_event without a session: a run's events go where its run message went."""

    name = "nosession"

    def encode_input(self, input: Any, ctx: Any) -> Any:
        return input

    def decode_event(self, event: Any, ctx: Any) -> list[Any]:
        return SharedSocket().decode_event(event, ctx)

    def identify_event(self, event: Any) -> EventIdentity | None:
        return EventIdentity(run_id=event["runId"]) if isinstance(event, dict) and "runId" in event else None


def test_an_event_without_a_session_follows_its_run():
    plain = parse_profile({"name": "p", "protocol": "chatkit_trace.examples.shared_socket:SharedSocket",
                           "routes": [{"capability": "subscribe", "path": "/ws", "session": "derived:exchange",
                                       "messages": [{"capability": "run", "match": {"type": "run"},
                                                     "session": "sessionId", "run": "runId"}]}]})
    ex = socket([out(type="run", sessionId="s2", runId="r2"), ("in", {"type": "run.completed", "runId": "r2"})],
                profile=plain)
    a = create_adapter(_NoSession(), subscribe=True)
    rep = replay([ex], a, capabilities=["run", "subscribe"])
    assert [fr.session_id for fr in rep.frames] == ["s2", "s2"]
    assert rep.sessions["s2"].core.snapshot.run("r2").status == "completed"
    assert load_protocol("myproto")  # the registry still answers (no state leaked)


def test_the_example_profile_ships_with_the_package():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["package-data"]["chatkit_trace.examples"]
    shipped = {p for pattern in patterns for p in (ROOT / "chatkit_trace" / "examples").glob(pattern)}
    assert ROOT / "chatkit_trace" / "examples" / "shared_socket.toml" in shipped
    assert load_profile("chatkit_trace.examples.shared_socket:SharedSocket").name == "shared-socket"


def test_several_history_messages_on_one_socket_are_stored(tmp_path):
    """Two sessions, two history reads each over one socket: the trace's derived
    tables are written (a socket's reads share its exchange id)."""
    from chatkit_trace.derive import Deriver
    from chatkit_trace.store import TraceStore

    SEQ.clear()
    items: list[tuple[str, Any]] = []
    for sid in ("s1", "s2"):
        rid = f"r-{sid}"
        answer = {"type": "history", "sessionId": sid, "messages": [
            {"id": f"u-{rid}", "role": "user", "runId": rid, "text": "hi"},
            {"id": f"m-{rid}", "role": "assistant", "runId": rid, "text": "Hello"}], "runs": [{"id": rid, "status": "completed"}]}
        items += [out(type="run", sessionId=sid, runId=rid, input={"text": "hi"}), ev(sid, rid, "run.started"),
                  ev(sid, rid, "text.delta", messageId=f"m-{rid}", delta="Hello"), ev(sid, rid, "run.completed"),
                  out(type="history", sessionId=sid), ("in", answer), out(type="history", sessionId=sid), ("in", answer)]
    ex = socket(items)
    with TraceStore(tmp_path / "t.db", create=True) as store:
        store.set_meta("protocol", PROFILE.protocol)
        store.add_exchange(ex)
        result = Deriver(store, adapter(), capabilities=PROFILE.capabilities).run(write_to=store)
        findings, counts = result.findings, result.counts
        reads = list(store.rows("history_reads"))
    assert counts["sessions"] == 2 and not [f for f in findings if f.severity != "info"]
    assert [r["exchange_id"] for r in reads] == [0]


def test_the_derive_engine_selects_each_session_of_a_shared_socket(tmp_path):
    """``Deriver`` (check, the recorder, the viewer's analysis …) takes a
    session's own frames of a shared socket; ``TraceReader`` (the viewer) finds
    the socket for each session it carries from the rows the engine wrote."""
    from chatkit_trace.derive import Deriver
    from chatkit_trace.store import TraceReader, TraceStore

    SEQ.clear()
    ex = socket([
        out(type="run", sessionId="s1", runId="r1", input={"text": "hi"}),
        out(type="run", sessionId="s2", runId="r2", input={"text": "salut"}),
        ev("s1", "r1", "run.started"), ev("s2", "r2", "run.started"),
        ev("s2", "r2", "run.completed"), ev("s1", "r1", "run.completed"),
    ])
    assert ex.session_id == "s1"  # filed under the first session it saw
    path = tmp_path / "t.db"
    with TraceStore(path, create=True) as store:
        store.set_meta("protocol", PROFILE.protocol)
        store.add_exchange(ex)
        reader = TraceReader(path)
        assert reader.shared_sockets("s2") == []  # nothing derived yet: nothing says s2 is on it
        deriver = Deriver(store, adapter(), capabilities=PROFILE.capabilities)
        assert deriver.sessions() == ["s1", "s2"] and deriver.shared_sockets() == {0}
        assert deriver.together({"s2"}) == {"s1", "s2"}
        for sid, frames in (("s1", [0, 2, 5]), ("s2", [1, 3, 4])):
            d = deriver.session(sid)
            [mine] = d.exchanges
            assert [f.index for f in mine.frames] == frames
            assert [fr.frame_index for fr in d.replay.frames] == frames and set(d.replay.sessions) == {sid}
            assert not [f for f in d.findings if f.severity != "info"]
        deriver.run(write_to=store)
        assert {(r["idx"], r["session_id"]) for r in store.rows("frame_results")} == {
            (0, "s1"), (2, "s1"), (5, "s1"), (1, "s2"), (3, "s2"), (4, "s2")}
    assert reader.shared_sockets("s2") == [0] and reader.shared_sockets("s1") == []  # s1's own exchange
    assert [e.index for e in reader.session_exchanges("s2", "default")] == [0]
    assert [r[0] for r in reader.exchange_summaries(session="s2", default_session="default")] == [0]
    assert reader.session_signature("s2", "default")[1] == 6
    reader.close()
