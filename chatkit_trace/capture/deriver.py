"""The recorder's deriver process: follows the trace file and derives it.

The writer process (:mod:`chatkit_trace.capture.writer`) stores raw frames
and names, in the same transaction, every session whose recorded rows
changed (``derive_queue``: the session, a change number, how many frames).
This process watches the file (SQLite's data version), replays each
queued session through the derive engine (:class:`chatkit_trace.derive.Deriver`:
the adapter and the Core, what ``check`` runs), writes its derived rows and
takes it off the queue in one transaction, logs one line per finished run
(through the proxy, which also marks the run's flows in mitmweb) and says
in the trace how far behind it is (meta ``derivation``)::

    live:  a session whose exchanges have all ended is derived at once;
           one with a stream still open at most every LIVE_LAG seconds
           (less often with more than OPEN_SHARE open: ``open_lag``)
    end:   nothing until the proxy stops (``final``)
    final: everything queued, then the file is settled (one file again)

It runs at a lower priority than the writer, which runs at a lower one
than the proxy: when the machine is busy the proxy's streams come first,
raw frames second, facts last, and the queue is the explicit back-pressure
between the two (docs/recording.md "Back-pressure").  When it is killed the
queue keeps what it had not derived: the next recording into the file
derives it first (and ``redecode`` clears it).
"""

from __future__ import annotations

import logging
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ..masking import PROCESS_SECRETS, keep_derived_secrets
from ._lines import install
from ._messages import Configure, Done, Final, Hello, Learn, Log, Mark, ToDeriver, ToProxy, Undecodable

__all__ = ["LiveDeriver", "serve"]

logger = install(logging.getLogger("chatkit_trace.capture"))  # lines masked, control characters shown

#: A session with a stream still open is derived at most this often (live)...
LIVE_LAG = 1.0
#: ... while at most this many sessions have a stream open; with more, each is
#: derived proportionally less often (200 open: every 10 s), so deriving
#: streams that are still growing (a session is derived from its start every
#: time) never takes more than about this many session passes a second.  A
#: session is derived at once when its streams have all ended.
OPEN_SHARE = 20
#: How often the file is checked for changes (seconds).
POLL = 0.1
#: Derivation is "behind" (logged, in meta ``derivation``) when the oldest
#: underived change is older than this.
BEHIND_AFTER = 5.0
#: Below this much free space on the trace's disk derived rows wait: twice the
#: writer's reserve (:data:`chatkit_trace.capture._losses.RESERVE_BYTES`).
LOW_DISK = 2 * 1024 * 1024
#: Module constants the proxy sends with the options (tests tune them there).
TUNABLE = ("LIVE_LAG", "OPEN_SHARE", "POLL", "BEHIND_AFTER", "LOW_DISK")


