"""``chatkit-trace demo``: the whole product on a built-in default.

Until the recorder and the demo backend exist, the demo admits the bundled
Core script ``data/demo.jsonl`` and prints what the Core did with each line.
"""

from __future__ import annotations

import argparse
from importlib import resources


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("demo", help="run the built-in demo")
    p.add_argument("--no-view", action="store_true", help="do not open the viewer")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .admit import run_script_text, render_text

    text = resources.files("chatkit_trace").joinpath("data/demo.jsonl").read_text("utf-8")
    outcome = run_script_text(text, name="demo.jsonl")
    print(render_text(outcome))
    return 0
