"""``chatkit-trace addon-path``: where the installed mitmproxy addon script is.

For people who run mitmproxy themselves::

    mitmweb -s "$(chatkit-trace addon-path)" --mode reverse:http://127.0.0.1:8000 \\
        --set chatkit_profile=openai --set chatkit_db=trace.db
"""

from __future__ import annotations

import argparse

from .record import addon_path

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "addon-path",
        help="print the path of the installed mitmproxy addon script (for mitmdump/mitmweb -s)",
        description="Print the absolute path of chatkit_trace/addon.py as installed, for `mitmdump -s` or `mitmweb -s`.",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    print(addon_path())
    return 0