class LiveDeriver:
    """Derives the queued sessions of one trace (see the module docstring).

    :param config: the recorder's options (:class:`~chatkit_trace.capture.writer.WriterConfig`).
    :param emit: a message for the proxy: :class:`~._messages.Log`,
        :class:`~._messages.Mark`.
    """

    def __init__(self, config: Any, emit: Callable[[ToProxy], None] | None = None) -> None:
        from ..store import TraceStore

        self.emit = emit
        self.store = TraceStore(config.db)
        self.config = config
        self.adapter: Any = None
        self.scrubber: Any = None
        self.logged_runs: dict[tuple[str, str], tuple[Any, ...]] = {}
        self.errors_seen: Counter[str] = Counter()
        self.stop_requested = False
        self.version: int | None = None
        self.behind = False
        self.paused = False  # the disk is nearly full: derived rows wait (_low_disk)
        self.next_due: float | None = None
        self.derived_frames = 0
        #: the live spans (chatkit_otlp: chatkit_trace.export.live), or None
        self.spans: Any = None
        self.configure(config)

    # ------------------------------------------------------------------ options

    def configure(self, config: Any) -> None:
        self.config = config
        self.adapter = None
        # Log lines are made of stored (already masked) data; the token shapes
        # are masked once more, as in the writer's lines.
        learned = self.scrubber.secrets if self.scrubber is not None else None
        self.scrubber = config.make_redactor()
        if learned is not None and self.scrubber is not None:
            self.scrubber.secrets.merge(learned)
        # What it derives is masked as it is written (the store: chatkit_trace.masking),
        # unless the recording keeps its secrets.
        keep_derived_secrets(self.scrubber is None)
        profile = config.profile
        self._configure_spans(config)
        if profile is None or config.derive == "off":
            return
        try:
            self.adapter = profile.create_adapter()
        except Exception as err:  # noqa: BLE001 - adapter code: a profile that cannot build its adapter is a capture error, the recording goes on
            self._capture_error("derive", f"cannot build the adapter for profile {profile.name!r}: {err}")
            # Loud, once: every later command needs the adapter too (docs/recording.md).
            # (A warning: mitmdump exits on an error logged during its startup.)
            self._log(logging.WARNING, f"chatkit-trace: ERROR: cannot import the adapter {profile.protocol!r} of "
                      f"profile {profile.name!r} ({type(err).__name__}: {err}). Every exchange is still recorded, "
                      "but no run is decoded or judged: install the adapter into this Python "
                      f"({sys.executable}), e.g. `pip install -e ./my_adapter`, then "
                      f"`chatkit-trace redecode {config.db}`; runs, check, view and the fixtures' pytest need it too")

    def learn(self, values: Sequence[str]) -> None:
        """Secret values the writer learned (through the proxy's pipes): the
        derived rows and log lines are masked with them too."""
        secrets = self.scrubber.secrets if self.scrubber is not None else PROCESS_SECRETS
        for v in values:
            secrets.learn(v)

    # ------------------------------------------------------------------ work

    def backlog(self) -> tuple[int, int]:
        return self.store.derivation_backlog()

    def changed(self) -> bool:
        """Whether another connection committed since the last look."""
        v = self.store.data_version()
        if v != self.version:
            self.version = v
            return True
        return False

    def _low_disk(self) -> bool:
        """Whether the trace's disk is nearly full (under :data:`LOW_DISK`):
        derived rows wait (they can always be derived again), so the room
        left, and the writer's reserve it frees when the disk fills up, is
        the writer's: raw frames first, and the mark saying what was lost."""
        import os

        from .target import free_bytes

        room = free_bytes(os.path.dirname(os.path.abspath(self.config.db)))
        low = room is not None and room < LOW_DISK
        if low != self.paused:
            self.paused = low
            self._log(logging.WARNING if low else logging.INFO,
                      f"chatkit-trace: derivation paused: {room // 1024} KiB free on the trace's disk; every frame the disk "
                      "takes is stored first, and the facts are derived when there is room (or `chatkit-trace redecode`)"
                      if low and room is not None else "chatkit-trace: derivation resumed: the trace's disk has room again")
        return low

    def step(self, *, final: bool = False) -> int:
        """Derive every queued session that is due; how many were derived."""
        if self.adapter is None or self._low_disk():
            return 0
        pending = self.store.derive_pending()
        now = time.time()
        lag = open_lag(sum(1 for p in pending if p.open))
        due = [p for p in pending if final or not p.open or now - p.since >= lag]
        later = [p.since + lag for p in pending if p not in due]
        self.next_due = min(later) if later else None
        if not due:
            return 0
        from ..store import PendingDerivation

        # a socket several sessions share is derived for all of them at once
        # (docs/recording.md): its other sessions come along, queued or not
        names = {p.session_id for p in due}
        try:
            with self.store.reading():
                names = self._deriver().together(names)
        except Exception as err:  # noqa: BLE001 - adapter code: the session's group is a capture error, derivation goes on
            self._internal_error("derive", err)
        queued = {p.session_id: p for p in pending}
        done = 0
        for sid in sorted(names, key=lambda s: (s is None, s or "")):
            if self.stop_requested:
                break
            self._derive_one(queued.get(sid) or PendingDerivation(sid, 0, now, 0), final=final)
            done += 1
        return done

    def _deriver(self) -> Any:
        """The derive engine on the trace as it is now (it caches what it read:
        one per session, made inside that session's snapshot)."""
        from ..derive import Deriver

        profile = self.config.profile
        return Deriver(self.store, self.adapter, capabilities=profile.capabilities if profile is not None else None)

    def _derive_one(self, p: Any, *, final: bool) -> None:
        store = self.store
        try:
            with store.reading():  # the queue entry and the session's rows: one snapshot
                current = store.derive_pending(session=p.session_id)
                if not current and p.seq:
                    return  # derived meanwhile (with a socket it shares)
                deriver = self._deriver()
                shared = deriver.shared_sockets()
                d = deriver.session(p.session_id, analyse=False)
            # a shared socket's rows are its sessions' own (replaced by session, not by exchange)
            ids = [ex.index for ex in d.exchanges if ex.index not in shared]
            done = current[0] if current else None
            rows = d.rows() if d.exchanges else {}
            # a busy file (the writer's batch) is waited for: never taken for an error
            # that would mark the session derived without its rows
            store.when_free(lambda: store.write_derived(rows, sessions=d.names, exchanges=ids, done=done))
            self.derived_frames += done.frames if done else 0
        except Exception as err:  # noqa: BLE001 - one session never stops the others
            self._internal_error("derive", err)
            try:
                if p.seq:
                    store.write_derived({}, done=p)  # not retried until the session changes again
            except Exception:  # noqa: BLE001, S110 - nowhere left to store it: the error above is recorded
                pass
            return
        if d.exchanges:
            findings = self._findings(deriver, d)
            self._report_runs(d, findings, final=final)
            if self.spans is not None:
                self._send_spans(d, findings, final=final)

    def finish(self) -> dict[str, Any]:
        """The recording stopped: derive everything queued (until told to stop).
        The writer is done by then, so one pass takes all; a second one
        catches a session queued while the first ran."""
        for _ in range(2):
            if self.stop_requested or self.adapter is None or not self.step(final=True):
                break
        sessions, frames = self.backlog()
        if self.adapter is None:
            state = "off" if self.config.derive == "off" else "incomplete"
        else:
            state = "complete" if not sessions else "incomplete"
        self._set_state(state, frames)
        self._finish_spans()
        return {"state": state, "frames": frames, "sessions": sessions}

    def report_backlog(self) -> None:
        """Say (log, meta) when derivation falls behind and when it caught up."""
        sessions, frames = self.backlog()
        pending = self.store.derive_pending() if sessions else []
        now = time.time()
        oldest = min((p.since for p in pending), default=now)
        behind = bool(pending) and now - oldest >= BEHIND_AFTER
        if behind and not self.behind:
            self.behind = True
            self._set_state("behind", frames)
            self._log(logging.INFO, f"chatkit-trace: derivation is behind by {frames} frame(s) of {sessions} session(s): "
                      "every frame is stored and the proxy is not slowed; facts catch up when the load drops")
        elif not sessions and self.behind:
            self.behind = False
            self._set_state("live", 0)
            self._log(logging.INFO, "chatkit-trace: derivation caught up")

    def _set_state(self, state: str, frames: int) -> None:
        try:
            with self.store.transaction():
                self.store.set_meta(
                    "derivation", {"mode": self.config.derive, "state": state, "frames": frames, "at": time.time()}
                )
        except Exception as err:  # noqa: BLE001 - a meta row that cannot be written never stops derivation
            self._internal_error("meta", err)

    def close(self) -> None:
        """Close the file: the last one out settles it (no -wal/-shm)."""
        try:
            self.store.close()
        except Exception:  # noqa: BLE001, S110 - closing at the stop: what could be committed is
            pass

    # ------------------------------------------------------------------ live spans (chatkit_otlp)

    def _configure_spans(self, config: Any) -> None:
        """Start (or keep, or stop) the live spans for these options."""
        settings = getattr(config, "otlp", None)
        if self.spans is not None and self.spans.settings == settings:
            return
        self._finish_spans()
        if settings is None or config.profile is None or config.derive == "off":
            return
        try:
            from pathlib import Path

            from ..export.live import LiveSpans

            self.spans = LiveSpans(settings, self.store.meta(), Path(config.db).name, self._log)
        except Exception as err:  # noqa: BLE001 - said once; the recording goes on without spans
            self._internal_error("otlp", err)

    def _send_spans(self, derived: Any, findings: list[Any], *, final: bool) -> None:
        try:
            self.spans.session(derived, findings, final=final)
        except Exception as err:  # noqa: BLE001 - a span never stops derivation
            self._internal_error("otlp", err)

    def _finish_spans(self) -> None:
        """The recording stopped (or the option changed): the last spans, the counts in meta ``otlp``."""
        spans, self.spans = self.spans, None
        if spans is None:
            return
        try:
            counts = spans.finish()
            with self.store.transaction():
                self.store.set_meta("otlp", counts)
        except Exception as err:  # noqa: BLE001 - the span exporter is a third party: its failure is a capture error
            self._internal_error("otlp", err)

    # ------------------------------------------------------------------ log lines and marks

    def _findings(self, deriver: Any, derived: Any) -> list[Any]:
        """The session's findings, by the analysis ``check`` runs (so the
        per-run log line and ``check`` say the same thing)."""
        try:
            findings: list[Any] = deriver.analyse(derived)  # the engine's own list, as before
            return findings
        except Exception as err:  # noqa: BLE001 - the log line then says so
            self._internal_error("analyze", err)
            return []

    def _report_runs(self, derived: Any, findings: list[Any] | None = None, *, final: bool) -> None:
        """One log line per finished run, with its findings as ``check`` reports
        them (and a mitmweb mark on its flows); logged again when they change."""
        per_finding: dict[tuple[Any, Any], list[Any]] = {}
        for f in findings or ():
            per_finding.setdefault((f.session_id, f.run_id), []).append(f)
        by_index = {ex.index: ex for ex in derived.exchanges}
        open_indexes = {i for i, ex in by_index.items() if ex.ended_at is None and ex.end is None}
        for run in derived.runs():
            view, exchanges = run.view, run.exchanges
            still_open = any(i in open_indexes for i in exchanges)
            if not view.terminal and still_open and not final:
                continue
            rejected = run.rejections
            outcome = _outcome(view, derived.replay, exchanges)
            mine = sorted(per_finding.get((run.session_id, view.id), []), key=lambda f: (f.severity != "error", f.severity, f.code))
            codes = tuple(dict.fromkeys(f"{f.code} {f.severity}" for f in mine))
            signature = (outcome, run.facts, tuple(sorted(rejected.items())), codes)
            key = (run.session_id, view.id)
            if self.logged_runs.get(key) == signature:
                continue
            self.logged_runs[key] = signature
            if rejected:
                rej = ", ".join(f"{reason} {n}" for reason, n in sorted(rejected.items()))
                rej_text = f"{sum(rejected.values())} rejected ({rej})"
            else:
                rej_text = "no rejections"
            found = f"findings: {', '.join(codes)}" if codes else "no findings"
            summary = f"session {run.session_id} run {view.id}: {outcome}, {run.facts} facts, {rej_text}; {found}"
            self._log(logging.INFO, f"chatkit-trace: {summary}")
            fids = [by_index[i].flow_id for i in exchanges if i in by_index and by_index[i].flow_id]
            if fids:
                self._emit(Mark(fids, _marker(view, rejected, mine), self._scrub(summary)))

    # ------------------------------------------------------------------ errors and messages

    def _capture_error(self, where: str, message: str) -> bool:
        """A ``capture_errors`` row in a transaction of its own; whether it was stored."""
        try:
            with self.store.transaction():
                self.store.add_capture_error(where, self._scrub(message))
        except Exception:  # noqa: BLE001 - nowhere left to store it (a full disk)
            return False
        return True

    def _internal_error(self, where: str, err: BaseException) -> None:
        """One log line per place and kind, never a traceback (where in the
        code it happened is in the line); the facts are derived again later
        (the queue keeps what was not written; ``chatkit-trace redecode``)."""
        tb = traceback.extract_tb(err.__traceback__)[-1] if err.__traceback__ is not None else None
        at = f" (at {tb.filename.rsplit('/', 1)[-1]}:{tb.lineno} in {tb.name})" if tb is not None else ""
        message = f"{type(err).__name__}: {err}{at}"
        stored = self._capture_error(f"deriver:{where}", message)
        key = f"{where}:{type(err).__name__}"
        self.errors_seen[key] += 1
        if self.errors_seen[key] == 1:
            kept = "kept in the trace's capture_errors" if stored else "not stored: the trace cannot be written"
            self._log(logging.WARNING, f"chatkit-trace: error in the deriver ({where}): {message} ({kept}); the recording "
                      "goes on, and what was not derived stays queued (`chatkit-trace redecode`)")

    def _scrub(self, text: str) -> str:
        return self.scrubber.scrub_text(text) if self.scrubber is not None else text

    def _log(self, level: int, message: str) -> None:
        message = self._scrub(message)
        if self.emit is None:
            logger.log(level, message)
        else:
            self._emit(Log(level, message))

    def _emit(self, message: ToProxy) -> None:
        if self.emit is None:
            return
        try:
            self.emit(message)
        except Exception:  # noqa: BLE001, S110 - the proxy is gone
            pass


