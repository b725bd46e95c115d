"""The snapshot at any row, computed incrementally (checkpoints, never from frame 0 every time).

Theory of operation
-------------------
A run's snapshot at a row depends on everything its *session* did before
that row, so one :class:`SessionReplayer` replays one session's exchanges
through the same machinery ``check`` uses (:class:`chatkit_trace.pipeline.Replayer`:
``start`` / ``frame`` / ``end`` per event, in the pipeline's order
``(t, exchange, kind, frame)``), streaming frames from SQLite a cursor at a
time instead of loading the trace.

* The *frontier* replays forward once, in the background, and every
  ``every`` events keeps a **checkpoint**: the Core snapshot (immutable and
  structurally shared, so it costs little) plus the replayer's whole state
  pickled (Core, decoder state, run records), so replay can restart there.
  Checkpoints are thinned (every other one dropped, ``every`` doubled) when
  there are more than ``max_checkpoints`` or they use more than
  ``max_bytes``: memory stays bounded whatever the session's length.
* A request for row key ``K`` is served from the LRU cache, else from the
  closest of: the frontier, the last *scratch* replayer, or the nearest
  checkpoint before ``K`` (unpickled), advancing to ``K``; every moment on
  the way is cached, so stepping back and forth is free.

Pickling shares what must not be copied (the adapter, its protocol,
functions) through persistent ids.
"""

from __future__ import annotations

import gc
import heapq
import io
import pickle
import threading
import time
import types
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

from chatkit_trace.adapters import Adapter
from chatkit_trace.core import Snapshot
from chatkit_trace.core._gc import paused_gc
from chatkit_trace.pipeline import DEFAULT_SESSION, FrameRecord, HistoryRecord, Replayer
from chatkit_trace.trace import Exchange
from chatkit_trace.wire import Frame

from ._portable import PortablePickler, PortableUnpickler
from .ahead import Ahead
from .data import TraceData
from .model import END, LRU, START, Key

__all__ = ["Moment", "SessionReplayer", "session_exchanges"]

#: moments the worker keeps computed behind the cursor after a jump (events):
#: stepping back from a restored state is a cache hit, not a restore
BEHIND = 256


@dataclass
class Moment:
    """What the UI would have shown right after one event of the session."""

    key: Key
    position: int  # events of the session processed so far
    snapshot: Snapshot
    frame: FrameRecord | None = None
    dispatch: str | None = None
    projected: int = 0
    history: HistoryRecord | None = None
    reader_stop: tuple[str, int] | None = None


class _LazyFrames:
    """``Exchange.frames`` for the replayer: read from SQLite only if iterated
    (the pipeline looks for a run id in the events when the profile has none)."""

    def __init__(self, data: TraceData, index: int) -> None:
        self.data = data
        self.index = index

    def __iter__(self) -> Iterator[Frame]:
        start = 0
        while True:
            frames = self.data.reader.frames(self.index, start=start, limit=256)
            if not frames:
                return
            yield from frames
            start = frames[-1].index + 1

    def __len__(self) -> int:
        return self.data.frame_count(self.index)


def session_exchanges(data: TraceData, session_id: str) -> list[Exchange]:
    """The classified exchanges of a session (``default``: also those without
    a session id), their frames read from SQLite only when iterated."""
    out = data.reader.session_exchanges(session_id, DEFAULT_SESSION)
    for ex in out:
        ex.frames = _LazyFrames(data, ex.index)  # type: ignore[assignment]
    return out


class _Shared:
    """What one replayer's checkpoints refer to instead of copying (the
    adapter, the trace's data, functions, lazy frame lists), by id.  Owned by
    the replayer, so it is freed with it; :func:`_shared` finds it through a
    weak registry."""

    def __init__(self) -> None:
        self.objects: dict[int, Any] = {}
        _TABLES[id(self)] = self


_TABLES: weakref.WeakValueDictionary[int, _Shared] = weakref.WeakValueDictionary()


def _shared(table: int, key: int) -> Any:
    return _TABLES[table].objects[key]


