"""``chatkit-trace check``: findings for CI (FINDINGS.md).

Exit codes: 0 no finding at or above ``--fail-on``; 1 there is one; 2 usage
or input error (one clear line, no traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .analyze import CATALOGUE, SEVERITIES, Finding, Options, analyze_store, severity_rank
from .cli import UsageError

__all__ = ["add_parser", "run", "run_check", "render_text", "render_json", "render_junit", "select_findings", "CheckResult"]


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "check",
        help="report findings; exit 1 when one is at or above --fail-on (a CI gate)",
        description="Replay a trace through its adapter and chatkit's Core and report findings with stable codes. "
        "TRACE is a trace database, a HAR or mitmproxy flow file (with --profile) or a fixture.",
    )
    p.add_argument("trace", metavar="TRACE")
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
    p.add_argument("--no-store", action="store_true", help="do not write facts and findings back into the trace")
    p.set_defaults(run=run)


def _codes(value: str | None) -> list[str]:
    if not value:
        return []
    out = [c.strip().upper() for c in value.split(",") if c.strip()]
    for c in out:
        if not c.startswith("CK") or not any(code.startswith(c) for code in CATALOGUE):
            raise UsageError(f"unknown finding code or prefix {c!r} (codes are CK101 ... CK602)")
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
    def __init__(self, findings: list[Finding], baselined: int, trace: str, frames: int, facts: int) -> None:
        self.findings = findings
        self.baselined = baselined
        self.trace = trace
        self.frames = frames
        self.facts = facts

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
    store_results: bool = True,
    show_progress: bool = False,
) -> CheckResult:
    """Replay and analyze a trace; optionally write the derived tables and findings back."""
    from .loading import open_trace

    loaded = open_trace(path, profile=profile, writable=store_results)
    try:
        write = store_results and loaded.kind == "db" and not loaded.store.readonly
        total = loaded.store.db.execute("SELECT COUNT(DISTINCT session_id) FROM exchanges WHERE capability IS NOT NULL").fetchone()[0]
        with _session_progress(total, show_progress) as tick:
            findings, counts = analyze_store(
                loaded.store, loaded.adapter, capabilities=loaded.capabilities, options=options, write=write, on_session=tick
            )
        if write:
            write_findings(loaded.store, findings)
            # An empty findings table then means "clean", not "never checked".
            import time

            from . import __version__

            loaded.store.set_meta("analysed", {"at": time.time(), "chatkit_trace_version": __version__, "findings": len(findings)})
            loaded.store.commit()
        return CheckResult(findings, 0, str(path), counts["frames"], counts["facts"])
    finally:
        loaded.close()


class _session_progress:
    """A rich progress bar over sessions on a terminal; nothing when piped."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled, self.progress = total, enabled and total > 1, None

    def __enter__(self):  # type: ignore[no-untyped-def]
        if not self.enabled:
            return lambda sid, n: None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn("analysing sessions"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
            console=Console(stderr=True), transient=True,
        )
        self.progress.start()
        task = self.progress.add_task("sessions", total=self.total)
        return lambda sid, n: self.progress.advance(task)

    def __exit__(self, *exc) -> None:  # type: ignore[no-untyped-def]
        if self.progress is not None:
            self.progress.stop()


def write_findings(store: Any, findings: Sequence[Finding]) -> None:
    db = store.db
    with db.conn:
        db.execute("DELETE FROM findings")
        db["findings"].insert_all(
            {
                "code": f.code,
                "severity": f.severity,
                "rule": f.rule,
                "session_id": f.session_id,
                "run_id": f.run_id,
                "frames": json.dumps(f.frames),
                "fingerprint": f.fingerprint,
                "message": f.message,
                "detail": json.dumps(f.detail, default=str),
            }
            for f in findings
        )


# ------------------------------------------------------------------ rendering