def open_lag(open_sessions: int) -> float:
    """How long a session with a stream still open waits between two passes."""
    return LIVE_LAG * max(1.0, open_sessions / max(1, OPEN_SHARE))


def _outcome(view: Any, r: Any, exchanges: list[int]) -> str:
    if view.status == "failed" and view.error is not None:
        code = getattr(view.error, "code", None)
        return f"failed ({code})" if code else "failed"
    if view.status == "interrupted" and view.interrupt_reason:
        return f"interrupted ({view.interrupt_reason})"
    if view.terminal:
        return str(view.status)
    ends = [r.exchanges[i].exchange.end for i in exchanges if i in r.exchanges]
    cut = [e for e in ends if e and e != "complete"]
    if cut:
        return f"no conclusion (connection {cut[-1]})"
    if view.connection == "disconnected":
        return "no conclusion (stream ended)"
    return str(view.status)


def _marker(view: Any, rejected: Counter[str], findings: Sequence[Any] = ()) -> str:
    if view.status == "failed":
        return ":x:"
    if rejected or any(f.severity == "error" for f in findings):
        return ":warning:"
    if view.terminal:
        return ":white_check_mark:"
    return ":hourglass:"


# ---------------------------------------------------------------------------- the deriver process


def serve(inp: int, out: int, terminated: list[bool] | None = None) -> int:
    # long-function: the deriver process's loop: messages, the file's changes and the queue in one place, in the order they are handled
    """The deriver process (``python -m chatkit_trace.capture._child deriver``).

    Reads :class:`Hello`, :class:`Configure` (after the writer opened the
    file), later ``Configure``, :class:`Learn` and :class:`Final` from
    ``inp`` (:mod:`._messages`); answers on ``out`` with log lines, marks
    and, at the end, :class:`Done`.  The pipe's end (the proxy died) counts
    as ``Final``; SIGTERM stops after the session being derived, leaving the
    rest queued.
    """
    from . import writer as writer_mod
    from ._pipe import deriver_unpacker, pack, read_some, write_all

    def emit(message: ToProxy) -> None:
        write_all(out, pack([message]))

    unpacker = deriver_unpacker()
    pending: list[ToDeriver | Undecodable] = []
    ended = False
    while len(pending) < 2 and not ended:
        got, ended = read_some(inp, unpacker, None)
        pending += got
    if len(pending) < 2 or not isinstance(hello := pending[0], Hello) or not isinstance(first := pending[1], Configure):
        return 2
    for p in hello.path:
        if p not in sys.path:
            sys.path.append(p)  # the proxy's import paths: a module:Class adapter imports here too
    config = first.config
    pending = pending[2:]
    apply = writer_mod.apply_tuning
    apply(sys.modules[__name__], config.tuning, TUNABLE)
    writer_mod._lower_priority(config.tuning.get("DERIVER_NICE", 0))
    try:
        live = LiveDeriver(config, emit)
    except Exception as err:  # noqa: BLE001 - said once; the recording goes on without facts
        emit(Log(logging.WARNING, f"chatkit-trace: the deriver cannot open {config.db}: {err}; "
                 "every frame is still recorded (`chatkit-trace redecode` derives them later)"))
        return 1

    def on_term(signum: int, frame: Any) -> None:
        live.stop_requested = True

    signal.signal(signal.SIGTERM, on_term)
    if terminated:  # told to stop while starting (_child.TERMINATED)
        live.stop_requested = True
    final: list[Final] = []

    def reconfigure(msg: Configure) -> None:
        config = msg.config
        apply(sys.modules[__name__], config.tuning, TUNABLE)
        live.configure(config)

    def undecodable(msg: Undecodable) -> None:
        live._log(logging.WARNING, f"chatkit-trace: the deriver could not read a message from the proxy: {msg.error}")

    #: the one dispatch (a second Hello is nothing to do)
    handlers: dict[type[Any], Callable[[Any], None]] = {
        Configure: reconfigure, Learn: lambda msg: live.learn(msg.values), Final: final.append,
        Hello: lambda msg: None, Undecodable: undecodable,
    }
    try:
        while not live.stop_requested:
            for msg in pending:
                handlers[type(msg)](msg)
            pending = []
            if final or ended:
                break
            if live.config.derive == "live":
                due = live.next_due is not None and time.time() >= live.next_due
                if live.changed() or due:
                    live.step()
                    live.report_backlog()
            got, ended = read_some(inp, unpacker, POLL)
            pending += got
        state = live.finish() if not live.stop_requested else _stopped(live)
    except Exception as err:  # noqa: BLE001 - the deriver's last word: whatever failed, the state says incomplete
        live._internal_error("loop", err)
        state = {"state": "incomplete"}
    live.close()
    try:
        emit(Done(state))
    except OSError:
        pass
    return 0


def _stopped(live: LiveDeriver) -> dict[str, Any]:
    live._finish_spans()
    sessions, frames = live.backlog()
    live._set_state("incomplete" if sessions else "complete", frames)
    return {"state": "incomplete" if sessions else "complete", "frames": frames, "sessions": sessions}
