"""Redaction before anything is stored (mitmproxy.md section 3).

Always on **copies**: the flow's headers, URL and bodies are never touched,
so what goes upstream and back to the client is exactly what was sent
(assigning to ``flow.request.headers`` would change the traffic).

On by default (:class:`~chatkit_trace.route.profiles.RedactConfig`, opt
out with ``keep_secrets = true``):

* headers: Authorization, Proxy-Authorization, Cookie, Set-Cookie,
  X-Api-Key, Api-Key, X-Auth-Token, X-Goog-Api-Key … and any header whose
  name ends in ``api-key``, ``token``, ``secret``, ``password`` or
  ``credential(s)``;
* query parameters and JSON / form body fields (at any depth) named like a
  secret: ``api_key``, ``apikey``, ``token``, ``access_token``,
  ``refresh_token``, ``password``, ``secret``, ``client_secret``,
  ``authorization`` … or ending in ``api_key``, ``secret``, ``password``,
  ``_token`` variants such as ``access_token``/``id_token`` (names are
  compared lower-case with ``-``, ``_`` and ``.`` removed, so ``apiKey``,
  ``API-KEY`` and ``api_key`` are one name).  Counters such as
  ``max_tokens`` or ``pageToken`` are *not* secrets and stay;
* URL user-info passwords (``https://user:pass@host``);
* plus every name the user lists.

Values become ``[REDACTED]``; what stays readable helps diagnosis: the
Authorization scheme (``Bearer [REDACTED]``), cookie names, Set-Cookie
attributes, and empty values (``""``/``null``: nothing to hide).  A body
that needed no change is returned as the same object (byte-identical);
a JSON body that changed is re-serialised compactly.

Values travel, so redaction follows them (:mod:`.secrets`): every value a
redactor removes is remembered in its :attr:`Redactor.secrets` (memory
only, with its partial forms: the token after ``Bearer``, each cookie
value) and the ``scrub_*`` methods mask it, and well-known token shapes
(``sk-…``, JWTs, AWS, GitHub, Google, Slack, Stripe keys, ``Bearer …``),
wherever they appear: URLs, every header value, bodies, every frame
(``text`` and ``raw``: server events too), error texts, notes.  Masks keep
the byte length, so offsets stay true; ``notes.scrubbed`` says where (never
what).  One redactor is one recording: build a new one per recording,
import or export.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, overload
from urllib.parse import quote, unquote, unquote_plus

from ..masking import Scrubber, Secrets, Span, StreamScrub, apply_hits, mask
from ..wire import replace_frame

if TYPE_CHECKING:  # pragma: no cover
    from ..trace import Exchange
    from ..wire import Frame
    from .profiles import RedactConfig

__all__ = [
    "REDACTED",
    "DEFAULT_HEADERS",
    "DEFAULT_NAMES",
    "Redactor",
    "StreamMasks",
    "is_secret_name",
    "note_scrubbed",
    "redact_exchange",
]

REDACTED = "[REDACTED]"
_MARK_Q = quote(REDACTED)

#: Header names redacted by default (lower case).
DEFAULT_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "x-api-key",
        "api-key",
        "apikey",
        "x-auth-token",
        "x-access-token",
        "x-refresh-token",
        "x-session-token",
        "x-csrf-token",
        "x-xsrf-token",
        "x-goog-api-key",
        "x-amz-security-token",
        "ocp-apim-subscription-key",
        "authentication",
        "x-authorization",
        "proxy-authenticate-info",
    }
)
_HEADER_SUFFIXES = ("apikey", "token", "secret", "password", "passwd", "credential", "credentials")

#: Query / body field names redacted by default (normalised: lower case, no ``-_.``).
DEFAULT_NAMES = frozenset(
    {
        "apikey",
        "xapikey",
        "token",
        "accesstoken",
        "refreshtoken",
        "idtoken",
        "authtoken",
        "sessiontoken",
        "bearertoken",
        "apitoken",
        "securitytoken",
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "secret",
        "clientsecret",
        "secretkey",
        "secretaccesskey",
        "privatekey",
        "authorization",
        "credentials",
        "credential",
        "cookie",
        "setcookie",
        "xamzsignature",
        "xamzsecuritytoken",
        "xamzcredential",
        "xgoogapikey",
        "subscriptionkey",
    }
)
_NAME_SUFFIXES = (
    "apikey",
    "secret",
    "password",
    "passwd",
    "accesstoken",
    "refreshtoken",
    "idtoken",
    "authtoken",
    "sessiontoken",
    "bearertoken",
    "apitoken",
    "privatekey",
    "secretkey",
)
#: Query-only names (short names APIs really use in URLs: Google ``key=``, Azure SAS ``sig=``).
_QUERY_ONLY = frozenset({"key", "sig", "signature", "code", "accesskey"})

_NORM = str.maketrans("", "", "-_. ")


def _norm(name: str) -> str:
    return name.lower().translate(_NORM)


def is_secret_name(name: str) -> bool:
    """Whether a query parameter / body field name looks like a secret (the defaults)."""
    n = _norm(name)
    return n in DEFAULT_NAMES or n.endswith(_NAME_SUFFIXES)


def _is_secret_header(lname: str) -> bool:
    return lname in DEFAULT_HEADERS or _norm(lname).endswith(_HEADER_SUFFIXES)


_AUTH_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9._~+/-]*)\s+\S")


class Redactor:
    """Redacts copies of headers, URLs, bodies and exchanges (module docstring).

    Build it once per recording (from a profile's ``redact`` config): no
    method mutates its arguments; the only state is :attr:`secrets`, the
    values it removed so far, which the ``scrub_*`` methods mask wherever
    they appear again (with the well-known token shapes unless
    ``keep_secrets``).
    """

    __slots__ = ("keep_secrets", "_headers", "_query", "_fields", "_defaults", "_field_re", "secrets", "scrubber")

    def __init__(self, config: RedactConfig | None = None) -> None:
        if config is None:
            from .profiles import RedactConfig

            config = RedactConfig()
        self.keep_secrets = config.keep_secrets
        self._defaults = not config.keep_secrets
        names = {_norm(n) for n in config.names}
        self._headers = frozenset(h.lower() for h in [*config.headers, *config.names]) | frozenset(
            _norm(h) for h in [*config.headers, *config.names]
        )
        self._query = frozenset(_norm(q) for q in config.query) | names
        self._fields = frozenset(_norm(f) for f in config.fields) | names
        self._field_re = self._fallback_regex()
        self.secrets = Secrets()
        self.scrubber = Scrubber(self.secrets, shapes=self._defaults)

    @classmethod
    def from_config(cls, config: RedactConfig | None = None, extra: str | Sequence[str] | None = None) -> Redactor:
        """A redactor from a profile's config plus the addon's ``chatkit_redact`` names."""
        if extra:
            from .profiles import RedactConfig

            config = (config or RedactConfig()).extend(extra)
        return cls(config)

    # -- names ---------------------------------------------------------------------------

    def header_is_secret(self, name: str) -> bool:
        lname = name.lower()
        if lname in self._headers or _norm(lname) in self._headers:
            return True
        return self._defaults and _is_secret_header(lname)

    def query_is_secret(self, name: str) -> bool:
        n = _norm(name)
        if n in self._query:
            return True
        return self._defaults and (n in DEFAULT_NAMES or n in _QUERY_ONLY or n.endswith(_NAME_SUFFIXES))

    def field_is_secret(self, name: str) -> bool:
        n = _norm(name)
        if n in self._fields:
            return True
        return self._defaults and (n in DEFAULT_NAMES or n.endswith(_NAME_SUFFIXES))

    # -- headers ---------------------------------------------------------------------------

    def redact_headers(self, pairs: Iterable[tuple[Any, Any]] | None) -> list[tuple[Any, Any]]:
        """A redacted copy of header ``(name, value)`` pairs (str or bytes, kept as given)."""
        out: list[tuple[Any, Any]] = []
        for name, value in pairs or ():
            sname = name.decode("latin-1") if isinstance(name, bytes) else str(name)
            if not self.header_is_secret(sname):
                out.append((name, value))
                continue
            sval = value.decode("latin-1") if isinstance(value, bytes) else str(value)
            new = _redact_header_value(sname.lower(), sval)
            if new != sval:
                self.secrets.learn_header(sname, sval)
            out.append((name, new.encode("latin-1") if isinstance(value, bytes) else new))
        return out

    # -- URLs ----------------------------------------------------------------------------

    def redact_url(self, url: str) -> str:
        """The URL with secret query parameters (and a user-info password) redacted."""
        if not url:
            return url
        out = url
        scheme = out.find("://")
        if scheme >= 0:
            slash = out.find("/", scheme + 3)
            authority_end = len(out) if slash < 0 else slash
            q = out.find("?", scheme + 3)
            if 0 <= q < authority_end:
                authority_end = q
            authority = out[scheme + 3 : authority_end]
            at = authority.rfind("@")
            if at >= 0 and ":" in authority[:at] and (self._defaults or self._query):
                user, _, password = authority[:at].partition(":")
                self.secrets.learn(unquote(password))
                out = out[: scheme + 3] + f"{user}:{_MARK_Q}" + authority[at:] + out[authority_end:]
        q = out.find("?")
        if q < 0:
            return out
        h = out.find("#", q)
        query = out[q + 1 : h] if h >= 0 else out[q + 1 :]
        new = self._redact_pairs(query, self.query_is_secret)
        if new is query:
            return out
        return out[: q + 1] + new + (out[h:] if h >= 0 else "")

    def _redact_pairs(self, query: str, secret: Any) -> str:
        """``a=1&b=2`` with secret names' values replaced; other bytes untouched."""
        if not query:
            return query
        parts = query.split("&")
        changed = False
        for i, pair in enumerate(parts):
            name, eq, value = pair.partition("=")
            if not eq or not value:
                continue
            try:
                key = unquote_plus(name)
            except Exception:  # noqa: BLE001 - a broken escape is just a name
                key = name
            if secret(key):
                try:
                    self.secrets.learn(unquote_plus(value))
                except Exception:  # noqa: BLE001, S110 - a broken escape: the raw value
                    self.secrets.learn(value)
                self.secrets.learn(value)
                parts[i] = f"{name}={REDACTED}"
                changed = True
        return "&".join(parts) if changed else query

    # -- bodies ----------------------------------------------------------------------------

    @overload
    def redact_body(self, body: bytes, content_type: str | None = None) -> bytes: ...
    @overload
    def redact_body(self, body: None, content_type: str | None = None) -> None: ...
    @overload
    def redact_body(self, body: bytes | None, content_type: str | None = None) -> bytes | None: ...
    def redact_body(self, body: bytes | None, content_type: str | None = None) -> bytes | None:
        """A redacted copy of a body: JSON field-wise at any depth, form bodies
        pair-wise, NDJSON line by line; anything else unchanged.  Never raises;
        returns ``body`` itself when nothing needed redacting."""
        if not body:
            return body
        try:
            return self._redact_body(body, (content_type or "").lower())
        except Exception:  # noqa: BLE001 - redaction must never break capture
            return body

    def _redact_body(self, body: bytes, ctype: str) -> bytes:
        if isinstance(body, str):  # tolerate text
            out = self._redact_body(body.encode("utf-8", "surrogatepass"), ctype)
            return out
        if "x-www-form-urlencoded" in ctype:
            try:
                text = body.decode("ascii")
            except UnicodeDecodeError:
                text = body.decode("latin-1")
            new = self._redact_pairs(text, self.field_is_secret)
            return body if new is text else new.encode("latin-1")
        if "ndjson" in ctype or "jsonl" in ctype or "json-seq" in ctype:
            lines = body.split(b"\n")
            changed = False
            for i, line in enumerate(lines):
                if line.strip():
                    new_line = self._redact_json(line, strict=True)
                    if new_line is not line:
                        lines[i], changed = new_line, True
            return b"\n".join(lines) if changed else body
        json_type = "json" in ctype
        if json_type or (not ctype or ctype.startswith("text/plain")) and body.lstrip()[:1] in (b"{", b"["):
            return self._redact_json(body, strict=json_type)
        return body

    def _redact_json(self, body: bytes, *, strict: bool, in_place: bool = False) -> bytes:
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):
            return self._redact_text_fallback(body)
        if not isinstance(doc, dict | list):
            return body
        changed = self._walk(doc)
        if not changed:
            return body
        masked = self._mask_fields(body) if in_place else None
        if masked is not None:
            return masked
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")

    def _mask_fields(self, body: bytes) -> bytes | None:
        """``body`` (valid JSON, with a secret-named field) as received, each
        secret field's value masked in place with the same byte length: a
        string keeps its quotes (``"[REDACTED]****"``), any other value
        becomes a string of its length.  None when the text cannot be walked
        (too deep): the caller re-serialises."""
        try:
            text = body.decode("utf-8", "surrogatepass")
            members = _json_members(text)
        except (ValueError, RecursionError, IndexError):
            return None
        out: list[str] = []
        last = 0
        for key, start, end in members:  # outermost first, in order
            if start < last or not self.field_is_secret(key):
                continue
            raw = text[start:end]
            if raw in ("null", '""', f'"{REDACTED}"'):
                continue
            n = len(raw.encode("utf-8", "surrogatepass"))
            if raw.startswith('"'):
                masked = '"' + mask(n - 2) + '"'
            else:
                masked = '"' + "*" * (n - 2) + '"' if n >= 2 else "0"
            out += [text[last:start], masked]
            last = end
        if not out:
            return None
        out.append(text[last:])
        return "".join(out).encode("utf-8", "surrogatepass")

    def redact_json_value(self, doc: Any) -> tuple[Any, bool]:
        """A redacted deep copy of a parsed JSON value, and whether anything changed."""
        copy = json.loads(json.dumps(doc))
        changed = self._walk(copy)
        return (copy, True) if changed else (doc, False)

    def _walk(self, doc: Any) -> bool:
        """Redact secret-named fields of ``doc`` (a fresh parse: mutated in place)."""
        changed = False
        stack = [doc]
        secret = self.field_is_secret
        while stack:
            cur = stack.pop()
            if isinstance(cur, dict):
                for k, v in cur.items():
                    if secret(k):
                        if v is None or v == "" or v == REDACTED:
                            continue
                        self.secrets.learn_field(k, v)
                        cur[k] = REDACTED
                        changed = True
                    elif isinstance(v, dict | list):
                        stack.append(v)
            else:
                for v in cur:
                    if isinstance(v, dict | list):
                        stack.append(v)
        return changed

    def _fallback_regex(self) -> re.Pattern[bytes] | None:
        return re.compile(rb'"((?:[^"\\]|\\.){1,200})"(\s*:\s*)"((?:[^"\\]|\\.)*)"')

    def _redact_text_fallback(self, body: bytes) -> bytes:
        """For JSON-looking bodies that do not parse (cut short, NaN …): string fields by pattern."""
        regex = self._field_re
        if regex is None:
            return body
        changed = False

        def sub(m: re.Match[bytes]) -> bytes:
            nonlocal changed
            try:
                key = json.loads(b'"' + m.group(1) + b'"')
            except ValueError:
                return m.group(0)
            if not self.field_is_secret(key) or not m.group(3) or m.group(3) == REDACTED.encode():
                return m.group(0)
            try:
                self.secrets.learn(json.loads(b'"' + m.group(3) + b'"'))
            except ValueError:
                self.secrets.learn(m.group(3))
            changed = True
            return b'"' + m.group(1) + b'"' + m.group(2) + b'"' + REDACTED.encode() + b'"'

        new = regex.sub(sub, body)
        return new if changed else body

    # -- following values (route/secrets.py) ------------------------------------------------

    def adopt(self, other: Redactor) -> None:
        """Keep what ``other`` learned (the same recording, new options)."""
        if other is not self:
            self.secrets.merge(other.secrets)

    def scrub_text(self, text: str) -> str:
        """``text`` with learned secrets and token shapes masked (log lines, error texts)."""
        if not text or not isinstance(text, str):
            return text
        try:
            return self.scrubber.text(text)[0]
        except Exception:  # noqa: BLE001 - never break capture: fall back to the whole text masked
            return REDACTED

    def scrub_bytes(self, data: bytes) -> bytes:
        if not data:
            return data
        return self.scrubber.data(bytes(data))[0]

    def scrub_frame(self, frame: Frame) -> tuple[Frame, list[dict[str, Any]]]:
        """The frame with secrets masked in its text, raw bytes, SSE fields and
        decode error, and where (``field``, byte offset ``at``, ``len``,
        ``kind``, and the ``stream`` offset when the frame has one).  The
        same frame object when nothing was found.  Lengths never change."""
        sc = self.scrubber
        changes: dict[str, Any] = {}
        found: list[dict[str, Any]] = []
        if frame.text:
            text, spans = sc.text(frame.text)
            if spans:
                changes["text"] = text
                found += [_span_note("text", s, _stream_offset(frame, s.at)) for s in spans]
        if frame.raw:
            raw, spans = sc.data(bytes(frame.raw))
            if spans:
                changes["raw"] = raw
                base = frame.start if frame.transport == "sse" and frame.start is not None else None
                found += [_span_note("raw", s, None if base is None else base + s.at) for s in spans]
        for name in ("event", "event_id"):
            value = getattr(frame, name)
            if value:
                new, spans = sc.text(value)
                if spans:
                    changes[name] = new
                    found += [_span_note(name, s, None) for s in spans]
        err = frame.error
        if err is not None:
            message, spans = sc.text(err.message)
            excerpt = sc.excerpt(err.excerpt) if err.excerpt else err.excerpt
            if spans or excerpt != err.excerpt:
                changes["error"] = replace(err, message=message, excerpt=excerpt)
                found += [_span_note("error.message", s, None) for s in spans]
                if excerpt != err.excerpt:
                    found.append({"field": "error.excerpt", "kind": "excerpt"})
        if not changes:
            return frame, []
        return replace_frame(frame, **changes), found

    def scrub_fields(self, ex: Exchange, memo: dict[str, Any] | None = None) -> list[tuple[str, list[dict[str, Any]]]]:
        """Mask secrets in an exchange's own fields **in place** (not its frames):
        URL, every header value, bodies, error, identity, notes.  Returns
        ``(where, spans)`` per place changed.  ``memo`` (kept by the caller
        between calls for one exchange) skips bodies already clean."""
        sc = self.scrubber
        out: list[tuple[str, list[dict[str, Any]]]] = []
        gen = self.secrets.generation
        if ex.url:
            url, spans = sc.text(ex.url)
            if spans:
                ex.url = url
                out.append(("url", [_span_note("url", s, None) for s in spans]))
        for side in ("request", "response"):
            attr = f"{side}_headers"
            headers = list(getattr(ex, attr) or ())
            changed = False
            for i, (k, v) in enumerate(headers):
                if not isinstance(v, str) or not v:
                    continue
                new, spans = sc.text(v)
                if spans:
                    headers[i] = (k, new)
                    changed = True
                    out.append((f"{side}.header:{str(k).lower()}", [_span_note("value", s, None) for s in spans]))
            if changed:
                setattr(ex, attr, headers)
        for side in ("request", "response"):
            self._scrub_body(ex, side, memo, gen, out)
        if ex.error:
            error, spans = sc.text(ex.error)
            if spans:
                ex.error = error
                out.append(("error", [_span_note("error", s, None) for s in spans]))
        for attr in ("session_id", "run_id", "cursor", "target_run_id"):
            value = getattr(ex, attr)
            if isinstance(value, str) and value:
                new, spans = sc.text(value)
                if spans:
                    setattr(ex, attr, new)
                    out.append((attr, [_span_note(attr, s, None) for s in spans]))
        if ex.notes:
            notes, n = self._scrub_json(ex.notes)
            if n:
                ex.notes.clear()
                ex.notes.update(notes)
                out.append(("notes", []))
        return out

    def _scrub_body(self, ex: Exchange, side: str, memo: dict[str, Any] | None, gen: int,
                    out: list[tuple[str, list[dict[str, Any]]]]) -> None:
        """:meth:`scrub_fields` of one body: byte scrub, then what only shows decoded."""
        attr = f"{side}_body"
        body = getattr(ex, attr)
        if not body:
            return
        seen = memo.get(attr) if memo is not None else None
        if seen is not None and seen[0] is body and seen[1] == gen:
            return  # this very object was found clean with everything known now
        new_body, spans = self.scrubber.data(bytes(body))
        new_body, joined = _decoded_body(self.scrubber, bytes(body), new_body)
        if spans or joined:
            setattr(ex, attr, new_body)
            out.append((f"{side}.body", [_span_note("body", s, s.at) for s in spans] + joined))
        if memo is not None:
            memo[attr] = (getattr(ex, attr), gen)  # holds the object: its id cannot be reused

    def _scrub_json(self, value: Any) -> tuple[Any, int]:
        """A JSON-like value with its strings scrubbed (our own redaction notes skipped)."""
        if isinstance(value, str):
            new = self.scrub_text(value)
            return new, int(new != value)
        if isinstance(value, dict):
            out, n = {}, 0
            for k, v in value.items():
                if k in _OWN_NOTES:
                    out[k] = v
                    continue
                out[k], m = self._scrub_json(v)
                n += m
            return out, n
        if isinstance(value, list):
            items = [self._scrub_json(v) for v in value]
            return [v for v, _ in items], sum(m for _, m in items)
        return value, 0

    def scrub_exchange(self, ex: Exchange, memo: dict[str, Any] | None = None) -> list[str]:
        """:meth:`scrub_fields` and :meth:`scrub_frame` on every frame, in place,
        noted in ``ex.notes`` (:func:`note_scrubbed`).  Returns where."""
        where = []
        for place, spans in self.scrub_fields(ex, memo):
            note_scrubbed(ex.notes, place, spans)
            where.append(place)
        if ex.frames:
            frames = list(ex.frames)
            streams = StreamMasks(self)
            at = {f.index: i for i, f in enumerate(frames)}
            for i, f in enumerate(frames):
                new, spans = self.scrub_frame(f)
                new, more, earlier = streams.add(f, new)
                for index, (version, notes) in earlier.items():
                    frames[at[index]] = version
                    note_scrubbed(ex.notes, f"frame:{index}", notes)
                    where.append(f"frame:{index}")
                if new is not f:
                    frames[i] = new
                    note_scrubbed(ex.notes, f"frame:{f.index}", spans + more)
                    where.append(f"frame:{f.index}")
            ex.frames = frames
        return where

    def learn_exchange(self, ex: Exchange) -> None:
        """Learn the secrets an exchange carries by name, changing nothing (the
        first pass of an import or export: a value sent later is known earlier)."""
        self._by_name(ex)

    # -- exchanges -------------------------------------------------------------------------

    def _by_name(self, ex: Exchange) -> tuple[Any, ...]:
        where: list[str] = []
        url = self.redact_url(ex.url)
        if url != ex.url:
            where.append("url")
        req_h = self.redact_headers(ex.request_headers)
        where += [f"request.header:{k.lower()}" for (k, v), (_, v2) in zip(ex.request_headers, req_h, strict=True) if v != v2]
        resp_h = self.redact_headers(ex.response_headers)
        where += [f"response.header:{k.lower()}" for (k, v), (_, v2) in zip(ex.response_headers, resp_h, strict=True) if v != v2]
        req_b = self.redact_body(ex.request_body, ex.header("content-type"))
        if req_b is not ex.request_body and req_b != ex.request_body:
            where.append("request.body")
        resp_b = self.redact_body(ex.response_body, ex.header("content-type", response=True))
        if resp_b is not ex.response_body and resp_b != ex.response_body:
            where.append("response.body")
        frames = ex.frames
        resp_ct = ex.header("content-type", response=True) or "application/json"
        if any((f.direction == "out" or f.transport == "body") and f.text for f in frames):
            frames = list(frames)
            for i, f in enumerate(frames):
                if not f.text:
                    continue
                if f.transport == "body" and f.direction == "in":
                    # a whole JSON response as a frame: the response body, redacted alike
                    raw = f.text.encode("utf-8", "surrogatepass")
                    new = self.redact_body(raw, resp_ct)
                elif f.direction == "out" and f.text.lstrip()[:1] in ("{", "["):
                    raw = f.text.encode("utf-8", "surrogatepass")
                    new = self._redact_json(raw, strict=True, in_place=True)  # the bytes sent, masked in place
                else:
                    continue
                if new is not raw and new != raw:
                    frames[i] = replace_frame(
                        f, text=new.decode("utf-8", "surrogatepass"), raw=None if f.raw is None else new,
                        end=None if f.start is None else f.start + len(new),
                    )
                    where.append(f"frame:{f.index}")
        return where, url, req_h, resp_h, req_b, resp_b, frames

    def redact_exchange(self, ex: Exchange) -> Exchange:
        """A redacted copy of an exchange (the input is not changed).

        By name: URL, request and response headers and bodies; client-to-server
        WebSocket messages that are JSON (an auth message is a common first
        frame) and ``body`` frames (a whole JSON response, the same bytes as
        the response body).  Then by value (:meth:`scrub_exchange`): every
        value learned so far and every well-known token shape is masked
        everywhere, streamed server events included.  ``notes["redacted"]``
        lists where (names only, never values); ``notes["scrubbed"]`` the
        masked spans.
        """
        where, url, req_h, resp_h, req_b, resp_b, frames = self._by_name(ex)
        notes = {k: (list(v) if k in _OWN_NOTES and isinstance(v, list) else v) for k, v in ex.notes.items()}
        if where:
            notes["redacted"] = list(where)
        else:  # nothing by name: the very values (a copy that compares equal)
            url, req_h, resp_h, req_b, resp_b = ex.url, ex.request_headers, ex.response_headers, ex.request_body, ex.response_body
        out = replace(
            ex,
            url=url,
            request_headers=req_h,
            response_headers=resp_h,
            request_body=req_b,
            response_body=resp_b,
            frames=list(frames),
            notes=notes,
        )
        self.scrub_exchange(out)
        return out

    def redact_exchanges(self, exchanges: Iterable[Exchange]) -> list[Exchange]:
        """Redacted copies of a whole recording (import, export): every exchange is
        learned from first, so a value is masked even before the exchange that sent it."""
        exs = list(exchanges)
        for ex in exs:
            self.learn_exchange(ex)
        return [self.redact_exchange(ex) for ex in exs]


