"""Secret values that travel: learned values and well-known token shapes, masked in place.

Redaction by name (:mod:`chatkit_trace.route.redact`) removes a secret
from the header, query parameter, cookie or JSON field that carries it.
But values travel: a backend that echoes its request headers in an SSE
frame, an error body that quotes the API key ("Incorrect API key provided:
sk-proj-…"), a WebSocket message that repeats a cookie.  This module
follows the value:

* :class:`Secrets` remembers every value redaction removed, in memory only
  (never stored, not even hashed), with its partial forms: the token after
  an Authorization scheme (``Bearer …``), each value inside a Cookie
  (``session=…``), the password of a ``Basic`` credential;
* :data:`SHAPES` is a small table of well-known token shapes (OpenAI and
  Anthropic ``sk-…`` keys, JWTs, AWS access keys, GitHub, Google, Slack
  and Stripe keys, ``Bearer …`` in any text) found without a header to
  learn them from;
* :class:`Scrubber` finds both in any text or bytes and replaces each
  occurrence with a mask **of the same byte length** (``[REDACTED]``
  followed by ``*``, or ``*`` alone under 10 bytes), so every stored
  offset (a frame's ``start``/``end``, SSE ``data_offsets``, a decode
  error's position) keeps pointing at the same byte, and JSON strings stay
  JSON strings.  It reports each replacement as a :class:`Span` (where,
  how long, which kind: ``learned`` or the shape's name), which the caller
  records in the exchange's notes: never the value.

A learned value is matched as it was sent and in the forms it takes when
it is echoed: JSON-escaped (both ``\\u`` and raw non-ASCII) and URL-encoded
(``quote``, ``quote_plus``).  Values too short or too common to be a
secret are not learned (:data:`MIN_LEARNED` characters, all-digit values
need :data:`MIN_DIGITS`, placeholders such as ``null`` or ``undefined``
never), because a learned value is masked wherever it appears, inside
other text too.

Everything here is thread-safe for one writer and any number of readers:
:meth:`Secrets.learn` takes a lock, and a scan uses an immutable compiled
snapshot.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = [
    "MARK",
    "MIN_DIGITS",
    "MIN_LEARNED",
    "MAX_LEARNED",
    "SHAPES",
    "Scrubber",
    "Secrets",
    "Shape",
    "Span",
    "StreamScrub",
    "apply_hits",
    "derived_scrubber",
    "keep_derived_secrets",
    "mask",
    "mask_derived",
    "mask_derived_bytes",
    "mask_derived_doc",
    "mask_derived_json",
    "mask_derived_value",
    "PROCESS_SECRETS",
]

MARK = "[REDACTED]"
#: Shortest value that is learned (characters).
MIN_LEARNED = 8
#: Shortest all-digit value that is learned (shorter ones are ids, dates, counters).
MIN_DIGITS = 16
#: Most values one recording remembers; the oldest are forgotten beyond it.
MAX_LEARNED = 4096
#: Longest value learned whole (longer ones are bodies, not credentials).
MAX_VALUE = 8192
#: Values that are placeholders, never secrets (compared lower-case).
PLACEHOLDERS = frozenset(
    {"undefined", "null", "none", "true", "false", "redacted", "anonymous", "[redacted]", "changeit", "<redacted>"}
)
_SCHEME = re.compile(r"(?i:bearer|basic|token|digest|apikey)\s+(\S{8,})\Z")
AUTH_HEADERS = frozenset({"authorization", "proxy-authorization", "x-authorization", "authentication"})


def mask(n: int) -> str:
    """The mask of a secret of ``n`` bytes: ``[REDACTED]`` then ``*`` up to ``n``, or ``*`` alone."""
    return MARK + "*" * (n - len(MARK)) if n >= len(MARK) else "*" * n


# -- shapes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """A well-known token shape.

    ``pattern`` is a regular expression; when it has a group named ``t``
    (or ``t2``) only that group is masked (``Bearer `` stays readable),
    else the whole match.  Every pattern asks for at least one digit where
    ordinary words could otherwise match, so chat text does not.
    ``anchor`` is a cheap pattern every match starts with: the full
    pattern is only tried where an anchor is; ``hints`` are literals for an
    even cheaper first test (most text has none).
    """

    name: str
    title: str
    pattern: str
    anchor: str
    #: lower-case literals one of which every match contains: text holding
    #: none of any shape's hints (most text) costs a few substring tests.
    hints: tuple[str, ...] = ()


_TOK = r"A-Za-z0-9_\-"
#: The table (sources: the providers' documented key formats, as also used by
#: gitleaks and detect-secrets).  Tests: one per shape, and none of them
#: matches the recorded fixtures' text (tests/route/test_secrets.py).
SHAPES: tuple[Shape, ...] = (
    Shape(
        "sk-key",
        "OpenAI / Anthropic style API key (sk-…, sk-proj-…, sk-ant-…)",
        rf"(?<![{_TOK}])sk-(?=[{_TOK}]*[0-9])[{_TOK}]{{20,}}",
        r"sk-",
        ("sk-",),
    ),
    Shape(
        "jwt",
        "JSON Web Token (eyJ….eyJ….…)",
        rf"(?<![{_TOK}])eyJ[{_TOK}]{{6,}}\.eyJ[{_TOK}]{{6,}}\.[{_TOK}]*",
        r"eyJ",
        ("eyj",),
    ),
    Shape(
        "aws-access-key",
        "AWS access key id (AKIA…, ASIA…)",
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
        r"AKIA|ASIA|ABIA|ACCA",
        ("akia", "asia", "abia", "acca"),
    ),
    Shape(
        "aws-secret-key",
        "AWS secret access key next to its name",
        r"(?i:secret_?access_?key)[\s\"':=]{1,6}(?P<t>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        r"(?i:secret_?access)",
        ("secret",),
    ),
    Shape(
        "github-token",
        "GitHub token (ghp_…, gho_…, ghu_…, ghs_…, ghr_…, github_pat_…)",
        r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        r"gh[pousr]_|github_pat_",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Shape(
        "google-api-key",
        "Google API key (AIza…) or OAuth access token (ya29.…)",
        rf"(?<![{_TOK}])(?:AIza[0-9A-Za-z_\-]{{35}}|ya29\.[{_TOK}]{{20,}})",
        r"AIza|ya29\.",
        ("aiza", "ya29."),
    ),
    Shape(
        "slack-token",
        "Slack token (xoxb-…, xoxp-…) or webhook URL",
        r"(?<![A-Za-z0-9])xox[abposre]-(?=[A-Za-z\-]*[0-9])[0-9A-Za-z\-]{10,}"
        r"|hooks\.slack\.com/services/(?P<t>[A-Za-z0-9_/]{20,})",
        r"xox|hooks\.slack\.com",
        ("xox", "hooks.slack.com"),
    ),
    Shape(
        "stripe-key",
        "Stripe secret or restricted key (sk_live_…, rk_test_…) or webhook secret (whsec_…)",
        r"(?<![A-Za-z0-9_])(?:(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}|whsec_[A-Za-z0-9+/=]{20,})",
        r"sk_|rk_|whsec_",
        ("sk_", "rk_", "whsec_"),
    ),
    Shape(
        "bearer",
        "a credential after Bearer (or Basic after Authorization) in any text",
        r"(?i:\bbearer)\s+(?P<t>(?=[A-Za-z._~+/\-]*[0-9])[A-Za-z0-9._~+/\-]{8,}=*)"
        r"|(?i:authorization)[\s\"':=]{1,6}(?i:basic)\s+(?P<t2>[A-Za-z0-9+/]{8,}={0,2})",
        r"(?i:bearer|authorization)",
        ("bearer", "authorization"),
    ),
)


# -- spans -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """One masked occurrence: byte offset and length in the text's UTF-8 (or the bytes), and its kind."""

    at: int
    length: int
    kind: str


