"""``chatkit-trace record`` and ``chatkit-trace addon-path``.

``record`` runs mitmproxy's own ``mitmdump`` (or ``mitmweb``) entry point in
this process with the installed addon script (docs/mitmproxy.md
section 5), so every mitmdump flag keeps working after ``--``::

    chatkit-trace record --profile openai --upstream http://127.0.0.1:8000 \\
        --port 9000 --db recordings/trace.db [-- extra mitmdump args]

is ``mitmdump -s <installed chatkit_trace/addon.py> --mode
reverse:http://127.0.0.1:8000 --listen-host 127.0.0.1 -p 9000 --set
connection_strategy=lazy --set chatkit_profile=openai --set
chatkit_db=recordings/trace.db …``.  ``connection_strategy=lazy`` makes a
dead backend show up as a recorded 502 instead of a silently closed
connection.  Ctrl-C / SIGTERM stop mitmproxy, and the addon's ``done``
flushes everything received.
"""

from __future__ import annotations

import argparse
import os
import sys
from urllib.parse import urlsplit

from ..errors import UsageError

__all__ = ["add_parser", "addon_path", "mitmdump_args", "run"]


def addon_path() -> str:
    """The absolute path of the installed ``chatkit_trace/addon.py``."""
    import chatkit_trace

    return os.path.join(os.path.dirname(os.path.abspath(chatkit_trace.__file__)), "addon.py")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "record",
        help="record a chat backend's traffic through mitmproxy (reverse proxy in front of --upstream)",
        description=(
            "Run mitmdump as a reverse proxy in front of UPSTREAM with the chatkit-trace addon: point the "
            "chatkit UI (or its dev server's /api proxy) at http://HOST:PORT. Every SSE event and WebSocket "
            "message is stored in the trace file as it passes; the stream is not delayed or altered. "
            "Stop with Ctrl-C: everything received is flushed."
        ),
        epilog="Arguments after -- go to mitmdump unchanged (e.g. -- --set chatkit_max_db_mb=200 -v).",
    )
    p.add_argument(
        "--profile", required=True,
        help="route profile: a preset (openai, adk, a2a, hermes, agui, myproto), a TOML/JSON file, or an adapter "
        "(an installed adapter's name or module:Class; without routes of its own every streamed response is recorded)",
    )
    p.add_argument("--upstream", required=True, metavar="URL", help="the backend, e.g. http://127.0.0.1:8000")
    p.add_argument("--port", type=int, default=9000, help="port to listen on (default 9000)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--db", default="chatkit-trace.db", help="trace file (created or appended to; default chatkit-trace.db)")
    p.add_argument("--redact", default="", metavar="NAMES", help="extra header/parameter/field names to redact, comma-separated")
    p.add_argument("--keep-secrets", action="store_true", help="store credentials as they are (no redaction)")
    p.add_argument("--max-db-mb", type=int, default=0, metavar="MB", help="cap the trace size (oldest exchanges dropped)")
    p.add_argument("--max-age", default="", metavar="AGE", help="keep only exchanges younger than AGE (e.g. 30m, 2h)")
    p.add_argument("--web", action="store_true", help="run mitmweb (the web UI) instead of mitmdump")
    p.add_argument(
        "--fault", action="append", default=None, metavar="RULE",
        help="inject a fault (repeatable), e.g. cut:after=5,capability=run,nth=1 or http:status=429 (docs/faults.md)",
    )
    p.add_argument("--fault-seed", type=int, default=None, metavar="N", help="seed for random faults (p=, jitter=); default: drawn and logged")
    p.add_argument("extra", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(run=run)


def mitmdump_args(args: argparse.Namespace) -> list[str]:
    """The argument list ``record`` hands to mitmdump (tested on its own)."""

    url = urlsplit(args.upstream)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise UsageError(f"--upstream must be an http:// or https:// URL, not {args.upstream!r}")
    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be between 1 and 65535, not {args.port}")
    faults = list(getattr(args, "fault", None) or [])
    if faults:
        from ..addons.fault_rules import FaultRuleError, parse_rules

        try:
            parse_rules(faults)
        except FaultRuleError as err:
            raise UsageError(f"--fault: {err}") from None
    extra = list(args.extra or [])
    if extra and extra[0] == "--":
        extra = extra[1:]
    argv = [
        "-s", addon_path(),
        "--mode", f"reverse:{args.upstream}",
        "--listen-host", args.host,
        "-p", str(args.port),
        "--set", "connection_strategy=lazy",
        "--set", f"chatkit_profile={args.profile}",
        "--set", f"chatkit_db={os.path.abspath(args.db)}",
    ]
    if args.redact:
        argv += ["--set", f"chatkit_redact={args.redact}"]
    if args.keep_secrets:
        argv += ["--set", "chatkit_keep_secrets=true"]
    if args.max_db_mb:
        argv += ["--set", f"chatkit_max_db_mb={args.max_db_mb}"]
    if args.max_age:
        argv += ["--set", f"chatkit_max_age={args.max_age}"]
    if faults:
        from ..addons import faults_path

        argv += ["-s", faults_path()]
        for rule in faults:
            argv += ["--set", f"chatkit_fault={rule}"]
        if getattr(args, "fault_seed", None) is not None:
            argv += ["--set", f"chatkit_fault_seed={args.fault_seed}"]
    return argv + extra


def every_stream_note(spec: str) -> str:
    """What ``record`` says when ``--profile`` names an adapter without routes."""
    return (
        f"chatkit-trace: adapter {spec} has no routes of its own: every streamed response (SSE, NDJSON, "
        "WebSocket) of the upstream is recorded as a run (its session and run ids from the request body's "
        "threadId/sessionId and runId when it has them); other exchanges are stored as they are. To narrow it, "
        f'write a profile file with protocol = "{spec}" and its [[routes]] and pass --profile FILE '
        "(docs/profiles.md, docs/adapters.md)"
    )


def run(args: argparse.Namespace) -> int:
    # long-function: the checks before mitmproxy starts (each a one-line refusal), the run, the summary
    argv = mitmdump_args(args)
    try:
        from ..route.profiles import load_profile

        profile = load_profile(args.profile)  # a bad profile is one clear line, before mitmproxy starts
    except ImportError:
        profile = None
    except Exception as err:  # noqa: BLE001 - ProfileError, FileNotFoundError …
        raise UsageError(f"--profile {args.profile}: {err}") from None
    db = os.path.abspath(args.db)
    from ..capture.target import RecordTargetError, check_target

    try:
        check_target(db)  # nothing is created, nothing is locked
    except RecordTargetError as err:
        raise UsageError(f"--db {args.db}: {err}") from None
    _check_listen(args.host, args.port)
    if profile is not None and profile.records_every_stream:
        print(every_stream_note(args.profile), file=sys.stderr)
    from mitmproxy.tools import main

    from ..capture import recorder

    first = _next_index(db)
    banner = (
        f"chatkit-trace: recording {args.upstream} on http://{args.host}:{args.port} into {db} "
        f"(profile {args.profile}); Ctrl-C to stop"
    )
    # printed by the addon's `running` hook: mitmproxy calls it once the proxy listens
    recorder.announce_when_listening(lambda: print(banner, file=sys.stderr, flush=True))
    entry = main.mitmweb if args.web else main.mitmdump
    try:
        entry(argv)
    finally:
        recorder.announce_when_listening(None)
    if recorder.listened():
        print(summary(db, first), file=sys.stderr, flush=True)
    return 0


def _check_listen(host: str, port: int) -> None:
    """``--port`` (and ``--host``) as mitmproxy will bind them: a port in use
    is one line naming ``--port`` before anything starts, not mitmproxy's
    advice about ``--mode …@PORT``."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as err:
        raise UsageError(f"--host {host}: not an address of this machine ({err.strerror})") from None
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's servers do
        try:
            s.bind(addr)
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise UsageError(
                    f"--port {port}: {host}:{port} is already in use (another proxy or server listens there): "
                    "choose another --port"
                ) from None
            if err.errno == errno.EACCES:
                raise UsageError(f"--port {port}: this user may not listen on port {port}: choose one above 1023") from None
            raise UsageError(f"--host {host} --port {port}: cannot listen there ({err.strerror})") from None


def _next_index(db: str) -> int:
    """The index the recording's first exchange will get (0 for a new file)."""
    if not os.path.exists(db) or os.path.getsize(db) == 0:
        return 0
    from ..store import TraceStore

    store = TraceStore(db, readonly=True)
    try:
        return store.next_exchange_index()
    finally:
        store.close()


#: ``record``'s exit summary judges the trace (as ``check`` does) up to this many frames.
SUMMARY_FRAMES = 200_000


def summary(db: str, first: int) -> str:
    """What ``record`` prints on the way out: what this recording stored
    (exchanges from index ``first`` on), the trace's findings by severity
    (``check``'s analysis), and the next command."""
    if not os.path.exists(db):
        return f"chatkit-trace: nothing was recorded ({db} was not created)"
    from ..store import TraceStore

    store = TraceStore(db, readonly=True)
    try:
        counts = store.counts_from(first)
    finally:
        store.close()
    head = (
        f"chatkit-trace: recorded {counts['exchanges']} exchange(s), {counts['frames']} frame(s), "
        f"{counts['runs']} run(s) into {db}"
    )
    return f"{head}\n{_judged(db, counts['trace_frames'])}\nnext: chatkit-trace check {_quote(db)}"


def _judged(db: str, frames: int) -> str:
    if frames > SUMMARY_FRAMES:
        return f"findings: not judged here ({frames} frames in the trace): `chatkit-trace check` lists them"
    from ..core import ChatkitTraceError
    from .check import run_check

    try:
        result = run_check(db)
    except ChatkitTraceError as err:
        return f"findings: none ({err})"
    by = {s: sum(1 for f in result.findings if f.severity == s) for s in ("error", "warning", "info")}
    line = "findings in the trace: " + ", ".join(f"{n} {s}" for s, n in by.items())
    gaps = sum(1 for f in result.findings if f.code in RECORDING_GAPS)
    if gaps:
        line += f"; the recording itself is incomplete ({gaps} × {'/'.join(RECORDING_GAPS)})"
    return line


#: the codes of a recording that lost part of what passed (docs/rules.md, CK7xx)
RECORDING_GAPS = ("CK702", "CK703")


def _quote(path: str) -> str:
    import shlex

    return shlex.quote(path)
