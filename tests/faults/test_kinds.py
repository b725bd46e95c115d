"""One test per fault kind: a real mitmdump with both addons in front of the real
demo backend, a real client; each test asserts what the client saw and what the
trace recorded (the frames, ``notes.fault``, and ``check``'s findings).

One proxy serves the whole module; every rule is aimed at its own session
(``session=k-drop*`` …) so the tests cannot disturb one another.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest

from .conftest import findings, settled_copy, start_proxy
from .helpers import request, run

RULES = [
    "cut:after=3,mode=reset,capability=run,session=k-cut-reset*",
    "cut:after=3,mode=close,capability=run,session=k-cut-close*",
    "cut:after=380ms,capability=run,session=k-cut-time*",
    "delay:by=300ms,capability=run,session=k-delay*",
    "delay:by=0ms,jitter=200ms,capability=run,session=k-jitter*",
    "stall:for=1s,after=2,capability=run,session=k-stall*",
    "dup:at=3,capability=run,session=k-dup*",
    "drop:at=3,capability=run,session=k-drop*",
    "swap:at=2,capability=run,session=k-swap*",
    "corrupt:at=3,capability=run,session=k-corrupt-json*",
    "corrupt:at=3,how=utf8,capability=run,session=k-corrupt-utf8*",
    "http:status=429,retry_after=2,capability=run,session=k-429*",
    "http:status=500,capability=run,session=k-500*",
    "http:status=503,capability=run,session=k-503*",
    "drop:at=1,capability=run,session=k-nth*,nth=2",
]
SEED = 4242
ALL = ["e0", "e1", "e2", "e3", "e4"]  # the demo backend's text answer: started, 3 texts, done


@pytest.fixture(scope="module")
def env(demo, module_procs, tmp_path_factory):
    server, backend = demo
    db = tmp_path_factory.mktemp("kinds") / "trace.db"
    p = start_proxy(server.url, db, RULES, seed=SEED)
    module_procs.append(p)
    return f"http://127.0.0.1:{p.port}", db, p, server, backend


def trace(env, tmp_path: Path, sid: str, count: int = 1):
    _, db, _, _, _ = env
    store = settled_copy(db, tmp_path / "copy.db", sid, count)
    exs = list(store.exchanges(session=sid))
    return store, exs


def fault_of(ex) -> dict:
    return ex.notes["fault"]


def only_applied(ex) -> dict:
    [a] = fault_of(ex)["applied"]
    return a


async def test_cut_after_n_events_with_a_reset(env, tmp_path):
    base = env[0]
    got = await run(base, "k-cut-reset")
    assert got.status == 200 and got.ids == ["e0", "e1", "e2"]
    assert got.error is not None  # the client saw the connection break
    assert got.headers["X-Chatkit-Fault"] == RULES[0]
    store, [ex] = trace(env, tmp_path, "k-cut-reset")
    assert (ex.end, ex.status) == (
        "reset",
        200,
    ) and ex.error  # a connection observation, as a real reset
    assert [f.event_id for f in store.frames(ex.index)] == ["e0", "e1", "e2"]
    a = only_applied(ex)
    assert (a["kind"], a["mode"], a["event"], a["event_id"], a["frame"]) == (
        "cut",
        "reset",
        3,
        "e2",
        2,
    )
    assert fault_of(ex)["end"] == "cut-reset" and fault_of(ex)["seed"] == SEED
    codes = {f.code: f for f in findings(store.path, "k-cut-reset")}
    assert set(codes) == {"CK103"}
    assert codes["CK103"].frames == [
        f"{ex.index}:2"
    ]  # the effect points at the frame the fault names


async def test_cut_after_n_events_with_a_clean_close(env, tmp_path):
    got = await run(env[0], "k-cut-close")
    assert got.status == 200 and got.ids == ["e0", "e1", "e2"] and got.error is None  # a clean end
    store, [ex] = trace(env, tmp_path, "k-cut-close")
    assert ex.end == "complete" and [f.event_id for f in store.frames(ex.index)] == [
        "e0",
        "e1",
        "e2",
    ]
    assert only_applied(ex)["mode"] == "close" and fault_of(ex)["end"] == "cut-close"
    # a clean end without a conclusion, nothing settled it: CK102, not an invented outcome
    assert {f.code for f in findings(store.path, "k-cut-close")} == {"CK102"}


async def test_cut_after_a_duration(env, tmp_path):
    got = await run(env[0], "k-cut-time+pace=150")  # e1 at 150 ms, e2 at 300, e3 at 450 …
    assert got.error is not None and 1 <= len(got.ids) <= 4 and got.ids == ALL[: len(got.ids)]
    assert got.events[-1][0] < 1.0
    store, [ex] = trace(env, tmp_path, "k-cut-time+pace=150")
    a = only_applied(ex)
    assert (a["kind"], a["after_s"], a["frame"]) == ("cut", 0.38, len(got.ids))
    assert 0.37 <= a["at_s"] < 1.0
    assert ex.end == "reset" and len(store.frames(ex.index)) == len(got.ids)


async def test_delay_every_event(env, tmp_path):
    got = await run(env[0], "k-delay")
    assert got.ids == ALL and got.error is None
    assert got.events[0][0] >= 0.3  # time to first event grows by the delay
    store, [ex] = trace(env, tmp_path, "k-delay")
    a = only_applied(ex)
    assert (a["kind"], a["events"], a["max_ms"], a["total_ms"]) == ("delay", 5, 300.0, 1500.0)
    frames = store.frames(ex.index)
    assert frames[0].at - ex.started_at >= 0.29  # the trace records when the client got it
    assert [f.event_id for f in frames] == ALL and ex.end == "complete"
    assert findings(store.path, "k-delay") == []


async def test_jitter_replays_from_the_seed(env, tmp_path):
    got = await run(env[0], "k-jitter")
    assert got.ids == ALL
    _, [ex] = trace(env, tmp_path, "k-jitter")
    i = RULES.index("delay:by=0ms,jitter=200ms,capability=run,session=k-jitter*")
    draws = random.Random(f"{SEED}:{i}:1")  # (seed, rule, first matching exchange)
    expect = [draws.uniform(0.0, 0.2) for _ in range(5)]
    a = only_applied(ex)
    assert a["total_ms"] == round(sum(expect) * 1000, 1) and a["max_ms"] == round(
        max(expect) * 1000, 1
    )
    assert fault_of(ex)["seed"] == SEED


async def test_stall(env, tmp_path):
    got = await run(env[0], "k-stall")
    assert got.ids == ALL and got.error is None
    times = [t for t, _, _ in got.events]
    assert times[2] - times[1] >= 0.95 and times[1] - times[0] < 0.5
    store, [ex] = trace(env, tmp_path, "k-stall")
    frames = store.frames(ex.index)
    assert frames[2].at - frames[1].at >= 0.95
    a = only_applied(ex)
    assert (a["kind"], a["event"], a["frame"], a["seconds"]) == ("stall", 2, 2, 1.0)
    assert findings(store.path, "k-stall") == []


async def test_duplicate_an_event(env, tmp_path):
    got = await run(env[0], "k-dup")
    assert got.ids == ["e0", "e1", "e2", "e2", "e3", "e4"]
    assert got.events[2][2] == got.events[3][2]
    store, [ex] = trace(env, tmp_path, "k-dup")
    assert [f.event_id for f in store.frames(ex.index)] == got.ids
    a = only_applied(ex)
    assert (a["kind"], a["event_id"], a["frame"]) == ("dup", "e2", 3)
    infos = findings(store.path, "k-dup", severities=("info",))
    assert [f.code for f in infos if f.code == "CK403"] == [
        "CK403"
    ]  # dropped idempotently by its outer id
    assert findings(store.path, "k-dup") == []


async def test_drop_an_event(env, tmp_path):
    got = await run(env[0], "k-drop")
    assert got.ids == ["e0", "e1", "e3", "e4"]
    store, [ex] = trace(env, tmp_path, "k-drop")
    assert [f.event_id for f in store.frames(ex.index)] == got.ids
    a = only_applied(ex)
    assert (a["kind"], a["event"], a["event_id"], a["frame"]) == ("drop", 3, "e2", 2)
    assert fault_of(ex)["events"] == {"backend": 5, "client": 4}


async def test_swap_two_adjacent_events(env, tmp_path):
    got = await run(env[0], "k-swap")
    assert got.ids == ["e0", "e2", "e1", "e3", "e4"]
    store, [ex] = trace(env, tmp_path, "k-swap")
    assert [f.event_id for f in store.frames(ex.index)] == got.ids
    a = only_applied(ex)
    assert (a["kind"], a["event_id"], a["swapped_with_id"], a["frame"]) == ("swap", "e1", "e2", 1)


async def test_corrupt_one_event_truncated_json(env, tmp_path):
    got = await run(env[0], "k-corrupt-json")
    assert got.ids == ALL
    with pytest.raises(ValueError):
        json.loads(got.events[2][2])
    store, [ex] = trace(env, tmp_path, "k-corrupt-json")
    a = only_applied(ex)
    assert (a["kind"], a["how"], a["event_id"], a["frame"]) == ("corrupt", "json", "e2", 2)
    [ck] = findings(store.path, "k-corrupt-json")
    assert ck.code == "CK405" and ck.frames[0] == f"{ex.index}:2"


async def test_corrupt_one_event_invalid_utf8(env, tmp_path):
    got = await run(env[0], "k-corrupt-utf8")
    assert got.ids == ALL and got.decode_errors  # the client's decoder tripped over the bytes
    assert b"\xff\xfe" in got.raw
    assert "\ufffd" in got.events[2][2]  # decoded as a browser does: U+FFFD
    store, [ex] = trace(env, tmp_path, "k-corrupt-utf8")
    frame = store.frames(ex.index)[2]
    assert frame.event_id == "e2" and str(frame.error.kind) in (
        "invalid-utf8",
        "DecodeErrorKind.INVALID_UTF8",
    )
    assert only_applied(ex)["how"] == "utf8"
    # not fatal for chatkit's reader (TextDecoder replaces silently, R2.5): no CK405, the text shows U+FFFD
    assert "CK405" not in {f.code for f in findings(store.path, "k-corrupt-utf8")}


@pytest.mark.parametrize("status, retry_after", [(429, "2"), (500, None), (503, "1")])
async def test_answer_a_route_with_an_http_error(env, tmp_path, status, retry_after):
    base, _, _, server, backend = env
    sid = f"k-{status}"
    got = await run(base, sid)
    assert got.status == status and got.headers.get("Retry-After") == retry_after
    assert json.loads(got.raw)["error"]["code"] == status
    assert server.call(lambda: sid not in backend.sessions)  # the backend was never called
    store, [ex] = trace(env, tmp_path, sid)
    assert ex.status == status and ex.capability == "run"
    assert fault_of(ex)["via"] == "proxy" and only_applied(ex)["status"] == status
    ck = findings(store.path, sid)
    assert [f.code for f in ck] == ["CK110"] and ck[0].frames == [str(ex.index)]


async def test_the_nth_matching_exchange_only(env, tmp_path):
    base = env[0]
    first = await run(base, "k-nth", "r1")
    second = await run(base, "k-nth", "r2")
    third = await run(base, "k-nth", "r3")
    hist = await request("GET", f"{base}/sessions/k-nth/runs")  # not a run: never counted
    assert first.ids == ALL and third.ids == ALL and second.ids == ALL[1:]
    assert "X-Chatkit-Fault" not in first.headers and "X-Chatkit-Fault" not in third.headers
    assert hist.status == 200
    _, exs = trace(env, tmp_path, "k-nth", 4)
    faulted = [ex.run_id for ex in exs if "fault" in ex.notes]
    assert faulted == ["r2"]
    [ex] = [e for e in exs if e.run_id == "r2"]
    assert fault_of(ex)["matched"] == [{"rule": RULES[-1], "nth": 2}]


async def test_a_held_stream_never_holds_the_others(env):
    """Delays and stalls wait on the event loop without blocking it: other
    streams (faulted or not) go on at their own pace meanwhile."""
    base = env[0]
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    stalled = asyncio.ensure_future(run(base, "k-stall-2", "r1"))
    await asyncio.sleep(0.1)  # the stall has begun
    free = await asyncio.gather(*(run(base, f"k-free-{i}", "r1") for i in range(5)))
    free_done = loop.time() - t0
    dropped = await run(base, "k-drop-2", "r1")
    assert all(g.ids == ALL for g in free) and dropped.ids == ["e0", "e1", "e3", "e4"]
    assert all("X-Chatkit-Fault" not in g.headers for g in free)
    held = await stalled
    held_done = loop.time() - t0
    assert held.ids == ALL and held_done >= 1.0
    assert free_done < 0.9 and free_done < held_done - 0.3  # done while the other was held
