"""Generate docs from the code itself (so they cannot drift).

    python -m chatkit_trace.cli._docgen > docs/cli-reference.md
    python -m chatkit_trace.cli._docgen --finding-codes   # the README's finding-code table

Tests regenerate both and compare them with the committed files.
"""

from __future__ import annotations

import argparse
import os


def cli_reference() -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        from . import build_parser

        parser = build_parser()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        out = [
            "# Command reference",
            "",
            "Generated from the CLI by `python -m chatkit_trace.cli._docgen`; a test keeps it in sync.",
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


def finding_codes_table(base: str = "docs/rules.md") -> str:
    """The README's finding-code table, from the catalogue, each code and rule
    linked to its explanation in docs/rules.md."""
    from ..analyze import CATALOGUE
    from ..rules import rule_link

    def rules(rule: str) -> str:
        return " ".join(f"[{r}]({rule_link(r, base)})" for r in rule.split()) if rule != "-" else "-"

    rows = ["| code | severity | rule | when |", "|---|---|---|---|"]
    rows += [f"| [{c.code}]({rule_link(c.code, base)}) | {c.severity} | {rules(c.rule)} | {c.title} |" for c in CATALOGUE.values()]
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover
    import sys

    print(finding_codes_table() if sys.argv[1:] == ["--finding-codes"] else cli_reference(), end="\n" if sys.argv[1:] else "")
