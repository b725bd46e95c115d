"""A finding code's rule text for the report.

The report reads every code's text through :func:`rule_text` only, so that
when the rules reference (``docs/rules.md`` and its reader) lands, this one
function points at it.  Until then the text is the finding catalogue's:
severity, SPEC rule numbers and when the code is reported.
"""

from __future__ import annotations

from ..analyze import CATALOGUE

__all__ = ["rule_text"]


def rule_text(code: str) -> str | None:
    """What rule ``code`` enforces, in a sentence (None for an unknown code)."""
    info = CATALOGUE.get(code)
    if info is None:
        return None
    rules = f"SPEC {info.rule}" if info.rule != "-" else "no SPEC rule (a measurement)"
    return f"{code} ({info.severity}, {rules}): reported when {info.title}."
