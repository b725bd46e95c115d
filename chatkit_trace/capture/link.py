"""The proxy's end of the recorder: hand everything to two other processes.

:class:`Link` starts the writer process and the deriver process
(:mod:`chatkit_trace.capture._pipe`) and is all the addon
(:mod:`chatkit_trace.capture.recorder`) talks to.  On mitmproxy's event
loop it only appends a typed message (:mod:`._messages`) to a list; every
``FLUSH_EVERY`` seconds one timer encodes the list and writes it into the
writer's pipe without blocking (what the pipe does not take now waits for
``add_writer``).  The
replies (log lines, mitmweb marks, sync answers) are read with
``add_reader``.  So the proxy's interpreter copies, timestamps and hands
off, and nothing else: parsing, decoding, redaction, SQLite and derivation
run in processes of their own, on the other core.

The bound: ``produced`` counts messages handed to :meth:`Link.put`,
``consumed`` those written into the pipe; the recorder drops its *copy* of
a chunk (never the chunk) while ``produced - consumed`` is at
``chatkit_queue``.  The writer reads its pipe as fast as the pipe fills
(up to its own memory bound), so that only happens when the writer process
is stuck or gone.

Stopping (:meth:`Link.stop`, mitmproxy's ``done``): the writer finishes
what it received and exits (bounded by ``WRITER_STOP``); then the deriver
derives what is still queued, bounded by ``chatkit_derive_wait`` and said in
the log; past the bound it stops after its current session and the rest
stays queued for the next recording into the file (or ``redecode``).  A
deriver that dies never stops the recording; a writer that dies stops it
(said once), never the traffic.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ._lines import install
from ._messages import (
    Configure,
    DeriverStopped,
    Done,
    Final,
    Hello,
    Learn,
    Learned,
    Log,
    Mark,
    OpenError,
    Ready,
    Stop,
    Stopped,
    Sync,
    Synced,
    ToProxy,
    ToWriter,
    Undecodable,
)
from ._pipe import Unpacker, pack, proxy_unpacker, read_some, spawn, write_all

#: the module the writer and deriver processes run (``python -P -m CHILD ROLE``)
CHILD = "chatkit_trace.capture._child"

__all__ = ["FLUSH_EVERY", "Link", "LinkError", "current_tuning"]

logger = install(logging.getLogger("chatkit_trace.capture"))  # lines masked, control characters shown

#: Seconds between two hand-offs on the loop while messages are waiting.
FLUSH_EVERY = 0.01
#: The writer must have opened the trace within this many seconds.
WRITER_START = 30.0
#: A clean stop waits this long for the writer to store what it received.
WRITER_STOP = 60.0
#: After SIGTERM, the deriver gets this long to finish its session.
DERIVER_TERM = 10.0
#: A stop that waits for the deriver longer than this says so.
WAIT_NOTICE = 1.0
#: ``os.nice`` increments: the proxy first, raw frames second, facts last.
WRITER_NICE = 10
DERIVER_NICE = 19


class LinkError(RuntimeError):
    """The writer process could not start or open the trace (the message says why)."""


def current_tuning() -> dict[str, Any]:
    """The writer's and the deriver's module constants as this process has
    them (sent with the options, so a test that changes one here changes it
    there)."""
    from . import deriver, writer

    tuning: dict[str, Any] = {name: getattr(writer, name) for name in writer.TUNABLE}
    tuning.update({name: getattr(deriver, name) for name in deriver.TUNABLE})
    tuning.update(WRITER_NICE=WRITER_NICE, DERIVER_NICE=DERIVER_NICE)
    return tuning


def _how(proc: subprocess.Popen[bytes] | None) -> str:
    code = None if proc is None else proc.poll()
    if code is None:
        return "exited"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class Link:
    """The recorder's two processes, seen from the proxy (module docstring).

    :param config: the options (:class:`~chatkit_trace.capture.writer.WriterConfig`).
    :param on_mark: ``on_mark(flow_ids, marker, comment)``: mark a finished
        run's flows (mitmweb), called on the loop.
    """

    def __init__(self, config: Any, *, on_mark: Callable[[Sequence[str], str, str], None] | None = None) -> None:
        self.config = config
        self.limit = max(1, config.queue_limit)
        self.produced = 0  # messages handed to put (the loop)
        self.consumed = 0  # messages written into the writer's pipe
        self.on_mark = on_mark
        self.buf: list[ToWriter] = []
        self.out = bytearray()
        self.batches: deque[list[int]] = deque()  # [bytes of self.out left, messages] per packed batch
        self.loop: asyncio.AbstractEventLoop | None = None
        self.handle: asyncio.TimerHandle | None = None
        self.writing = False  # add_writer is waiting for the pipe
        self.dead = False  # the writer is gone: nothing is handed off any more
        self.stopping = False
        self.writer: subprocess.Popen[bytes] | None = None
        self.deriver: subprocess.Popen[bytes] | None = None
        self._unpack: dict[str, Unpacker[ToProxy]] = {"writer": proxy_unpacker(), "deriver": proxy_unpacker()}
        #: what the writer and the deriver say, by type (one dispatch: :meth:`_handle`)
        self._handlers: dict[type[Any], Callable[[Any], None]] = {
            Log: self._on_log,
            Mark: self._on_mark,
            Synced: self._on_synced,
            Ready: self._on_ready,
            OpenError: self._on_open_error,
            Stopped: self._on_stopped,
            Done: self._on_done,
            Learned: self._on_learned,
            Undecodable: self._on_undecodable,
        }
        self._ended: set[str] = set()
        self._synced: set[int] = set()
        self._tokens = 0
        self.ready: Ready | None = None  # the writer opened the trace
        self.open_error: str | None = None  # ... or could not
        self.derivation: dict[str, Any] | None = None  # the deriver's last word ("done")
        self.writer_stats: dict[str, Any] | None = None
        self.requests = 0  # exchanges handed off (put_request)
        self.first_index = 0  # the index of this recording's first exchange
        #: the writer died while recording: its gap (meta ``gaps``), the thread that marks it, the lock taken over
        self.gone: dict[str, Any] | None = None
        self._marking: Any = None
        self._lock: Any = None

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        """Start both processes; return when the writer has opened the trace
        (raises :class:`LinkError` otherwise)."""
        config = self.config
        try:
            self.writer = spawn("writer", CHILD)
            if config.derive != "off":
                self.deriver = spawn("deriver", CHILD)
        except OSError as err:
            self._kill_all()
            raise LinkError(f"cannot start the recorder's processes ({sys.executable}): {err}") from None
        meta = dict(config.recorder_meta, writer_pid=self.writer.pid)
        if self.deriver is not None:
            meta["deriver_pid"] = self.deriver.pid
        self.config = config = replace(config, recorder_meta=meta)
        first = pack([Hello(list(sys.path)), Configure.of(config)])
        wfd = self._fd("writer", "in")
        if not write_all(wfd, first, WRITER_START):
            self._kill_all()
            raise LinkError(f"timed out starting the writer for {config.db}")
        deadline = time.monotonic() + WRITER_START
        while self.ready is None and self.open_error is None:
            left = deadline - time.monotonic()
            if left <= 0 or not self._read("writer", left):
                self._kill_all()
                if left <= 0:
                    raise LinkError(f"timed out opening {config.db}")
                raise LinkError(f"the writer process {_how(self.writer)} before opening {config.db}")
        if self.open_error is not None or self.ready is None:
            self._kill_all()
            raise LinkError(self.open_error or f"the writer process {_how(self.writer)} before opening {config.db}")
        os.set_blocking(wfd, False)
        if self.deriver is not None:
            dfd = self._fd("deriver", "in")
            if not write_all(dfd, first, 10.0):
                self._deriver_gone("did not take its options")
            else:
                os.set_blocking(dfd, False)
        self.first_index = self.ready.next_index
        sessions, frames = self.ready.backlog
        if sessions and self.deriver is not None:
            logger.info(f"chatkit-trace: {frames} frame(s) of {sessions} session(s) were left underived by an earlier "
                        "recording into this file: deriving them now")
        try:
            self.attach(asyncio.get_running_loop())
        except RuntimeError:
            pass

    def attach(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Hand off and read replies on ``loop`` (mitmproxy's)."""
        if loop is None or loop is self.loop or loop.is_closed():
            return
        self.loop = loop
        for role in ("writer", "deriver"):
            fd = self._fd(role, "out")
            if fd is not None and role not in self._ended:
                loop.add_reader(fd, self._on_readable, role)

    def _fd(self, role: str, side: str) -> Any:
        proc = self.writer if role == "writer" else self.deriver
        if proc is None:
            return None
        f = proc.stdin if side == "in" else proc.stdout
        if f is None or f.closed:
            return None
        return f.fileno()

    # ------------------------------------------------------------------ handing off (the loop)

    def put_request(self, item: ToWriter) -> None:
        """:meth:`put` for the first message of an exchange (counted: what
        passed unrecorded after the writer died is said in the trace)."""
        self.requests += 1
        self.put(item)

    def put(self, item: ToWriter) -> None:
        """Hand a message to the writer (in order; never blocks)."""
        if self.dead:
            return
        self.buf.append(item)
        self.produced += 1
        if self.handle is None and not self.writing:
            self._schedule()

    def _schedule(self) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None:
                self.attach(loop)
        if loop is None or self.stopping:
            self._flush(block=True)  # no loop (tests, shutdown): hand it off now
            return
        self.handle = loop.call_later(FLUSH_EVERY, self._flush)

    def _flush(self, block: bool = False, timeout: float = 10.0) -> None:
        self.handle = None
        if self.buf:
            data = pack(self.buf)
            self.batches.append([len(data), len(self.buf)])
            self.buf = []
            self.out += data
        self._write(block, timeout)

    def _write(self, block: bool, timeout: float) -> None:
        fd = self._fd("writer", "in")
        if fd is None or self.dead:
            self._drop_pending()
            return
        deadline = time.monotonic() + timeout
        try:
            while self.out:
                try:
                    n = os.write(fd, self.out)
                except BlockingIOError:
                    n = 0
                if n:
                    del self.out[:n]
                    self._account(n)
                    continue
                if not block:
                    if not self.writing and self.loop is not None:
                        self.loop.add_writer(fd, self._flush)
                        self.writing = True
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                import select

                select.select([], [fd], [], min(left, 0.1))
        except OSError:  # BrokenPipeError: the writer is gone
            self._writer_gone()
            return
        if self.writing and self.loop is not None:
            self.loop.remove_writer(fd)
            self.writing = False

    def _account(self, n: int) -> None:
        batches = self.batches
        while n and batches:
            first = batches[0]
            take = min(n, first[0])
            first[0] -= take
            n -= take
            if not first[0]:
                self.consumed += first[1]
                batches.popleft()

    def _drop_pending(self) -> None:
        self.consumed = self.produced
        self.buf = []
        self.out = bytearray()
        self.batches.clear()

    # ------------------------------------------------------------------ replies

    def _on_readable(self, role: str) -> None:
        try:
            self._read(role, 0)
        except Exception as err:  # noqa: BLE001 - never raise into the loop
            logger.warning(f"chatkit-trace: {err}")

    def _read(self, role: str, timeout: float | None) -> bool:
        """Read and handle what ``role`` sent; ``False`` once its pipe ended."""
        fd = self._fd(role, "out")
        if fd is None or role in self._ended:
            return False
        messages, ended = read_some(fd, self._unpack[role], timeout)
        for msg in messages:
            self._handle(role, msg)
        if ended:
            self._ended.add(role)
            if self.loop is not None and not self.loop.is_closed():
                self.loop.remove_reader(fd)
            if not self.stopping and self.ready is not None:
                if self.loop is not None and not self.loop.is_closed():
                    self.loop.call_later(0.2, self._gone, role)  # let the exit status arrive
                else:
                    self._gone(role)
            return False
        return True

    def _handle(self, role: str, msg: ToProxy | Undecodable) -> None:
        self._handlers[type(msg)](msg)

    def _on_log(self, msg: Log) -> None:
        logger.log(msg.level, msg.text)

    def _on_mark(self, msg: Mark) -> None:
        if self.on_mark is not None:
            try:
                self.on_mark(msg.fids, msg.marker, msg.comment)
            except Exception as err:  # noqa: BLE001 - mitmweb's view refused a mark: said, the recording goes on
                logger.warning(f"chatkit-trace: {err}")

    def _on_synced(self, msg: Synced) -> None:
        self._synced.add(msg.token)

    def _on_ready(self, msg: Ready) -> None:
        self.ready = msg

    def _on_open_error(self, msg: OpenError) -> None:
        self.open_error = msg.text

    def _on_stopped(self, msg: Stopped) -> None:
        self.writer_stats = msg.stats

    def _on_done(self, msg: Done) -> None:
        self.derivation = msg.state

    def _on_learned(self, msg: Learned) -> None:
        self._learned(msg.values)

    def _on_undecodable(self, msg: Undecodable) -> None:
        logger.warning(f"chatkit-trace: a message from the recorder's processes could not be read: {msg.error}")

    def _learned(self, values: Sequence[str]) -> None:
        """Secret values the writer learned: this process masks its log lines
        with them, and the deriver what it derives (pipes only, never a file)."""
        from ..masking import PROCESS_SECRETS

        for v in values:
            PROCESS_SECRETS.learn(v)
        fd = self._fd("deriver", "in")
        if fd is not None and "deriver" not in self._ended:
            try:
                write_all(fd, pack([Learn(list(values))]), 1.0)
            except OSError:
                pass

    def _gone(self, role: str) -> None:
        if self.stopping:
            return
        if role == "writer":
            self._writer_gone()
        else:
            self._deriver_gone(_how(self.deriver))

    def _writer_gone(self) -> None:
        if self.dead:
            return
        self.dead = True
        self._drop_pending()
        if not self.stopping:
            how = _how(self.writer)
            logger.error(f"chatkit-trace: the writer process {how}: the recording into {self.config.db} stopped (what "
                         "it committed is kept, and the trace marks what it lacks: CK702); the traffic is not affected")
            self.gone = {"kind": "writer", "at": time.time(), "until": None, "reason": how, "unrecorded": 0}
            import threading

            self._marking = threading.Thread(target=self._mark_gone, name="chatkit-trace-mark", daemon=True)
            self._marking.start()

    def _mark_gone(self) -> None:
        """Off the loop, once the dead writer's process is gone: hold the
        trace (no other recorder may take it while this proxy runs), mark the
        exchanges it left open and say in meta ``gaps`` that the recording
        stopped here (:meth:`_close_gap` completes it at the stop)."""
        gone = self.gone
        assert gone is not None
        try:
            if self.writer is not None:
                self.writer.wait(WRITER_STOP)
            from ..store import TraceStore
            from .target import TraceLock

            lock = TraceLock(self.config.db)
            lock.acquire()
            self._lock = lock
            with TraceStore(self.config.db) as store, store.transaction():
                touched = store.mark_unfinished(self.first_index, gone)
                gaps = store.get_meta("gaps", [])
                store.set_meta("gaps", [*(gaps if isinstance(gaps, list) else []), gone])
                if touched and self.config.derive != "off":
                    store.queue_derivation(touched, int(time.time() * 1000))
        except Exception as err:  # noqa: BLE001 - nothing may reach the loop; said once
            logger.warning(f"chatkit-trace: could not mark the recording's gap in {self.config.db}: {err}")

    def _close_gap(self) -> None:
        """At the stop after the writer died: the gap ends now; how many
        exchanges passed through the proxy without reaching the trace."""
        gone = self.gone
        if gone is None:
            return
        if self._marking is not None:
            self._marking.join(WRITER_STOP)
        try:
            from ..store import TraceStore

            with TraceStore(self.config.db) as store, store.transaction():
                stored = store.counts_from(self.first_index)["exchanges"]
                gaps = [g for g in store.get_meta("gaps", []) or [] if g != gone]
                gone.update(until=time.time(), unrecorded=max(0, self.requests - stored))
                store.set_meta("gaps", [*gaps, gone])
            if gone["unrecorded"]:
                logger.warning(f"chatkit-trace: {gone['unrecorded']} exchange(s) passed through the proxy after the writer "
                               f"process {gone['reason']} and are not in {self.config.db} (the trace says so: CK702)")
        except Exception as err:  # noqa: BLE001 - the stop goes on: the gap's mark is best effort, said in one line
            logger.warning(f"chatkit-trace: could not complete the recording's gap in {self.config.db}: {err}")
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def _deriver_gone(self, how: str) -> None:
        message = (f"the deriver process {how}: the recording goes on and every frame is stored; its facts are "
                   "derived by the next recording into this file (or `chatkit-trace redecode`)")
        logger.warning(f"chatkit-trace: {message}")
        state = {"mode": self.config.derive, "state": "stopped", "reason": how, "at": time.time()}
        self.put(DeriverStopped(state, message))

    # ------------------------------------------------------------------ sync, stop

    def is_alive(self) -> bool:
        return not self.dead and self.writer is not None and self.writer.poll() is None

    @property
    def deriver_pid(self) -> int | None:
        return None if self.deriver is None else self.deriver.pid

    def sync(self, timeout: float = 30.0) -> bool:
        """Wait until the writer committed everything handed off so far
        (blocks the caller: tests)."""
        if not self.is_alive():
            return False
        self._tokens += 1
        token = self._tokens
        self.put(Sync(token))
        self._flush(block=True, timeout=timeout)
        deadline = time.monotonic() + timeout
        while token not in self._synced:
            left = deadline - time.monotonic()
            if left <= 0 or not self._read("writer", min(left, 0.2)) and "writer" in self._ended:
                return False
            self._read("deriver", 0)
        self._synced.discard(token)
        return True

    def reconfigure(self, config: Any) -> None:
        """New options for the same trace (mitmweb's options editor)."""
        self.config = config = replace(config, recorder_meta=self.config.recorder_meta)
        self.limit = max(1, config.queue_limit)
        self.put(Configure.of(config))
        fd = self._fd("deriver", "in")
        if fd is not None and "deriver" not in self._ended:
            try:
                write_all(fd, pack([Configure.of(config)]), 1.0)
            except OSError:
                pass

    def stop(self) -> None:
        """Stop both processes in order, within bounds (module docstring).  Blocks."""
        if self.stopping:
            return
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        self._detach()
        self.stopping = True
        if not self.dead:
            self.buf.append(Stop())
            self.produced += 1
            self._flush(block=True, timeout=10.0)
        self._close_in("writer")
        self._wait("writer", WRITER_STOP)
        if self.writer is not None and self.writer.poll() is None:
            logger.warning(f"chatkit-trace: the writer did not finish within {WRITER_STOP:g} s: stopped it "
                           "(what it committed is kept)")
            self._kill(self.writer)
        if self.deriver is not None:
            self._stop_deriver()
        self._close_gap()
        self._settle()

    def _stop_deriver(self) -> None:
        d = self.deriver
        if d is None:
            return
        if d.poll() is None and "deriver" not in self._ended:
            fd = self._fd("deriver", "in")
            if fd is not None:
                write_all(fd, pack([Final()]), 5.0)
            self._close_in("deriver")
            wait = max(0.0, float(self.config.derive_wait))
            start = time.monotonic()
            if not self._wait("deriver", min(WAIT_NOTICE, wait)):
                logger.info(f"chatkit-trace: deriving the last facts before stopping (at most {wait:g} s; "
                            "every frame is already stored)")
                if not self._wait("deriver", wait - (time.monotonic() - start)):
                    logger.warning(
                        f"chatkit-trace: stopped waiting for the deriver after {wait:g} s: every frame is stored; "
                        "the facts left are derived by the next recording into this file "
                        f"(or `chatkit-trace redecode {self.config.db}`)"
                    )
                    d.send_signal(signal.SIGTERM)
                    if not self._wait("deriver", DERIVER_TERM):
                        self._kill(d)
                elif self.derivation is not None:
                    logger.info(f"chatkit-trace: derivation {self.derivation.get('state', 'done')} "
                                f"after {time.monotonic() - start:.1f} s")
            if self.derivation is None:
                if d.poll() is None:
                    self._kill(d)
                self._say_for_the_deriver(_how(d))
        else:
            self._close_in("deriver")
            self._wait("deriver", 1.0)
        if d.poll() is None:
            self._kill(d)

    def _say_for_the_deriver(self, how: str) -> None:
        """The deriver ended without its last word (stopped before it had
        started, or killed after ``DERIVER_TERM``): meta ``derivation`` says
        what it would have said, so the trace never claims less or more than
        its backlog."""
        try:
            from ..store import TraceStore

            with TraceStore(self.config.db) as store:
                sessions, frames = store.derivation_backlog()
                state = {"mode": self.config.derive, "state": "incomplete" if sessions else "complete",
                         "frames": frames, "sessions": sessions, "reason": f"the deriver {how}", "at": time.time()}
                with store.transaction():
                    store.set_meta("derivation", state)
            self.derivation = state
        except Exception as err:  # noqa: BLE001 - the stop goes on: the derivation state is best effort, said in one line
            logger.warning(f"chatkit-trace: could not record the derivation state in {self.config.db}: {err}")

    def _wait(self, role: str, timeout: float) -> bool:
        """Read ``role``'s replies until it exits or ``timeout`` passes; whether it exited."""
        proc = self.writer if role == "writer" else self.deriver
        if proc is None:
            return True
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            left = deadline - time.monotonic()
            if role in self._ended or self._fd(role, "out") is None:
                try:
                    proc.wait(max(0.0, min(left, 5.0)))
                except subprocess.TimeoutExpired:
                    return False
                return True
            if left <= 0:
                return False
            self._read(role, min(left, 0.2))
            other = "deriver" if role == "writer" else "writer"
            if other not in self._ended:
                self._read(other, 0)

    def _close_in(self, role: str) -> None:
        proc = self.writer if role == "writer" else self.deriver
        if proc is not None and proc.stdin is not None and not proc.stdin.closed:
            try:
                proc.stdin.close()
            except OSError:
                pass

    def _detach(self) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        for role in ("writer", "deriver"):
            fd = self._fd(role, "out")
            if fd is not None:
                loop.remove_reader(fd)
        fd = self._fd("writer", "in")
        if fd is not None and self.writing:
            loop.remove_writer(fd)
            self.writing = False

    def _settle(self) -> None:
        """The last process out leaves the trace as one file; if the deriver
        was stopped before it could, do it here."""
        db = self.config.db
        if not (os.path.exists(db + "-wal") or os.path.exists(db + "-shm")):
            return
        try:
            from ..store import TraceStore

            TraceStore(db).close()
        except Exception as err:  # noqa: BLE001 - the stop goes on: settling the file is best effort, said in one line
            logger.warning(f"chatkit-trace: could not settle {db}: {err}")

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes]) -> None:
        try:
            proc.kill()
            proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            pass

    def _kill_all(self) -> None:
        for proc in (self.writer, self.deriver):
            if proc is not None and proc.poll() is None:
                self._kill(proc)
        for proc in (self.writer, self.deriver):
            if proc is not None:
                for f in (proc.stdin, proc.stdout):
                    if f is not None:
                        try:
                            f.close()
                        except OSError:
                            pass
        self.dead = True