class _Pickler(pickle.Pickler):
    """Pickles a replayer's state; what must stay shared is pickled as a
    reference into the replayer's :class:`_Shared` table.

    ``reducer_override`` is only consulted for non-builtin objects (strings,
    dicts, lists … never reach it), so this costs little per checkpoint.
    """

    def __init__(self, file: io.BytesIO, keep: tuple[Any, ...], table: _Shared) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.keep_ids = {id(k) for k in keep}
        self.table = table

    def reducer_override(self, obj: Any) -> Any:
        if obj is _shared:
            return NotImplemented
        if id(obj) in self.keep_ids or isinstance(
            obj, (types.FunctionType, types.MethodType, types.BuiltinFunctionType, _LazyFrames)
        ):
            self.table.objects[id(obj)] = obj
            return _shared, (id(self.table), id(obj))
        return NotImplemented


class _Cursor:
    """A replayer positioned after some event of the session."""

    def __init__(
        self, owner: SessionReplayer, rp: Replayer, key: Key | None, position: int
    ) -> None:
        self.owner = owner
        self.rp = rp
        self.key = key
        self.position = position
        self._events: Iterator[tuple[Key, Exchange, Frame | None]] | None = None
        self._peek: tuple[Key, Exchange, Frame | None] | None = None
        self.exhausted = False

    def events(self) -> Iterator[tuple[Key, Exchange, Frame | None]]:
        if self._events is None:
            self._events = self.owner._events(self.key, self.rp)
        return self._events

    def peek(self) -> tuple[Key, Exchange, Frame | None] | None:
        if self._peek is None and not self.exhausted:
            try:
                self._peek = next(self.events())
            except StopIteration:
                self.exhausted = True
        return self._peek

    def step(self, *, moment: bool = True) -> Moment | None:
        """Process the next event; its moment (None with ``moment=False``:
        fast-forward, when nobody will look at this event's snapshot)."""
        ev = self.peek()
        if ev is None:
            return None
        self._peek = None
        key, ex, frame = ev
        rp = self.rp
        kind = key[2]
        rec_frame: FrameRecord | None = None
        if kind == 0:
            rp.start(ex)
        elif kind == 1:
            assert frame is not None
            rp.frame(ex, frame)
            current = rp.out.exchanges[ex.index]
            rec_frame = current.frames[-1] if current.frames else None
            current.frames.clear()  # keep the state small: the moment holds it
        else:
            rp.end(ex)
        rp.out.frames.clear()
        rp.out.facts.clear()
        self.key = key
        self.position += 1
        if not moment:
            return None
        exrec = rp.out.exchanges.get(ex.index)
        sid = (exrec.session_id if exrec is not None else None) or self.owner.session_key
        s = rp.out.sessions.get(sid) or rp.session(self.owner.session_key)
        return Moment(
            key,
            self.position,
            s.core.snapshot,
            rec_frame,
            exrec.dispatch if exrec else None,
            exrec.projected if exrec else 0,
            exrec.history if exrec else None,
            exrec.reader_stop if exrec else None,
        )


