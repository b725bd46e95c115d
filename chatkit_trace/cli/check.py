"""``chatkit-trace check``: findings for CI (the codes: docs/rules.md#finding-codes).

Exit codes: 0 no finding at or above ``--fail-on``; 1 there is one; 2 usage
or input error, or nothing to judge (one clear line, no traceback).

A gate that cannot go green by mistake: a trace with no traffic, or whose
traffic the profile did not match (or matched, but its adapter understood
none of it) is exit 2 with one sentence naming the unmatched routes and the
preset they look like (:mod:`chatkit_trace.capture.detect`), never "no
findings".  ``check`` never writes to its input (``redecode`` stores the
derived tables).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from ..analyze import CATALOGUE, SEVERITIES, Finding, Options, severity_rank
from ..errors import NothingToJudge, UsageError
from ..masking import mask_derived, mask_derived_json
from ..visible import xml_safe

if TYPE_CHECKING:
    from rich.progress import Progress

__all__ = [
    "add_parser",
    "run",
    "run_check",
    "probe_check",
    "render_text",
    "render_json",
    "render_junit",
    "select_findings",
    "CheckResult",
    "NothingToJudge",
    "AUTO_FRAMES",
    "AUTO_INPUTS",
]

#: Without ``-j``, a trace of this many frames or more (and more than one
#: session) is derived over one worker process per CPU: starting the workers
#: (about 0.3 s each, spawned) is then a small part of the time.
AUTO_FRAMES = 50_000
#: Without ``-j``, this many inputs or more are checked one per CPU at a time.
AUTO_INPUTS = 8


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check",
        help="report findings; exit 1 when one is at or above --fail-on (a CI gate)",
        description="Replay a trace through its adapter and chatkit's Core and report findings with stable codes. "
        "TRACE is a trace database, a HAR or mitmproxy flow file (with --profile) or a fixture.",
    )
    p.add_argument("trace", metavar="TRACE", nargs="*",
                   help="one or more traces (databases, HAR/flow files with --profile, fixtures) or folders of them")
    p.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                   help="worker processes: several traces are checked N at a time (results in input order), one "
                   "trace's sessions N at a time; 0 = one per CPU; default: one per CPU for a trace of "
                   f"{AUTO_FRAMES:,} frames or more or for {AUTO_INPUTS} inputs or more, else 1")
    p.add_argument("--profile", help="adapter/profile to decode with (default: the one the trace was recorded with)")
    p.add_argument("--format", choices=("text", "json", "junit"), default="text")
    p.add_argument("--fail-on", choices=("error", "warning", "info", "never"), default="error")
    p.add_argument("--select", metavar="CODES", help="only these codes or prefixes, comma-separated (CK1,CK201)")
    p.add_argument("--ignore", metavar="CODES", help="drop these codes or prefixes, comma-separated")
    p.add_argument("--baseline", metavar="FILE", help="accepted findings (by fingerprint): only new ones count")
    p.add_argument("--write-baseline", metavar="FILE", help="write the current findings as a baseline and exit 0")
    p.add_argument("--first-event", type=float, default=Options.first_event, metavar="SECONDS", help="CK601 threshold")
    p.add_argument("--stall", type=float, default=Options.stall, metavar="SECONDS", help="CK602 threshold")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    p.add_argument("--html", metavar="FILE", help="also write the self-contained HTML report of these findings (see: report)")
    p.add_argument("--no-store", action="store_true", help="accepted for compatibility: check never writes to its input "
                   "(chatkit-trace redecode stores facts and findings in the trace)")
    p.add_argument("--explain", metavar="CODE", help="print what a finding code (or rule number) means, with a worked "
                   "example, and exit (the same as `chatkit-trace explain CODE`; TRACE is not read)")
    p.set_defaults(run=run)


def _codes(value: str | None) -> list[str]:
    if not value:
        return []
    out = [c.strip().upper() for c in value.split(",") if c.strip()]
    for c in out:
        if not c.startswith("CK") or not any(code.startswith(c) for code in CATALOGUE):
            raise UsageError(f"unknown finding code or prefix {c!r} (codes are CK101 ... CK703)")
    return out


def select_findings(findings: Iterable[Finding], select: Sequence[str] = (), ignore: Sequence[str] = ()) -> list[Finding]:
    out = []
    for f in findings:
        if select and not any(f.code.startswith(s) for s in select):
            continue
        if any(f.code.startswith(i) for i in ignore):
            continue
        out.append(f)
    return out


class CheckResult:
    def __init__(
        self, findings: list[Finding], baselined: int, trace: str, frames: int, facts: int, notes: list[str] | None = None
    ) -> None:
        self.findings = findings
        self.baselined = baselined
        self.trace = trace
        self.frames = frames
        self.facts = facts
        #: what was not judged (streamed exchanges no route matched), for stderr
        self.notes = notes or []

    def summary(self) -> dict[str, Any]:
        counts = Counter(f.severity for f in self.findings)
        return {
            "trace": self.trace,
            "total": len(self.findings),
            **{s: counts.get(s, 0) for s in SEVERITIES},
            "by_code": dict(sorted(Counter(f.code for f in self.findings).items())),
            "baselined": self.baselined,
            "frames": self.frames,
            "facts": self.facts,
        }

    def fails(self, fail_on: str) -> bool:
        if fail_on == "never":
            return False
        limit = severity_rank(fail_on)
        return any(severity_rank(f.severity) <= limit for f in self.findings)


def _load_baseline(path: str) -> set[str]:
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except FileNotFoundError:
        raise UsageError(f"baseline {path}: no such file (write one with --write-baseline)") from None
    except (OSError, ValueError) as err:
        raise UsageError(f"baseline {path}: not a baseline file ({err})") from None
    items = data.get("findings") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise UsageError(f"baseline {path}: expected {{\"findings\": [{{\"fingerprint\": ...}}]}}")
    return {i["fingerprint"] for i in items if isinstance(i, dict) and isinstance(i.get("fingerprint"), str)}


def run_check(
    path: str,
    *,
    profile: str | None = None,
    options: Options | None = None,
    store_results: bool = False,
    show_progress: bool = False,
    jobs: int | None = 1,
) -> CheckResult:
    """Replay and analyze a trace.

    Raises :class:`NothingToJudge` when the trace has no traffic or none the
    profile's adapter understood.  ``store_results`` (``redecode``) writes
    the derived tables and findings back into a trace database (re-classified
    in place when ``profile`` is a route profile); otherwise nothing is
    written to the input.  ``jobs`` > 1 derives the sessions in that many
    worker processes (:func:`chatkit_trace.derive.derive_parallel`: the same
    findings in the same order, the same rows written); None: one per CPU
    for a trace of :data:`AUTO_FRAMES` frames or more, else 1.
    """
    loaded = _open(path, profile, writable=store_results)
    try:
        from ..derive import Deriver

        write = store_results and loaded.kind == "db" and not loaded.store.readonly
        deriver = Deriver(loaded.store, loaded.adapter, capabilities=loaded.capabilities, options=options)
        result = _derive(deriver, loaded.store, profile, options, jobs, write=write, show_progress=show_progress)
        findings, counts = result.findings, result.counts
        if not counts["understood"]:
            raise NothingToJudge(_nothing_to_judge(str(path), loaded, counts))
        notes = _unmatched_notes(loaded)
        if write:
            # An empty findings table then means "clean", not "never checked".
            import time

            from .. import __version__

            loaded.store.set_meta("analysed", {"at": time.time(), "chatkit_trace_version": __version__, "findings": len(findings)})
            loaded.store.commit()
        return CheckResult(findings, 0, str(path), counts["frames"], counts["facts"], notes)
    finally:
        loaded.close()


def jobs_option(value: int | None) -> int | None:
    """``-j``/``--jobs`` as ``run_check`` takes it: None (not given) stays
    None, the automatic choice; 0 is one per CPU; a negative number is a
    usage error."""
    if value is not None and value < 0:
        raise UsageError("--jobs must be >= 0 (0: one per CPU)")
    return None if value is None else value or (os.cpu_count() or 1)


def _open(path: str, profile: str | None, *, writable: bool) -> Any:
    from ..loading import TraceInputError, open_trace

    try:
        return open_trace(path, profile=profile, writable=writable)
    except TraceInputError as err:
        # A recording made without a profile: say what its traffic looks like.
        hint = _no_profile_hint(path) if profile is None and "does not say which protocol" in str(err) else None
        if hint is None:
            raise
        raise NothingToJudge(hint) from None


def probe_check(path: str, *, profile: str | None = None) -> None:
    """Raise what :func:`run_check` would raise for ``path`` (an unreadable
    input, :class:`NothingToJudge`) without judging it all: sessions are
    replayed one at a time, without analysis, only until the adapter made
    sense of one exchange.  Nothing is written (a route ``profile``
    re-classifies a temporary copy).  ``redecode`` asks this before it
    rewrites a trace, so a wrong ``--profile`` leaves the trace as it was."""
    loaded = _open(path, profile, writable=False)
    try:
        from ..derive import Deriver, session_counts

        deriver = Deriver(loaded.store, loaded.adapter, capabilities=loaded.capabilities)

        def until_understood() -> Iterator[Any]:
            for sid in deriver.sessions():
                counts = session_counts(deriver.session(sid, analyse=False))
                yield [], counts, None
                if counts["understood"]:
                    return

        counts = deriver.collect(until_understood(), analyse=False).counts
        if not counts["understood"]:
            raise NothingToJudge(_nothing_to_judge(str(path), loaded, counts))
    finally:
        loaded.close()


def _derive(deriver: Any, store: Any, profile: str | None, options: Options | None, jobs: int | None, *, write: bool,
            show_progress: bool) -> Any:
    """Every session of ``store`` derived (and its rows written to it when
    ``write``) in this process or over ``jobs`` workers (None: one per CPU
    for a trace of :data:`AUTO_FRAMES` frames or more)."""
    sessions = len(deriver.sessions())
    if jobs is None:
        jobs = (os.cpu_count() or 1) if sessions > 1 and store.frame_count() >= AUTO_FRAMES else 1
    with _session_progress(sessions, show_progress) as tick:
        if jobs > 1 and sessions > 1:
            from concurrent.futures.process import BrokenProcessPool

            from ..derive import derive_parallel
            from ..route.profiles import resolve_adapter

            try:
                return derive_parallel(
                    deriver, store.path, profile=profile, jobs=jobs, options=options, on_session=tick,
                    resolve=resolve_adapter, write_to=store if write else None,
                )
            except BrokenProcessPool:
                _workers_failed()  # the rows some workers sent are cleared and written again below
        return deriver.run(write_to=store if write else None, on_session=tick)


def _workers_failed() -> None:
    """Worker processes could not start or died: say so, in one line; the
    caller goes on in this process.  (A script that calls the CLI without an
    ``if __name__ == "__main__":`` guard cannot spawn workers: each one runs
    the script again.)"""
    print("chatkit-trace: worker processes failed to start or died; checking in this process instead "
          "(a script that calls chatkit-trace needs an `if __name__ == \"__main__\":` guard for workers)",
          file=sys.stderr)


def _streamed(ex: Any) -> bool:
    return bool(ex.frames) or ex.transport in ("sse", "ndjson", "ws", "body")


def _nothing_to_judge(trace: str, loaded: Any, counts: dict[str, int]) -> str:
    """The one sentence for a trace with nothing to judge (see the module docstring)."""
    from ..capture.detect import describe_routes, guess_profile, unmatched_hint

    store = loaded.store
    if not store.exchange_count():
        return f"{trace}: nothing recorded (no exchanges): nothing to judge"
    exchanges = list(store.exchanges(with_frames=True))
    name = loaded.profile
    if not counts["matched"]:
        unmatched = [e for e in exchanges if e.capability is None]
        shown = [e for e in unmatched if _streamed(e)] or unmatched
        guess = guess_profile(unmatched, exclude=name)
        return f"{trace}: nothing to judge: " + unmatched_hint(name, describe_routes(shown), guess)
    matched = [e for e in exchanges if e.capability is not None]
    guess = guess_profile(exchanges, exclude=name)
    routes = describe_routes([e for e in matched if _streamed(e)] or matched)
    return f"{trace}: nothing to judge: " + unmatched_hint(name, routes, guess, not_understood=True)


def _unmatched_notes(loaded: Any) -> list[str]:
    """A note for streamed exchanges no route matched, when others were judged."""
    from ..capture.detect import describe_routes, guess_profile, unmatched_hint

    rows = list(loaded.store.exchanges(with_frames=False, classified=False))
    streamed = [e for e in rows if e.transport in ("sse", "ndjson", "ws", "body")]
    if not streamed:
        return []
    for e in streamed:
        e.frames = loaded.store.frames(e.index, limit=64)
    guess = guess_profile(streamed, exclude=loaded.profile)
    return [unmatched_hint(loaded.profile, describe_routes(streamed), guess) + " (not judged)"]


def _no_profile_hint(path: str) -> str | None:
    """For a trace recorded without a profile: what its traffic looks like."""
    from pathlib import Path

    from ..capture.detect import describe_routes, guess_profile, unmatched_hint
    from ..loading import kind_of
    from ..store import TraceStore

    if kind_of(Path(path)) != "db":
        return None
    try:
        with TraceStore(path, readonly=True) as store:
            exchanges = list(store.exchanges(with_frames=True))
    except Exception:  # noqa: BLE001 - the original error says it
        return None
    if not exchanges:
        return f"{path}: nothing recorded (no exchanges): nothing to judge"
    shown = [e for e in exchanges if _streamed(e)] or exchanges
    return f"{path}: nothing to judge: " + unmatched_hint(None, describe_routes(shown), guess_profile(exchanges))


class _session_progress:
    """A rich progress bar over sessions on a terminal; nothing when piped."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled = total, enabled and total > 1
        self.progress: Progress | None = None

    def __enter__(self) -> Callable[[Any], None]:
        if not self.enabled:
            return lambda derived: None
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        progress = self.progress = Progress(
            TextColumn("analysing sessions"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
            console=Console(stderr=True), transient=True,
        )
        progress.start()
        task = progress.add_task("sessions", total=self.total)
        return lambda derived: progress.advance(task)

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()


# ------------------------------------------------------------------ rendering


def _grouped(findings: Sequence[Finding]) -> list[tuple[tuple[str | None, str | None], list[Finding]]]:
    groups: dict[tuple[str | None, str | None], list[Finding]] = defaultdict(list)
    for f in findings:
        groups[(f.session_id, f.run_id)].append(f)
    ordered = sorted(  # runs and sessions by their worst finding; trace-wide limits last
        groups.items(),
        key=lambda kv: (kv[0] == (None, None), min(severity_rank(f.severity) for f in kv[1]), kv[0][0] or "", kv[0][1] or ""),
    )
    return [(k, sorted(v, key=lambda f: (severity_rank(f.severity), f.code))) for k, v in ordered]


def _heading(session: str | None, run_id: str | None) -> str:
    if session is None and run_id is None:
        return "trace-wide (protocol and route limits)"
    if run_id is None:
        return f"session {session} (session-wide)"
    if session is None:
        return f"run {run_id}"
    return f"session {session}  run {run_id}"


def _frames_text(frames: Sequence[str]) -> str:
    shown = list(dict.fromkeys(frames))
    more = len(shown) - 3
    return ", ".join(shown[:3]) + (f" (+{more} more)" if more > 0 else "")


def _width(color: bool) -> int | None:
    """The terminal's width when writing to one (``COLUMNS`` wins); None: do not wrap."""
    import os
    import shutil

    if os.environ.get("COLUMNS", "").isdigit():
        return max(40, int(os.environ["COLUMNS"]))
    if not color:
        return None
    columns = shutil.get_terminal_size((0, 0)).columns
    return max(40, columns) if columns else None


def render_text(result: CheckResult, *, color: bool = False, width: int | None = None) -> str:
    """Findings grouped by session and run, one per entry; a finding that does
    not fit the width wraps with a hanging indent under its message.  ``frames
    E:F`` names a stored frame: exchange ``E`` (the recording's request
    number, from 0), frame ``F`` of its response (a bare ``E`` is the
    exchange itself: a history body, a stop request)."""
    from rich.markup import escape  # recorded text (ids, quoted messages) is never markup
    from rich.table import Table
    from rich.text import Text

    from ._output import SafeConsole  # recorded control characters are shown, never sent

    width = width if width is not None else _width(color)
    console = SafeConsole(
        record=True, width=width or 100_000, color_system="standard" if color else None, force_terminal=color, file=cast("IO[str]", _Null())
    )
    styles = {"error": "bold red", "warning": "yellow", "info": "cyan"}
    if not result.findings:
        console.print(f"[green]No findings[/green] in {escape(str(result.trace))} ({result.frames} frames, {result.facts} facts).")
    for (session, run_id), items in _grouped(result.findings):
        console.print(Text(_heading(session, run_id), style="bold"))
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)  # "  error   CK101"
        grid.add_column(overflow="fold")
        for f in items:
            left = Text("  ")
            left.append(f"{f.severity:<7}", style=styles[f.severity])
            left.append(" ")
            left.append(f.code, style="bold")
            right = Text(f"({f.rule}) {f.message}  ")
            right.append(f"frames {_frames_text(f.frames)}", style="dim")
            grid.add_row(left, right)
        console.print(grid)
    s = result.summary()
    tail = f"{s['total']} finding(s): {s['error']} error, {s['warning']} warning, {s['info']} info"
    if result.baselined:
        tail += f" ({result.baselined} in the baseline not shown)"
    console.print(tail)
    if result.findings:
        code = min(result.findings, key=lambda f: (severity_rank(f.severity), f.code)).code
        import shlex

        # in this trace's protocol: chatkit's words and the example on its wire (decisions.md 279)
        console.print(Text(f"explain a code and its rules: chatkit-trace explain {code} --trace {shlex.quote(str(result.trace))}  "
                           f"(docs/rules.md#{code.lower()})", style="dim"))
    text = console.export_text(styles=color)
    return "\n".join(line.rstrip() for line in text.rstrip("\n").split("\n"))