class StreamMasks:
    """The frames of one exchange as a stream (:class:`~chatkit_trace.masking.StreamScrub`
    per direction): a secret that only shows once the frames' JSON strings are
    decoded and each field's text joined (split across events or parts, or
    ``\\u``-escaped) is masked in the frames that hold its pieces.

    :meth:`add` takes each frame as received and as the per-frame scrub left
    it, in order; it returns that frame masked further, the span notes, and
    new versions of earlier frames a secret continued from (by index, with
    their notes).  It keeps the latest version of every earlier frame a
    later one may still change.
    """

    __slots__ = ("redactor", "streams", "latest", "fed", "room")

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.streams: dict[str, StreamScrub] = {}
        self.latest: dict[int, Frame] = {}
        self.fed = -1  # the last frame index taken (a batch written again is not fed twice)
        self.room = 64

    def add(self, received: Frame, masked: Frame) -> tuple[Frame, list[dict[str, Any]], dict[int, tuple[Frame, list[dict[str, Any]]]]]:
        earlier: dict[int, tuple[Frame, list[dict[str, Any]]]] = {}
        if not received.text or not self.redactor.scrubber.active or received.index <= self.fed:
            return masked, [], earlier
        self.fed = received.index
        stream = self.streams.get(received.direction)
        if stream is None:
            stream = self.streams[received.direction] = StreamScrub(self.redactor.scrubber)
        hits = stream.feed(received.index, received.text)
        notes: list[dict[str, Any]] = []
        for index, found in hits.items():
            if index == received.index:
                masked = replace_frame(masked, text=apply_hits(masked.text or "", found))
                notes += _joined_notes(masked, found)
                continue
            old = self.latest.get(index)
            if old is None or not old.text:  # pragma: no cover - a held frame is always kept
                continue
            version = replace_frame(old, text=apply_hits(old.text, found))
            self.latest[index] = version
            earlier[index] = (version, _joined_notes(version, found))
        if stream.holds(received.index):
            self.latest[received.index] = masked
        if len(self.latest) > self.room:  # forget the frames no stream holds (now and then: amortised)
            for index in [i for i in self.latest if not any(s.holds(i) for s in self.streams.values())]:
                del self.latest[index]
            self.room = max(64, 2 * len(self.latest))
        return masked, notes, earlier


