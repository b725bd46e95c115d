"""The recorder's deriver (``capture/deriver.py``): back-pressure said in the
log and in the trace.  A real recorder (writer process) records with
``chatkit_derive=end``, so the frames wait in ``derive_queue``; a
:class:`LiveDeriver` on the same file then says how far behind it is and
catches up."""

from __future__ import annotations

import logging

from chatkit_trace.capture import deriver as deriver_mod
from chatkit_trace.capture._messages import Log
from chatkit_trace.capture.deriver import LiveDeriver
from chatkit_trace.store import TraceStore

from .test_recorder import CHUNKS, harness, make_flow  # noqa: F401 - the fixture

__all__ = ["harness"]


def test_derivation_behind_is_said_in_the_log_and_the_trace_and_then_caught_up(harness, monkeypatch):
    h = harness(chatkit_derive="end")
    h.stream(make_flow(), CHUNKS)
    with h.store() as store:
        sessions, frames = store.derivation_backlog()
        assert (sessions, frames) == (1, len(CHUNKS)) and not list(store.rows("runs"))
    said: list[Log] = []
    monkeypatch.setattr(deriver_mod, "BEHIND_AFTER", 0.0)
    live = LiveDeriver(h.rec.writer.config, emit=said.append)
    try:
        live.report_backlog()
        assert said == [Log(logging.INFO, f"chatkit-trace: derivation is behind by {frames} frame(s) of 1 session(s): "
                         "every frame is stored and the proxy is not slowed; facts catch up when the load drops")]
        with TraceStore(h.db, readonly=True) as store:
            assert {k: v for k, v in store.get_meta("derivation").items() if k != "at"} == {"mode": "end", "state": "behind", "frames": frames}
        live.report_backlog()
        assert len(said) == 1  # said once, not on every look
        assert live.step(final=True) == 1
        live.report_backlog()
        assert said[-1] == Log(logging.INFO, "chatkit-trace: derivation caught up")
        assert any(isinstance(m, Log) and "session s1 run r1: completed" in m.text for m in said)
        with TraceStore(h.db, readonly=True) as store:
            assert store.derivation_backlog() == (0, 0)
            assert store.get_meta("derivation")["state"] == "live"
            assert {r["run_id"]: r["status"] for r in store.rows("runs")} == {"r1": "completed"}
    finally:
        live.close()
