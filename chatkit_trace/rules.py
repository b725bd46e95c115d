"""The rules chatkit-trace checks, and what each finding code means.

The text is ``docs/rules.md``, shipped in the package as
``chatkit_trace/data/rules.md`` (a test keeps the two identical), so the
``explain`` command, ``check``'s output, the viewer and a report quote the
same words the repository's documentation shows::

    >>> from chatkit_trace.rules import rule_text, explain
    >>> rule_text("R8.4")          # the paragraph, as Markdown
    >>> print(explain("CK201"))    # severity, meaning, rules, worked example

Rule numbers look like ``R8.4``, ``R2.5a`` or, for a whole section, ``R8``;
finding codes like ``CK201``.  Standard library only.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

from .errors import UnknownRule

__all__ = [
    "RULE_ID",
    "CodeDoc",
    "Rule",
    "UnknownRule",
    "cited_rules",
    "code_doc",
    "codes",
    "explain",
    "rule_anchor",
    "rule_link",
    "rule_text",
    "rules",
    "rules_markdown",
]

#: A rule number as the code cites it: ``R3``, ``R8.4``, ``R2.5a``, ``R13.11``.
RULE_ID = re.compile(r"\bR(\d+)(?:\.(\d+)([a-z]?))?\b")

#: Where the rules live in the repository (links in text meant for people).
DOC_PATH = "docs/rules.md"

_CODE_ID = re.compile(r"^CK\d{3}$")
_ANCHOR = re.compile(r'^<a id="([a-z0-9-]+)"></a>\n', re.M)
_HEADING = re.compile(r"^(#{2,3}) (\S+) (.+)$")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_SEVERITY_LINE = re.compile(r"^(error|warning|info) · (.+)$")


@dataclass(frozen=True)
class Rule:
    """One rule (``R8.4``) or one section (``R8``) of docs/rules.md."""

    id: str
    title: str
    #: The rule's text as Markdown (a section's: its introduction).
    text: str
    anchor: str
    #: The section it belongs to (``R8`` for ``R8.4``; a section names itself).
    section: str


@dataclass(frozen=True)
class CodeDoc:
    """A finding code as docs/rules.md explains it."""

    code: str
    severity: str
    #: Rule numbers, as the catalogue's ``rule`` field lists them (``("R3.5", "R2.5a")``).
    rules: tuple[str, ...]
    title: str
    #: What the code means and what to change, as Markdown.
    meaning: str
    #: The worked example's frame (or fact) sequence, plain text.
    example: str
    #: What the chatkit UI does with that sequence, as Markdown.
    ui: str
    anchor: str


def rules_markdown() -> str:
    """The whole of docs/rules.md, from the installed package."""
    return resources.files("chatkit_trace").joinpath("data", "rules.md").read_text(encoding="utf-8")


def rule_anchor(rule_id: str) -> str:
    """The anchor of a rule in docs/rules.md: ``R8.4`` -> ``r84``, ``R2.5a`` ->
    ``r25a``, ``R8`` -> ``r8``; rules of section R1 keep a hyphen (``R1.3`` ->
    ``r1-3``) so that they cannot collide with R13."""
    m = RULE_ID.fullmatch(rule_id)
    if m is None:
        raise UnknownRule(f"not a rule number: {rule_id!r}")
    section, number, letter = m.groups()
    if number is None:
        return f"r{section}"
    return f"r{section}-{number}{letter}" if section == "1" else f"r{section}{number}{letter}"


def rule_link(name: str, base: str = DOC_PATH) -> str:
    """``docs/rules.md#r84`` for a rule number, ``docs/rules.md#ck201`` for a code."""
    key = _normalise(name)
    return f"{base}#{key.lower() if _CODE_ID.match(key) else rule_anchor(key)}"


def cited_rules(text: str) -> list[str]:
    """The rule numbers ``text`` cites, in order of first appearance."""
    out: list[str] = []
    for m in RULE_ID.finditer(text):
        if m.group(0) not in out:
            out.append(m.group(0))
    return out


def _chunks(markdown: str) -> list[tuple[str, str]]:
    """(anchor, text after it up to the next anchor) for every ``<a id>``."""
    marks = list(_ANCHOR.finditer(markdown))
    return [
        (m.group(1), markdown[m.end() : marks[i + 1].start() if i + 1 < len(marks) else len(markdown)])
        for i, m in enumerate(marks)
    ]


@cache
def _parsed() -> tuple[dict[str, Rule], dict[str, CodeDoc]]:
    found_rules: dict[str, Rule] = {}
    found_codes: dict[str, CodeDoc] = {}
    for anchor, chunk in _chunks(rules_markdown()):
        first, _, body = chunk.partition("\n")
        heading = _HEADING.match(first)
        if heading is None:
            continue
        name, title = heading.group(2), heading.group(3).strip()
        # A section's text is its introduction, up to its first rule.
        body = body.split("\n### ", 1)[0].split('\n<a id="', 1)[0].strip()
        if RULE_ID.fullmatch(name):
            section = "R" + RULE_ID.fullmatch(name).group(1)  # type: ignore[union-attr]
            found_rules[name] = Rule(name, title, body, anchor, section)
        elif _CODE_ID.match(name):
            found_codes[name] = _code_doc(name, title, body, anchor)
    return found_rules, found_codes


