"""Record a session of the subscription backend through a real mitmdump, with a
real headless Chromium page whose ``EventSource`` reconnects by itself."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chatkit_trace.adapters import MessageUpdate
from chatkit_trace.examples.my_protocol import MyProtocol, input_text, to_user_message

from .proxy import BIN, REPO, Proc, mitmdump
from .subscription_backend import SubscriptionBackend

WAIT_MS = 15_000


@dataclass
class Recorded:
    db: Path
    #: what the page's EventSource received: [{id, data}]
    got: list[dict[str, Any]]
    #: how many times the EventSource opened (2: it reconnected once)
    opens: int
    #: the run ids the sends started (the backend's when it minted them)
    runs: list[str]


def record_session(
    browser: Any,
    backend: SubscriptionBackend,
    procs: list[Proc],
    db: Path,
    sid: str,
    *,
    runs: tuple[str | None, ...] = ("r1",),
    close_after: tuple[int, ...] = (3,),
    mode: str = "correct",
    history: bool = False,
    passive: str | None = None,
    answer: list[str] | None = None,
    history_answer: list[str] | None = None,
    text: str | None = None,
    profile: str = "myproto",
) -> Recorded:
    """One page session: subscribe, send each run (waiting for its ``done``),
    optionally a run another client starts and a history read, then close."""
    backend.configure(sid, mode=mode, close_after=list(close_after), **({"answer": answer} if answer else {}),
                      **({"history_answer": history_answer} if history_answer is not None else {}))
    p = mitmdump(upstream=backend.url, db=db, profile=profile)
    procs.append(p)
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{p.port}/page?sid={sid}")
        page.wait_for_function("window.opens >= 1", timeout=WAIT_MS)
        started: list[str] = []
        for r in runs:
            reply = page.evaluate("([r, t]) => send(r, t)", [r, text if text is not None else f"hi {r}"])
            started.append(reply["runId"])
            page.wait_for_function("(r) => doneOf(r)", arg=reply["runId"], timeout=WAIT_MS)
        if passive:
            backend.start_run_direct(sid, passive, "from elsewhere")
            page.wait_for_function("(r) => doneOf(r)", arg=passive, timeout=WAIT_MS)
        if history:
            page.evaluate("readHistory()")
        got = page.evaluate("window.got")
        opens = page.evaluate("window.opens")
        page.evaluate("window.es.close()")
    finally:
        context.close()
    rc = p.stop()
    assert rc == 0, p.output
    return Recorded(db, got, opens, started)


def check(db: Path, *extra: str) -> tuple[int, list[dict[str, Any]]]:
    """``chatkit-trace check --format json`` on ``db``: its exit code and findings."""
    out = subprocess.run(
        [str(BIN / "chatkit-trace"), "check", str(db), "--format", "json", "--fail-on", "error", *extra],
        capture_output=True, text=True, timeout=120, cwd=str(REPO),
        env={**os.environ, "PYTHONPATH": str(REPO)},  # InputOnStart below, named as module:Class
    )
    assert out.returncode in (0, 1), out.stderr
    return out.returncode, json.loads(out.stdout)["findings"]


def subscriptions(db: Path) -> list[Any]:
    """The recorded subscription exchanges, in order."""
    from chatkit_trace.store import TraceStore

    with TraceStore(db, readonly=True) as store:
        return [e for e in store.exchanges() if e.capability == "subscribe"]


class InputOnStart(MyProtocol):
    """myproto whose ``started`` event may carry the run's input (``{"type":
    "started", "run": "r2", "input": {"text": …}}``), decoded into the run's
    user message: how a protocol carries the input of a run another client
    started (docs/profiles.md, "Subscriptions")."""

    name = "myproto-input"

    def decode_event(self, event: Any, ctx: Any) -> list[Any]:
        updates = list(super().decode_event(event, ctx))
        if isinstance(event, Mapping) and event.get("type") == "started" and "input" in event:
            return [MessageUpdate(to_user_message(ctx.run_id, input_text(event["input"]))), *updates]
        return updates

    def event_limits(self, event: Any) -> tuple[str, ...]:
        if isinstance(event, Mapping) and event.get("type") == "started" and "input" in event:
            return ()
        return super().event_limits(event)