def _grouped(findings: Sequence[Finding]) -> list[tuple[tuple[str, str], list[Finding]]]:
    groups: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for f in findings:
        groups[(f.session_id or "-", f.run_id or "-")].append(f)
    ordered = sorted(groups.items(), key=lambda kv: (min(severity_rank(f.severity) for f in kv[1]), kv[0]))
    return [(k, sorted(v, key=lambda f: (severity_rank(f.severity), f.code))) for k, v in ordered]


def render_text(result: CheckResult, *, color: bool = False) -> str:
    from rich.console import Console

    console = Console(record=True, width=110, color_system="standard" if color else None, force_terminal=color, file=_Null())
    styles = {"error": "bold red", "warning": "yellow", "info": "cyan"}
    if not result.findings:
        console.print(f"[green]No findings[/green] in {result.trace} ({result.frames} frames, {result.facts} facts).")
    for (session, run_id), items in _grouped(result.findings):
        console.print(f"[bold]session {session}  run {run_id}[/bold]")
        for f in items:
            frames = ", ".join(f.frames[:3]) + (" ..." if len(f.frames) > 3 else "")
            console.print(
                f"  [{styles[f.severity]}]{f.severity:<7}[/{styles[f.severity]}] [bold]{f.code}[/bold] "
                f"({f.rule}) {f.message}  [dim]frames {frames}[/dim]",
                highlight=False,
                soft_wrap=False,
            )
    s = result.summary()
    tail = f"{s['total']} finding(s): {s['error']} error, {s['warning']} warning, {s['info']} info"
    if result.baselined:
        tail += f" ({result.baselined} in the baseline not shown)"
    console.print(tail)
    return console.export_text(styles=color).rstrip("\n")


class _Null:
    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        pass


def render_json(result: CheckResult) -> str:
    return json.dumps({"findings": [f.to_json() for f in result.findings], "summary": result.summary()}, indent=2, default=str)


def render_junit(result: CheckResult) -> str:
    """JUnit XML: each finding is a failed test case (CI systems list them)."""
    suite = ET.Element(
        "testsuite",
        name="chatkit-trace",
        tests=str(max(1, len(result.findings))),
        failures=str(len(result.findings)),
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
        failure = ET.SubElement(case, "failure", message=f.message, type=f"{f.code} {f.severity}")
        failure.text = f"{f.code} ({f.rule}) {f.severity}: {f.message}\nframes: {', '.join(f.frames)}\n" + json.dumps(
            f.detail, indent=2, default=str
        )
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode")


def run(args: argparse.Namespace) -> int:
    select, ignore = _codes(args.select), _codes(args.ignore)
    for name in ("first_event", "stall"):
        if getattr(args, name) < 0:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 0")
    baseline = _load_baseline(args.baseline) if args.baseline else set()
    result = run_check(
        args.trace,
        profile=args.profile,
        options=Options(first_event=args.first_event, stall=args.stall),
        store_results=not args.no_store,
        show_progress=sys.stderr.isatty(),
    )
    findings = select_findings(result.findings, select, ignore)
    if args.write_baseline:
        Path(args.write_baseline).write_text(
            json.dumps({"findings": [{"fingerprint": f.fingerprint, "code": f.code, "message": f.message} for f in findings]}, indent=2)
            + "\n",
            "utf-8",
        )
        print(f"wrote {len(findings)} finding(s) to the baseline {args.write_baseline}", file=sys.stderr)
        return 0
    kept = [f for f in findings if f.fingerprint not in baseline]
    result.baselined = len(findings) - len(kept)
    result.findings = kept
    if args.html:
        from .report import write_report

        shown = {f.fingerprint for f in kept}
        options = Options(first_event=args.first_event, stall=args.stall)
        write_report(args.trace, args.html, profile=args.profile, options=options, keep=lambda f: f.fingerprint in shown)
    if args.format == "json":
        text = render_json(result)
    elif args.format == "junit":
        text = render_junit(result)
    else:
        text = render_text(result, color=args.output is None and sys.stdout.isatty())
    if args.output:
        Path(args.output).write_text(text + "\n", "utf-8")
    else:
        print(text)
    return 1 if result.fails(args.fail_on) else 0