def _code_doc(code: str, title: str, body: str, anchor: str) -> CodeDoc:
    head, _, rest = body.partition("\n\n")
    m = _SEVERITY_LINE.match(head.strip())
    if m is None:
        raise ValueError(f"docs/rules.md: {code} has no 'severity · rules' line")
    listed = tuple(_LINK.sub(r"\1", m.group(2)).split())
    meaning, _, after = rest.partition("```text\n")
    example, _, ui = after.partition("\n```")
    return CodeDoc(
        code=code,
        severity=m.group(1),
        rules=() if listed == ("-",) else listed,
        title=title,
        meaning=meaning.strip(),
        example=example.rstrip(),
        ui=ui.strip(),
        anchor=anchor,
    )


def rules() -> Mapping[str, Rule]:
    """Every rule and section docs/rules.md defines, by number, in its order."""
    return _parsed()[0]


def codes() -> Mapping[str, CodeDoc]:
    """Every finding code docs/rules.md explains, by code, in its order."""
    return _parsed()[1]


def _normalise(name: str) -> str:
    name = name.strip()
    if re.fullmatch(r"(?i)ck\d{3}", name):
        return name.upper()
    m = re.fullmatch(r"(?i)r(\d+)(?:\.(\d+)([a-z]?))?", name)
    if m:
        section, number, letter = m.groups()
        return f"R{section}" + (f".{number}{letter.lower()}" if number is not None else "")
    return name


def _unknown(name: str) -> UnknownRule:
    return UnknownRule(
        f"unknown finding code or rule {name!r} (codes are CK101 ... CK602, rules R1.1 ... R13.11; see {DOC_PATH})"
    )


def rule_text(rule_id: str) -> str:
    """The text of a rule (``"R8.4"``) or a section (``"R8"``), as Markdown."""
    rule = rules().get(_normalise(rule_id))
    if rule is None:
        raise _unknown(rule_id)
    return rule.text


def code_doc(code: str) -> CodeDoc:
    """How docs/rules.md explains a finding code (``"CK201"``)."""
    doc = codes().get(_normalise(code))
    if doc is None:
        raise _unknown(code)
    return doc


# ------------------------------------------------------------------ plain text


def _plain(markdown: str, indent: str = "  ", width: int = 80) -> str:
    """Markdown to terminal text: links become their text, ``**`` goes,
    paragraphs are re-wrapped, lists, tables and code blocks keep their lines."""
    out: list[str] = []
    for block in markdown.split("\n\n"):
        text = _LINK.sub(r"\1", block).replace("**", "")
        lines = text.splitlines()
        if not lines:
            continue
        if lines[0].startswith(("|", "```")) or re.match(r"\d+\. ", lines[0]):
            items: list[str] = []
            for line in lines:
                if line.startswith("```"):
                    continue
                if re.match(r"\d+\. ", line) or not items or line.startswith("|"):
                    items.append(line)
                else:
                    items[-1] += " " + line.strip()
            for item in items:
                hang = " " * (item.index(" ") + 1) if re.match(r"\d+\. ", item) else ""
                out.append(_fill(item, width, indent, indent + hang) if hang else indent + item)
        else:
            out.append(_fill(" ".join(line.strip() for line in lines), width, indent, indent))
        out.append("")
    return "\n".join(out).rstrip()


def _fill(text: str, width: int, first: str, rest: str) -> str:
    return textwrap.fill(text, width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False, break_long_words=False)


def _installed() -> str:
    return str(resources.files("chatkit_trace").joinpath("data", "rules.md"))


def _citing(rule_id: str) -> list[str]:
    return [c.code for c in codes().values() if rule_id in c.rules]


def explain(name: str) -> str:
    """What a finding code or a rule number means, as terminal text.

    For a code: its severity, title and meaning, a worked example (a short
    frame sequence and what the UI does with it) and the text of each of its
    rules.  For a rule or a section: its text and the codes that cite it.
    Raises :class:`UnknownRule` for anything else.
    """
    key = _normalise(name)
    doc = codes().get(key)
    if doc is not None:
        parts = [
            f"{doc.code} ({doc.severity}): {doc.title}",
            "Rules: " + (", ".join(doc.rules) if doc.rules else "none (a measure of what users feel)"),
            "",
            _plain(doc.meaning),
            "",
            "  Example:",
            textwrap.indent(doc.example, "    "),
            "",
            _plain(doc.ui),
        ]
        for rid in doc.rules:
            cited = rules()[rid]
            parts += ["", f"{cited.id} {cited.title}", _plain(cited.text)]
        parts += ["", f"See {rule_link(doc.code)} (installed copy: {_installed()})."]
        return "\n".join(parts)
    rule = rules().get(key)
    if rule is None:
        raise _unknown(name)
    parts = [f"{rule.id} {rule.title}", _plain(rule.text)]
    if rule.section == rule.id:
        members = [r for r in rules().values() if r.section == rule.id and r.id != rule.id]
        if members:
            parts += ["", "  " + "\n  ".join(f"{r.id} {r.title}" for r in members)]
    else:
        section = rules()[rule.section]
        parts[0] += f"  (in {section.id} {section.title})"
    citing = _citing(rule.id)
    parts += ["", "Cited by: " + (", ".join(citing) if citing else "no finding code")]
    parts += [f"See {rule_link(rule.id)} (installed copy: {_installed()})."]
    return "\n".join(parts)