def _joined_notes(frame: Frame, found: list[tuple[int, int, str, str]]) -> list[dict[str, Any]]:
    """Span notes of a stream scrub's hits on ``frame``'s text (``joined``: found in the decoded, joined text)."""
    return [{**_span_note("text", Span(lo, hi - lo, kind), _stream_offset(frame, lo)), "joined": True} for lo, hi, _, kind in found]


def _decoded_body(sc: Scrubber, received: bytes, masked: bytes) -> tuple[bytes, list[dict[str, Any]]]:
    """A JSON body's secrets that only show decoded (escaped, or split across
    the parts of one field), masked in ``masked`` (the body as the byte scrub
    left it), and their span notes."""
    head = received.lstrip()[:1]
    if head not in (b"{", b"[") or not sc.active:
        return masked, []
    try:
        text = received.decode("utf-8")
    except UnicodeDecodeError:
        return masked, []
    found = StreamScrub(sc).feed(0, text).get(0)
    if not found:
        return masked, []
    data = bytearray(masked)
    for lo, hi, chunk, _ in found:
        data[lo:hi] = chunk.encode("ascii")
    return bytes(data), [{**_span_note("body", Span(lo, hi - lo, kind), lo), "joined": True} for lo, hi, _, kind in found]


_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _json_members(text: str) -> list[tuple[str, int, int]]:
    """Every object member of a JSON text: ``(key, value start, value end)``
    (character offsets), an outer member before the members inside it."""
    found: list[tuple[str, int, int]] = []

    def value(i: int) -> int:
        i = _WS.match(text, i).end()  # type: ignore[union-attr]
        c = text[i]
        if c == "{":
            i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
            if text[i] == "}":
                return i + 1
            while True:
                if text[i] != '"':
                    raise ValueError("a key")
                key, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
                i = _WS.match(text, i).end()  # type: ignore[union-attr]
                if text[i] != ":":
                    raise ValueError("a colon")
                start = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
                slot = len(found)
                found.append((key, start, start))
                end = value(start)
                found[slot] = (key, start, end)
                i = _WS.match(text, end).end()  # type: ignore[union-attr]
                if text[i] == "}":
                    return i + 1
                if text[i] != ",":
                    raise ValueError("a comma")
                i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
        if c == "[":
            i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
            if text[i] == "]":
                return i + 1
            while True:
                i = _WS.match(text, value(i)).end()  # type: ignore[union-attr]
                if text[i] == "]":
                    return i + 1
                if text[i] != ",":
                    raise ValueError("a comma")
                i += 1
        _, end = _DECODER.raw_decode(text, i)
        return int(end)

    value(0)
    return found


