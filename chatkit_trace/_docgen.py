"""Generate docs/cli-reference.md from the CLI itself (so it cannot drift).

    python -m chatkit_trace._docgen > docs/cli-reference.md

A test regenerates it and compares with the committed file.
"""

from __future__ import annotations

import argparse
import os


def cli_reference() -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        from .cli import build_parser

        parser = build_parser()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        out = [
            "# Command reference",
            "",
            "Generated from the CLI by `python -m chatkit_trace._docgen`; a test keeps it in sync.",
            "",
            "```text",
            parser.format_help().rstrip(),
            "```",
            "",
        ]
        for name, p in sub.choices.items():
            out += [f"## `chatkit-trace {name}`", "", "```text", p.format_help().rstrip(), "```", ""]
        return "\n".join(out)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


if __name__ == "__main__":  # pragma: no cover
    print(cli_reference(), end="")