# -- the learned values ----------------------------------------------------------------------


def _forms(value: str) -> set[str]:
    """The value and the forms an echo gives it (JSON-escaped, URL-encoded)."""
    forms = {value}
    try:
        forms.add(json.dumps(value)[1:-1])
        forms.add(json.dumps(value, ensure_ascii=False)[1:-1])
    except (TypeError, ValueError):
        pass
    forms.add(quote(value, safe=""))
    forms.add(quote_plus(value, safe=""))
    forms.add(quote(value, safe="/:"))
    return {f for f in forms if len(f) >= MIN_LEARNED}


def _trie(words: Iterable[str]) -> str:
    """One regular expression matching any of ``words``, longest first (a trie)."""
    root: dict[str, Any] = {}
    for w in words:
        node = root
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = None

    def build(node: dict[str, Any]) -> str:
        # Collapse single-child chains without recursion (values can be long).
        out: list[str] = []
        while True:
            end = "" in node
            kids = [(ch, child) for ch, child in node.items() if ch != ""]
            if len(kids) == 1 and not end:
                ch, node = kids[0]
                out.append(re.escape(ch))
                continue
            if not kids:
                return "".join(out)
            alts = [re.escape(ch) + build(child) for ch, child in sorted(kids)]
            body = "(?:" + "|".join(alts) + ")"
            return "".join(out) + (body + "?" if end else body)

    return build(root)


