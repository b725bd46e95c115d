"""The writer's losses: its own errors, a trace that cannot be written (a
full disk), and the marks that say what the trace lacks (``notes.gaps`` on
an exchange, meta ``gaps``; ``check`` reports CK702).  One log line per
episode or kind, never a traceback."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
import traceback
from collections import Counter
from typing import Any

from ..trace import Exchange
from ._messages import DeriverStopped, TrapError
from ._recording import Recording
from ._scrub import Scrub

__all__ = ["RESERVE_BYTES", "RESERVE_SUFFIX", "Losses", "StoreGap", "add_gap"]

#: Room kept on the trace's disk while recording (``<trace>-reserve``, removed
#: at the stop): freed when the disk fills up, so the mark that says so fits.
RESERVE_BYTES = 1024 * 1024
RESERVE_SUFFIX = "-reserve"


class StoreGap:
    """One episode of a trace that could not be written (a full disk), from
    the first failed commit to the next one that succeeds (``until``); its
    ``mark`` is what meta ``gaps`` holds."""

    def __init__(self, at: float, reason: str) -> None:
        self.at = at
        self.reason = reason
        self.until: float | None = None
        self.failing = True  # the last commit failed
        self.marked = False  # meta ``gaps`` holds this gap (some version of it)
        self.batches = 0
        self.frames = 0
        self.exchanges: set[int] = set()
        self.mark: dict[str, Any] = {}
        self.sync()

    @property
    def open(self) -> bool:
        return self.until is None

    def sync(self) -> None:
        self.mark.update(kind="store", at=self.at, until=self.until, reason=self.reason, batches=self.batches,
                         frames=self.frames, exchanges=len(self.exchanges))


class Losses:
    """What the writer could not do, said once and marked in the trace."""

    def __init__(self, rec: Recording, scrub: Scrub) -> None:
        self.rec = rec
        self.scrub = scrub
        self.errors_seen: Counter[str] = Counter()
        self.stored_errors: set[tuple[str, str | None]] = set()
        #: the trace could not be written (a full disk): the current episode, and this recording's marks
        self.gap: StoreGap | None = None
        self.gaps: list[dict[str, Any]] = []
        self.prior_gaps: list[dict[str, Any]] = []  # meta ``gaps`` of earlier recordings into the file

    # ------------------------------------------------------------------ errors

    def trap_error(self, item: TrapError) -> None:
        """A capture error the proxy caught on its loop: stored, and its line
        logged masked (in queue order: by now the flow's secrets are learned)."""
        fid = item.fid
        st = self.rec.flows.get(fid) if fid else None
        if item.message is not None:
            self.capture_error(item.where, item.message, fid=fid, exchange_id=st.ex.index if st else None)
        if item.log:
            self.rec.log(logging.WARNING, item.log)

    def deriver_stopped(self, item: DeriverStopped) -> None:
        """The proxy saw the deriver die: the trace says so (derivation resumes
        at the next recording into this file, or with redecode)."""
        self.rec.store.set_meta("derivation", item.state)
        self.capture_error("deriver", item.message)

    def capture_error(self, where: str, message: str, *, fid: str | None = None, exchange_id: int | None = None) -> None:
        """A ``capture_errors`` row, written with the current batch (once per
        place, message and flow)."""
        key = (f"{where}:{message[:200]}", fid)
        if key in self.stored_errors:
            return
        self.stored_errors.add(key)
        rec = self.rec
        if rec.redactor is not None:
            message = rec.redactor.scrub_text(message)
        try:
            rec.store.add_capture_error(where, message, flow_id=fid, exchange_id=exchange_id)
        except Exception:  # noqa: BLE001, S110 - nowhere left to store it (the disk is full: marked apart)
            pass

    def internal_error(self, where: str, err: BaseException, *, fid: str | None = None) -> None:
        """A failure inside the writer: a trace that cannot be written is a
        gap (:meth:`store_failed`); anything else is a capture error row
        and, when it concerns one flow, a mark on its exchange (part of it is
        not recorded: CK702).  One log line per place and kind, with where
        in the code it happened, never a traceback."""
        if isinstance(err, (sqlite3.Error, OSError)):
            if self.gap is None or not self.gap.open:
                self.store_failed(err)
            return
        message = f"{type(err).__name__}: {err}{_where(err)}"
        st = self.rec.flows.get(fid) if fid else None
        self.capture_error(f"writer:{where}", message, fid=fid, exchange_id=st.ex.index if st else None)
        if st is not None:
            add_gap(st.ex, None, "error", errors=1, reason=message)
            st.dirty = True
        key = f"{where}:{type(err).__name__}"
        self.errors_seen[key] += 1
        if self.errors_seen[key] == 1:
            what = f"exchange {st.ex.index} is marked incomplete (CK702)" if st is not None else "the recording goes on"
            self.rec.log(logging.WARNING, f"chatkit-trace: capture error in the writer ({where}): {message}; {what}; the "
                         "traffic is not affected (logged once; every one is kept in the trace's capture_errors)")

    # ------------------------------------------------------------------ what could not be stored

    def store_failed(self, err: BaseException) -> None:
        """A batch that could not be committed: its frames are lost (counted
        on their exchanges, ``notes.gaps``), its exchange rows stay to be
        written with the next batch that can be, the trace is marked (meta
        ``gaps``) as soon as it can be (the reserve makes room for that).
        One log line per episode, never a traceback."""
        rec = self.rec
        self.rollback()
        lost = Counter(f.exchange_index for f in rec.frames)
        rec.frames = []
        gap = self.gap
        if gap is None or not gap.open:
            gap = self.gap = StoreGap(time.time(), _store_reason(err))
            self.gaps.append(gap.mark)
            rec.log(logging.WARNING, f"chatkit-trace: cannot write to {rec.config.db}: {gap.reason}. The traffic is "
                    "not affected; frames are dropped until the trace can be written again, and the trace marks the gap "
                    "(`chatkit-trace check` reports CK702)")
        gap.failing = True
        gap.batches += 1
        for index, n in lost.items():
            gap.frames += n
            st = rec.flow_of_index(index)
            if st is not None:
                add_gap(st.ex, gap.at, "store", frames=n, reason=gap.reason)
                st.dirty = True
        gap.exchanges |= set(lost)
        gap.sync()
        self.free_reserve()
        if self.write_marks():
            gap.marked = True

    def stored(self) -> None:
        """A commit went through: a gap still open closes once the reserve is
        back too (:meth:`_recovered`)."""
        if self.gap is not None and self.gap.open:
            self._recovered()

    def _recovered(self) -> None:
        """A commit went through while a gap is open.  The gap closes once
        the reserve is back too: until then the next failure might find no
        room for its mark, so the trace keeps saying that anything from the
        gap's start on may be missing."""
        gap = self.gap
        assert gap is not None
        gap.failing = False
        try:
            self.make_reserve()
        except OSError:
            return  # room for the trace, not yet for the reserve
        gap.until = time.time()
        gap.sync()
        self.write_marks()
        rec = self.rec
        rec.log(logging.WARNING, f"chatkit-trace: {rec.config.db} is writable again: {gap.frames} frame(s) of "
                f"{len(gap.exchanges)} exchange(s) were not stored in {gap.until - gap.at:.1f} s (the trace marks them: "
                "`chatkit-trace check` reports CK702)")

    def write_marks(self) -> bool:
        """Meta ``gaps`` and the marked exchanges' rows, in a transaction of
        their own; False when even that cannot be written (tried again with
        the next batch, and at the stop)."""
        rec = self.rec
        store = rec.store
        try:
            store.begin()
            store.set_meta("gaps", self.prior_gaps + self.gaps)
            store.commit()
        except Exception:  # noqa: BLE001 - the disk is still full
            self.rollback()
            return False
        try:
            self.scrub.scrub()  # as every write: nothing unmasked reaches the file
            store.begin()
            for st in rec.flows.values():
                if st.dirty and st.ex.notes.get("gaps"):
                    store.add_exchange(st.ex, with_frames=False)
            store.commit()
        except Exception:  # noqa: BLE001 - the rows stay dirty: written with a later batch
            self.rollback()
        return True

    def rollback(self) -> None:
        try:
            self.rec.store.rollback()
        except Exception:  # noqa: BLE001, S110 - nothing was open
            pass

    def last_word_on_the_gap(self) -> None:
        """At the stop, a gap still open: when the last commit went through,
        nothing was lost since the last failure and the gap closes; else the
        trace is marked once more (the reserve is free by now) as incomplete
        from the gap's start on.  Said in one line, as the file says it."""
        gap = self.gap
        if gap is None or not gap.open:
            return
        self.free_reserve()
        if not gap.failing:
            gap.until = time.time()
        gap.sync()
        marked = self.write_marks()
        lost = f"{gap.frames} frame(s) of {len(gap.exchanges)} exchange(s) were not stored"
        since = time.strftime("%H:%M:%S", time.localtime(gap.at))
        db = self.rec.config.db
        if marked and not gap.failing:
            self.rec.log(logging.WARNING, f"chatkit-trace: {lost} ({gap.reason}; the trace marks them: `chatkit-trace check` "
                         "reports CK702)")
        elif marked or gap.marked:
            counts = "" if marked else " (its counts are those of the last mark that fitted)"
            self.rec.log(logging.WARNING, f"chatkit-trace: {db} could still not be written at the stop "
                         f"({gap.reason}): {lost}, and the trace says it is incomplete from {since} on{counts} "
                         "(`chatkit-trace check` reports CK702)")
        else:
            self.rec.log(logging.ERROR, f"chatkit-trace: {db} could not be written at all since {since} "
                         f"({gap.reason}): {lost}, and not even that mark fits: the trace does not say it is incomplete. "
                         "Free some space and record again")

    # ------------------------------------------------------------------ the reserve

    @property
    def reserve_path(self) -> str:
        return self.rec.config.db + RESERVE_SUFFIX

    def make_reserve(self) -> None:
        """Keep :data:`RESERVE_BYTES` of the disk next to the trace (a file
        of zeros, removed at the stop): when the disk fills up, freeing it
        makes room to write the mark that says so."""
        if os.path.exists(self.reserve_path):
            return
        fd = os.open(self.reserve_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        except (AttributeError, OSError):
            os.close(fd)
            self.free_reserve()
            raise
        os.close(fd)

    def free_reserve(self) -> None:
        try:
            os.remove(self.reserve_path)
        except OSError:
            pass


def _where(err: BaseException) -> str:
    """`` (at writer.py:123 in _chunk)``: the innermost frame of a failure."""
    tb = err.__traceback__
    if tb is None:
        return ""
    last = traceback.extract_tb(tb)[-1]
    return f" (at {os.path.basename(last.filename)}:{last.lineno} in {last.name})"


def _store_reason(err: BaseException) -> str:
    """What a failed write says, for people: a full disk named as such."""
    import errno

    text = str(err)
    if isinstance(err, sqlite3.OperationalError) and ("disk is full" in text or "database or disk is full" in text):
        return "the disk is full"
    if isinstance(err, OSError) and err.errno == errno.ENOSPC:
        return "the disk is full"
    return f"{type(err).__name__}: {text}"


def add_gap(ex: Exchange, at: float | None, kind: str, **counts: Any) -> None:
    """Mark a loss on an exchange (``notes.gaps``): one entry per kind and
    episode (``at``), its counts added up."""
    gaps = ex.notes.setdefault("gaps", [])
    for gap in gaps:
        if gap.get("kind") == kind and gap.get("at") == at:  # at None: one entry per kind
            for key, value in counts.items():
                if isinstance(value, int) and isinstance(gap.get(key), int):
                    gap[key] += value
                else:
                    gap[key] = value
            return
    gaps.append({"kind": kind, "at": at, **counts})
    ex.notes["incomplete"] = True
