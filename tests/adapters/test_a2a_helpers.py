"""Helpers for the A2A adapter tests (raw bytes -> wire -> adapter -> Core), plus
the tests that the wire path itself is split-invariant on the captures."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chatkit_trace.adapters import create_adapter
from chatkit_trace.adapters.a2a import A2AProtocol, unwrap
from chatkit_trace.core import ChatCore, Fact, FactResult, RuntimeMessage
from chatkit_trace.wire import SSEParser, event_json, frame_from_sse

DATA = Path(__file__).parent / "data" / "a2a"
IDEMPOTENT = {"duplicate-event", "no-change"}


def load(name: str) -> bytes:
    return (DATA / name).read_bytes()


def load_json(name: str) -> Any:
    return json.loads(load(name))


def request(name: str) -> Any:
    """The recorded request body of ``{v}-{scenario}.{step}``."""
    return load_json("requests.json")[name]


def events(raw: bytes, cuts: list[int] | None = None) -> list[Any]:
    """SSE bytes -> JSON values (R2.8), fed in pieces split at ``cuts``."""
    parser, out, last = SSEParser(), [], 0
    for cut in [*(cuts or []), len(raw)]:
        out += parser.feed(raw[last:cut])
        last = cut
    out += parser.flush()
    values = []
    for i, ev in enumerate(out):
        value, err = event_json(frame_from_sse(ev, 0, i, 0.0))
        assert err is None, err
        values.append(value)
    return values


def random_cuts(raw: bytes, seed: int) -> list[int]:
    rng = random.Random(seed)
    return sorted(rng.sample(range(1, len(raw)), min(len(raw) - 1, rng.randint(1, 40))))


def context_of(values: list[Any]) -> str:
    for v in values:
        kind, obj = unwrap(v)
        if kind not in (None, "error") and obj.get("contextId"):
            return obj["contextId"]
    raise AssertionError("no contextId in the stream")


@dataclass
class Replayed:
    core: ChatCore
    run_id: str
    updates: list[list[Any]] = field(default_factory=list)
    log: list[tuple[Fact, FactResult]] = field(default_factory=list)
    #: Updates of frames after the reader stopped at the terminal (R2.5a): never admitted.
    after: list[list[Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def violations(self) -> list[str]:
        return [
            f"{type(f).__name__} {r.reason} {r.detail}"
            for f, r in self.log
            if not r.accepted and str(r.reason) not in IDEMPOTENT
        ]

    def rejected(self, reason: str) -> list[Fact]:
        return [f for f, r in self.log if str(r.reason) == reason]

    @property
    def status(self) -> str:
        return self.core.snapshot.run(self.run_id).status

    def messages(self) -> list[RuntimeMessage]:
        return list(self.core.snapshot.messages)

    def assistant(self) -> dict[str, RuntimeMessage]:
        return {m.id: m for m in self.core.snapshot.messages if m.role == "assistant"}


def replay(
    values: list[Any],
    session_id: str,
    *,
    run_id: str = "run-1",
    input: Any = None,
    core: ChatCore | None = None,
    version: str = "1.0",
    stop: bool = True,
) -> Replayed:
    """One direct run stream through SessionDecoder and a ChatCore, the way the
    UI reads it: the reader stops at the first terminal (R2.5a); later frames
    are still decoded (``after``) to check they carry no output."""
    adapter = create_adapter(A2AProtocol(version), history=True, abort=True)
    if core is None:
        core = ChatCore(session_id, capabilities=adapter.capabilities)
    decoder = adapter.decoder(session_id)
    if core.run_view(run_id) is None:
        project = decoder.project(input, run_id) if input is not None else None
        core.send(run_id, input if input is not None else {"text": ""}, project=project)
        core.take_requests()
        core.dispatch_settled(run_id, True)
    out = Replayed(core, run_id)
    stopped = False
    for i, value in enumerate(values):
        d = decoder.decode(value, run_id=run_id, fallback_id=f"0:{i}")
        if d.error:
            out.errors.append(d.error)
            break
        (out.after if stopped else out.updates).append(d.updates)
        if not stopped:
            for fact in d.facts:
                out.log.append((fact, core.admit(fact)))
            stopped = stop and d.terminal
    return out


def visible(msg: RuntimeMessage) -> list[tuple[str, str, Any]]:
    """(part id, type, JSON without id) per part: what R8.4 compares."""
    out = []
    for p in msg.parts:
        data = p.to_json()
        data.pop("id")
        out.append((p.id, p.type, data))
    return out


SCENARIOS = ["text", "tool", "fail", "crash", "slow_cancel"]


@pytest.mark.parametrize("v", ["v10", "v03"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_split_anywhere_gives_the_same_events(v: str, scenario: str) -> None:
    raw = load(f"{v}-{scenario}.stream.sse")
    whole = events(raw)
    assert whole and all(isinstance(e, dict) for e in whole)
    for seed in range(5):
        assert events(raw, random_cuts(raw, seed)) == whole
    assert events(raw, list(range(1, len(raw)))) == whole  # one byte at a time