class Secrets:
    """The secret values learned in one recording (memory only; see the module docstring)."""

    def __init__(self, *, process: bool = True) -> None:
        self._values: dict[str, None] = {}  # insertion-ordered set
        self._lock = threading.Lock()
        self.generation = 0  # bumps on every new value
        #: what this set learns, the process's set learns too (derived text: :func:`mask_derived`)
        self._process = process

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._values))

    def __repr__(self) -> str:  # never the values
        return f"<Secrets: {len(self._values)} value(s)>"

    @staticmethod
    def worth(value: str) -> bool:
        """Whether ``value`` is learned: long enough, not a placeholder or a mask."""
        if len(value) < MIN_LEARNED or len(value) > MAX_VALUE:
            return False
        if value.isdigit() and len(value) < MIN_DIGITS:
            return False
        if value.lower() in PLACEHOLDERS or MARK in value:
            return False
        return len(set(value)) > 2  # "********", "00000000"

    def learn(self, value: Any) -> bool:
        """Remember ``value`` (a str or bytes; anything else is ignored).  True when it is new."""
        if isinstance(value, bytes | bytearray):
            try:
                value = bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                value = bytes(value).decode("latin-1")
        if not isinstance(value, str):
            return False
        value = value.strip()
        scheme = _SCHEME.match(value)
        if scheme is not None:  # "Bearer <token>" in a field or parameter: the token (the scheme stays readable)
            value = scheme.group(1)
        if not self.worth(value) or value in self._values:
            return False
        with self._lock:
            if value in self._values:
                return False
            self._values[value] = None
            while len(self._values) > MAX_LEARNED:
                del self._values[next(iter(self._values))]
            self.generation += 1
        if self._process:
            PROCESS_SECRETS.learn(value)
        return True

    def learn_header(self, name: str, value: str) -> None:
        """The value of a secret header, with its partial forms."""
        lname = name.lower()
        value = (value or "").strip()
        if not value:
            return
        if lname in AUTH_HEADERS:
            scheme, sep, token = value.partition(" ")
            if sep and token.strip():
                token = token.strip()
                self.learn(token)
                if scheme.lower() == "basic":
                    try:
                        plain = base64.b64decode(token, validate=True).decode("utf-8")
                    except (binascii.Error, ValueError):
                        plain = ""
                    if plain:
                        self.learn(plain)
                        self.learn(plain.partition(":")[2])
                return
        if lname in ("cookie", "set-cookie"):
            parts = value.split(";") if lname == "cookie" else value.split(";", 1)[:1]
            for part in parts:
                _, eq, v = part.strip().partition("=")
                if eq:
                    self.learn(v.strip().strip('"'))
            return
        self.learn(value)

    def learn_field(self, name: str, value: Any) -> None:
        """A JSON field's value removed by its name: an ``authorization`` or
        ``cookie`` string as that header's value (its partial forms), else
        every string in it (an object's too)."""
        norm = name.lower().replace("-", "").replace("_", "")
        if isinstance(value, str) and norm in ("authorization", "proxyauthorization"):
            self.learn_header("authorization", value)
        elif isinstance(value, str) and norm in ("cookie", "setcookie"):
            self.learn_header("cookie" if norm == "cookie" else "set-cookie", value)
        else:
            self.learn_json(value)

    def learn_json(self, value: Any) -> None:
        """Every string in a JSON value."""
        stack = [value]
        while stack:
            cur = stack.pop()
            if isinstance(cur, str):
                self.learn(cur)
            elif isinstance(cur, dict):
                stack.extend(cur.values())
            elif isinstance(cur, list):
                stack.extend(cur)

    def clear(self) -> None:
        """Forget every value (the process's set between two tests)."""
        with self._lock:
            self._values.clear()
            self.generation += 1

    def merge(self, other: Secrets) -> None:
        """Learn everything ``other`` knows (a new redactor of the same recording)."""
        for v in other:
            self.learn(v)

    def forms(self) -> list[str]:
        out: set[str] = set()
        for v in list(self._values):
            out |= _forms(v)
        return sorted(out, key=lambda s: (-len(s), s))


# -- scrubbing -------------------------------------------------------------------------------


def _shape_alts() -> str:
    alts = []
    for i, s in enumerate(SHAPES):
        pattern = s.pattern.replace("(?P<t>", f"(?P<t{i}>").replace("(?P<t2>", f"(?P<u{i}>")
        alts.append(f"(?P<s{i}>{pattern})")
    return "|".join(alts)


