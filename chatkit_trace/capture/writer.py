"""The recorder's writer process: everything between the proxy's bytes and the trace file.

Theory of operation
-------------------
mitmproxy runs every hook and every stream callable on one asyncio event
loop (docs: mitmproxy.md section 7), so anything that blocks there delays
every connection, and anything that computes there (or in a thread of the
proxy's process, which shares its interpreter) takes the proxy's time.
The loop side (:mod:`chatkit_trace.capture.recorder`) therefore only
timestamps what it sees and hands it to this process through a pipe
(:mod:`chatkit_trace.capture.link`); this process owns the raw side of the
SQLite file and does the rest::

    proxy:   hook / stream callable --> batch --pipe--> reader thread
    writer:  Writer thread: take what is queued --> one transaction per batch
               per flow: Content-Encoding decoder -> SSE parser / NDJSON
               splitter -> frames; requests matched against the route
               profile and redacted; exchanges finalised when their flow
               ends; caps; every session whose rows changed is queued
               for the deriver (``derive_queue``) in the same transaction
    deriver: a third process (:mod:`chatkit_trace.capture.deriver`) follows
               the file and derives the queued sessions

Storing raw frames never waits for derivation: when the deriver falls
behind, frames are stored all the same and the queue says what is left.

This module is the thread (lock, open, batch loop, stop); each step of a
batch is a part of its own module over one shared state (:mod:`._recording`
lists them: traffic, identity, scrub, losses, caps, rows).

Messages are the typed :data:`~._messages.ToWriter` union (the loop side
builds them, see ``Recorder``), each handled by the one method its type
names in :attr:`Writer.handlers`: :class:`~._messages.Request` (request
line and headers), ``RequestBody``, ``ResponseHead`` (status and headers,
and how the body is recorded), ``Chunk`` (a response chunk, still
content-encoded), ``Gap`` (the loop dropped chunks of this flow because its
buffer was full), ``SocketMessage``, ``End`` (the flow ended: complete,
reset, client-gone, timeout, error), ``TrapError`` (a capture error caught
on the loop), ``Configure`` (new options), ``DeriverStopped`` (the
deriver's state, when the proxy learned it: it died), ``Sync`` (commit and
answer: tests, ``done``) and ``Stop``.

The bound: ``produced`` is only written by the reader and ``consumed`` only
by the writer thread, so ``produced - consumed`` is the backlog without a
lock; the reader stops reading the pipe while it is over
``BACKLOG_FACTOR`` times ``chatkit_queue``, so the pipe fills and the proxy
keeps (and at its own bound drops, counting) its copies instead.

Nothing here may raise out of :meth:`Writer.run`: a failure while handling
one message becomes a stored capture error (and one log line per kind), and
the thread carries on with the next message.
"""

from __future__ import annotations

import logging
import os
import queue
import sqlite3
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ..route import EVENT_ID_TRIES as _EVENT_ID_TRIES
from ._caps import Caps
from ._config import WriterConfig
from ._identity import Identity
from ._lines import install
from ._losses import Losses
from ._messages import (
    Configure,
    DeriverStopped,
    Hello,
    OpenError,
    Ready,
    Stop,
    Stopped,
    Sync,
    Synced,
    ToProxy,
    ToWriter,
    TrapError,
    Undecodable,
    kind_of,
)
from ._pipe import Unpacker
from ._recording import Recording, Tuning
from ._rows import Rows
from ._scrub import Scrub
from ._traffic import Traffic

__all__ = ["MAX_BODY_BYTES", "Writer", "WriterConfig"]

logger = install(logging.getLogger("chatkit_trace.capture"))  # lines masked, control characters shown

#: Request bodies and whole response bodies are stored up to this size.
MAX_BODY_BYTES = 8 * 1024 * 1024
#: Items handled per transaction at most (keeps a commit's latency bounded).
BATCH_ITEMS = 4096
#: While traffic flows the writer wakes this often and takes what is queued
#: (instead of waking for every chunk, which costs the loop GIL hand-offs).
BATCH_WAIT = 0.02
#: Chunks are parsed when the writer is quiet, when their flow ends, or at
#: the latest when the oldest unparsed chunk of a flow is this old or its
#: unparsed bytes reach PARSE_BYTES.  Every event still gets the arrival
#: time of the chunk that completed it.  (This process shares no interpreter
#: with the proxy: nothing to wait for.)
PARSE_LAG = 0.0
PARSE_BYTES = 4 * 1024 * 1024
#: How often the caps (size, age) are checked.
CAP_INTERVAL = 2.0
#: The reader stops taking messages off the pipe while this many times
#: ``chatkit_queue`` wait for the writer thread (memory bound).
BACKLOG_FACTOR = 10
#: Module constants the proxy sends with the options (tests tune them there).
TUNABLE = ("MAX_BODY_BYTES", "BATCH_ITEMS", "BATCH_WAIT", "PARSE_LAG", "PARSE_BYTES", "CAP_INTERVAL", "EVENT_ID_TRIES")
#: Server frames of one exchange tried for ids its route takes from the events
#: (the routing layer's number, which import uses too; tunable here for tests).
EVENT_ID_TRIES = _EVENT_ID_TRIES