class _Null:
    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        pass


def render_json(result: CheckResult) -> str:
    return json.dumps({"findings": [f.to_json() for f in result.findings], "summary": result.summary()}, indent=2, default=str)


def _fails(f: Finding, fail_on: str) -> bool:
    return fail_on != "never" and severity_rank(f.severity) <= severity_rank(fail_on)


def render_junit(result: CheckResult, fail_on: str = "error") -> str:
    """JUnit XML, one test case per finding: a finding at or above
    ``fail_on`` is a failure (what fails the gate); the others are passed
    test cases with their text in ``system-out``, so CI lists them without
    turning the build red."""
    failures = [f for f in result.findings if _fails(f, fail_on)]
    suite = ET.Element(
        "testsuite",
        name="chatkit-trace",
        tests=str(max(1, len(result.findings))),
        failures=str(len(failures)),
        errors="0",
        skipped="0",
    )
    if not result.findings:
        ET.SubElement(suite, "testcase", classname="chatkit-trace", name=f"check {result.trace}")
    for f in result.findings:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"chatkit-trace.{f.session_id or 'trace'}.{f.run_id or '-'}",
            name=f"{f.code} {CATALOGUE[f.code].title} [{f.fingerprint}]",
        )
        text = f"{f.code} ({f.rule}) {f.severity}: {f.message}\nframes: {', '.join(f.frames)}\n" + json.dumps(
            f.detail, indent=2, default=str
        )
        if _fails(f, fail_on):
            failure = ET.SubElement(case, "failure", message=f.message, type=f"{f.code} {f.severity}")
            failure.text = text
        else:
            out = ET.SubElement(case, "system-out")
            out.text = f"below --fail-on {fail_on}: " + text
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(xml_safe(root), encoding="unicode")


