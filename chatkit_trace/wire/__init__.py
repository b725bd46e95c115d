"""The wire layer: bytes on the wire -> frames (docs/architecture.md, data flow).

Pure Python, no I/O, no mitmproxy or aiohttp imports: the mitmproxy addon's
writer thread, HAR import and the tests all feed it plain bytes::

    response chunks (still Content-Encoded, split anywhere)
        |  make_decoder(content-encoding).decode(chunk) / .flush()   encoding.py
        |  (decoder.error -> error_frame(...), so the cutoff sees it)
        v
    decoded body bytes
        |-- text/event-stream -> SSEParser.feed / .flush -> SSEEvent     sse.py
        |                        frame_from_sse(event, ...) -> Frame      frames.py
        |-- x-ndjson / jsonl  -> NDJSONSplitter.feed / .flush -> Frame    frames.py
        '-- a JSON body       -> body_frame(content, ...) -> Frame        frames.py
    WebSocket messages -> ws_frame / ws_frame_from_message / frames_from_har   websocket.py

    Frame --event_json--> (JSON value | DONE, DecodeError | None)    SPEC R2.8
    [Frame] --reader_cutoff--> where chatkit's reader stops          SPEC R2.5
    JSON value --classify--> JSONRPCMessage (A2A envelopes)          jsonrpc.py

Bad input never raises: every decoder returns a :class:`DecodeError` value
beside what it could still decode, and keeps going, so one broken event never
costs the recording the events after it. :class:`WireDecodeError` exists
for callers that want to raise one.
"""

from .encoding import SUPPORTED_ENCODINGS, Decoder, make_decoder
from .errors import DecodeError, DecodeErrorKind, WireDecodeError
from .frames import (
    DONE,
    NDJSON_CONTENT_TYPES,
    DoneType,
    Frame,
    NDJSONSplitter,
    admitted,
    body_frame,
    byte_offset,
    content_transport,
    error_frame,
    event_json,
    frame_from_sse,
    parse_json,
    reader_cutoff,
    replace_frame,
)
from .jsonrpc import JSONRPCMessage, RPCError, RPCKind, classify, envelope_error
from .sse import DEFAULT_MAX_LINE, SSEEvent, SSEParser, parse_sse
from .websocket import WebSocketMessageLike, frames_from_har, ws_frame, ws_frame_from_message

__all__ = [
    "DEFAULT_MAX_LINE",
    "DONE",
    "DecodeError",
    "DecodeErrorKind",
    "Decoder",
    "DoneType",
    "Frame",
    "JSONRPCMessage",
    "NDJSONSplitter",
    "NDJSON_CONTENT_TYPES",
    "RPCError",
    "RPCKind",
    "SSEEvent",
    "SSEParser",
    "SUPPORTED_ENCODINGS",
    "WebSocketMessageLike",
    "WireDecodeError",
    "admitted",
    "body_frame",
    "byte_offset",
    "classify",
    "content_transport",
    "envelope_error",
    "error_frame",
    "event_json",
    "frame_from_sse",
    "frames_from_har",
    "make_decoder",
    "parse_json",
    "parse_sse",
    "reader_cutoff",
    "replace_frame",
    "ws_frame",
    "ws_frame_from_message",
]