def apply_tuning(module: Any, tuning: dict[str, Any], names: Sequence[str]) -> None:
    """Set the module constants ``names`` the proxy sent (``WriterConfig.tuning``)."""
    for name in names:
        if name in tuning:
            setattr(module, name, tuning[name])


class Writer(threading.Thread):
    """The single writer of one recording's raw side (see the module docstring):
    the thread, the trace's lock, the batch loop and the stop; each step of a
    batch is a part of its own (:mod:`._recording` draws them).

    Args:
        config: options, see :class:`WriterConfig`.
        emit: called from this thread with a message for the proxy
            (:class:`~._messages.Log`, :class:`~._messages.Synced` ...);
            ``None`` logs here.
    """

    def __init__(self, config: WriterConfig, emit: Callable[[ToProxy], None] | None = None) -> None:
        super().__init__(name="chatkit-trace-writer", daemon=True)
        tuning = Tuning(max_body_bytes=MAX_BODY_BYTES, parse_lag=PARSE_LAG, parse_bytes=PARSE_BYTES,
                        cap_interval=CAP_INTERVAL, event_id_tries=EVENT_ID_TRIES)
        self.rec = rec = Recording(config, tuning, emit)
        self.scrub = Scrub(rec)
        self.losses = Losses(rec, self.scrub)
        self.caps = Caps(rec)
        self.identity = Identity(rec)
        self.traffic = Traffic(rec, self.identity, self.losses, self.caps)
        self.rows = Rows(rec, self.identity, self.scrub, self.losses, self.caps)
        self.q: queue.SimpleQueue[ToWriter | Undecodable] = queue.SimpleQueue()
        self.limit = max(1, config.queue_limit)
        self.produced = 0  # written by the reader only
        self.consumed = 0  # written by this thread only
        self.ready = threading.Event()
        self.open_error: str | None = None
        self.lock: Any = None  # target.TraceLock, held from open to close
        self.backlog: tuple[int, int] = (0, 0)
        self.stopped = threading.Event()
        #: the one dispatch: each message type's handler (:meth:`_batch`; Sync and Stop are the batch's own)
        self.handlers: dict[type[Any], Callable[[Any], None]] = {
            **self.traffic.handlers(),
            TrapError: self.losses.trap_error,
            DeriverStopped: self.losses.deriver_stopped,
            Configure: self._reconfigure,
            Hello: self._unexpected,
            Undecodable: self._undecodable,
        }

    def put(self, item: ToWriter | Undecodable) -> None:
        """Queue a message (the reader thread)."""
        self.produced += 1
        self.q.put(item)

    # ------------------------------------------------------------------ thread

    def run(self) -> None:
        try:
            self._open()
        except Exception as err:  # noqa: BLE001 - reported to configure() as an OptionsError
            self.open_error = str(err) or type(err).__name__
            self.ready.set()
            self.stopped.set()
            return
        self.ready.set()
        try:
            self._loop()
        finally:
            try:
                self._shutdown()
            except Exception:
                logger.exception("chatkit-trace: error while closing the recording")
            self.stopped.set()

    def _open(self) -> None:
        """Lock the trace (one recorder per file: :class:`~.target.TraceLock`),
        open or create it.  A failure leaves nothing behind: a file or folder
        this call created is removed again."""
        from .target import TraceLock

        path = self.rec.config.db
        made = _make_folders(os.path.dirname(os.path.abspath(path)))
        self.lock = TraceLock(path)
        try:
            self.lock.acquire()
            self._open_store()
        except BaseException:
            self._undo_open(made)
            raise

    def _undo_open(self, made: list[str]) -> None:
        rec = self.rec
        if rec.store is not None:
            try:
                rec.store.close()
            except Exception:  # noqa: BLE001, S110 - closing what failed to open
                pass
            rec.store = None
        self.losses.free_reserve()
        lock = self.lock
        if lock is not None and lock.created:
            for suffix in ("", "-wal", "-shm", "-journal"):
                try:
                    os.remove(lock.path.as_posix() + suffix)
                except OSError:
                    pass
        if lock is not None:
            lock.release()
        for folder in reversed(made):
            try:
                os.rmdir(folder)
            except OSError:
                pass

    def _open_store(self) -> None:
        from ..store import TraceStore

        rec = self.rec
        store = rec.store = TraceStore(rec.config.db, create=True)
        rec.next_index = store.next_exchange_index()
        prior = store.get_meta("gaps", [])
        self.losses.prior_gaps = list(prior) if isinstance(prior, list) else []
        self.losses.make_reserve()
        #: (sessions, frames) an earlier recording left underived (its deriver died)
        self.backlog = store.derivation_backlog()
        self.caps.measure()
        meta = dict(rec.config.recorder_meta)
        meta["started_at"] = time.time()
        recordings = store.get_meta("recordings", []) or []
        recordings.append(meta)
        store.set_meta("recordings", recordings)
        store.commit()
        self._configure(rec.config)

    def _configure(self, config: WriterConfig) -> None:
        rec = self.rec
        if config is not rec.config:
            old = rec.redactor
            rec.redactor = config.make_redactor()
            if rec.redactor is not None and old is not None:
                rec.redactor.adopt(old)  # one recording: what was learned stays learned
        rec.config = config
        rec.router.profile = config.profile
        self.limit = max(1, config.queue_limit)
        self.rows.write_meta(config)

    def _reconfigure(self, item: Configure) -> None:
        self._configure(item.config)

    def _unexpected(self, item: ToWriter) -> None:
        raise ValueError(f"unknown queue message {kind_of(item)!r}")

    def _undecodable(self, item: Undecodable) -> None:
        raise ValueError(f"undecodable queue message {item.error}")

    # ------------------------------------------------------------------ batches

    def _loop(self) -> None:
        q = self.q
        while True:
            timeout = self.rec.tuning.cap_interval if self.caps.on else None
            try:
                item = q.get(timeout=timeout) if timeout is not None else q.get()
            except queue.Empty:
                self._check_caps()
                continue
            items = [item]
            # Let a batch gather: one transaction every BATCH_WAIT while traffic flows.
            time.sleep(BATCH_WAIT)
            while True:
                try:
                    while len(items) < BATCH_ITEMS:
                        items.append(q.get_nowait())
                except queue.Empty:
                    pass
                if not items:  # quiet: parse everything pending, then block again
                    self.traffic.parse_pending(force=True)
                    self.rows.commit()
                    break
                if self._batch(items):
                    return
                items = []
                time.sleep(BATCH_WAIT)

    def _batch(self, items: list[ToWriter | Undecodable]) -> bool:
        """Handle ``items`` in one transaction; ``True`` when told to stop."""
        stop = False
        syncs: list[int] = []
        handlers = self.handlers
        try:
            self.rec.store.begin()
        except sqlite3.Error as err:
            self.losses.internal_error("store", err)
        for item in items:
            handler = handlers.get(type(item))
            if handler is None:  # the batch's own: where it ends, what to answer
                if isinstance(item, Stop):
                    stop = True
                elif isinstance(item, Sync):
                    syncs.append(item.token)
                continue
            try:
                handler(item)
            except Exception as err:  # noqa: BLE001 - one bad message never stops the recording
                self.losses.internal_error(kind_of(item), err, fid=getattr(item, "fid", None))
        self.consumed += len(items)
        self.traffic.parse_pending(force=stop or bool(syncs))
        self.rows.commit()
        if self.caps.due():
            self._check_caps()
        for token in syncs:
            self.rec.send(Synced(token))
        return stop

    def _check_caps(self) -> None:
        try:
            self.caps.check()
        except Exception as err:  # noqa: BLE001 - a cap that cannot be applied never stops the recording
            self.losses.internal_error("caps", err)

    # ------------------------------------------------------------------ shutdown

    def _shutdown(self) -> None:
        """Flows still open become ``end='open'``; the caps once more; close
        (the deriver derives what is queued: the proxy tells it when this
        process is done)."""
        rec = self.rec
        store = rec.store
        if store is None:
            return
        try:
            store.begin()
            self.traffic.finish_open()
            self.identity.assign_ready(force=True)
            self.rows.commit()
        except Exception as err:  # noqa: BLE001 - the stop goes on: what can be written is
            self.losses.internal_error("shutdown", err)
        try:
            drops, capped = rec.drops, self.caps.capped
            stats = {"queue_dropped": drops, "orphan_messages": self.traffic.orphans, "capped": capped}
            store.set_meta("capture_stats", stats)
            if drops["chunks"] or capped["exchanges"] or capped["frames_over_cap"]:
                store.set_meta("dropped", self.caps.dropped())
            store.commit()
        except Exception as err:  # noqa: BLE001 - the stop goes on: what can be written is
            self.losses.internal_error("shutdown", err)
        try:
            # Flows finalised at shutdown count towards the caps too: check once more.
            rec.open_indexes.clear()
            self.caps.check(force=True)
            rec.queue_touched()
        except Exception as err:  # noqa: BLE001 - the stop goes on: what can be written is
            self.losses.internal_error("caps", err)
        if rec.drops["chunks"]:
            d = rec.drops
            rec.log(logging.WARNING, f"chatkit-trace: the writer process fell behind: {d['chunks']} chunk(s), "
                    f"{d['bytes']} bytes of {d['flows']} flow(s) were not recorded "
                    "(the traffic itself was not affected; the trace marks them: CK702); raise chatkit_queue to keep more")
        self.losses.last_word_on_the_gap()
        store.settle()  # one file after a clean stop: no -wal/-shm next to the trace
        try:
            store.close()
        except sqlite3.Error:
            pass  # a full disk: what could be committed is
        finally:
            if self.lock is not None:
                self.lock.release()  # after the connection: see target.TraceLock
            self.losses.free_reserve()

    def stats(self) -> dict[str, Any]:
        """The writer's last word to the proxy (:class:`~._messages.Stopped`)."""
        return {"queue_dropped": self.rec.drops, "orphans": self.traffic.orphans,
                "errors": sum(self.losses.errors_seen.values())}


