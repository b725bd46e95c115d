"""``chatkit-trace demo``: the whole product on a built-in default, in a few seconds.

1. starts the demo backend (:mod:`chatkit_trace.demo.backend`, aiohttp on
   127.0.0.1, a free port): the seed's example protocol with resume, history,
   stop, a session subscription and bugs switched on per session;
2. starts the recording proxy in front of it: ``chatkit-trace record
   --profile myproto`` (mitmdump with the real addon) as a subprocess on a
   free port;
3. plays the demo sessions through the proxy with a real HTTP client
   (:mod:`chatkit_trace.demo.client`): a clean session (text, tool, failure,
   stop, reload + resume, refresh), one with a session subscription, a
   correct resume after a reset, and one session per bug;
4. stops the proxy (everything received is flushed; streams a buggy backend
   never ended are recorded as still open), runs ``check`` on the trace and
   prints the findings, then which findings each session was expected to
   produce and whether it did;
5. opens the viewer on the trace when run in a terminal (``--no-view`` for
   scripts and CI), on the first run with an error or warning finding.

Every process it starts is stopped on the way out, also on Ctrl-C and on
errors.  Exit code 0 when every session produced exactly its expected
findings, 1 when one did not, 2 when the demo could not run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import tempfiles

__all__ = ["PROTOCOLS", "DemoReport", "RecordingProxy", "add_parser", "first_finding_run", "play", "run"]

#: protocols the demo backend speaks -> the route profile that records it.
PROTOCOLS: dict[str, str] = {"myproto": "myproto"}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="record a built-in demo backend with switchable bugs, show the findings, open the viewer",
        description="Start the demo backend and the recording proxy, play a clean chat session and one session "
        "per backend bug through the proxy with a real HTTP client, check the recording and print the findings. "
        "Takes a few seconds; every process started is stopped on the way out.",
    )
    p.add_argument("--no-view", action="store_true", help="do not open the viewer (scripts, CI)")
    p.add_argument(
        "--db",
        default=os.path.join("recordings", "demo.db"),
        help="trace file to write (default recordings/demo.db; replaced if an earlier demo wrote it, "
        "any other existing file is left alone)",
    )
    p.add_argument(
        "--protocol",
        choices=sorted(PROTOCOLS),
        default="myproto",
        help="the protocol the demo backend speaks (default myproto)",
    )
    p.add_argument(
        "--pace-ms",
        type=float,
        default=5.0,
        metavar="MS",
        help="the backend's delay before each event (default 5)",
    )
    p.set_defaults(run=run)


# ---------------------------------------------------------------------- the proxy


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


#: ``chatkit-trace`` in this interpreter: what the console script runs (a
#: subprocess, so the demo never imports the dispatcher that dispatches to it)
CONSOLE_SCRIPT = ("-c", "import sys; from chatkit_trace.cli import main; sys.exit(main())")


class RecordingProxy:
    """``chatkit-trace record`` (mitmdump + the addon) as a subprocess in its own
    process group; :meth:`stop` sends SIGINT (the addon flushes) and escalates."""

    def __init__(self, upstream: str, db: Path, profile: str, *, host: str = "127.0.0.1") -> None:
        self.upstream = upstream
        self.db = db
        self.profile = profile
        self.host = host
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        # closed in cleanup(): the subprocess writes into it while it runs
        self.log = tempfiles.new_file("demo-proxy-", ".log").open("w+b")  # noqa: SIM115 - private, removed at exit

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def argv(self) -> list[str]:
        return [
            sys.executable, *CONSOLE_SCRIPT, "record",
            "--profile", self.profile, "--upstream", self.upstream,
            "--host", self.host, "--port", str(self.port), "--db", str(self.db),
        ]  # fmt: skip

    async def start(self, timeout: float = 30.0) -> None:
        for attempt in range(3):  # a free port can be taken between probing and binding
            self.port = _free_port(self.host)
            self.proc = subprocess.Popen(  # noqa: ASYNC220 - returns at once; readiness is awaited below
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            if await self._ready(timeout):
                return
            if self.proc.poll() is None:
                self.kill()
                raise RuntimeError(
                    f"the recording proxy did not listen within {timeout:.0f} s:\n{self.output()}"
                )
            if attempt == 2 or "address already in use" not in self.output().lower():
                raise RuntimeError(
                    f"the recording proxy exited with code {self.proc.returncode}:\n{self.output()}"
                )

    async def _ready(self, timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection(self.host, self.port)
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
                return True
            await asyncio.sleep(0.05)
        return False

    def output(self) -> str:
        try:
            return Path(self.log.name).read_text("utf-8", errors="replace")[-4000:]
        except OSError:
            return ""

    async def stop(self, timeout: float = 15.0) -> int | None:
        """Stop mitmdump the way Ctrl-C does (the addon's ``done`` flushes the trace)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return None if proc is None else proc.returncode
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGTERM, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
            deadline = time.monotonic() + wait
            while proc.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            if proc.poll() is not None:
                return proc.returncode
        self.kill()
        return proc.returncode

    def kill(self) -> None:
        """Last resort, synchronous: SIGKILL the proxy's own process group."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)

    def cleanup(self) -> None:
        self.kill()
        self.log.close()
        with contextlib.suppress(OSError):
            os.unlink(self.log.name)


# ---------------------------------------------------------------------- playing


@dataclass
class DemoReport:
    db: Path
    outcomes: list[Any] = field(default_factory=list)
    check: Any = None
    timings: dict[str, float] = field(default_factory=dict)

    def found(self, session_id: str, severities: Sequence[str] = ("error", "warning")) -> list[str]:
        return sorted(
            {
                f.code
                for f in self.check.findings
                if f.session_id == session_id and f.severity in severities
            }
        )

    def ok(self, outcome: Any) -> bool:
        got = set(self.found(outcome.session_id))
        return outcome.error is None and set(outcome.expect) <= got <= set(outcome.expect) | set(
            outcome.allow
        )

    @property
    def all_ok(self) -> bool:
        return all(self.ok(o) for o in self.outcomes)


def _written_by_the_demo(db: Path) -> bool:
    """Whether ``db`` is a trace an earlier demo wrote (meta ``demo``), so replacing it loses nothing."""
    import sqlite3

    from ..store import TraceFormatError, TraceStore
    from .client import DEMO_SESSIONS

    try:
        with TraceStore(db, readonly=True) as store:
            meta = store.meta()
            if "demo" in meta:
                return meta["demo"] is True
            # a demo trace from before the marker: only the demo's sessions
            sessions = {e.session_id for e in store.exchanges()} - {None}
    except (TraceFormatError, sqlite3.Error, OSError, ValueError):
        return False
    return bool(sessions) and sessions <= {s.id for s in DEMO_SESSIONS}


def _check_target(db: Path) -> None:
    if db.is_dir():
        raise RuntimeError(f"--db {db} is a directory")
    if db.exists() and not _written_by_the_demo(db):
        raise RuntimeError(
            f"{db} exists and is not a trace the demo wrote: choose another --db or remove it"
        )


def _remove_trace(db: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal", "-reserve"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(db) + suffix)


async def _record(report: DemoReport, proxy: RecordingProxy, pace_ms: float) -> None:
    from .backend import running_backend
    from .client import Driver

    t0 = time.monotonic()
    async with running_backend(pace_ms=pace_ms) as (backend_url, _backend):
        proxy.upstream = backend_url
        await proxy.start()
        report.timings["start"] = time.monotonic() - t0
        t1 = time.monotonic()
        driver = Driver(proxy.url)
        try:
            report.outcomes = await driver.play_all()
            report.timings["sessions"] = time.monotonic() - t1
            await asyncio.sleep(0.1)  # the last chunks reach the proxy
            t2 = time.monotonic()
            # Stop recording while the streams a buggy backend never ends are still open.
            await proxy.stop()
            report.timings["flush"] = time.monotonic() - t2
        finally:
            await driver.close()
            await proxy.stop()


def play(db: Path, *, protocol: str = "myproto", pace_ms: float = 5.0) -> DemoReport:
    """Record the demo into ``db`` (replaced) and check it; every process is gone on return."""
    from ..cli.check import run_check

    _check_target(db)
    db.parent.mkdir(parents=True, exist_ok=True)
    _remove_trace(db)
    report = DemoReport(db)
    proxy = RecordingProxy("", db, PROTOCOLS[protocol])
    try:
        asyncio.run(_record(report, proxy, pace_ms))
    finally:
        proxy.cleanup()  # also after Ctrl-C, which interrupts asyncio.run
    if not db.exists():
        raise RuntimeError("the recording proxy wrote no trace")
    _note_profile(db, PROTOCOLS[protocol])
    t = time.monotonic()
    # The profile is named: a trace recorded by the proxy may not say it in a form every loader reads.
    report.check = run_check(str(db), profile=PROTOCOLS[protocol], store_results=True)  # its own output
    report.timings["check"] = time.monotonic() - t
    return report


def _note_profile(db: Path, profile: str) -> None:
    """Mark the trace as the demo's (meta ``demo``) and name its profile (``profile``,
    ``protocol``, ``capabilities``) when the recorder did not, so ``check`` and ``view``
    need no ``--profile``."""
    from ..route.profiles import load_profile
    from ..store import TraceStore

    prof = load_profile(profile)
    with TraceStore(db) as store:
        store.set_meta("demo", True)  # a later demo may replace this file
        if not store.get_meta("protocol"):
            store.set_meta("profile", prof.name)
            store.set_meta("protocol", prof.protocol)
            store.set_meta("capabilities", sorted(prof.capabilities))
        store.commit()


# ---------------------------------------------------------------------- output


def render_sessions(report: DemoReport, *, color: bool = False) -> str:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(
        title="What each session shows", title_justify="left", show_lines=False, expand=False
    )
    table.add_column("session", no_wrap=True)
    table.add_column("plays", ratio=3)
    table.add_column("runs ended (UI)", ratio=2)
    table.add_column("expected", no_wrap=True)
    table.add_column("found (errors, warnings)", no_wrap=True)
    table.add_column("", no_wrap=True)
    for o in report.outcomes:
        ok = report.ok(o)
        found = ", ".join(report.found(o.session_id)) or "none"
        table.add_row(
            o.session_id,
            o.title + (f" [red]({escape(str(o.error))})[/red]" if o.error else ""),
            o.statuses(),
            (", ".join(o.expect) or "none") + (f" (maybe {', '.join(o.allow)})" if o.allow else ""),
            found,
            "[green]ok[/green]" if ok else "[red]MISMATCH[/red]",
        )
    with open(os.devnull, "w") as sink:
        console = Console(
            record=True,
            width=max(shutil.get_terminal_size((160, 24)).columns, 120) if color else 160,
            color_system="standard" if color else None,
            force_terminal=color,
            file=sink,
        )
        console.print(table)
        return console.export_text(styles=color).rstrip("\n")


def _viewer_available() -> str | None:
    """Why the viewer cannot open, or None when ``chatkit-trace view`` exists."""
    import importlib

    try:
        importlib.import_module("chatkit_trace.cli.view")
    except ImportError as err:
        return f"the viewer is not installed ({err})"
    return None


def _open_viewer(argv: list[str]) -> None:
    """``chatkit-trace view ARGV``: the command's own parser and run, its
    mistakes one line on stderr as the dispatcher prints them (the demo does
    not call back into the dispatcher that runs it)."""
    from ..cli.view import add_parser
    from ..cli.view import run as run_view
    from ..errors import ChatkitTraceError

    parser = argparse.ArgumentParser(prog="chatkit-trace")
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["view", *argv])
    try:
        run_view(args)
    except (ChatkitTraceError, FileNotFoundError, IsADirectoryError, PermissionError) as err:
        print(f"chatkit-trace view: error: {err}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from ..cli.check import render_text
    from ..errors import UsageError

    if args.pace_ms < 0:
        raise UsageError("--pace-ms must be >= 0")
    db = Path(args.db)
    try:
        _check_target(db)
    except RuntimeError as err:
        raise UsageError(str(err)) from None
    color = sys.stdout.isatty()
    print(
        f"chatkit-trace demo: recording the demo backend ({args.protocol}) through the proxy into {db} …",
        flush=True,
    )
    t = time.monotonic()
    try:
        report = play(db, protocol=args.protocol, pace_ms=args.pace_ms)
    except (RuntimeError, OSError) as err:
        raise UsageError(f"the demo could not run: {err}") from None
    total = time.monotonic() - t
    print(render_text(report.check, color=color))
    print()
    print(render_sessions(report, color=color))
    tm = report.timings
    print(
        f"\nrecorded {len(report.outcomes)} sessions into {db} in {total:.1f} s (proxy up {tm.get('start', 0):.1f} s, "
        f"sessions {tm.get('sessions', 0):.1f} s, flush {tm.get('flush', 0):.1f} s, check {tm.get('check', 0):.1f} s)"
    )
    if not report.all_ok:
        print(
            "some sessions did not produce the findings they should (MISMATCH above)",
            file=sys.stderr,
        )
    first = first_finding_run(report)
    at = ["--session", first[0], "--run", first[1]] if first else []
    if not args.no_view and sys.stdin.isatty() and sys.stdout.isatty():
        why = _viewer_available()
        if why is None:
            # Open on the first run that shows a bug, not on the clean one before it.
            _open_viewer([str(db), "--profile", PROTOCOLS[args.protocol], *at])
        else:
            print(f"not opening the viewer: {why}")
    else:
        why = _viewer_available()
        print(f"check it again: chatkit-trace check {db}")
        if why is None:
            print(f"look at it:     chatkit-trace view {db}" + "".join(f" {a}" for a in at))
    return 0 if report.all_ok else 1


def first_finding_run(report: DemoReport) -> tuple[str, str] | None:
    """Where the viewer opens: the first run, in the order the demo played its
    sessions, with an error finding; only when no run has one, the first with
    a warning (decisions.md 281: a warning-only run is not the bug to show first)."""
    order = {o.session_id: i for i, o in enumerate(report.outcomes)}
    for severities in (("error",), ("warning",)):
        runs = [
            (order.get(f.session_id or "", len(order)), f.session_id, f.run_id)
            for f in report.check.findings
            if f.session_id and f.run_id and f.severity in severities
        ]
        if runs:
            _, session, run = min(runs, key=lambda r: (r[0], str(r[1]), str(r[2])))
            return session, run
    return None
