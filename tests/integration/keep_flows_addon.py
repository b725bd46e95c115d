"""A mitmproxy script for the live-vs-import test: the flow file of the live session.

Loaded after the recording addon (``-s`` order), in the same ``mitmdump``
that records live.  mitmproxy keeps no body of a response it streams (the
recorder streams every event stream), so neither ``-w`` nor ``hardump``
would hold the events: this script wraps the recorder's stream callable with
one that keeps a copy of the raw (still encoded) bytes, puts them back into
``flow.response.raw_content`` when the flow ends (as a mitmproxy that
buffered the response would hold them; a flow cut mid-body keeps what
arrived), and writes every flow with ``mitmproxy.io.FlowWriter`` to
``keep_flows`` when mitmdump stops.  mitmproxy's own ``savehar`` addon
(``--set hardump=FILE``) builds its HAR from the same flow objects at the
same stop, so it sees the same bodies.
"""

from __future__ import annotations

from typing import Any

from mitmproxy import ctx, http, io


class KeepFlows:
    def __init__(self) -> None:
        self.flows: list[http.HTTPFlow] = []
        self.copies: dict[str, bytearray] = {}

    def load(self, loader: Any) -> None:
        loader.add_option("keep_flows", str, "", "write every flow, with its streamed body, to this file at the end")

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        resp = flow.response
        if resp is None or not callable(resp.stream):
            return
        inner = resp.stream
        copy = self.copies[flow.id] = bytearray()

        def keep(chunk: bytes) -> bytes:
            copy.extend(chunk)
            return inner(chunk)

        resp.stream = keep

    def _ended(self, flow: http.HTTPFlow) -> None:
        copy = self.copies.pop(flow.id, None)
        if copy is not None and flow.response is not None:
            flow.response.raw_content = bytes(copy)
        self.flows.append(flow)

    def response(self, flow: http.HTTPFlow) -> None:
        if flow.websocket is None:  # a WebSocket ends in websocket_end
            self._ended(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        if flow.websocket is None:
            self._ended(flow)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        self._ended(flow)

    def done(self) -> None:
        if ctx.options.keep_flows:
            with open(ctx.options.keep_flows, "wb") as fo:
                writer = io.FlowWriter(fo)
                for flow in self.flows:
                    writer.add(flow)


addons = [KeepFlows()]
