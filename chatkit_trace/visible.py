"""Recorded text shown, never obeyed: control characters made visible.

A backend controls the ids, event names, texts and error messages a trace
holds, and a terminal obeys escape sequences: a recorded ``\\x1b]0;…\\x07``
sets the tmux pane's title, ``\\x1b[2J`` clears the screen, ``\\x1b[31mOK``
prints a red "OK" that chatkit-trace never said.  So every text output
(``runs``, ``check``, ``diff``, the viewer, the recorder's log lines) shows a
control character as its escape (:func:`visible`: ``\\x1b``, ``\\x07``,
``\\u202e``), and JSON outputs keep JSON's own escaping.

XML 1.0 forbids most C0 controls even as character references, so a JUnit
file with a raw ``\\x1b`` in an attribute is not well-formed and CI rejects
it: :func:`xml_text` replaces every character XML cannot hold by the same
visible escape, and :func:`xml_safe` does it for a whole ElementTree.

Standard library only (the CLI, the viewer, the report and the recorder
all use it).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

__all__ = ["CONTROL", "visible", "visible_line", "xml_safe", "xml_text", "json_safe"]

#: What a terminal may obey: C0 controls but tab and newline, DEL, C1 controls
#: (``\\x9b`` is an 8-bit CSI), the bidirectional overrides and isolates that
#: reorder what is shown ("Trojan source"), and lone surrogates (not text).
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
#: The same and tab and newline: one line (an id, a cell, a log line's fields).
_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
#: What XML 1.0 cannot hold, and what it discourages (C1 controls) or a reader may reorder.
_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")
#: Inside a JSON string written with ``ensure_ascii=False``: what must not appear raw in an HTML or XML file.
_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2028\u2029\u2066-\u2069\ud800-\udfff\ufffe\uffff]")

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(m: re.Match[str]) -> str:
    c = m.group(0)
    named = _NAMED.get(c)
    if named is not None:
        return named
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def visible(text: str) -> str:
    """``text`` with every control character written as its escape (``\\x1b``);
    tabs and newlines stay.  A backslash stays a backslash."""
    if not text or not isinstance(text, str):
        return text
    return CONTROL.sub(_escape, text) if CONTROL.search(text) else text


def visible_line(text: str) -> str:
    """:func:`visible` that also writes tab and newline as ``\\t`` and ``\\n``: one line."""
    if not text or not isinstance(text, str):
        return text
    return _LINE.sub(_escape, text) if _LINE.search(text) else text


def xml_text(text: str) -> str:
    """``text`` as XML 1.0 can hold it: every character it forbids (and the
    C1 controls and bidi overrides) written as its escape; tab, newline and
    carriage return stay (the serialiser writes them as references in attributes)."""
    if not text or not isinstance(text, str):
        return text
    return _XML.sub(_escape, text) if _XML.search(text) else text


def xml_safe(root: ET.Element) -> ET.Element:
    """Every text, tail, attribute name and value of the tree through :func:`xml_text` (in place)."""
    for el in root.iter():
        if el.text:
            el.text = xml_text(el.text)
        if el.tail:
            el.tail = xml_text(el.tail)
        if el.attrib:
            el.attrib = {xml_text(k): xml_text(v) if isinstance(v, str) else v for k, v in el.attrib.items()}
    return root


def _json_escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group(0)):04x}"


def json_safe(text: str) -> str:
    """JSON text written with ``ensure_ascii=False`` made safe to embed in HTML
    or XML: C1 controls, bidi overrides, line separators, noncharacters and
    lone surrogates as ``\\uXXXX`` escapes (JSON's own, so the value is the
    same).  JSON has no such character outside a string."""
    return _JSON.sub(_json_escape, text) if _JSON.search(text) else text