def _make_folders(folder: str) -> list[str]:
    """``os.makedirs(folder)``; the folders it created, outermost first."""
    made: list[str] = []
    probe = folder
    while probe and not os.path.exists(probe):
        made.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    os.makedirs(folder, exist_ok=True)
    return list(reversed(made))


# ---------------------------------------------------------------------------- the writer process


def serve(inp: int, out: int) -> int:
    # long-function: the writer process's loop: its messages in order, the stop and the final commit in one place
    """The writer process (``python -m chatkit_trace.capture._child writer``).

    Reads messages from ``inp`` (the proxy's pipe, :mod:`._messages`):
    :class:`Hello`, :class:`Configure`, then the traffic of the module
    docstring; answers on ``out``: :class:`Ready` or :class:`OpenError`, then
    log lines and sync replies, and :class:`Stopped` at the end.  The pipe's
    end (the proxy stopped or died) or SIGTERM stop it like :class:`Stop`:
    every open flow is finalised as ``open``, the file committed and settled.
    """
    import signal

    from ._pipe import pack, write_all, writer_unpacker

    lock = threading.Lock()

    def emit(message: ToProxy) -> None:
        data = pack([message])
        with lock:
            write_all(out, data)

    stream = _Stream(inp, writer_unpacker())
    hello = stream.next()
    if not isinstance(hello, Hello):
        return 2
    for p in hello.path:
        if p not in sys.path:
            sys.path.append(p)  # the proxy's import paths: a module:Class adapter imports here too
    cfg = stream.next()
    if not isinstance(cfg, Configure):
        return 2
    config = cfg.config
    apply_tuning(sys.modules[__name__], config.tuning, TUNABLE)
    _lower_priority(config.tuning.get("WRITER_NICE", 0))
    writer = Writer(config, emit=emit)
    writer.start()
    writer.ready.wait()
    if writer.open_error is not None:
        emit(OpenError(writer.open_error))
        return 1
    emit(Ready(os.getpid(), writer.rec.next_index, writer.backlog))

    def on_term(signum: int, frame: Any) -> None:
        raise _Stop

    signal.signal(signal.SIGTERM, on_term)
    limit = max(1, config.queue_limit) * BACKLOG_FACTOR
    try:
        while True:
            item = stream.next()
            if item is None:
                break
            writer.put(item)
            if isinstance(item, Configure):
                limit = max(1, item.config.queue_limit) * BACKLOG_FACTOR
            elif isinstance(item, Stop):
                break
            if not stream.ready:  # what the pipe had is queued
                while writer.produced - writer.consumed > limit and writer.is_alive():
                    time.sleep(0.01)  # memory bound: let the pipe fill, the proxy keeps (or drops) its copies
    except _Stop:
        pass
    writer.q.put(Stop())
    writer.join()
    try:
        emit(Stopped(writer.stats()))
    except OSError:
        pass
    return 0


class _Stop(Exception):
    """SIGTERM: stop as if the pipe ended."""


class _Stream:
    """Messages off a blocking pipe, one at a time."""

    def __init__(self, fd: int, unpacker: Unpacker[ToWriter]) -> None:
        self.fd = fd
        self.unpacker = unpacker
        self.ready: deque[ToWriter | Undecodable] = deque()
        self.ended = False

    def next(self) -> ToWriter | Undecodable | None:
        while not self.ready:
            if self.ended:
                return None
            try:
                data = os.read(self.fd, 1 << 20)
            except OSError:
                data = b""
            if not data:
                self.ended = True
                return None
            self.ready.extend(self.unpacker.feed(data))
        return self.ready.popleft()


def _lower_priority(nice: int) -> None:
    """Give the proxy the CPU first (``os.nice``; best effort)."""
    if nice:
        try:
            os.nice(nice)
        except (AttributeError, OSError):
            pass