_SHAPES_TEXT = re.compile(_shape_alts())
_SHAPES_DATA = re.compile(_shape_alts().encode("ascii"))
_ANCHORS_TEXT = re.compile("|".join(s.anchor for s in SHAPES))
_ANCHORS_DATA = re.compile("|".join(s.anchor for s in SHAPES).encode("ascii"))
_HINTS = tuple(sorted({h for s in SHAPES for h in s.hints}))
_HINTS_DATA = tuple(h.encode("ascii") for h in _HINTS)
#: Nothing shorter can hold a learned value or a shape.
_SHORTEST = min(MIN_LEARNED, 12)


def _hinted(text: Any) -> bool:
    """Whether ``text`` (str or bytes) holds any shape's hint (a superset test)."""
    low = text.lower()
    hints = _HINTS if isinstance(low, str) else _HINTS_DATA
    return any(h in low for h in hints)


@dataclass(frozen=True)
class _Learned:
    generation: int
    text: re.Pattern[str] | None
    data: re.Pattern[bytes] | None
    #: with few values, their forms: substring tests are cheaper than the pattern when nothing is there
    forms: tuple[str, ...] | None = None
    forms_data: tuple[bytes, ...] | None = None
    #: the longest form's length
    longest: int = 0


#: Up to this many forms, text is first tested with ``in`` for each.
_FEW_FORMS = 64


def _word_class(form: str) -> str | None:
    """``a-z`` or ``A-Z`` for a value that is one word of one letter case and
    shorter than 16 (``complete``, ``SECRETVALUE``): it is matched only where
    the neighbours are not letters of that case, so ``complete`` never masks
    part of ``completed``.  None: matched anywhere."""
    if len(form) >= 16 or not form.isascii() or not form.isalpha():
        return None
    if form.islower():
        return "a-z"
    if form.isupper():
        return "A-Z"
    return None


def _learned_pattern(forms: list[str]) -> str:
    groups: dict[str | None, list[str]] = {}
    for f in forms:
        groups.setdefault(_word_class(f), []).append(f)
    alts = []
    for cls, words in groups.items():
        try:
            body = _trie(words)
            re.compile(body)
        except (re.error, RecursionError, OverflowError):  # pragma: no cover - a pathological set
            body = "|".join(re.escape(w) for w in sorted(words, key=lambda w: (-len(w), w)))
        alts.append(body if cls is None else f"(?<![{cls}])(?:{body})(?![{cls}])")
    return "|".join(f"(?:{a})" for a in alts)


def _compile(forms: list[str]) -> tuple[re.Pattern[str] | None, re.Pattern[bytes] | None]:
    if not forms:
        return None, None
    as_bytes = [f.encode("utf-8", "surrogatepass").decode("latin-1") for f in forms]
    return re.compile(_learned_pattern(forms)), re.compile(_learned_pattern(as_bytes).encode("latin-1"))


def _kind(m: re.Match[Any]) -> tuple[str, int, int]:
    """The shape a match of the shapes pattern is, and the span to mask."""
    name = m.lastgroup or "s0"
    i = int(name[1:])
    for g in (f"t{i}", f"u{i}"):
        if g in m.re.groupindex and m.group(g) is not None:
            return SHAPES[i].name, m.start(g), m.end(g)
    return SHAPES[i].name, m.start(), m.end()


