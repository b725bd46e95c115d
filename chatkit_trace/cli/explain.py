"""``chatkit-trace explain``: what a finding code or a rule number means.

The text is docs/rules.md, shipped with the package (:mod:`chatkit_trace.rules`);
``chatkit-trace check --explain CODE`` prints the same.  An unknown name is
one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ..rules import UnknownRule, explain

__all__ = ["add_parser", "run", "explain_text"]


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "explain",
        help="what a finding code or rule number means, with a worked example",
        description="Print a finding code's severity, meaning, rules and a worked example (a short frame sequence "
        "and what the chatkit UI does with it), or a rule's text and the codes that cite it. "
        "The text is docs/rules.md, shipped with the package.",
    )
    p.add_argument("names", nargs="+", metavar="NAME", help="a finding code (CK201) or a rule number (R8.4, R2.5a, R8)")
    p.set_defaults(run=run)


def explain_text(names: list[str]) -> str:
    """The explanations of ``names``, or a :class:`UsageError` naming the first unknown one."""
    try:
        return "\n\n".join(explain(name) for name in names)
    except UnknownRule as err:
        raise UsageError(str(err)) from None


def run(args: argparse.Namespace) -> int:
    print(explain_text(args.names))
    return 0
