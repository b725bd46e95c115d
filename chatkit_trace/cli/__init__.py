"""The ``chatkit-trace`` command line.

Each command lives in its own module, which provides ``add_parser(sub)``
(registering its arguments) and ``run(args) -> int`` (the exit code).  A user
mistake becomes one clear line on stderr and exit code 2, never a traceback
(:class:`UsageError`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ..core import ChatkitTraceError
from ..errors import UsageError

#: command name -> module (relative to chatkit_trace) providing add_parser/run.
COMMANDS: dict[str, str] = {
    "admit": "chatkit_trace.cli.admit",
    "demo": "chatkit_trace.demo.play",
    "demo-backend": "chatkit_trace.demo.backend",
    "record": "chatkit_trace.cli.record",
    "addon-path": "chatkit_trace.cli.addon_path",
    "check": "chatkit_trace.cli.check",
    "explain": "chatkit_trace.cli.explain",
    "runs": "chatkit_trace.cli.runs",
    "diff": "chatkit_trace.cli.diff",
    "redecode": "chatkit_trace.cli.redecode",
    "view": "chatkit_trace.cli.view",
    "import": "chatkit_trace.capture.importer",
    "export": "chatkit_trace.cli.export",
    "report": "chatkit_trace.cli.report",
    "replay": "chatkit_trace.cli.replay",
    "serve": "chatkit_trace.cli.serve",
    "redrive": "chatkit_trace.cli.redrive",
    "new-adapter": "chatkit_trace.cli.new_adapter",
}


#: commands that own the terminal (a full-screen app, a proxy, servers): their
#: output is not wrapped; what they print of a trace is masked where it is made
INTERACTIVE = frozenset({"view", "record", "demo", "demo-backend", "serve", "redrive"})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chatkit-trace",
        description="Record, decode and diagnose chat backends' streaming traffic against chatkit's Core.",
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"chatkit-trace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        try:
            mod = importlib.import_module(module)
        except ImportError as err:  # a broken install: say so when the command is used
            p = sub.add_parser(name, help=f"(unavailable: {err})")
            p.set_defaults(run=_unavailable(name, err))
            continue
        mod.add_parser(sub)
    #: command -> its parser, so a command's mistakes show that command's usage
    parser.commands = dict(sub.choices)  # type: ignore[attr-defined]
    return parser


def _unavailable(name: str, err: ImportError):  # type: ignore[no-untyped-def]
    def run(args: argparse.Namespace) -> int:
        raise UsageError(f"this installation cannot run {name!r}: {err}")

    return run


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; Ctrl-C at any point after it starts (importing the
    commands takes a while) is exit 130 without a traceback."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return 130


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if not getattr(args, "command", None):
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        parser.print_help()  # asked for nothing: the help is the answer
        return 0
    if extra:
        # The command's own usage, not the top level's (argparse reports these at the top).
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")  # type: ignore[attr-defined]
    try:
        if args.command in INTERACTIVE:
            return int(args.run(args) or 0)
        from ._output import guarded

        with guarded():  # what a command prints is masked (issue 32)
            return int(args.run(args) or 0)
    except (ChatkitTraceError, FileNotFoundError, IsADirectoryError, PermissionError) as err:
        print(f"chatkit-trace {args.command}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0