class Scrubber:
    """Masks learned values and (when ``shapes``) well-known token shapes (module docstring).

    Two passes: the learned values (one trie-shaped pattern), then the
    shapes, only over text that holds one of their anchors.  Masks keep
    byte lengths, so the spans of both passes are offsets into the result.
    """

    def __init__(self, secrets: Secrets | None = None, *, shapes: bool = True) -> None:
        self.secrets = secrets if secrets is not None else Secrets()
        self.shapes = shapes
        self._learned: _Learned = _Learned(-1, None, None, (), ())
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self.shapes or len(self.secrets) > 0

    def _patterns(self) -> _Learned:
        c = self._learned
        gen = self.secrets.generation
        if c.generation == gen:
            return c
        with self._lock:
            c = self._learned
            if c.generation != gen:
                forms = self.secrets.forms()
                text, data = _compile(forms)
                few = len(forms) <= _FEW_FORMS
                c = self._learned = _Learned(
                    gen, text, data, tuple(forms) if few else None,
                    tuple(f.encode("utf-8", "surrogatepass") for f in forms) if few else None,
                    max((len(f) for f in forms), default=0),
                )
        return c

    def might(self, text: str) -> bool:
        """A cheap superset test: ``text`` may hold a secret (a learned form or a shape's hint)."""
        if not text or len(text) < _SHORTEST:
            return False
        c = self._patterns()
        if c.text is not None and (c.forms is None or any(f in text for f in c.forms)):
            return True
        return self.shapes and _hinted(text)

    def find(self, text: str) -> list[tuple[int, int, str, int]]:
        """Where secrets are in ``text``: ``(start, end, kind, context)`` in
        characters, sorted, overlapping ones merged (the first one's kind);
        ``context`` is where the whole match starts (``Bearer`` before the
        masked token), ``start`` or before."""
        if not text or len(text) < _SHORTEST:
            return []
        found: list[tuple[int, int, str, int]] = []
        c = self._patterns()
        if c.text is not None and (c.forms is None or any(f in text for f in c.forms)):
            found += [(m.start(), m.end(), "learned", m.start()) for m in c.text.finditer(text) if m.end() > m.start()]
        if self.shapes and _hinted(text):
            for m in self._matches(_SHAPES_TEXT, _ANCHORS_TEXT, text):
                name, a, b = _kind(m)
                if a < b:
                    found.append((a, b, name, m.start()))
        found.sort()
        merged: list[tuple[int, int, str, int]] = []
        for a, b, kind, ctx in found:
            if merged and a < merged[-1][1]:
                pa, pb, pk, pc = merged[-1]
                merged[-1] = (pa, max(pb, b), pk, min(pc, ctx))
            else:
                merged.append((a, b, kind, ctx))
        return merged

    def text(self, text: str) -> tuple[str, list[Span]]:
        """``text`` with every secret masked (UTF-8 byte lengths kept), and where (UTF-8 offsets)."""
        if not text or len(text) < _SHORTEST:
            return text, []
        spans: list[Span] = []
        c = self._patterns()
        if c.text is not None and (c.forms is None or any(f in text for f in c.forms)):
            text = self._sub_text(text, c.text, spans, lambda m: ("learned", m.start(), m.end()))
        if self.shapes and _hinted(text):
            text = self._sub_text(text, _SHAPES_TEXT, spans, _kind, _ANCHORS_TEXT)
        return text, sorted(spans, key=lambda s: s.at)

    def data(self, data: bytes) -> tuple[bytes, list[Span]]:
        """``data`` with every secret masked (same length), and where."""
        if not data or len(data) < _SHORTEST:
            return data, []
        spans: list[Span] = []
        c = self._patterns()
        if c.data is not None and (c.forms_data is None or any(f in data for f in c.forms_data)):
            data = self._sub_data(data, c.data, spans, lambda m: ("learned", m.start(), m.end()))
        if self.shapes and _hinted(data):
            data = self._sub_data(data, _SHAPES_DATA, spans, _kind, _ANCHORS_DATA)
        return data, sorted(spans, key=lambda s: s.at)

    @staticmethod
    def _matches(pat: re.Pattern[Any], anchors: re.Pattern[Any] | None, text: Any) -> Iterator[re.Match[Any]]:
        if anchors is None:
            yield from pat.finditer(text)
            return
        pos = 0
        for a in anchors.finditer(text):
            if a.start() < pos:
                continue
            m = pat.match(text, a.start())
            if m is not None and m.end() > m.start():
                pos = m.end()
                yield m

    def _sub_text(self, text: str, pat: re.Pattern[str], spans: list[Span], kind: Any,
                  anchors: re.Pattern[str] | None = None) -> str:
        out: list[str] = []
        last = 0
        byte_pos = 0  # UTF-8 offset of text[last]
        for m in self._matches(pat, anchors, text):
            name, a, b = kind(m)
            if a >= b:
                continue
            before = text[last:a]
            byte_pos += len(before.encode("utf-8", "surrogatepass"))
            n = len(text[a:b].encode("utf-8", "surrogatepass"))
            out.append(before)
            out.append(mask(n))
            spans.append(Span(byte_pos, n, name))
            byte_pos += n
            last = b
        if not out:
            return text
        out.append(text[last:])
        return "".join(out)

    def _sub_data(self, data: bytes, pat: re.Pattern[bytes], spans: list[Span], kind: Any,
                  anchors: re.Pattern[bytes] | None = None) -> bytes:
        out = bytearray()
        last = 0
        found = False
        for m in self._matches(pat, anchors, data):
            name, a, b = kind(m)
            if a >= b:
                continue
            found = True
            out += data[last:a]
            out += mask(b - a).encode("ascii")
            spans.append(Span(a, b - a, name))
            last = b
        if not found:
            return data
        out += data[last:]
        return bytes(out)

    def excerpt(self, text: str) -> str:
        """A decode error's excerpt: secrets masked, and a learned value cut
        at either edge of the window masked too (an excerpt is a cut-out)."""
        new, _ = self.text(text)
        if not new or not len(self.secrets):
            return new
        for v in self.secrets.forms():
            for k in range(min(len(v), len(new)) - 1, 5, -1):
                if new.endswith(v[:k]):
                    new = new[: len(new) - k] + "*" * k
                    break
            for k in range(min(len(v), len(new)) - 1, 5, -1):
                if new.startswith(v[-k:]):
                    new = "*" * k + new[k:]
                    break
        return new


