"""A finding code's rule text for the report, from docs/rules.md.

The report reads every code's text through :func:`rule_text` only: the
code's meaning and what the chatkit UI does, as ``docs/rules.md`` (shipped
in the package, :mod:`chatkit_trace.rules`) explains it, followed by the
text of each rule it cites.  The same words ``chatkit-trace explain`` prints.
"""

from __future__ import annotations

import re

from ..analyze import CATALOGUE
from ..rules import UnknownRule, code_doc
from ..rules import rule_text as _rule

__all__ = ["rule_text"]

_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")


def _plain(markdown: str) -> str:
    """Markdown links to their text, whitespace folded (the page shows plain text)."""
    return " ".join(_LINK.sub(r"\1", markdown).replace("`", "").split())


def rule_text(code: str) -> str | None:
    """What ``code`` means, what the UI does and its rules' text (None for an unknown code)."""
    info = CATALOGUE.get(code)
    if info is None:
        return None
    try:
        doc = code_doc(code)
    except UnknownRule:  # a code the rules document does not explain yet: the catalogue's words
        rules = f"rule {info.rule}" if info.rule != "-" else "no rule (a measurement)"
        return f"{code} ({info.severity}, {rules}): reported when {info.title}."
    parts = [f"{code} ({info.severity}): {info.title}.", _plain(doc.meaning), _plain(doc.ui)]
    for rule in doc.rules:
        try:
            parts.append(f"{rule}: {_plain(_rule(rule))}")
        except UnknownRule:
            continue
    return "\n\n".join(p for p in parts if p)