_OWN_NOTES = frozenset({"redacted", "scrubbed", "scrubbed_more"})
#: Spans noted per exchange at most (the rest are counted in ``scrubbed_more``).
MAX_NOTED = 100


def _span_note(field: str, span: Span, stream: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"field": field, "at": span.at, "len": span.length, "kind": span.kind}
    if stream is not None:
        out["stream"] = stream
    return out


def _stream_offset(frame: Frame, at: int) -> int | None:
    """The stream offset of byte ``at`` of a frame's text (SSE data lines mapped
    through ``data_offsets``), or None for a frame without offsets (WebSocket)."""
    if frame.start is None:
        return None
    offsets = frame.data_offsets
    if not offsets:
        return frame.start + at
    data = (frame.text or "").encode("utf-8", "surrogatepass")
    line_start = 0
    for k, offset in enumerate(offsets):
        newline = data.find(b"\n", line_start)
        if newline < 0 or at <= newline or k == len(offsets) - 1:
            return offset + (at - line_start)
        line_start = newline + 1
    return None  # pragma: no cover


def note_scrubbed(notes: dict[str, Any], where: str, spans: Iterable[dict[str, Any]] = ()) -> None:
    """Record in an exchange's notes that ``where`` was redacted (``redacted``)
    and the masked spans (``scrubbed``, at most :data:`MAX_NOTED`)."""
    done = notes.setdefault("redacted", [])
    if where not in done:
        done.append(where)
    spans = list(spans)
    if not spans:
        return
    listed = notes.setdefault("scrubbed", [])
    spans = [s for s in ({"where": where, **s} for s in spans) if s not in listed]  # a piece masked again: noted once
    room = max(0, MAX_NOTED - len(listed))
    listed.extend(spans[:room])
    if len(spans) > room:
        notes["scrubbed_more"] = int(notes.get("scrubbed_more", 0)) + len(spans) - room


def _redact_header_value(lname: str, value: str) -> str:
    if not value:
        return value
    if lname in ("authorization", "proxy-authorization", "x-authorization", "authentication"):
        m = _AUTH_SCHEME.match(value)
        return f"{m.group(1)} {REDACTED}" if m else REDACTED
    if lname == "cookie":
        out = []
        for part in value.split(";"):
            name, eq, _ = part.strip().partition("=")
            out.append(f"{name}={REDACTED}" if eq else REDACTED)
        return "; ".join(out)
    if lname == "set-cookie":
        first, sep, attrs = value.partition(";")
        name, eq, _ = first.strip().partition("=")
        return (f"{name}={REDACTED}" if eq else REDACTED) + (sep + attrs if sep else "")
    return REDACTED


def redact_exchange(ex: Exchange, config: RedactConfig | None = None) -> Exchange:
    """:meth:`Redactor.redact_exchange` with a redactor built from ``config`` (defaults on)."""
    return Redactor(config).redact_exchange(ex)