# -- derived text: what the product makes of the frames ---------------------------------------
#
# Frames are masked one at a time as they are stored.  What the product derives
# from them (a run's text joined from its deltas, JSON strings decoded, parts
# joined, findings that quote them, fixtures, reports, log lines) can hold a
# secret that no single frame held whole.  Two mechanisms (docs/recording.md
# "Redaction", decisions 230-233):
#
# * :class:`StreamScrub`: while frames are stored (recorder, import, export),
#   JSON strings are decoded and each field's text is followed across the
#   frames of a stream (and the parts of one frame), and what forms a secret
#   there is masked in the frames' own bytes (length kept), so nothing
#   derived from the stored frames later (by ``check``, ``report``, ``export``,
#   which know no learned value) can put it together again;
# * :func:`mask_derived` and friends: every derived text is masked again just
#   before it is written, by every process (the store's derived rows and
#   findings, fixture files, the report and its payload, ``check``'s files and
#   every command's output, log lines), with the token shapes and every value
#   any redactor of the process learned (:data:`PROCESS_SECRETS`).

#: Every value any :class:`Secrets` of this process learned (memory only).
PROCESS_SECRETS = Secrets(process=False)


class _Derived:
    keep = False  # the process keeps secrets (recorder/import with keep_secrets): derived text is not masked
    scrubber = Scrubber(PROCESS_SECRETS, shapes=True)


def keep_derived_secrets(keep: bool = True) -> None:
    """Whether this process leaves derived text unmasked (``keep_secrets``: the
    user opted out of redaction for the recording it writes)."""
    _Derived.keep = keep


def derived_scrubber() -> Scrubber | None:
    """The process's scrubber for derived text (None: secrets are kept)."""
    return None if _Derived.keep else _Derived.scrubber


def mask_derived(text: str) -> str:
    """``text`` (derived: not a recorded frame) with the token shapes and every
    value this process learned masked, byte lengths kept."""
    if not text or _Derived.keep or not isinstance(text, str):
        return text
    sc = _Derived.scrubber
    if not sc.might(text):
        return text
    return sc.text(text)[0]


def mask_derived_bytes(data: bytes) -> bytes:
    if not data or _Derived.keep:
        return data
    return _Derived.scrubber.data(bytes(data))[0]


def mask_derived_json(text: str) -> str:
    """A JSON document's text with secrets masked; it stays the same JSON
    document apart from the masked strings.  A mask that would cut into the
    document's structure (a learned value spelled across a quote) is applied
    to the decoded strings instead."""
    if not text or _Derived.keep:
        return text
    sc = _Derived.scrubber
    if not sc.might(text):
        return text
    spans = sc.find(text)
    if not spans:
        return text
    masked = sc.text(text)[0]
    if any('"' in text[a:b] or "\\" in text[a:b] for a, b, _, _ in spans):
        try:
            json.loads(masked)
        except ValueError:
            try:
                doc = json.loads(text)
            except ValueError:
                return masked  # not JSON after all: the text, masked
            return json.dumps(mask_derived_value(doc), separators=(",", ":"), ensure_ascii=False)
    return masked


def mask_derived_doc(value: Any) -> Any:
    """:func:`mask_derived_value` for a large JSON-like value: one test over its
    JSON text first (the value itself when nothing may be there)."""
    if _Derived.keep:
        return value
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return mask_derived_value(value)
    return mask_derived_value(value) if _Derived.scrubber.might(text) else value


