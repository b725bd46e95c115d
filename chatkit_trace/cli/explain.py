"""``chatkit-trace explain``: what a finding code or a rule number means.

The text is docs/rules.md, shipped with the package (:mod:`chatkit_trace.rules`);
``chatkit-trace check --explain CODE`` prints the same.  An unknown name is
one line on stderr and exit code 2.

With ``--profile NAME`` or ``--trace TRACE`` (whose recorded profile is
used), a code's explanation goes on in that route's protocol
(decisions.md 279): chatkit's words on its wire (what concludes a run as
completed, failed or interrupted, what carries output, what an event id
is) and the code's worked example in its frames when the adapter has one
(:attr:`~chatkit_trace.adapters.AdapterProtocol.wire_examples`).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import UsageError
from ..rules import UnknownRule, explain

__all__ = ["add_parser", "run", "explain_text", "wire_text"]

#: The glossary's rows, in order.
TERMS = ("completed", "failed", "interrupted", "output", "event id")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "explain",
        help="what a finding code or rule number means, with a worked example",
        description="Print a finding code's severity, meaning, rules and a worked example (a short frame sequence "
        "and what the chatkit UI does with it), or a rule's text and the codes that cite it. "
        "The text is docs/rules.md, shipped with the package. With --profile or --trace, a code's "
        "explanation goes on in that route's protocol: chatkit's words on its wire and the example in its frames.",
    )
    p.add_argument("names", nargs="+", metavar="NAME", help="a finding code (CK201) or a rule number (R8.4, R2.5a, R8)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--profile", help="explain in this profile's protocol (openai, adk, a2a, hermes, …)")
    where.add_argument("--trace", metavar="TRACE", help="explain in the protocol TRACE was recorded with")
    p.set_defaults(run=run)


def explain_text(names: list[str]) -> str:
    """The explanations of ``names``, or a :class:`UsageError` naming the first unknown one."""
    try:
        return "\n\n".join(explain(name) for name in names)
    except UnknownRule as err:
        raise UsageError(str(err)) from None


def _protocol(profile: str | None, trace: str | None) -> Any:
    """The adapter protocol of ``profile``, or of the profile ``trace`` was recorded with."""
    from ..errors import ChatkitTraceError
    from ..route.profiles import resolve_adapter

    meta: dict[str, Any] = {}
    if trace is not None:
        from pathlib import Path

        from ..store import TraceStore

        if not Path(trace).is_file():
            raise UsageError(f"--trace {trace}: no such trace file")
        try:
            with TraceStore(trace, readonly=True) as store:
                meta = store.meta()
        except Exception as err:  # noqa: BLE001 - not a trace database: one line, exit 2
            raise UsageError(f"--trace {trace}: not a trace database ({err})") from None
    try:
        adapter, _, _ = resolve_adapter(profile, meta)
    except ChatkitTraceError as err:
        raise UsageError(str(err)) from None
    return adapter.protocol


def wire_text(name: str, protocol: Any) -> str:
    """``name`` (a code) in ``protocol``'s wire: its glossary and its example."""
    pname = getattr(protocol, "name", None) or type(protocol).__name__
    terms = getattr(protocol, "wire_terms", None) or {}
    examples = getattr(protocol, "wire_examples", None) or {}
    out = [f"On the {pname} wire (chatkit's words -> what {pname} sends):"]
    rows = [(k, terms[k]) for k in TERMS if terms.get(k)]
    if rows:
        width = max(len(k) for k, _ in rows)
        out += [f"  {k.ljust(width)}  {v}" for k, v in rows]
    else:
        out.append(f"  ({pname}'s adapter does not say; the example above is chatkit's example protocol)")
    example = examples.get(name.upper())
    if example:
        out += ["", f"{name.upper()} in {pname}'s frames:", "", "```text", example, "```"]
    elif rows:
        out += ["", f"No {pname} example of {name.upper()}: read the example above with the words listed here."]
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    text = explain_text(args.names)
    if args.profile is None and args.trace is None:
        print(text)
        return 0
    protocol = _protocol(args.profile, args.trace)
    parts = []
    for name in args.names:
        one = explain_text([name])
        if name.upper().startswith("CK"):
            one += "\n\n" + wire_text(name, protocol)
        parts.append(one)
    print("\n\n".join(parts))
    return 0
