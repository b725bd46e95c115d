"""One end classification (route.ends, decision 197): what mitmproxy, a flow file
or a HAR file reports becomes the same EndKind, live or imported."""

from __future__ import annotations

import pytest

from chatkit_trace.route import EndKind, classify_end, proxy_answered
from chatkit_trace.trace import STREAM_ENDS

PEER_CLOSED = "HTTP/1 protocol error: peer closed connection without sending complete message body (incomplete chunked read)"


@pytest.mark.parametrize(
    "message, had_response, expected",
    [
        (PEER_CLOSED, True, "reset"),
        (PEER_CLOSED, False, "error"),  # before any response: the proxy answered 502 itself
        ("server closed connection", False, "error"),
        ("Server disconnected.", True, "reset"),
        ("net::ERR_CONNECTION_RESET", True, "reset"),  # a browser's HAR
        ("Client disconnected.", True, "client-gone"),
        ("Client disconnected.", False, "client-gone"),
        ("net::ERR_ABORTED", True, "client-gone"),  # a browser's HAR: the page cancelled the fetch
        ("NS_BINDING_ABORTED", False, "client-gone"),
        ("The user cancelled the request", True, "client-gone"),
        ("canceled", True, "client-gone"),
        ("Connection timed out", True, "timeout"),
        ("read timeout", False, "timeout"),
        ("[Errno 111] Connect call failed ('127.0.0.1', 1)", False, "error"),
        ("Connection killed.", True, "error"),
    ],
)
def test_an_error_message_is_one_end_kind(message, had_response, expected):
    assert classify_end(message, had_response=had_response) == expected


@pytest.mark.parametrize(
    "code, by_client, expected",
    [
        (1000, True, "complete"),
        (1001, False, "complete"),
        (None, None, "complete"),
        (1006, True, "client-gone"),  # the client dropped its TCP connection
        (1006, False, "reset"),  # the server did
        (1011, False, "reset"),
        (4000, True, "client-gone"),
    ],
)
def test_a_websocket_close_is_one_end_kind(code, by_client, expected):
    assert classify_end(None, had_response=True, websocket=True, close_code=code, closed_by_client=by_client) == expected


def test_a_flow_error_wins_over_the_close_code():
    assert classify_end("Client disconnected.", had_response=True, websocket=True, close_code=1000) == "client-gone"


def test_no_error_on_http_is_complete_and_the_proxy_answers_only_errors_before_a_response():
    assert classify_end(None, had_response=True) == "complete"
    assert proxy_answered(EndKind.ERROR, had_response=False)
    assert not proxy_answered(EndKind.ERROR, had_response=True)
    assert not proxy_answered(EndKind.TIMEOUT, had_response=False)


def test_the_vocabulary_is_defined_once():
    assert STREAM_ENDS == ("complete", "reset", "client-gone", "timeout", "error", "open")
    assert all(isinstance(k, str) for k in STREAM_ENDS) and tuple(EndKind) == STREAM_ENDS


def test_capture_still_exports_the_routing_names_under_their_old_path():
    """``chatkit_trace.capture`` re-exports route's names (their home before
    issue 15 step 3) from route's own list: the same objects, no second list."""
    import chatkit_trace.capture as capture
    import chatkit_trace.route as route

    assert capture.__all__ == route.__all__
    assert all(getattr(capture, name) is getattr(route, name) for name in route.__all__)
    from chatkit_trace.capture import load_profile  # the path adapter projects and docs used

    assert load_profile is route.load_profile