def mask_derived_value(value: Any) -> Any:
    """A JSON-like value with every string (keys too) masked (:func:`mask_derived`); the same object when clean."""
    if isinstance(value, str):
        return mask_derived(value)
    if isinstance(value, dict):
        out = {mask_derived(k) if isinstance(k, str) else k: mask_derived_value(v) for k, v in value.items()}
        return value if all(a is b for a, b in zip(out.values(), value.values(), strict=True)) and list(out) == list(value) else out
    if isinstance(value, list | tuple):
        items = [mask_derived_value(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else type(value)(items)
    return value


# -- secrets that only show once a stream is decoded -------------------------------------------

#: A JSON string literal (its body in group 1) and, for a key, the colon after it.
_LITERAL = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"(\s*:)?', re.S)
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
#: Characters of a field's text kept to find a secret continued in its next value.
TAIL = 2048
#: How far before a value a token shape that reaches into it may start (its hint).
SHAPE_REACH = 1024
#: Longest shape hint (``hooks.slack.com``): a hint cut by a value's start is found with this much before it.
_HINT_MAX = max(len(h) for h in _HINTS)
#: Any shape's hint, in one pass (what :func:`_hinted` tests with many).
_HINT_RE = re.compile("|".join(re.escape(h) for h in _HINTS), re.IGNORECASE)


def _decode_literal(body: str) -> tuple[str, list[int]]:
    """A JSON string body with escapes: its value, and for each character of the
    value the offset of its first raw character (one more entry: the end)."""
    out: list[str] = []
    starts: list[int] = []
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            starts.append(i)
            i += 1
            continue
        e = body[i + 1]
        if e == "u" and i + 6 <= n:
            try:
                code = int(body[i + 2 : i + 6], 16)
            except ValueError:
                code = -1
            if code >= 0:
                width = 6
                if 0xD800 <= code < 0xDC00 and body[i + 6 : i + 8] == "\\u":
                    try:
                        low = int(body[i + 8 : i + 12], 16)
                    except ValueError:
                        low = -1
                    if 0xDC00 <= low < 0xE000:
                        code, width = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00), 12
                out.append(chr(code))
                starts.append(i)
                i += width
                continue
        out.append(_ESCAPES.get(e, e))
        starts.append(i)
        i += 2
    starts.append(n)
    return "".join(out), starts


class _Seg:
    """One string value of a field: where it sits in its frame's text."""

    __slots__ = ("ref", "frame_text", "body_at", "at", "value", "starts")

    def __init__(self, ref: Any, frame_text: str, body_at: int, at: int, value: str, starts: list[int] | None) -> None:
        self.ref = ref
        self.frame_text = frame_text  # the frame's text as received (memory only)
        self.body_at = body_at  # character offset of the literal's body in the frame's text
        self.at = at  # offset of the value's first character in the field's joined text
        self.value = value
        self.starts = starts  # None: the value is its raw text (no escapes)

    def raw_bytes(self, a: int, b: int) -> tuple[int, int]:
        """Byte offsets, in the frame's UTF-8 text, of the value's characters ``a:b``."""
        if self.starts is not None:
            a, b = self.starts[a], self.starts[b]
        a += self.body_at
        b += self.body_at
        t = self.frame_text
        if t.isascii():
            return a, b
        start = len(t[:a].encode("utf-8", "surrogatepass"))
        return start, start + len(t[a:b].encode("utf-8", "surrogatepass"))


class _Field:
    __slots__ = ("segs", "text", "base", "hints")

    def __init__(self) -> None:
        self.segs: list[_Seg] = []
        self.text = ""  # the field's text joined (its last TAIL-odd characters)
        self.base = 0  # offset of text[0] in everything the field ever held
        self.hints: list[int] = []  # where shape hints may start (absolute), within SHAPE_REACH


#: what a stream scrub asks its caller to mask: per frame ref, (byte start, byte end, mask text, kind)
Hits = dict[Any, list[tuple[int, int, str, str]]]


class StreamScrub:
    """Secrets a stream only shows once decoded, masked in its frames' bytes.

    Feed it a stream's frame texts in order (one instance per exchange and
    direction; a JSON body is a stream of one).  Each JSON string is decoded
    (``\\u0073k-…`` is ``sk-…``) and appended to its field's text (the field
    is the key the string is the value of: ``content``, ``text``, ``delta``,
    whatever the protocol streams, in one frame or across frames; a frame
    that is not JSON is one value of the field ``""``).  A secret found
    there that no single raw frame held (split across frames or parts, or
    escaped) is reported as byte ranges of the frames that hold its pieces,
    with the pieces of one mask (``[REDACTED]***`` sliced), so the joined
    text reads as one mask.  Earlier frames may be named again when a secret
    continues into a later one.  Memory: the last :data:`TAIL` characters of
    each field and the texts of the frames they came from.
    """

    def __init__(self, scrubber: Scrubber, *, tail: int = TAIL) -> None:
        self.scrubber = scrubber
        self.fields: dict[str, _Field] = {}
        self.tail = tail
        self.refs: dict[Any, int] = {}  # frame ref -> segments still held

    def feed(self, ref: Any, text: str | None) -> Hits:
        """The frame ``ref``'s text as received: what to mask, in it and in earlier frames."""
        hits: Hits = {}
        if not text:
            return hits
        head = text.lstrip()[:1]
        if head not in ("{", "["):
            self._value("", ref, text, 0, text, None, hits)
            return hits
        key = ""
        for m in _LITERAL.finditer(text):
            body = m.group(1)
            if m.group(2) is not None:
                key = body
                continue
            if "\\" in body:
                value, starts = _decode_literal(body)
                self._value(key, ref, text, m.start(1), value, starts, hits)
            elif body:
                self._value(key, ref, text, m.start(1), body, None, hits)
        return hits

    def holds(self, ref: Any) -> bool:
        """Whether a later frame may still ask for ``ref`` to be masked again."""
        return ref in self.refs

    def _value(self, key: str, ref: Any, frame_text: str, body_at: int, value: str,
               starts: list[int] | None, hits: Hits) -> None:
        f = self.fields.get(key)
        if f is None:
            f = self.fields[key] = _Field()
        elif f.segs and f.segs[-1].value == value:
            return  # a field that repeats itself (an id, a type, a model name) streams nothing
        at = f.base + len(f.text)  # where this value starts in the field's text
        f.segs.append(_Seg(ref, frame_text, body_at, at, value, starts))
        self.refs[ref] = self.refs.get(ref, 0) + 1
        before = len(f.text)
        edge = max(0, before - _HINT_MAX)
        f.text += value
        sc = self.scrubber
        if sc.shapes and _HINT_RE.search(f.text, edge) is not None:
            f.hints.append(f.base + edge)
        while f.hints and f.hints[0] < f.base + before - SHAPE_REACH:
            f.hints.pop(0)  # too far back to start a shape that reaches this value
        c = sc._patterns()
        start = None  # where a secret reaching into this value may start (in f.text)
        if c.text is not None:  # a learned value that reaches into this one
            lo = max(0, before - c.longest + 1)
            if c.text.search(f.text, lo) is not None:
                start = lo
        if len(f.segs) > 1 or starts is not None:
            near = [h - f.base for h in f.hints if h - f.base >= max(0, before - SHAPE_REACH)]
            if near:
                start = min(near[0], start) if start is not None else near[0]
        if start is not None:
            self._scan(f, at, starts is not None, start, hits)
        self._trim(f)

    def _scan(self, f: _Field, at: int, escaped: bool, start: int, hits: Hits) -> None:
        """Secrets in the field's text from ``start`` on that reach into the newest
        value and that the frame's own scrub cannot see (they start before it,
        or it was escaped)."""
        for a, b, kind, ctx in self.scrubber.find(f.text[start:]):
            a += f.base + start
            b += f.base + start
            ctx += start
            if b <= at or (f.base + ctx >= at and not escaped):
                continue  # done before, or the frame's own scrub sees all of it
            pieces = []
            for seg in f.segs:
                end = seg.at + len(seg.value)
                if end <= a or seg.at >= b:
                    continue
                lo, hi = max(a, seg.at) - seg.at, min(b, end) - seg.at
                pieces.append((seg.ref, *seg.raw_bytes(lo, hi)))
            whole = mask(sum(hi - lo for _, lo, hi in pieces))
            pos = 0
            for ref, lo, hi in pieces:
                hits.setdefault(ref, []).append((lo, hi, whole[pos : pos + hi - lo], kind))
                pos += hi - lo

    def _trim(self, f: _Field) -> None:
        if len(f.text) <= 2 * self.tail:
            return
        cut = len(f.text) - self.tail
        f.text = f.text[cut:]
        f.base += cut
        keep = [s for s in f.segs if s.at + len(s.value) > f.base]
        for s in f.segs[: len(f.segs) - len(keep)]:
            n = self.refs[s.ref] - 1
            if n:
                self.refs[s.ref] = n
            else:
                del self.refs[s.ref]
        f.segs = keep


def apply_hits(text: str, found: list[tuple[int, int, str, str]]) -> str:
    """``text`` with the byte ranges of :meth:`StreamScrub.feed`'s hits replaced (lengths kept)."""
    data = bytearray(text.encode("utf-8", "surrogatepass"))
    for lo, hi, chunk, _ in found:
        data[lo:hi] = chunk.encode("ascii")
    return data.decode("utf-8", "surrogatepass")
