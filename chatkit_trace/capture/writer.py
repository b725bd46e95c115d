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
import traceback
import weakref
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..route import EVENT_ID_TRIES as _EVENT_ID_TRIES
from ..route import Router, apply_match, make_redactor
from ..trace import Exchange
from ..wire import (
    DEFAULT_MAX_LINE,
    Frame,
    NDJSONSplitter,
    SSEParser,
    error_frame,
    frame_from_sse,
    make_decoder,
    replace_frame,
    ws_frame,
)
from ._lines import install
from ._messages import (
    Chunk,
    Configure,
    DeriverStopped,
    End,
    Gap,
    Hello,
    Learned,
    Log,
    OpenError,
    Ready,
    Request,
    RequestBody,
    ResponseHead,
    SocketMessage,
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
#: Room kept on the trace's disk while recording (``<trace>-reserve``, removed
#: at the stop): freed when the disk fills up, so the mark that says so fits.
RESERVE_BYTES = 1024 * 1024
RESERVE_SUFFIX = "-reserve"
#: Module constants the proxy sends with the options (tests tune them there).
TUNABLE = ("MAX_BODY_BYTES", "BATCH_ITEMS", "BATCH_WAIT", "PARSE_LAG", "PARSE_BYTES", "CAP_INTERVAL", "EVENT_ID_TRIES")
#: Server frames of one exchange tried for ids its route takes from the events
#: (the routing layer's number, which import uses too; tunable here for tests).
EVENT_ID_TRIES = _EVENT_ID_TRIES


@dataclass(frozen=True)
class WriterConfig:
    """What the writer needs from the options (``Recorder.configure`` builds it)."""

    db: str
    profile: Any = None  # a route.profiles.Profile, or None: record without identity
    redact: str = ""  # chatkit_redact: extra names, comma-separated
    keep_secrets: bool = False  # chatkit_keep_secrets
    queue_limit: int = 20000
    max_db_bytes: int = 0  # 0: no cap
    max_age: float = 0.0  # seconds, 0: no cap
    derive: str = "live"  # live | end | off
    derive_wait: float = 30.0  # seconds a clean stop waits for the deriver
    #: longest SSE event line / NDJSON line kept whole (chatkit_max_event_mb);
    #: a longer one is kept as its head, length and SHA-256 (CK703)
    max_event_bytes: int = DEFAULT_MAX_LINE
    test_raise: frozenset[str] = frozenset()
    #: the live spans' settings (chatkit_otlp*: chatkit_trace.export.live.OTLPSettings), or None
    otlp: Any = None
    #: what to store in the meta table about this recording
    recorder_meta: dict[str, Any] = field(default_factory=dict)
    #: module constants of the writer and the deriver, as the proxy has them
    tuning: dict[str, Any] = field(default_factory=dict)

    def make_redactor(self) -> Any:
        """The redactor of these options (None: secrets are kept)."""
        if self.keep_secrets:
            return None
        return make_redactor(self.profile, self.redact)


def apply_tuning(module: Any, tuning: dict[str, Any], names: Sequence[str]) -> None:
    """Set the module constants ``names`` the proxy sent (``WriterConfig.tuning``)."""
    for name in names:
        if name in tuning:
            setattr(module, name, tuning[name])


def _text(value: bytes | str) -> str:
    if isinstance(value, str):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def _pairs(fields: Iterable[tuple[Any, Any]]) -> list[tuple[str, str]]:
    return [(_text(k), _text(v)) for k, v in fields]


def _header(pairs: Sequence[tuple[str, str]], name: str) -> str | None:
    for k, v in pairs:
        if k.lower() == name:
            return v
    return None


def _shift(frame: Frame, base: int) -> Frame:
    """A frame from a parser restarted after a gap, moved to stream offsets."""
    if not base:
        return frame
    return replace_frame(
        frame,
        start=None if frame.start is None else frame.start + base,
        end=None if frame.end is None else frame.end + base,
        data_offsets=None if frame.data_offsets is None else tuple(o + base for o in frame.data_offsets),
    )


def _redacted(ex: Exchange, where: str) -> None:
    """Note what was redacted (names only, as ``Redactor.redact_exchange`` does)."""
    done = ex.notes.setdefault("redacted", [])
    if where not in done:
        done.append(where)


def _redacted_headers(ex: Exchange, side: str, before: Sequence[tuple[str, str]], after: Sequence[tuple[str, str]]) -> None:
    for (k, v), (_, v2) in zip(before, after, strict=False):
        if v != v2:
            _redacted(ex, f"{side}.header:{k.lower()}")


_FRAME_ROW = 64  # bytes counted per frame row besides its text and raw bytes
_EXCHANGE_ROW = 256  # per exchange row besides its bodies, headers and URL


def _exchange_size(ex: Exchange) -> int:
    headers = sum(len(k) + len(v) + 6 for k, v in (*ex.request_headers, *ex.response_headers))
    return _EXCHANGE_ROW + len(ex.request_body or b"") + len(ex.response_body or b"") + headers + len(ex.url)


class _InjectedFault(RuntimeError):
    """Raised on purpose when ``chatkit_test_raise`` asks for it."""


@dataclass(eq=False)
class _Flow:
    """The writer's state of one flow (one exchange)."""

    fid: str
    ex: Exchange
    raw_url: str = ""  # unredacted, for the profile
    raw_headers: list[tuple[str, str]] = field(default_factory=list)  # unredacted, for the profile
    request_body: bytes | None = None  # unredacted, for the profile
    match: Any = None  # identity.Match, provisional until assigned
    matched: bool = False
    resolved: bool = False  # ids from the response looked up
    assigned: bool = False  # final ids written (IdentityTracker, request order)
    event_tries: int = 0
    response_headers: list[tuple[str, str]] = field(default_factory=list)  # unredacted
    decoder: Any = None
    parser: Any = None  # SSEParser | NDJSONSplitter | None
    base: int = 0  # stream offset where the current parser started (after a gap)
    copy: bytearray | None = None  # decoded copy of a 'body' stream (capped)
    copy_lost: int = 0
    next_frame: int = 0
    pending: list[tuple[float, bytes]] = field(default_factory=list)  # (arrival time, chunk) not parsed yet
    pending_since: float = 0.0
    pending_bytes: int = 0
    chunks: int = 0
    encoded: int = 0
    decoded: int = 0
    decoder_error_stored: bool = False
    lost: bool = False  # the decoder cannot go on after a gap (compressed body)
    ended: bool = False
    dirty: bool = True
    frame_count: int = 0


class Writer(threading.Thread):
    """The single writer of one recording's raw side (see the module docstring).

    Args:
        config: options, see :class:`WriterConfig`.
        emit: called from this thread with a message for the proxy
            (:class:`~._messages.Log`, :class:`~._messages.Synced` ...);
            ``None`` logs here.
    """

    def __init__(self, config: WriterConfig, emit: Callable[[ToProxy], None] | None = None) -> None:
        super().__init__(name="chatkit-trace-writer", daemon=True)
        self.config = config
        self.emit = emit
        self.redactor: Any = config.make_redactor()
        self.q: queue.SimpleQueue[ToWriter | Undecodable] = queue.SimpleQueue()
        self.limit = max(1, config.queue_limit)
        self.produced = 0  # written by the reader only
        self.consumed = 0  # written by this thread only
        self.ready = threading.Event()
        self.open_error: str | None = None
        self.store: Any = None
        self.lock: Any = None  # target.TraceLock, held from open to close
        self.next_index = 0
        self.flows: dict[str, _Flow] = {}
        self.router = Router(config.profile)  # matching and identity, in request order
        self.ident_queue: deque[_Flow] = deque()  # flows in request order, until assigned
        self.flow_of: dict[int, str] = {}  # exchange index -> flow id (for marks)
        self.open_indexes: set[int] = set()
        self.frames: list[Frame] = []
        #: sessions changed in this batch -> frames added (the deriver's queue)
        self.touched: dict[str | None, int] = {}
        self.seq = 0  # grows with every batch that queues sessions
        self.backlog: tuple[int, int] = (0, 0)
        self.orphans = 0
        self.errors_seen: Counter[str] = Counter()
        self.stored_errors: set[tuple[str, str | None]] = set()
        self.drops = {"chunks": 0, "bytes": 0, "flows": 0}
        self.capped = {"exchanges": 0, "frames": 0, "by_age": 0, "by_size": 0, "frames_over_cap": 0}
        #: the trace could not be written (a full disk): the current episode, and this recording's marks
        self.gap: _StoreGap | None = None
        self.gaps: list[dict[str, Any]] = []
        self.prior_gaps: list[dict[str, Any]] = []  # meta ``gaps`` of earlier recordings into the file
        self.over_cap = False
        self.last_cap_check = 0.0
        self.unparsed: set[_Flow] = set()
        self.recorded_bytes = 0  # the recorded data's size (chatkit_max_db_mb), kept up to date
        self.stopped = threading.Event()
        self.scrub_memo: weakref.WeakKeyDictionary[_Flow, dict[str, Any]] = weakref.WeakKeyDictionary()
        #: the unmatched-stream hint was logged (once per recording)
        self.hinted = False
        #: learned values already sent to the deriver (memory only)
        self.shared: set[str] = set()
        self.shared_generation = 0
        #: the one dispatch: each message type's handler (:meth:`_batch`)
        self.handlers: dict[type[Any], Callable[[Any], None]] = {
            Chunk: self._chunk,
            Request: self._request,
            RequestBody: self._request_body,
            ResponseHead: self._response_head,
            SocketMessage: self._ws,
            End: self._end,
            Gap: self._gap,
            TrapError: self._trap_error,
            Configure: self._reconfigure,
            DeriverStopped: self._deriver_stopped,
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

        path = self.config.db
        made = _make_folders(os.path.dirname(os.path.abspath(path)))
        self.lock = TraceLock(path)
        try:
            self.lock.acquire()
            self._open_store()
        except BaseException:
            self._undo_open(made)
            raise

    def _undo_open(self, made: list[str]) -> None:
        if self.store is not None:
            try:
                self.store.close()
            except Exception:  # noqa: BLE001, S110 - closing what failed to open
                pass
            self.store = None
        self._free_reserve()
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

        path = self.config.db
        self.store = TraceStore(path, create=True)
        self.next_index = self.store.next_exchange_index()
        prior = self.store.get_meta("gaps", [])
        self.prior_gaps = list(prior) if isinstance(prior, list) else []
        self._make_reserve()
        #: (sessions, frames) an earlier recording left underived (its deriver died)
        self.backlog = self.store.derivation_backlog()
        self.recorded_bytes = self._recorded_bytes()
        meta = dict(self.config.recorder_meta)
        meta["started_at"] = time.time()
        recordings = self.store.get_meta("recordings", []) or []
        recordings.append(meta)
        self.store.set_meta("recordings", recordings)
        self.store.commit()
        self._configure(self.config)

    def _configure(self, config: WriterConfig) -> None:
        if config is not self.config:
            old = self.redactor
            self.redactor = config.make_redactor()
            if self.redactor is not None and old is not None:
                self.redactor.adopt(old)  # one recording: what was learned stays learned
        self.config = config
        self.router.profile = config.profile
        self.limit = max(1, config.queue_limit)
        self._write_meta(config)

    def _write_meta(self, config: WriterConfig) -> None:
        """The meta keys readers use (docs/trace-format.md): which profile, protocol and
        capabilities decode this trace, whether it is redacted, where it came from."""
        store = self.store
        profile = config.profile
        if profile is not None:
            store.set_meta("profile", profile.name)
            store.set_meta("protocol", profile.protocol)
            store.set_meta("capabilities", list(profile.capabilities))
            try:
                store.set_meta("profile_spec", profile.model_dump(mode="json", by_alias=True))
            except Exception:  # noqa: BLE001, S110 - a profile object without pydantic: the name suffices
                pass
        store.set_meta("redaction", "off" if self.redactor is None else "on")
        store.set_meta("source", {"kind": "record", **config.recorder_meta})
        if config.derive == "off":
            store.set_meta("derivation", {"mode": "off", "state": "off", "at": time.time()})
        store.commit()

    def _loop(self) -> None:
        q = self.q
        while True:
            timeout = self._idle_timeout()
            try:
                item = q.get(timeout=timeout) if timeout is not None else q.get()
            except queue.Empty:
                self._idle()
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
                    self._parse_pending(force=True)
                    self._commit()
                    break
                if self._batch(items):
                    return
                items = []
                time.sleep(BATCH_WAIT)

    def _idle_timeout(self) -> float | None:
        if self.config.max_age or self.config.max_db_bytes:
            return CAP_INTERVAL
        return None

    def _idle(self) -> None:
        self._idle_caps()

    def _batch(self, items: list[ToWriter | Undecodable]) -> bool:
        """Handle ``items`` in one transaction; ``True`` when told to stop."""
        store = self.store
        stop = False
        syncs: list[int] = []
        handlers = self.handlers
        try:
            store.begin()
        except sqlite3.Error as err:
            self._internal_error("store", err)
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
                self._internal_error(kind_of(item), err, fid=getattr(item, "fid", None))
        self.consumed += len(items)
        self._parse_pending(force=stop or bool(syncs))
        self._commit()
        if (self.config.max_age or self.config.max_db_bytes) and time.time() - self.last_cap_check > CAP_INTERVAL:
            self._idle_caps()
        for token in syncs:
            self._emit(Synced(token))
        return stop

    def _idle_caps(self) -> None:
        try:
            self._check_caps()
        except Exception as err:  # noqa: BLE001
            self._internal_error("caps", err)

    def _commit(self) -> None:
        """Write the batch (frames, changed exchanges, the derivation queue) in
        one transaction.  A busy file (the deriver writes to it too) retries
        the same batch (``TraceStore.when_free``), so nothing is lost to a
        lock; any other error (a full disk) drops this batch's frames, marks
        the loss on each exchange they belonged to and in the trace
        (:class:`_StoreGap`), and says so in one line."""
        try:
            self.store.when_free(self._write_and_commit)
        except Exception as err:  # noqa: BLE001 - e.g. disk full: mark, say once, go on
            self._store_failed(err)
            return
        self._batch_written(stored=True)
        if self.gap is not None and self.gap.open:
            self._store_recovered()

    def _write_and_commit(self) -> None:
        self._assign_ready()
        self._scrub()
        self._share_learned()
        self._write_batch()
        self.store.commit()

    def _share_learned(self) -> None:
        """Values learned since the last batch go to the deriver (through the
        proxy's pipes, never a file) before the frames they mask are committed:
        it masks what it derives with them (chatkit_trace.masking)."""
        red = self.redactor
        if red is None or self.emit is None or red.secrets.generation == self.shared_generation:
            return
        self.shared_generation = red.secrets.generation
        new = [v for v in red.secrets if v not in self.shared]
        if new:
            self.shared.update(new)
            self._emit(Learned(new))

    def _write_batch(self) -> None:
        """The batch's rows, inside the open transaction (nothing cleared yet:
        a busy file retries the same batch)."""
        store = self.store
        if self.frames and not self.over_cap:
            store.add_frames(self.frames)
        for st in self.flows.values():
            if st.dirty:
                store.add_exchange(st.ex, with_frames=False)
        if self.touched and self.config.derive != "off":
            store.queue_derivation(self.touched, self.seq + 1)

    def _batch_written(self, *, stored: bool) -> None:
        """The batch is committed (or dropped after an error): clear it."""
        if self.frames:
            if self.over_cap:
                self.capped["frames_over_cap"] += len(self.frames)
            elif stored:
                self.recorded_bytes += sum(_FRAME_ROW + len(f.text or "") + len(f.raw or b"") for f in self.frames)
            self.frames = []
        for st in self.flows.values():
            st.dirty = False
        if self.touched and self.config.derive != "off" and stored:
            self.seq += 1
        self.touched = {}
        if stored:
            done = [fid for fid, st in self.flows.items() if st.ended and st.assigned]
            for fid in done:
                del self.flows[fid]

    # ------------------------------------------------------------------ what could not be stored

    def _store_failed(self, err: BaseException) -> None:
        """A batch that could not be committed: its frames are lost (counted
        on their exchanges, ``notes.gaps``), its exchange rows stay to be
        written with the next batch that can be, the trace is marked (meta
        ``gaps``) as soon as it can be (the reserve makes room for that).
        One log line per episode, never a traceback."""
        self._rollback()
        lost = Counter(f.exchange_index for f in self.frames)
        self.frames = []
        gap = self.gap
        if gap is None or not gap.open:
            gap = self.gap = _StoreGap(time.time(), _store_reason(err))
            self.gaps.append(gap.mark)
            self._log(logging.WARNING, f"chatkit-trace: cannot write to {self.config.db}: {gap.reason}. The traffic is "
                      "not affected; frames are dropped until the trace can be written again, and the trace marks the gap "
                      "(`chatkit-trace check` reports CK702)")
        gap.failing = True
        gap.batches += 1
        for index, n in lost.items():
            gap.frames += n
            st = self.flows.get(self.flow_of.get(index, ""))
            if st is not None:
                _add_gap(st.ex, gap.at, "store", frames=n, reason=gap.reason)
                st.dirty = True
        gap.exchanges |= set(lost)
        gap.sync()
        self._free_reserve()
        if self._write_marks():
            gap.marked = True

    def _store_recovered(self) -> None:
        """A commit went through while a gap is open.  The gap closes once
        the reserve is back too: until then the next failure might find no
        room for its mark, so the trace keeps saying that anything from the
        gap's start on may be missing."""
        gap = self.gap
        assert gap is not None
        gap.failing = False
        try:
            self._make_reserve()
        except OSError:
            return  # room for the trace, not yet for the reserve
        gap.until = time.time()
        gap.sync()
        self._write_marks()
        self._log(logging.WARNING, f"chatkit-trace: {self.config.db} is writable again: {gap.frames} frame(s) of "
                  f"{len(gap.exchanges)} exchange(s) were not stored in {gap.until - gap.at:.1f} s (the trace marks them: "
                  "`chatkit-trace check` reports CK702)")

    def _write_marks(self) -> bool:
        """Meta ``gaps`` and the marked exchanges' rows, in a transaction of
        their own; False when even that cannot be written (tried again with
        the next batch, and at the stop)."""
        store = self.store
        try:
            store.begin()
            store.set_meta("gaps", self.prior_gaps + self.gaps)
            store.commit()
        except Exception:  # noqa: BLE001 - the disk is still full
            self._rollback()
            return False
        try:
            self._scrub()  # as every write: nothing unmasked reaches the file
            store.begin()
            for st in self.flows.values():
                if st.dirty and st.ex.notes.get("gaps"):
                    store.add_exchange(st.ex, with_frames=False)
            store.commit()
        except Exception:  # noqa: BLE001 - the rows stay dirty: written with a later batch
            self._rollback()
        return True

    def _rollback(self) -> None:
        try:
            self.store.rollback()
        except Exception:  # noqa: BLE001, S110 - nothing was open
            pass

    @property
    def reserve_path(self) -> str:
        return self.config.db + RESERVE_SUFFIX

    def _make_reserve(self) -> None:
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
            self._free_reserve()
            raise
        os.close(fd)

    def _free_reserve(self) -> None:
        try:
            os.remove(self.reserve_path)
        except OSError:
            pass

    def _scrub(self) -> None:
        """Mask learned secrets and token shapes in every frame and exchange row
        about to be written (route/secrets.py): nothing unmasked reaches the
        file, its WAL or free pages.  Lengths are kept; the exchange notes where."""
        red = self.redactor
        if red is None:
            return
        from ..route.redact import StreamMasks, note_scrubbed

        frames = self.frames
        here = {(f.exchange_index, f.index): i for i, f in enumerate(frames)}
        again: dict[tuple[int, int], Frame] = {}  # frames of earlier batches masked again
        for i, f in enumerate(frames):
            new, spans = red.scrub_frame(f)
            st = self.flows.get(self.flow_of.get(f.exchange_index, ""))
            if st is not None:
                # A secret split across events (or escaped) only shows in the
                # decoded, joined text: masked in every frame holding a piece.
                memo = self.scrub_memo.setdefault(st, {})
                streams = memo.get("streams")
                if streams is None:
                    streams = memo["streams"] = StreamMasks(red)
                new, more, earlier = streams.add(f, new)
                spans += more
                for index, (version, notes) in earlier.items():
                    key = (f.exchange_index, index)
                    j = here.get(key)
                    if j is not None:
                        frames[j] = version
                    else:
                        again[key] = version
                    note_scrubbed(st.ex.notes, f"frame:{index}", notes)
            if new is f:
                continue
            frames[i] = new
            if st is not None:
                note_scrubbed(st.ex.notes, f"frame:{f.index}", spans)
                st.dirty = True
        if again:
            frames.extend(again.values())
        for st in self.flows.values():
            if st.dirty:
                memo = self.scrub_memo.setdefault(st, {})
                for where, spans in red.scrub_fields(st.ex, memo):
                    note_scrubbed(st.ex.notes, where, spans)

    # ------------------------------------------------------------------ messages

    def _trap_error(self, item: TrapError) -> None:
        fid = item.fid
        st = self.flows.get(fid) if fid else None
        if item.message is not None:
            self._capture_error(item.where, item.message, fid=fid, exchange_id=st.ex.index if st else None)
        if item.log:
            self._log(logging.WARNING, item.log)  # the loop's error, masked here (in queue order)

    def _reconfigure(self, item: Configure) -> None:
        self._configure(item.config)

    def _deriver_stopped(self, item: DeriverStopped) -> None:
        # The proxy saw the deriver die: the trace says so (derivation resumes
        # at the next recording into this file, or with redecode).
        self.store.set_meta("derivation", item.state)
        self._capture_error("deriver", item.message)

    def _unexpected(self, item: ToWriter) -> None:
        raise ValueError(f"unknown queue message {kind_of(item)!r}")

    def _undecodable(self, item: Undecodable) -> None:
        raise ValueError(f"undecodable queue message {item.error}")

    def _maybe_raise(self) -> None:
        if "writer" in self.config.test_raise:
            raise _InjectedFault("chatkit_test_raise=writer: injected writer failure")

    def _request(self, item: Request) -> None:
        fid, t, method, url = item.fid, item.t, item.method, item.url
        if fid in self.flows:
            return
        index = self.next_index
        self.next_index += 1
        headers = _pairs(item.headers)
        ex = Exchange(index, method=method, url=url, started_at=t, flow_id=fid)
        st = _Flow(fid, ex, raw_url=url, raw_headers=headers)
        red = self.redactor
        if red is not None:
            ex.url = red.redact_url(url)
            if ex.url != url:
                _redacted(ex, "url")
            ex.request_headers = red.redact_headers(headers)
            _redacted_headers(ex, "request", headers, ex.request_headers)
        else:
            ex.request_headers = headers
        self.flows[fid] = st
        self.flow_of[index] = fid
        self.open_indexes.add(index)
        self.ident_queue.append(st)

    def _request_body(self, item: RequestBody) -> None:
        raw, encoding, streamed = item.raw, item.encoding, item.streamed
        st = self.flows.get(item.fid)
        if st is None:
            self.orphans += 1
            return
        body = None
        if raw:
            body, problem = self._decode_whole(raw, encoding)
            if problem:
                st.ex.notes["request_body_encoding"] = problem
        elif streamed:
            st.ex.notes["request_body"] = "streamed by another addon: not recorded"
        st.request_body = body
        self._match(st)
        if body is not None:
            stored = body
            if len(stored) > MAX_BODY_BYTES:
                st.ex.notes["request_body_truncated"] = len(stored)
                stored = stored[:MAX_BODY_BYTES]
            red = self.redactor
            if red is not None:
                before = stored
                stored = red.redact_body(stored, _header(st.raw_headers, "content-type"))
                if stored is not before and stored != before:
                    _redacted(st.ex, "request.body")
            st.ex.request_body = stored
        st.dirty = True

    def _match(self, st: _Flow) -> None:
        st.matched = True
        ex = st.ex
        st.match = self.router.match(ex.method, st.raw_url, st.raw_headers, st.request_body)
        if st.match is not None:
            ex.notes["identity"] = "pending"

    def _assign_ready(self, *, force: bool = False) -> None:
        """Final ids, in request order, for the flows whose ids are all known.

        :class:`IdentityTracker` must see exchanges in request order, each
        once, with the ids from the response and the events already filled
        in; a flow still waiting for those holds back the flows after it
        (their rows say ``notes.identity = "pending"`` meanwhile).  ``force``
        (shutdown) assigns everything with what is known.
        """
        q = self.ident_queue
        while q:
            st = q[0]
            m = st.match
            if not force and not st.ended:
                if not st.matched:
                    return
                if m is not None and not st.resolved:
                    return
                if m is not None and m.pending_events and st.event_tries < EVENT_ID_TRIES:
                    return
            q.popleft()
            st.assigned = True
            if m is None:
                continue
            if not st.resolved:
                st.match = m = self.router.respond(m, st.ex.status, st.response_headers, None)
            st.match = m = self.router.assign(m, st.ex.index)
            ex = st.ex
            ex.notes.pop("identity", None)
            apply_match(ex, m)
            st.dirty = True
            if ex.capability is not None:
                self._touch(ex.session_id, st.frame_count)

    def _response_head(self, item: ResponseHead) -> None:
        t, status, transport = item.t, item.status, item.transport
        st = self.flows.get(item.fid)
        if st is None:
            self.orphans += 1
            return
        if not st.matched:
            self._match(st)
        headers = _pairs(item.headers)
        st.response_headers = headers
        red = self.redactor
        ex = st.ex
        ex.status = status
        if red is not None:
            ex.response_headers = red.redact_headers(headers)
            _redacted_headers(ex, "response", headers, ex.response_headers)
        else:
            ex.response_headers = headers
        ex.transport = transport
        ex.notes["response_at"] = t
        if st.match is not None and not self.router.keeps(st.match, transport, status):
            _drop_match(st)  # a route for event streams only (Route.streams_only)
        if transport in ("sse", "ndjson", "body"):
            st.decoder = make_decoder(_header(headers, "content-encoding"))
            if st.decoder.unsupported_error is not None:
                self._add_frame(st, error_frame(st.decoder.unsupported_error, ex.index, st.next_frame, t, transport=transport))
            if transport == "sse":
                st.parser = SSEParser(max_line=self.config.max_event_bytes)
            elif transport == "ndjson":
                st.parser = NDJSONSplitter(ex.index, max_line=self.config.max_event_bytes)
            else:
                st.copy = bytearray()
        if st.match is None and transport in ("sse", "ndjson"):
            self._hint_unmatched(st)
        if st.match is not None and transport is not None and not st.resolved:
            # A streamed body is not JSON: only response headers can name ids.
            st.match = self.router.respond(st.match, status, headers, None)
            st.resolved = True
        st.dirty = True

    def _hint_unmatched(self, st: _Flow) -> None:
        """The first streamed response that matches no route: say so, and what it
        looks like (the sentence ``check`` says about such a trace).  The
        exchange is kept whatever the profile says; ``check --profile``
        decodes it later."""
        if self.hinted:
            return
        self.hinted = True
        from types import SimpleNamespace

        from .detect import describe_routes, guess_profile, unmatched_hint

        ex = st.ex
        raw = SimpleNamespace(method=ex.method, url=st.raw_url, request_headers=st.raw_headers,
                              request_body=st.request_body, frames=(), transport=ex.transport)
        profile = getattr(self.config.profile, "name", None)
        guess = guess_profile([raw], exclude=profile)
        hint = unmatched_hint(profile, describe_routes([raw], counts=False), guess)
        later = f" --profile {guess.profiles[0]}" if len(guess.profiles) == 1 else " --profile …"
        self._log(logging.WARNING, f"chatkit-trace: {hint} (the exchange is kept, undecoded: "
                  f"`chatkit-trace check {self.config.db}{later}` decodes it later)")

    def _add_frame(self, st: _Flow, frame: Frame) -> None:
        self.frames.append(frame)
        st.next_frame = frame.index + 1
        st.frame_count += 1
        if st.assigned:
            if st.ex.capability is not None:
                self._touch(st.ex.session_id, 1)
        elif st.match is not None and st.match.pending_events and st.event_tries < EVENT_ID_TRIES and frame.direction == "in":
            st.event_tries += 1
            st.match = self.router.event(st.match, frame)

    def _touch(self, session_id: str | None, frames: int = 0) -> None:
        """The session's rows changed (``frames`` more frames): queued for the
        deriver with this batch (``derive_queue``)."""
        self.touched[session_id] = self.touched.get(session_id, 0) + frames

    def _chunk(self, item: Chunk) -> None:
        t, chunk = item.t, item.data
        st = self.flows.get(item.fid)
        if st is None or st.ended:
            self.orphans += 1
            return
        self._maybe_raise()
        st.chunks += 1
        st.encoded += len(chunk)
        if st.lost or st.decoder is None:
            return
        if not st.pending:
            st.pending_since = t
            self.unparsed.add(st)
        st.pending.append((t, chunk))
        st.pending_bytes += len(chunk)

    def _parse_pending(self, *, force: bool = False) -> None:
        """Decode and parse the chunks waiting (see PARSE_LAG)."""
        if not self.unparsed:
            return
        now = time.time()
        for st in list(self.unparsed):
            if force or now - st.pending_since >= PARSE_LAG or st.pending_bytes >= PARSE_BYTES:
                try:
                    self._parse(st)
                except Exception as err:  # noqa: BLE001
                    st.pending = []
                    self.unparsed.discard(st)
                    self._internal_error("parse", err, fid=st.fid)

    def _parse(self, st: _Flow) -> None:
        pending, st.pending, st.pending_bytes = st.pending, [], 0
        self.unparsed.discard(st)
        if st.lost or st.decoder is None:
            return
        decoder = st.decoder
        for t, chunk in pending:
            data = decoder.decode(chunk)
            self._feed(st, data, t)
            if decoder.error is not None and not st.decoder_error_stored:
                st.decoder_error_stored = True
                self._add_frame(st, error_frame(decoder.error, st.ex.index, st.next_frame, t, transport=st.ex.transport or "sse"))

    def _feed(self, st: _Flow, data: bytes, t: float, *, final: bool = False) -> None:
        if data:
            st.decoded += len(data)
        parser = st.parser
        ex = st.ex
        if isinstance(parser, SSEParser):
            events = parser.feed(data) if data else []
            if final:
                events += parser.flush()
            for ev in events:
                self._add_frame(st, _shift(frame_from_sse(ev, ex.index, st.next_frame, t), st.base))
        elif isinstance(parser, NDJSONSplitter):
            frames = parser.feed(data, t) if data else []
            if final:
                frames += parser.flush(t)
            for fr in frames:
                self._add_frame(st, _shift(fr, st.base))
        elif st.copy is not None and data:
            room = MAX_BODY_BYTES - len(st.copy)
            if room > 0:
                st.copy += data[:room]
            st.copy_lost += max(0, len(data) - max(room, 0))

    def _gap(self, item: Gap) -> None:
        """The loop dropped chunks of this flow: what follows is not contiguous."""
        nbytes = item.nbytes
        st = self.flows.get(item.fid)
        if st is None:
            return
        self._parse(st)
        ex = st.ex
        ex.notes["incomplete"] = True
        st.dirty = True
        if st.decoder is None or st.lost:
            return
        if st.decoder.coding != "identity":
            # A compressed stream cannot be decoded past a hole.
            self._feed(st, b"", time.time(), final=True)
            st.lost = True
            ex.notes["lost_after_gap"] = "content-encoded stream: nothing after the first dropped chunk was decoded"
            return
        # Identity: end the current parser (its partial event is truncated) and
        # restart after the hole, keeping offsets in stream coordinates.
        t = time.time()
        self._feed(st, b"", t, final=True)
        st.base = st.decoded + nbytes
        st.decoded = st.base
        if isinstance(st.parser, SSEParser):
            st.parser = SSEParser(max_line=self.config.max_event_bytes)
        elif isinstance(st.parser, NDJSONSplitter):
            st.parser = NDJSONSplitter(ex.index, first_index=st.next_frame, max_line=self.config.max_event_bytes)

    def _ws(self, item: SocketMessage) -> None:
        t, content, is_text, from_client = item.t, item.content, item.is_text, item.from_client
        st = self.flows.get(item.fid)
        if st is None or st.ended:
            self.orphans += 1
            return
        self._maybe_raise()
        if st.ex.transport != "ws":
            st.ex.transport = "ws"
            st.dirty = True
            if st.match is None:
                self._hint_unmatched(st)
        frame = ws_frame(content, is_text, from_client, t, st.ex.index, st.next_frame)
        if self.redactor is not None and from_client and frame.text:
            # Client messages may authenticate (a first "auth" frame); server
            # events are the recording's source of truth and stay as they are.
            [frame] = self._redact_frames(st.ex, [frame], None)
        self._add_frame(st, frame)

    def _end(self, item: End) -> None:
        t, end, error, body, notes, dropped = item.t, item.end, item.error, item.body, item.notes, item.dropped
        st = self.flows.get(item.fid)
        if st is None or st.ended:
            return
        ex = st.ex
        if not st.matched:
            self._match(st)
        ex.ended_at = t
        if notes:
            ex.notes.update(notes)
        if error:
            ex.error = error
        if end == "proxy-error" and ex.status is None:
            # The proxy answered the client itself (e.g. 502 for a dead upstream).
            ex.status = 502
            ex.notes["status_from"] = "proxy"
            end = "error"
        if dropped and dropped[0]:
            ex.notes.update(dropped_chunks=dropped[0], dropped_bytes=dropped[1], incomplete=True)
            self.drops["chunks"] += dropped[0]
            self.drops["bytes"] += dropped[1]
            self.drops["flows"] += 1
        # Finish the stream copy.
        self._parse(st)
        if st.decoder is not None and not st.lost:
            rest = st.decoder.flush()
            self._feed(st, rest, t, final=True)
            if st.decoder.error is not None and not st.decoder_error_stored:
                st.decoder_error_stored = True
                self._add_frame(st, error_frame(st.decoder.error, ex.index, st.next_frame, t, transport=ex.transport or "sse"))
        decoded = None
        if st.copy is not None:
            decoded = bytes(st.copy)
        elif body:
            decoded, problem = self._decode_whole(body, _header(st.response_headers, "content-encoding"))
            if problem:
                ex.notes["response_body_encoding"] = problem
        if st.match is not None and not self.router.keeps(st.match, ex.transport):
            _drop_match(st)
        if st.match is not None and not st.resolved:
            st.match = self.router.respond(st.match, ex.status, st.response_headers, decoded)
            st.resolved = True
        if decoded is not None:
            self._store_body(st, decoded, t, lost=st.copy_lost)
        if ex.transport is not None or end != "complete":
            ex.end = end
        if st.chunks:
            ex.notes["chunks"] = st.chunks
            ex.notes["bytes"] = st.encoded
        st.ended = True
        st.dirty = True
        self.open_indexes.discard(ex.index)
        self.recorded_bytes += _exchange_size(ex)
        if ex.capability is not None:
            self._touch(ex.session_id)

    def _store_body(self, st: _Flow, data: bytes, t: float, *, lost: int = 0) -> None:
        """A whole (decoded) response body: stored redacted; the run's output
        becomes ``body`` frames by the rule ``import`` uses (``output_frames``)."""
        ex = st.ex
        if lost or len(data) > MAX_BODY_BYTES:
            ex.notes["response_body_truncated"] = len(data) + lost
            data = data[:MAX_BODY_BYTES]
        frames = []
        if ex.transport in (None, "body") and st.frame_count == 0:
            frames = self.router.output(st.match, ex.status, data, ex.index, t, first_index=st.next_frame)
        red = self.redactor
        ctype = _header(st.response_headers, "content-type")
        if red is not None:
            before = data
            data = red.redact_body(data, ctype)
            if data is not before and data != before:
                _redacted(ex, "response.body")
            if frames:
                frames = self._redact_frames(ex, frames, ctype)
        ex.response_body = data
        if frames:
            ex.transport = "body"
            for frame in frames:
                self._add_frame(st, frame)
        elif ex.transport == "body":
            ex.transport = None  # a streamed body that is not the run's output: stored whole, as import does

    def _redact_frames(self, ex: Exchange, frames: list[Frame], ctype: str | None) -> list[Frame]:
        """Body frames and client messages, redacted exactly as ``Redactor.redact_exchange`` does on import."""
        red = self.redactor
        probe = Exchange(ex.index, response_headers=[("content-type", ctype)] if ctype else [], frames=frames)
        done = red.redact_exchange(probe)
        for where in done.notes.get("redacted", ()):
            _redacted(ex, where)
        if "scrubbed" in done.notes:
            from ..route.redact import note_scrubbed

            for span in done.notes["scrubbed"]:
                where = span.get("where", "")
                note_scrubbed(ex.notes, where, [{k: v for k, v in span.items() if k != "where"}])
        return list(done.frames)

    @staticmethod
    def _decode_whole(raw: bytes, encoding: str | None) -> tuple[bytes, str | None]:
        if not encoding:
            return raw, None
        d = make_decoder(encoding)
        data = d.decode(raw) + d.flush()
        err = d.error or d.unsupported_error
        if err is not None:
            return (raw if not data else data), err.message
        return data, None

    # ------------------------------------------------------------------ errors

    def _capture_error(self, where: str, message: str, *, fid: str | None = None, exchange_id: int | None = None) -> None:
        """A ``capture_errors`` row, written with the current batch (once per
        place, message and flow)."""
        key = (f"{where}:{message[:200]}", fid)
        if key in self.stored_errors:
            return
        self.stored_errors.add(key)
        if self.redactor is not None:
            message = self.redactor.scrub_text(message)
        try:
            self.store.add_capture_error(where, message, flow_id=fid, exchange_id=exchange_id)
        except Exception:  # noqa: BLE001, S110 - nowhere left to store it (the disk is full: marked apart)
            pass

    def _internal_error(self, where: str, err: BaseException, *, fid: str | None = None) -> None:
        """A failure inside the writer: a trace that cannot be written is a
        gap (:meth:`_store_failed`); anything else is a capture error row
        and, when it concerns one flow, a mark on its exchange (part of it is
        not recorded: CK702).  One log line per place and kind, with where
        in the code it happened, never a traceback."""
        if isinstance(err, (sqlite3.Error, OSError)):
            if self.gap is None or not self.gap.open:
                self._store_failed(err)
            return
        message = f"{type(err).__name__}: {err}{_where(err)}"
        st = self.flows.get(fid) if fid else None
        self._capture_error(f"writer:{where}", message, fid=fid, exchange_id=st.ex.index if st else None)
        if st is not None:
            _add_gap(st.ex, None, "error", errors=1, reason=message)
            st.dirty = True
        key = f"{where}:{type(err).__name__}"
        self.errors_seen[key] += 1
        if self.errors_seen[key] == 1:
            what = f"exchange {st.ex.index} is marked incomplete (CK702)" if st is not None else "the recording goes on"
            self._log(logging.WARNING, f"chatkit-trace: capture error in the writer ({where}): {message}; {what}; the "
                      "traffic is not affected (logged once; every one is kept in the trace's capture_errors)")

    def _log(self, level: int, message: str) -> None:
        """A log line for the proxy's log (masked here: it may quote traffic)."""
        if self.redactor is not None:
            message = self.redactor.scrub_text(message)
        if self.emit is not None:
            self._emit(Log(level, message))
            return
        logger.log(level, message)

    def _emit(self, message: ToProxy) -> None:
        emit = self.emit
        if emit is None:
            return
        try:
            emit(message)
        except Exception:  # noqa: BLE001, S110 - the proxy is gone: nobody to tell
            pass

    # ------------------------------------------------------------------ caps

    def _check_caps(self, *, force: bool = False) -> None:
        cfg = self.config
        if not (cfg.max_age or cfg.max_db_bytes):
            return
        if not force and time.time() - self.last_cap_check < CAP_INTERVAL:
            return
        self.last_cap_check = time.time()
        store = self.store
        dropped_before = self.capped["exchanges"]
        if cfg.max_age:
            rows = [r for r in store.exchange_ages(ended_before=time.time() - cfg.max_age) if r[0] not in self.open_indexes]
            if rows:
                self._prune(rows, "by_age")
        if cfg.max_db_bytes:
            self.over_cap = False
            for _ in range(50):
                if self.recorded_bytes <= cfg.max_db_bytes:
                    break
                rows = [r for r in store.exchange_ages() if r[0] not in self.open_indexes]
                if not rows:
                    self.over_cap = True
                    break
                self._prune(rows[: max(1, len(rows) // 10)], "by_size")
        if self.capped["exchanges"] != dropped_before:
            store.set_meta("dropped", dict(self.capped, queue=self.drops))
            store.commit()
            n = self.capped["exchanges"] - dropped_before
            self._log(logging.INFO, f"chatkit-trace: recording cap reached: dropped the {n} oldest exchange(s) "
                      f"({self.capped['exchanges']} so far, {self.capped['frames']} frames); see meta 'dropped'")

    def _recorded_bytes(self, ids: list[int] | None = None) -> int:
        """The size of recorded exchanges and frames (all, or of exchanges ``ids``), as counted for the cap."""
        frames, frame_bytes, exchanges, exchange_bytes = self.store.recorded_sizes(ids)
        return frames * _FRAME_ROW + frame_bytes + exchanges * _EXCHANGE_ROW + exchange_bytes

    def _prune(self, rows: list[tuple[int, str | None]], why: str) -> None:
        ids = [r[0] for r in rows]
        for i in range(0, len(ids), 500):
            self.recorded_bytes -= self._recorded_bytes(ids[i : i + 500])
        frames = self.store.delete_exchanges(ids)
        self.capped["exchanges"] += len(ids)
        self.capped["frames"] += frames
        self.capped[why] += len(ids)
        for i in ids:
            self.flow_of.pop(i, None)
        for _, sid in rows:
            self._touch(sid)
        self._queue_touched()

    def _queue_touched(self) -> None:
        """Queue the touched sessions for the deriver now (outside a batch)."""
        if self.touched and self.config.derive != "off":
            self.seq += 1
            self.store.queue_derivation(self.touched, self.seq)
            self.store.commit()
        self.touched = {}

    # ------------------------------------------------------------------ shutdown

    def _shutdown(self) -> None:
        """Flows still open become ``end='open'``; the caps once more; close
        (the deriver derives what is queued: the proxy tells it when this
        process is done)."""
        store = self.store
        if store is None:
            return
        try:
            store.begin()
            for st in list(self.flows.values()):
                if st.ended:
                    continue
                if not st.matched:
                    self._match(st)
                ex = st.ex
                self._parse(st)
                if st.decoder is not None and not st.lost:
                    self._feed(st, st.decoder.flush(), time.time(), final=True)
                if st.copy is not None:
                    self._store_body(st, bytes(st.copy), time.time(), lost=st.copy_lost)
                ex.end = "open"
                st.ended = True
                st.dirty = True
                if st.assigned and ex.capability is not None:
                    self._touch(ex.session_id)
            self._assign_ready(force=True)
            self._commit()
        except Exception as err:  # noqa: BLE001
            self._internal_error("shutdown", err)
        try:
            stats = {"queue_dropped": self.drops, "orphan_messages": self.orphans, "capped": self.capped}
            store.set_meta("capture_stats", stats)
            if self.drops["chunks"] or self.capped["exchanges"] or self.capped["frames_over_cap"]:
                store.set_meta("dropped", dict(self.capped, queue=self.drops))
            store.commit()
        except Exception as err:  # noqa: BLE001
            self._internal_error("shutdown", err)
        try:
            # Flows finalised at shutdown count towards the caps too: check once more.
            self.open_indexes.clear()
            self._check_caps(force=True)
            self._queue_touched()
        except Exception as err:  # noqa: BLE001
            self._internal_error("caps", err)
        if self.drops["chunks"]:
            self._log(logging.WARNING, f"chatkit-trace: the writer process fell behind: {self.drops['chunks']} chunk(s), "
                      f"{self.drops['bytes']} bytes of {self.drops['flows']} flow(s) were not recorded "
                      "(the traffic itself was not affected; the trace marks them: CK702); raise chatkit_queue to keep more")
        self._last_word_on_the_gap()
        store.settle()  # one file after a clean stop: no -wal/-shm next to the trace
        try:
            store.close()
        except sqlite3.Error:
            pass  # a full disk: what could be committed is
        finally:
            if self.lock is not None:
                self.lock.release()  # after the connection: see target.TraceLock
            self._free_reserve()

    def _last_word_on_the_gap(self) -> None:
        """At the stop, a gap still open: when the last commit went through,
        nothing was lost since the last failure and the gap closes; else the
        trace is marked once more (the reserve is free by now) as incomplete
        from the gap's start on.  Said in one line, as the file says it."""
        gap = self.gap
        if gap is None or not gap.open:
            return
        self._free_reserve()
        if not gap.failing:
            gap.until = time.time()
        gap.sync()
        marked = self._write_marks()
        lost = f"{gap.frames} frame(s) of {len(gap.exchanges)} exchange(s) were not stored"
        since = time.strftime("%H:%M:%S", time.localtime(gap.at))
        if marked and not gap.failing:
            self._log(logging.WARNING, f"chatkit-trace: {lost} ({gap.reason}; the trace marks them: `chatkit-trace check` "
                      "reports CK702)")
        elif marked or gap.marked:
            counts = "" if marked else " (its counts are those of the last mark that fitted)"
            self._log(logging.WARNING, f"chatkit-trace: {self.config.db} could still not be written at the stop "
                      f"({gap.reason}): {lost}, and the trace says it is incomplete from {since} on{counts} "
                      "(`chatkit-trace check` reports CK702)")
        else:
            self._log(logging.ERROR, f"chatkit-trace: {self.config.db} could not be written at all since {since} "
                      f"({gap.reason}): {lost}, and not even that mark fits: the trace does not say it is incomplete. "
                      "Free some space and record again")


class _StoreGap:
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


def _add_gap(ex: Exchange, at: float | None, kind: str, **counts: Any) -> None:
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


def _drop_match(st: _Flow) -> None:
    """The response is not an event stream and the route takes only those:
    the exchange stays a plain one (stored, not a run)."""
    st.match = None
    if st.ex.notes.get("identity") == "pending":
        del st.ex.notes["identity"]


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
    emit(Ready(os.getpid(), writer.next_index, writer.backlog))

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
    stats = {"queue_dropped": writer.drops, "orphans": writer.orphans, "errors": sum(writer.errors_seen.values())}
    try:
        emit(Stopped(stats))
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
