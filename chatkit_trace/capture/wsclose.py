"""A WebSocket dropped without a close frame stays dropped through the proxy.

When one side of a WebSocket drops its TCP connection without a close frame,
mitmproxy's WebSocket layer (``mitmproxy.proxy.layers.websocket``, 11.x and
12.x) turns the loss into wsproto's ``CloseConnection(1006)`` and relays it
to the other side; wsproto never sends the local-only code 1006 on the wire
and writes a **1000 close frame** instead.  A client that reconnects only
after an abnormal close (1006) then behaves differently while recorded.

:func:`pass_abnormal_closes` makes the relay close the other side's TCP
connection instead of sending that close frame, so the other side sees an
abnormal close (1006) too, exactly as without the proxy.  Every other close
(a real close frame, with its code and reason) is relayed as mitmproxy
relays it.  The recorder turns it on unless ``chatkit_ws_abnormal_close`` is
false (docs/recording.md, "WebSocket").  mitmproxy offers no hook between
the drop and its close frame (``websocket_end`` runs after it, and a
WebSocket flow cannot be killed in transit), so this wraps
``WebsocketConnection.send2``, the one place the relayed close is written.
"""

from __future__ import annotations

from typing import Any

__all__ = ["pass_abnormal_closes", "passing_abnormal_closes"]

_state = {"on": False, "patched": False}


def passing_abnormal_closes() -> bool:
    return bool(_state["on"] and _state["patched"])


def pass_abnormal_closes(on: bool = True) -> bool:
    """Turn the pass-through on (or off); returns whether it is in effect
    (False when this mitmproxy has no ``WebsocketConnection.send2``)."""
    _state["on"] = on
    if on and not _state["patched"]:
        try:
            import wsproto.events
            from mitmproxy.proxy import commands
            from mitmproxy.proxy.layers import websocket as layer
        except ImportError:  # pragma: no cover - mitmproxy without a WebSocket layer
            return False
        original = getattr(layer.WebsocketConnection, "send2", None)
        if original is None:  # pragma: no cover - a mitmproxy that writes its relay elsewhere
            return False

        def send2(self: Any, event: Any) -> Any:
            if (
                _state["on"]
                and isinstance(event, wsproto.events.CloseConnection)
                and event.code == 1006  # the other side dropped its connection: no close frame came
            ):
                return commands.CloseConnection(self.conn)
            return original(self, event)

        send2.__wrapped__ = original  # type: ignore[attr-defined]
        layer.WebsocketConnection.send2 = send2
        _state["patched"] = True
    return passing_abnormal_closes() if on else False