def run(args: argparse.Namespace) -> int:
    if args.explain:
        from .explain import explain_text

        print(explain_text([args.explain]))
        return 0
    if not args.trace:
        raise UsageError("TRACE is required (a trace database, a HAR or flow file, or a fixture), or --explain CODE")
    select, ignore = _codes(args.select), _codes(args.ignore)
    for name in ("first_event", "stall"):
        if getattr(args, name) < 0:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 0")
    jobs = jobs_option(args.jobs)
    baseline = _load_baseline(args.baseline) if args.baseline else set()
    inputs = expand_inputs(args.trace, args.profile)
    options = Options(first_event=args.first_event, stall=args.stall)
    if len(inputs) == 1 and inputs[0] == args.trace[0]:
        result = run_check(args.trace[0], profile=args.profile, options=options, show_progress=sys.stderr.isatty(), jobs=jobs)
        return _report_one(args, result, select, ignore, baseline)
    if args.html:
        raise UsageError("--html takes one TRACE (run `chatkit-trace report` per trace)")
    outcomes = check_many(inputs, profile=args.profile, options=options, jobs=jobs)
    return _report_many(args, outcomes, select, ignore, baseline)


def expand_inputs(paths: Sequence[str], profile: str | None = None) -> list[str]:
    """The traces ``check`` judges, in the order given: a file as it is; a
    folder, every trace database and fixture under it (and HAR and flow
    files when a ``profile`` says how to read them), sorted by path.  A
    folder with none is a usage error (nothing to judge)."""
    from ..loading import FIXTURE_SUFFIXES, FLOW_SUFFIXES, HAR_SUFFIXES

    out: list[str] = []
    suffixes = (".db", *FIXTURE_SUFFIXES) + ((*HAR_SUFFIXES, *FLOW_SUFFIXES) if profile else ())
    for raw in paths:
        p = Path(raw)
        if not p.is_dir():
            out.append(raw)
            continue
        found = sorted(
            str(f) for f in p.rglob("*")
            if f.is_file() and f.name.lower().endswith(suffixes) and not f.name.endswith(("-wal", "-shm", "-journal"))
        )
        if not found:
            raise UsageError(f"{raw}: a folder with no trace databases or fixtures in it: nothing to judge")
        out.extend(found)
    return out


