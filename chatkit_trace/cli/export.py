"""``chatkit-trace export``: a conformance fixture, OpenTelemetry spans or Parquet.

``export TRACE --session S [--run R] -o FILE`` writes the session's
exchanges (or those of some runs) with the outcome the current adapter and
Core give them (facts with their results, final snapshot, findings) as a
versioned ``*.chatkit.json`` file; see :mod:`chatkit_trace.fixtures.export`
for what is kept and normalised.

``export TRACE... --otlp [ENDPOINT]`` sends each trace's sessions, runs and
findings as spans (:mod:`chatkit_trace.export.otlp`); ``export TRACE...
--parquet DIR`` writes them into a Parquet dataset
(:mod:`chatkit_trace.export.parquet`); both at once derive each trace once.
Exit 0, or 2 with one line saying what is wrong (e.g. which sessions or
runs exist, a receiver that refused the spans, a missing extra).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import NothingToJudge, UsageError

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "export",
        help="export a session as a conformance fixture (*.chatkit.json), or traces as OpenTelemetry spans (--otlp) "
        "or a Parquet dataset (--parquet)",
        description="Export one session of a trace (or some of its runs) as a versioned JSON fixture: the "
        "exchanges in order (requests, responses, frames with relative timing and event ids, how each stream "
        "ended, history reads) and the expected outcome (facts with admission results, final snapshot, "
        "findings). Redaction is applied again; hosts, ports and times are normalised. "
        "With --otlp or --parquet: every given trace's sessions, runs and findings (derived as check derives "
        "them) as OpenTelemetry spans after the GenAI semantic conventions, or into a Parquet dataset many "
        "traces share (docs/export.md).",
    )
    p.add_argument("trace", metavar="TRACE", nargs="+",
                   help="a trace database (or a HAR/flow file with --profile, or a fixture); several with --otlp/--parquet")
    p.add_argument("--session", "-s", metavar="S", help="the session to export (a fixture)")
    p.add_argument("--run", "-r", action="append", dest="run_ids", default=[], metavar="R",
                   help="only this run (repeatable; default: every run of the session)")
    p.add_argument("-o", "--output", metavar="FILE", help="the fixture to write (*.chatkit.json; - for stdout)")
    p.add_argument("--profile", metavar="P", help="profile/adapter (default: the one the trace was recorded with)")
    p.add_argument("--redact", action="append", default=[], metavar="NAME",
                   help="also redact this header/parameter/field (header:X, query:X, field:X); repeatable")
    p.add_argument("--scrub-text", action="store_true",
                   help="replace message text with same-shape placeholders (ids and structure kept), to share the fixture")
    p.add_argument("--note", metavar="TEXT", help="a note kept in the fixture's meta (what it shows)")
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")
    g = p.add_argument_group("OpenTelemetry and Parquet (docs/export.md)")
    g.add_argument("--otlp", nargs="?", const="", metavar="ENDPOINT",
                   help="send spans to this OTLP receiver (http://host:4318 for HTTP/protobuf, host:4317 with "
                   "--otlp-protocol grpc); without ENDPOINT, the OTEL_EXPORTER_OTLP_* variables decide")
    g.add_argument("--otlp-protocol", choices=("http/protobuf", "grpc"), metavar="P",
                   help="http/protobuf or grpc (default: OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL, else http/protobuf)")
    g.add_argument("--parquet", metavar="DIR",
                   help="write the traces into the Parquet dataset DIR (created; a trace exported again replaces its files)")
    g.add_argument("--frames", nargs="?", type=int, const=100, default=0, metavar="N",
                   help="frames as span events, at most N per run (default N: 100), sampled evenly beyond")
    g.add_argument("--content", action="store_true",
                   help="include message text (gen_ai.input/output.messages, frame text), masked as the trace is")
    g.add_argument("--backend", metavar="NAME", help="name the backend so (default: each exchange's host:port)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.otlp is not None or args.parquet:
        return run_outbound(args)
    from ..fixtures import FIXTURE_SUFFIX, dumps_fixture, export_fixture

    if len(args.trace) > 1:
        raise UsageError("a fixture is made of one trace: give one TRACE (several go with --otlp or --parquet)")
    if not args.session or not args.output:
        missing = [n for n, v in (("--session", args.session), ("-o/--output", args.output)) if not v]
        raise UsageError(f"the following arguments are required: {', '.join(missing)} (or --otlp/--parquet)")
    args.trace = args.trace[0]
    out = args.output
    if out != "-":
        path = Path(out)
        if path.exists() and not args.force:
            raise UsageError(f"{path} exists: use --force to replace it, or choose another -o")
        if path.is_dir():
            raise UsageError(f"{path} is a directory: give the fixture's file name")
        if not path.parent.exists():
            raise UsageError(f"{path.parent}: no such directory for the output")
    result = export_fixture(
        args.trace, args.session, args.run_ids, profile=args.profile, redact=args.redact,
        scrub_text=args.scrub_text, note=args.note,
    )
    fx = result.fixture
    text = dumps_fixture(fx)
    if out == "-":
        sys.stdout.write(text)
    else:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, "utf-8")
        tmp.replace(path)
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    frames = sum(len(e.frames) for e in fx.exchanges)
    codes = ", ".join(sorted({f.code for f in fx.expected.findings})) or "none"
    print(
        f"exported session {args.session!r} (runs {', '.join(fx.meta.runs) or '-'}): {len(fx.exchanges)} exchanges, "
        f"{frames} frames, {len(fx.expected.facts)} facts, findings {codes} -> {out}",
        file=sys.stderr,
    )
    if out != "-" and not out.endswith(FIXTURE_SUFFIX):
        print(f"note: the pytest plugin collects files named *{FIXTURE_SUFFIX}", file=sys.stderr)
    return 0


def run_outbound(args: argparse.Namespace) -> int:
    """``--otlp`` and/or ``--parquet``: every trace, one derive each."""
    from ..export import ExportOptions

    if args.session or args.run_ids or args.output or args.scrub_text or args.note:
        raise UsageError("--session, --run, -o, --scrub-text and --note make a fixture: not with --otlp/--parquet")
    if args.frames < 0:
        raise UsageError("--frames must be >= 0")
    exporter = None
    if args.otlp is not None:
        from ..export.otlp import make_exporter

        exporter = make_exporter(args.otlp or None, args.otlp_protocol)
    elif args.otlp_protocol:
        raise UsageError("--otlp-protocol goes with --otlp")
    if args.parquet:
        from ..export.parquet import check_dataset, require_pyarrow

        require_pyarrow()
        check_dataset(Path(args.parquet))
    options = ExportOptions(frames_per_run=args.frames, content=args.content, backend=args.backend, redact=args.redact)
    try:
        for trace in args.trace:
            _export_one(trace, args, options, exporter)
    finally:
        if exporter is not None:
            exporter.shutdown()
    return 0


def _export_one(trace: str, args: argparse.Namespace, options: Any, exporter: Any) -> None:
    from ..export import collect
    from .check import _nothing_to_judge, _open

    sinks: list[Any] = []
    otlp = None
    if exporter is not None:
        from ..export.otlp import OTLPSink

        otlp = OTLPSink(exporter)
        sinks.append(otlp)
    dataset = None
    if args.parquet:
        from ..export.parquet import ParquetSink

        dataset = ParquetSink(args.parquet)
        sinks.append(dataset)
    loaded = _open(trace, args.profile, writable=False)
    try:
        result = collect(loaded.store, loaded.adapter, capabilities=loaded.capabilities, name=Path(trace).name,
                         kind=loaded.kind, options=options, sinks=sinks)
        if not result.counts.get("understood"):
            raise NothingToJudge(_nothing_to_judge(trace, loaded, result.counts))
    finally:
        loaded.close()
    _report(trace, result, otlp, dataset, exporter)


def _report(trace: str, result: Any, otlp: Any, dataset: Any, exporter: Any) -> None:
    from ..export.otlp import describe

    codes = sorted({f.finding.code for f in result.findings})
    what = (f"{trace}: {len(result.sessions)} session(s), {len(result.runs)} run(s), {result.counts.get('frames', 0)} "
            f"frame(s), findings {', '.join(codes) or 'none'} (trace {result.info.uid})")
    if dataset is not None:
        print(f"{what} -> {len(dataset.written)} Parquet file(s) in {dataset.root}", file=sys.stderr)
    if otlp is not None:
        if otlp.error is not None:
            raise UsageError(
                f"{trace}: the OTLP receiver at {describe(exporter)} took {otlp.sent} of {otlp.spans} span(s): {otlp.error}"
            )
        print(f"{what} -> {otlp.sent} span(s) to {describe(exporter)}", file=sys.stderr)