class SessionReplayer:
    """Incremental replay of one session with checkpoints (see the module docstring)."""

    def __init__(
        self,
        data: TraceData,
        session_id: str,
        adapter: Adapter,
        capabilities: frozenset[str] | None,
        *,
        every: int = 256,
        max_checkpoints: int = 48,
        max_bytes: int = 96 * 1024 * 1024,
        cache_size: int = 512,
        max_cache_bytes: int = 32 * 1024 * 1024,
    ) -> None:
        self.data = data
        self.session_key = session_id
        self.adapter = adapter
        self.capabilities = capabilities
        self.every = every
        self.max_checkpoints = max_checkpoints
        self.max_bytes = max_bytes
        self.cache: LRU[Key, Moment] = LRU(cache_size, max_cache_bytes)
        self._lock = threading.Lock()  # the cache is read by the UI thread
        #: held while a thread replays (the worker, or the UI thread's short cut)
        self._busy = threading.Lock()
        self._exchanges: list[Exchange] | None = None
        self._since = time.perf_counter()
        self._replay_time = 0.0
        self.checkpoints: list[tuple[Key | None, int, bytes]] = []
        #: what the checkpoints refer to instead of copying (:class:`_Shared`)
        self._shared = _Shared()
        self.frontier = _Cursor(self, self._fresh(), None, 0)
        self.scratch: _Cursor | None = None
        self.horizon: Key | None = (
            None  # the frontier stops here (the run's last row), None: the session's end
        )
        self._cv = threading.Condition()
        self._request: tuple[Any, Key] | None = None
        #: a long replay gives up when a newer request arrives (the worker loop sets this)
        self.interruptible = False
        #: when the UI last asked for something (the background frontier waits for a quiet moment)
        self.last_request = 0.0
        self.replays = 0  # how many events were processed (for tests and the bench)
        self.restores = 0
        #: states a child process replayed ahead (:mod:`.ahead`), in replay order
        self.remote: list[tuple[Key | None, int, bytes]] = []
        self._remote_bytes = 0
        self.ahead: Ahead | None = None
        #: the earliest moment a restore's replay kept, ``(key, position)``: the
        #: events before it were not replayed since (:meth:`fill_behind`)
        self.edge: tuple[Key, int] | None = None
        #: the position of the moment served last (where the user is)
        self.at = 0
        self._first_kept: Moment | None = None
        self._checkpoint(self.frontier)

    # -- state ----------------------------------------------------------------------

    def _fresh(self) -> Replayer:
        # a socket several sessions share gives this session its own frames only
        return Replayer(self.adapter, self.capabilities, only={self.session_key})

    def exchanges(self) -> list[Exchange]:
        if self._exchanges is None:
            self._exchanges = session_exchanges(self.data, self.session_key)
        return self._exchanges

    def _dump(self, rp: Replayer) -> bytes:
        buf = io.BytesIO()
        _Pickler(buf, (self.adapter, self.adapter.protocol, self.data), self._shared).dump(rp)
        return buf.getvalue()

    def _load(self, blob: bytes) -> Replayer:
        return cast(Replayer, pickle.loads(blob))

    # -- replaying ahead in a child process (see .ahead) ----------------------------------

    def _named(self) -> dict[str, Any]:
        return {"adapter": self.adapter, "protocol": self.adapter.protocol, "data": self.data}

    def portable_dump(self, rp: Replayer) -> bytes:
        buf = io.BytesIO()
        PortablePickler(buf, self._named(), _LazyFrames).dump(rp)
        return buf.getvalue()

    def portable_load(self, blob: bytes) -> Replayer:
        rp: Replayer = PortableUnpickler(io.BytesIO(blob), self._named(), lambda e: _LazyFrames(self.data, e)).load()
        return rp

    def add_remote(self, key: Key | None, position: int, blob: bytes) -> None:
        """A state the child replayed to; every other one is dropped past ``max_bytes``."""
        with self._lock:
            self.remote.append((key, position, blob))
            self._remote_bytes += len(blob)
            if self._remote_bytes > self.max_bytes and len(self.remote) > 2:
                self.remote = self.remote[1::2]
                self._remote_bytes = sum(len(b) for _, _, b in self.remote)

    def start_ahead(self, path: str, profile: str | None, every: int = 4096) -> None:
        """Replay this session ahead in a child process (long sessions: see :mod:`.ahead`)."""
        expect = (type(self.adapter).__qualname__, self.capabilities)
        self.ahead = Ahead(path, profile, self.session_key, self.horizon, every, expect, self.add_remote)

    def stop_ahead(self) -> None:
        if self.ahead is not None:
            self.ahead.stop()

    def _nearest_remote(self, key: Key, below: int | None = None) -> tuple[Key | None, int, bytes] | None:
        with self._lock:
            remote = self.remote
            lo, hi = 0, len(remote)
            while lo < hi:  # the last state strictly before ``key``
                mid = (lo + hi) // 2
                k = remote[mid][0]
                if k is None or k < key:
                    lo = mid + 1
                else:
                    hi = mid
            while below is not None and lo and remote[lo - 1][1] >= below:
                lo -= 1  # (and before the position ``below``)
            return remote[lo - 1] if lo else None

    def _checkpoint(self, cur: _Cursor) -> None:
        """Keep the frontier's state; thin out when there are too many or they
        cost too much (time: a checkpoint may cost a tenth of the replay since
        the last one; memory: ``max_bytes`` in all)."""
        t0 = time.perf_counter()
        self.checkpoints.append((cur.key, cur.position, self._dump(cur.rp)))
        now = time.perf_counter()
        spent, self._since = now - t0, now
        size = sum(len(b) for _, _, b in self.checkpoints)
        if len(self.checkpoints) > self.max_checkpoints or (
            size > self.max_bytes and len(self.checkpoints) > 2
        ):
            self.checkpoints = self.checkpoints[:1] + self.checkpoints[2::2]
            self.every *= 2
        elif spent > 0.1 * self._replay_time and self.every < 1 << 16:
            self.every *= 2
        self._replay_time = 0.0

    def _events_between(self, a: Key, b: Key) -> float:
        """How many events lie from ``a`` to ``b``, when the frame indexes of
        one exchange tell (a frame and a later frame, or the exchange's end);
        0 when they do not (every moment on the way is then kept)."""
        if a[1] != b[1] or a[2] != 1:
            return 0
        if b[2] == 1:
            return b[3] - a[3]
        if b[2] == 2:
            count = self._frame_counts.get(a[1])
            if count is None:
                count = self._frame_counts[a[1]] = self.data.frame_count(a[1])
            return count - a[3]
        return 0

    # -- events ---------------------------------------------------------------------

    def _events(
        self, after: Key | None, rp: Replayer
    ) -> Iterator[tuple[Key, Exchange, Frame | None]]:
        """The session's events in replay order, strictly after ``after``."""
        exchanges = self.exchanges()
        # the replayer's own Exchange objects (run ids found in events are written on them)
        mine = {i: rec.exchange for i, rec in rp.out.exchanges.items()}
        streams = []
        for ex0 in exchanges:
            ex = mine.get(ex0.index, ex0)
            streams.append(self._exchange_events(ex, after))
        if len(streams) == 1:
            return streams[0]  # one exchange: nothing to merge
        return heapq.merge(*streams, key=lambda e: e[0])

    def _exchange_events(
        self, ex: Exchange, after: Key | None
    ) -> Iterator[tuple[Key, Exchange, Frame | None]]:
        e, s = ex.index, ex.started_at
        start_key: Key = (s, e, 0, START)
        if after is None or start_key > after:
            yield start_key, ex, None
        # this exchange's frames strictly after ``after``, as (t, idx) in replay order
        frames_after: tuple[float, int] | None = None
        if after is not None:
            tk, ek, kk, ik = after
            if (e, 1) > (ek, kk):
                frames_after = (tk, -1)  # t >= tk
            elif e == ek and kk == 1:
                frames_after = (tk, ik)
            else:
                frames_after = (tk, END)  # t > tk
        reader = self.data.reader
        at = reader.last_frame_at(e)
        last = max(s, at) if at else s
        for t, frame in reader.frames_by_time(e, s, after=frames_after):
            yield (t, e, 1, frame.index), ex, frame
        end_key: Key = (max(ex.ended_at or last, last), e, 2, END)
        if after is None or end_key > after:
            yield end_key, ex, None

    # -- serving ----------------------------------------------------------------------

    def cached(self, key: Key) -> Moment | None:
        with self._lock:
            return self.cache.get(key)

    def _keep(self, m: Moment) -> None:
        size = _weight(m)
        with self._lock:
            self.cache.put(m.key, m, size)

    def moment(self, key: Key) -> Moment | None:
        """The moment right after the event ``key`` (blocking: call from a worker)."""
        hit = self.cached(key)
        if hit is None:
            with self._busy:
                hit = self._moment(key, None, self.interruptible)
        if hit is not None:
            self.at = hit.position
        return hit

    def try_moment(self, key: Key, budget: int) -> Moment | None:
        """The moment at ``key`` if it is at most ``budget`` events from a cursor and
        no worker is replaying: the UI thread's short cut (a page down replays a
        page's rows in a millisecond or two; a request to the worker costs a
        second screen update).  None otherwise: the events replayed on the way
        stay replayed (and their moments cached), the worker does the rest."""
        self.last_request = time.monotonic()  # the user is busy: the frontier waits
        hit = self.cached(key)
        if hit is None:
            if not self._busy.acquire(blocking=False):
                return None
            try:
                hit = self._moment(key, budget, False)
            finally:
                self._busy.release()
        if hit is not None:
            self.at = hit.position
            if self.wants_fill():
                self.wake()  # the worker fills in behind the jump
        return hit

    def _moment(self, key: Key, budget: int | None, interruptible: bool) -> Moment | None:
        hit = self.cached(key)
        if hit is not None:
            return hit
        best: _Cursor | None = None
        for cur in (self.frontier, self.scratch):
            if (
                cur is not None
                and (cur.key is None or cur.key < key)
                and (best is None or _after(cur.key, best.key))
            ):
                best = cur
        restored = self._restore(key, best)
        if restored is not None:
            self.scratch = best = restored
        assert best is not None
        m = self._advance(best, key, budget, interruptible)
        if restored is not None and self._first_kept is not None:
            self.edge = (self._first_kept.key, self._first_kept.position)
        return m

    def _restore(self, key: Key, best: _Cursor | None, below: int | None = None) -> _Cursor | None:
        """A cursor at the latest state strictly before ``key`` (and before the
        position ``below``: a checkpoint or a child's state) if it is later than
        ``best``; None if ``best`` is."""
        ck = None
        for k, pos, blob in reversed(self.checkpoints):
            if (k is None or k < key) and (below is None or pos < below):
                ck = (k, pos, blob)
                break
        far = self._nearest_remote(key, below) if self.remote else None
        if far is not None and (ck is None or _after(far[0], ck[0])) and (best is None or _after(far[0], best.key)):
            self.restores += 1
            return _Cursor(self, self.portable_load(far[2]), far[0], far[1])
        if ck is not None and (best is None or _after(ck[0], best.key)):
            self.restores += 1
            return _Cursor(self, self._load(ck[2]), ck[0], ck[1])
        return None

    # -- filling in behind a jump -------------------------------------------------------

    def wants_fill(self) -> bool:
        """Is the user within half :data:`BEHIND` events of the edge of what a
        restore replayed?  (A fill then keeps ``BEHIND`` events behind him: a
        user stepping back costs a fill every ``BEHIND / 2`` steps.)"""
        edge = self.edge
        return edge is not None and edge[1] > 1 and 0 <= self.at - edge[1] < BEHIND // 2

    def fill_behind(self) -> bool:
        """Replay the events just before :attr:`edge` from the state before them,
        keeping their moments, so stepping back from a jump finds them cached
        (the worker calls this when it has no request; a request interrupts it).
        True if it replayed something."""
        with self._busy:
            edge = self.edge
            if edge is None or not self.wants_fill():
                return False
            key = edge[0]
            # the moments the user may step back to: BEHIND events behind where he is,
            # replayed from a state before the first of them
            keep_from = max(1, self.at - BEHIND)
            front = self.frontier
            cur = front if front.key is not None and front.key < key and front.position < keep_from else None
            cur = self._restore(key, cur, below=keep_from) or cur
            if cur is None:  # nothing earlier to start from: the session's start
                cur = _Cursor(self, self._fresh(), None, 0)
            self._advance(cur, key, None, self.interruptible, keep_from=keep_from)
            first, nxt = self._first_kept, cur.peek()
            if nxt is not None and nxt[0] < key:
                return True  # interrupted (a request came): the edge stays, the fill goes on later
            # the moments just kept are young: age them now, before the user's next
            # step would (a young collection walking them: 5-8 ms of the first step)
            gc.collect(1)
            self.edge = None if first is None or nxt is None else (first.key, first.position)
            return True

    def _advance(
        self,
        cur: _Cursor,
        key: Key,
        budget: int | None = None,
        interruptible: bool = False,
        *,
        keep_from: int | None = None,
    ) -> Moment | None:
        # long-function: the replay loop: fast-forward far events, keep near moments, checkpoints, give up when superseded or over budget
        """Replay ``cur`` up to the event ``key``; the moments of the last
        events before it (up to the cache's size) are kept, the earlier ones
        are fast-forwarded (no snapshot, no moment: a jump to the end of a long
        run costs the replay alone).  With ``keep_from`` (:meth:`fill_behind`),
        the event ``key`` itself is left for later, the moments kept are those
        from that position on, and every event up to ``key`` is replayed (no
        switch to a child's state ahead).  The cyclic GC waits meanwhile (the pipeline's
        reason: :mod:`chatkit_trace.core._gc`)."""
        last: Moment | None = None
        self._first_kept = None
        t = time.perf_counter()
        n = 0
        near = self.cache.maxsize
        self._frame_counts: dict[int, int] = {}  # (a live recording grows: counted once per call)
        with paused_gc():
            while True:
                nxt = cur.peek()
                if nxt is None or nxt[0] > key or (keep_from is not None and nxt[0] == key):
                    break
                if keep_from is None:
                    far = self._events_between(nxt[0], key) > near
                else:
                    far = cur.position + 1 < keep_from
                m = cur.step(moment=not far)
                if m is None and not far:
                    break
                self.replays += 1
                if m is not None:
                    self._keep(m)
                    if last is None:
                        self._first_kept = m
                    last = m
                n += 1
                # (the UI thread gets the GIL every switch interval anyway)
                if n % 256 == 0 and self._request is not None and interruptible:
                    return None  # superseded: the cursor moved on (what was replayed stays in the cursors)
                if n % 256 == 0 and self.remote and keep_from is None:
                    # (never in a fill: the state ahead is the one it fills in behind)
                    ahead = self._nearest_remote(key)
                    if ahead is not None and ahead[1] > cur.position + 1024:
                        # the child process got further meanwhile: go on from its state
                        if cur is self.frontier:
                            self._replay_time += time.perf_counter() - t
                        self.restores += 1
                        self.scratch = cur = _Cursor(self, self.portable_load(ahead[2]), ahead[0], ahead[1])
                if cur is self.frontier and cur.position % self.every == 0:
                    self._replay_time += time.perf_counter() - t
                    self._checkpoint(cur)
                    t = time.perf_counter()
                if budget is not None and n >= budget:
                    nxt = cur.peek()
                    if nxt is not None and nxt[0] <= key:
                        last = None  # over budget before ``key``: the worker goes on from here
                        break
        if cur is self.frontier:
            self._replay_time += time.perf_counter() - t
        return last

    def extend(self, n: int = 256) -> bool:
        """Advance the frontier by up to ``n`` events; False when it has nothing left to do."""
        with self._busy:
            return self._extend(n)

    def _extend(self, n: int) -> bool:
        cur = self.frontier
        t = time.perf_counter()
        for _ in range(n):
            nxt = cur.peek()
            if nxt is None or (self.horizon is not None and nxt[0] > self.horizon):
                self._replay_time += time.perf_counter() - t
                return False
            m = cur.step()
            if m is None:
                return False
            self.replays += 1
            self._keep(m)
            if cur.position % self.every == 0:
                self._replay_time += time.perf_counter() - t
                self._checkpoint(cur)
                t = time.perf_counter()
        self._replay_time += time.perf_counter() - t
        return True

    @property
    def done(self) -> bool:
        nxt = self.frontier.peek()
        return nxt is None or (self.horizon is not None and nxt[0] > self.horizon)

    # -- a request queue for one worker thread ----------------------------------------------

    def request(self, tag: Any, key: Key) -> None:
        """Ask the worker for ``key`` (a newer request replaces an older one)."""
        with self._cv:
            self._request = (tag, key)
            self.last_request = time.monotonic()
            self._cv.notify()

    def take(self, timeout: float) -> tuple[Any, Key] | None:
        with self._cv:
            if self._request is None:
                self._cv.wait(timeout)
            req, self._request = self._request, None
            return req

    def wake(self) -> None:
        with self._cv:
            self._cv.notify()


def _weight(m: Moment) -> int:
    """Roughly what a moment keeps alive that no other moment shares: the text of
    whole-text parts its facts carry (an adapter that re-sends the whole message
    per event makes each moment hold its own copy; delta-built text is shared)."""
    size = 256
    if m.frame is None:
        return size
    for rec in m.frame.facts:
        message = getattr(rec.fact, "message", None)
        for part in getattr(message, "parts", ()):
            if getattr(part, "chunk_count", 0) == 1:
                text = part.text
                size += len(text) if isinstance(text, str) else 0
    return size


def _after(a: Key | None, b: Key | None) -> bool:
    """Is position ``a`` strictly later than ``b`` (None is the start)?"""
    if a is None:
        return False
    if b is None:
        return True
    return a > b
