"""How an exchange ended: the one reading of what the proxy, or a recorded file, reports.

The live recorder (mitmproxy's ``error`` and ``websocket_end`` hooks), the
importer (a flow file's ``flow.error`` and ``flow.websocket``, a HAR entry's
``_error``) and redrive all call :func:`classify_end`, so the same traffic
gets the same :class:`~chatkit_trace.trace.EndKind` whichever way it was
recorded (docs/decisions.md 197).

What mitmproxy reports (docs/mitmproxy.md, "Errors, disconnects"):

* ``Client disconnected.``: the client left -> ``client-gone`` (a browser's
  HAR says ``net::ERR_ABORTED`` / ``NS_BINDING_ABORTED``, a fetch that was
  cancelled says ``canceled``: the same).
* ``... timed out`` / ``timeout`` -> ``timeout``.
* ``HTTP/1 protocol error: peer closed connection without sending complete
  message body (incomplete chunked read)`` after the response started ->
  ``reset`` (the upstream dropped the stream).  Before any response the
  proxy answers the client itself (502): ``error`` with that status
  (:func:`proxy_answered`).
* anything else (a refused connection, a killed flow) -> ``error``.

A WebSocket ends ``complete`` on a close frame 1000/1001 (or none reported),
otherwise ``client-gone`` when the client closed it and ``reset`` when the
server side did (1006: the TCP connection dropped without a close frame);
a flow error wins over the close code.
"""

from __future__ import annotations

from typing import Any

from ..trace import EndKind

__all__ = ["EndKind", "classify_end", "proxy_answered", "websocket_close_notes"]

_CLIENT_GONE = ("client disconnected", "client closed", "aborted", "canceled", "cancelled")
_TIMEOUT = ("timeout", "timed out")
_RESET = ("peer closed", "server disconnected", "reset", "incomplete", "connection closed", "eof")
#: WebSocket close codes of a clean close (None: no close reported).
_CLEAN_CLOSES = (1000, 1001, None)


def classify_end(
    error: str | None,
    *,
    had_response: bool,
    websocket: bool = False,
    close_code: int | None = None,
    closed_by_client: bool | None = None,
) -> EndKind:
    """The :class:`EndKind` of an exchange from what its recorder reported.

    ``error`` is the transport error's message (``flow.error.msg``, a HAR
    ``_error``), None when there was none; ``had_response`` whether a
    response (its status line) arrived before it.  A WebSocket's close code
    and closer decide when there is no error.
    """
    if error:
        m = error.lower()
        if any(s in m for s in _CLIENT_GONE):
            return EndKind.CLIENT_GONE
        if any(s in m for s in _TIMEOUT):
            return EndKind.TIMEOUT
        if had_response and any(s in m for s in _RESET):
            return EndKind.RESET
        return EndKind.ERROR
    if websocket and close_code not in _CLEAN_CLOSES:
        return EndKind.CLIENT_GONE if closed_by_client else EndKind.RESET
    return EndKind.COMPLETE


def proxy_answered(end: EndKind | str, *, had_response: bool) -> bool:
    """Whether the proxy answered the client itself (a 502): an ``error`` end before any response."""
    return end == EndKind.ERROR and not had_response


def websocket_close_notes(close_code: int | None, closed_by_client: bool | None, close_reason: str | None) -> dict[str, Any]:
    """A WebSocket exchange's close, as its ``notes`` say it (the analysis reads ``close_code``)."""
    notes: dict[str, Any] = {"close_code": close_code, "closed_by_client": closed_by_client}
    if close_reason:
        notes["close_reason"] = close_reason
    return notes
