"""JSON-RPC 2.0 envelopes: what a parsed JSON value is, and what is wrong with it.

A2A sends every SSE event as a whole JSON-RPC response
(``{"jsonrpc": "2.0", "id": "req-1", "result": {...}}``; an error frame is
``{"jsonrpc": "2.0", "id": ..., "error": {"code", "message", "data?"}}``,
as the a2a-sdk captures in recordings/captures/a2a show), and its requests are JSON-RPC
requests. :func:`classify` looks at one parsed value and returns a
:class:`JSONRPCMessage`: its kind, the envelope members, and a tuple of
``problems`` (empty when the envelope follows the specification). It never
raises.

Which values are JSON-RPC at all: by default only objects with a
``"jsonrpc"`` member, because other chat protocols use ``error`` and
``result`` keys of their own (an OpenAI error body is ``{"error": {...}}``).
An adapter for a protocol that *is* JSON-RPC passes ``expected=True``; then
an object with ``method``, ``result`` or ``error`` but no ``jsonrpc`` is
classified by its members and the missing ``jsonrpc`` is a problem.

Kinds (:class:`RPCKind`): ``request`` (method and id), ``notification``
(method, no id), ``result`` and ``error`` (responses), ``invalid`` (has
``"jsonrpc"`` but neither a method nor a result or error), ``not-jsonrpc``.

Rules checked (JSON-RPC 2.0 specification, sections 4 and 5):
``jsonrpc`` is exactly ``"2.0"``; ``method`` is a string; ``params``, when
present, is an array or an object; ``id`` is a string, a number or null; a
response has an ``id`` member and exactly one of ``result`` / ``error``; an
error is an object whose ``code`` is an integer (a float with no fraction
counts, as JavaScript cannot tell them apart) and whose ``message`` is a
string. Unknown extra members are allowed. The two kinds of member a
request cannot have (``result``/``error``) are reported too.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .errors import DecodeError, DecodeErrorKind

__all__ = ["JSONRPCMessage", "RPCError", "RPCKind", "classify", "envelope_error"]


class RPCKind(StrEnum):
    REQUEST = "request"
    NOTIFICATION = "notification"
    RESULT = "result"
    ERROR = "error"
    INVALID = "invalid"
    NOT_JSONRPC = "not-jsonrpc"


@dataclass(frozen=True, slots=True)
class RPCError:
    """The ``error`` member of an error response, as sent (types unchecked here).

    ``code`` and ``message`` are None when absent; ``raw`` is the member
    itself (which may not even be an object).
    """

    code: object
    message: object
    data: object = None
    has_data: bool = False
    raw: object = None


@dataclass(frozen=True, slots=True)
class JSONRPCMessage:
    """One classified value; see the module docstring.

    ``id`` is None both when absent and when null: ``has_id`` tells them
    apart (a notification has no ``id``; a response to an unreadable request
    has ``"id": null``).
    """

    kind: RPCKind
    id: object = None
    has_id: bool = False
    method: str | None = None
    params: object = None
    result: object = None
    error: RPCError | None = None
    problems: tuple[str, ...] = ()

    @property
    def valid(self) -> bool:
        """True for a well-formed JSON-RPC 2.0 message."""
        return self.kind is not RPCKind.NOT_JSONRPC and not self.problems

    @property
    def is_response(self) -> bool:
        return self.kind in (RPCKind.RESULT, RPCKind.ERROR)

    @property
    def payload(self) -> object:
        """``result``, the error member, or ``params``, whichever the kind carries."""
        if self.kind is RPCKind.RESULT:
            return self.result
        if self.kind is RPCKind.ERROR:
            return None if self.error is None else self.error.raw
        return self.params


def _is_int(value: object) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _id_problem(value: dict[str, object]) -> list[str]:
    if "id" not in value:
        return []
    rid = value["id"]
    if rid is None or isinstance(rid, str):
        return []
    if isinstance(rid, int | float) and not isinstance(rid, bool):
        return []
    return [f"id must be a string, a number or null, not {type(rid).__name__}"]


def _error_member(raw: object) -> tuple[RPCError, list[str]]:
    if not isinstance(raw, dict):
        return RPCError(None, None, raw=raw), [f"error must be an object, not {type(raw).__name__}"]
    problems = []
    code, message = raw.get("code"), raw.get("message")
    if "code" not in raw:
        problems.append("error has no code")
    elif not _is_int(code):
        problems.append(f"error.code must be an integer, not {code!r}"[:120])
    if "message" not in raw:
        problems.append("error has no message")
    elif not isinstance(message, str):
        problems.append(f"error.message must be a string, not {type(message).__name__}")
    return RPCError(code, message, raw.get("data"), "data" in raw, raw), problems


def _kind(value: dict[str, object], expected: bool) -> RPCKind:
    if "jsonrpc" not in value and not expected:
        return RPCKind.NOT_JSONRPC
    if "method" in value:
        return RPCKind.REQUEST if "id" in value else RPCKind.NOTIFICATION
    if "error" in value:
        return RPCKind.ERROR
    if "result" in value:
        return RPCKind.RESULT
    return RPCKind.INVALID


def classify(value: object, *, expected: bool = False) -> JSONRPCMessage:
    # long-function: JSON-RPC 2.0's message shapes in the specification's order
    """Classify one parsed JSON value as a JSON-RPC 2.0 message.

    Args:
        value: a parsed JSON value (``json.loads`` output).
        expected: the protocol is JSON-RPC, so judge objects without a
            ``jsonrpc`` member too (see the module docstring).

    Returns:
        A :class:`JSONRPCMessage`. ``not-jsonrpc`` values have no problems,
        except batches (arrays), which say so: classify their items one by
        one. A response with both ``result`` and ``error`` is an ``error``
        with a problem.
    """
    if isinstance(value, list):
        problem = "a batch (array): classify each item"
        return JSONRPCMessage(RPCKind.NOT_JSONRPC, problems=(problem,))
    if not isinstance(value, dict):
        if expected:
            problem = f"a JSON-RPC message is an object, not {type(value).__name__}"
            return JSONRPCMessage(RPCKind.INVALID, problems=(problem,))
        return JSONRPCMessage(RPCKind.NOT_JSONRPC)
    kind = _kind(value, expected)
    if kind is RPCKind.NOT_JSONRPC:
        return JSONRPCMessage(kind)
    problems: list[str] = []
    if value.get("jsonrpc") != "2.0":
        got = repr(value["jsonrpc"])[:40] if "jsonrpc" in value else "absent"
        problems.append(f'jsonrpc must be "2.0" (got {got})')
    problems += _id_problem(value)
    method = value.get("method")
    error: RPCError | None = None
    if kind in (RPCKind.REQUEST, RPCKind.NOTIFICATION):
        if not isinstance(method, str):
            problems.append(f"method must be a string, not {type(method).__name__}")
            method = None
        if "params" in value and not isinstance(value["params"], list | dict):
            problems.append("params must be an array or an object")
        if "result" in value or "error" in value:
            problems.append("a request cannot have result or error")
    elif kind is RPCKind.INVALID:
        problems.append("neither method (request) nor result/error (response)")
    else:
        method = None
        if "id" not in value:
            problems.append("a response must have an id (null when unknown)")
        if "result" in value and "error" in value:
            problems.append("a response cannot have both result and error")
        if kind is RPCKind.ERROR:
            error, more = _error_member(value["error"])
            problems += more
    return JSONRPCMessage(
        kind,
        value.get("id"),
        "id" in value,
        method if isinstance(method, str) else None,
        value.get("params"),
        value.get("result"),
        error,
        tuple(problems),
    )


def envelope_error(message: JSONRPCMessage, offset: int | None = None) -> DecodeError | None:
    """A ``bad-envelope`` DecodeError for an ill-formed JSON-RPC message, else None.

    ``not-jsonrpc`` values are not errors here: whether a protocol requires
    JSON-RPC is the adapter's call.
    """
    if not message.problems:
        return None
    return DecodeError(
        DecodeErrorKind.BAD_ENVELOPE,
        f"JSON-RPC {message.kind}: " + "; ".join(message.problems),
        offset,
        None,
    )