class Outcome:
    """One input of a ``check`` over many: its result, or the one-line error
    that made it exit 2 (nothing to judge, unreadable input)."""

    def __init__(self, trace: str, result: CheckResult | None = None, error: str | None = None) -> None:
        self.trace, self.result, self.error = trace, result, error


def _check_one(trace: str, profile: str | None, options: Options, jobs: int | None = 1) -> Outcome:
    from ..core import ChatkitTraceError

    try:
        return Outcome(trace, run_check(trace, profile=profile, options=options, jobs=jobs))
    except (ChatkitTraceError, FileNotFoundError, IsADirectoryError, PermissionError) as err:
        return Outcome(trace, error=str(err))


def check_many(inputs: Sequence[str], *, profile: str | None, options: Options, jobs: int | None = 1) -> list[Outcome]:
    """``run_check`` of every input, ``jobs`` at a time in worker processes
    (``spawn``), the outcomes in input order.  ``jobs`` None: one per CPU
    for :data:`AUTO_INPUTS` inputs or more; fewer are checked one after the
    other, each large one over one worker per CPU (``run_check``'s None)."""
    if jobs is None:
        if len(inputs) < AUTO_INPUTS:
            return [_check_one(t, profile, options, None) for t in inputs]
        jobs = os.cpu_count() or 1
    if jobs <= 1 or len(inputs) <= 1:
        return [_check_one(t, profile, options) for t in inputs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    try:
        with ProcessPoolExecutor(max_workers=min(jobs, len(inputs)), mp_context=multiprocessing.get_context("spawn")) as pool:
            return list(pool.map(_check_one, inputs, [profile] * len(inputs), [options] * len(inputs)))
    except BrokenProcessPool:
        _workers_failed()
        return [_check_one(t, profile, options) for t in inputs]


def _filtered(result: CheckResult, select: Sequence[str], ignore: Sequence[str], baseline: set[str]) -> list[Finding]:
    findings = select_findings(result.findings, select, ignore)
    kept = [f for f in findings if f.fingerprint not in baseline]
    result.baselined = len(findings) - len(kept)
    result.findings = kept
    return findings


def _write_baseline(path: str, findings: Sequence[Finding]) -> None:
    Path(path).write_text(
        mask_derived_json(json.dumps({"findings": [{"fingerprint": f.fingerprint, "code": f.code, "message": f.message}
                                                   for f in findings]}, indent=2))
        + "\n",
        "utf-8",
    )
    print(f"wrote {len(findings)} finding(s) to the baseline {path}", file=sys.stderr)


def _emit(args: argparse.Namespace, text: str) -> None:
    text = mask_derived_json(text) if args.format == "json" else mask_derived(text)  # nothing secret in a file
    if args.output:
        Path(args.output).write_text(text + "\n", "utf-8")
    else:
        print(text)


def _report_one(args: argparse.Namespace, result: CheckResult, select: Sequence[str], ignore: Sequence[str],
                baseline: set[str]) -> int:
    for note in result.notes:
        print(f"chatkit-trace check: note: {note}", file=sys.stderr)
    if args.write_baseline:
        _write_baseline(args.write_baseline, select_findings(result.findings, select, ignore))
        return 0
    _filtered(result, select, ignore, baseline)
    kept = result.findings
    if args.html:
        from ..report import write_report

        shown = {f.fingerprint for f in kept}
        options = Options(first_event=args.first_event, stall=args.stall)
        write_report(args.trace[0], args.html, profile=args.profile, options=options, keep=lambda f: f.fingerprint in shown)
    if args.format == "json":
        text = render_json(result)
    elif args.format == "junit":
        text = render_junit(result, args.fail_on)
    else:
        text = render_text(result, color=args.output is None and sys.stdout.isatty())
    _emit(args, text)
    return 1 if result.fails(args.fail_on) else 0


def _report_many(args: argparse.Namespace, outcomes: Sequence[Outcome], select: Sequence[str], ignore: Sequence[str],
                 baseline: set[str]) -> int:
    """Every input's report in input order; the exit code is the highest of
    theirs (2 for an input with nothing to judge or that cannot be read)."""
    codes: list[int] = []
    for o in outcomes:
        if o.error is not None:
            print(f"chatkit-trace check: error: {o.error}", file=sys.stderr)
            codes.append(2)
            continue
        assert o.result is not None
        for note in o.result.notes:
            print(f"chatkit-trace check: note: {o.trace}: {note}", file=sys.stderr)
    if args.write_baseline:
        found = [f for o in outcomes if o.result is not None for f in select_findings(o.result.findings, select, ignore)]
        _write_baseline(args.write_baseline, found)
        return 2 if codes else 0
    for o in outcomes:
        if o.result is not None:
            _filtered(o.result, select, ignore, baseline)
            codes.append(1 if o.result.fails(args.fail_on) else 0)
    if args.format == "json":
        text = render_json_many(outcomes)
    elif args.format == "junit":
        text = render_junit_many(outcomes, args.fail_on)
    else:
        color = args.output is None and sys.stdout.isatty()
        parts = []
        for o in outcomes:
            body = render_text(o.result, color=color) if o.result is not None else f"error: {o.error}"
            parts.append(f"== {o.trace}\n{body}")
        failed = sum(1 for c in codes if c)
        parts.append(f"{len(outcomes)} trace(s): {failed} failed (exit {max(codes)})")
        text = "\n\n".join(parts)
    _emit(args, text)
    return max(codes)


def render_json_many(outcomes: Sequence[Outcome]) -> str:
    """``{"traces": [...]}``: each input's findings and summary as for one
    trace (or its ``error``), in input order."""
    traces: list[dict[str, Any]] = []
    for o in outcomes:
        if o.result is None:
            traces.append({"trace": o.trace, "error": o.error})
        else:
            traces.append({"trace": o.trace, "findings": [f.to_json() for f in o.result.findings], "summary": o.result.summary()})
    return json.dumps({"traces": traces}, indent=2, default=str)


def render_junit_many(outcomes: Sequence[Outcome], fail_on: str = "error") -> str:
    """One JUnit test suite per input (an unreadable one as an error)."""
    root = ET.Element("testsuites")
    for o in outcomes:
        if o.result is not None:
            doc = ET.fromstring(render_junit(o.result, fail_on).split("\n", 1)[1])
            for suite in doc:
                suite.set("name", f"chatkit-trace {o.trace}")
                root.append(suite)
        else:
            suite = ET.SubElement(root, "testsuite", name=f"chatkit-trace {o.trace}", tests="1", failures="0", errors="1",
                                  skipped="0")
            case = ET.SubElement(suite, "testcase", classname="chatkit-trace", name=f"check {o.trace}")
            ET.SubElement(case, "error", message=o.error or "", type="input")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(xml_safe(root), encoding="unicode")
