"""Incremental Content-Encoding decoders for the recorder's own copy of a body.

mitmproxy hands a streamed response to the recorder chunk by chunk and
*still compressed* (docs: mitmproxy.md section 1); its own decoders only work
on whole bodies, and the recording must not change what the client gets
(never strip ``Accept-Encoding``). So the recorder decodes its copy here::

    decoder = make_decoder(flow.response.headers.get("content-encoding"))
    parser.feed(decoder.decode(chunk))          # for every chunk
    parser.feed(decoder.flush()); parser.flush()  # at the end

Every decoder has httpx's ``decode(chunk) -> bytes`` / ``flush() -> bytes``
pair and accepts the stream split at any byte. Nothing raises on bad input:
a corrupt or truncated stream sets :attr:`Decoder.error` to a
``bad-encoding`` :class:`~chatkit_trace.wire.errors.DecodeError` whose
offset is the position in the *decoded* stream where output stopped (the
encoded byte range is in the message; zlib, brotli and zstd do not say which
byte was wrong, only which chunk). After that the decoder is *failed* and
passes nothing further. An unknown coding gives an identity decoder with
``unsupported`` set and an ``unsupported-encoding`` error value, so the bytes
are still kept as they came.

Codings: ``identity``; ``gzip``/``x-gzip`` (several members allowed);
``deflate``, zlib-wrapped as RFC 9110 says or raw as some servers send it,
told apart by the zlib header check on the first two bytes; ``br``;
``zstd`` (several frames allowed). A list (``gzip, br``) was applied left to
right by the server, so it is undone right to left.

SPEC R2.5: a browser whose body decoding fails ends the read, so
``bad-encoding`` stops chatkit's reader.
"""

from __future__ import annotations

import zlib
from typing import Protocol

from .errors import DecodeError, DecodeErrorKind

__all__ = ["Decoder", "SUPPORTED_ENCODINGS", "make_decoder"]

SUPPORTED_ENCODINGS = ("identity", "gzip", "x-gzip", "deflate", "br", "zstd")


class Decoder(Protocol):
    """What :func:`make_decoder` returns."""

    coding: str
    unsupported: bool
    unsupported_error: DecodeError | None
    error: DecodeError | None

    def decode(self, chunk: bytes) -> bytes:
        """Decode the next encoded chunk; returns what it completes (maybe ``b""``)."""
        ...

    def flush(self) -> bytes:
        """End of the encoded stream: the rest, and a truncation check."""
        ...


class _Base:
    """Bookkeeping shared by every decoder: counts, the error, the failed state."""

    coding = "identity"

    def __init__(self) -> None:
        self.unsupported = False
        self.unsupported_error: DecodeError | None = None
        self.error: DecodeError | None = None
        self.consumed = 0  # encoded bytes given to decode()
        self.produced = 0  # decoded bytes returned

    def decode(self, chunk: bytes) -> bytes:
        if self.error is not None or not chunk:
            return b""
        start = self.consumed
        self.consumed += len(chunk)
        out: list[bytes] = []
        try:
            self._decode(chunk, out)
        except Exception as exc:  # noqa: BLE001 - a codec's own errors (zlib.error, brotli.error, ZstdError ...) share no base: the stream is corrupt
            where = f"encoded bytes {start}..{self.consumed}"
            self._fail(out, f"corrupt {self.coding} data in {where}: {exc}")
        return self._count(out)

    def flush(self) -> bytes:
        if self.error is not None:
            return b""
        out: list[bytes] = []
        try:
            self._flush(out)
        except Exception as exc:  # noqa: BLE001 - a codec's own errors share no base: the stream is corrupt
            self._fail(out, f"corrupt {self.coding} data at the end of the stream: {exc}")
        if self.error is None and self.consumed and not self._finished():
            self._fail(out, f"the {self.coding} stream ended before its end marker (truncated)")
        return self._count(out)

    def _count(self, out: list[bytes]) -> bytes:
        data = b"".join(out)
        self.produced += len(data)
        return data

    def _fail(self, out: list[bytes], message: str) -> None:
        at = self.produced + sum(map(len, out))  # where the decoded output stops
        self.error = DecodeError(DecodeErrorKind.BAD_ENCODING, message, at, at)

    def _decode(self, chunk: bytes, out: list[bytes]) -> None:
        out.append(chunk)

    def _flush(self, out: list[bytes]) -> None:
        pass

    def _finished(self) -> bool:
        return True


class _Identity(_Base):
    def __init__(self, coding: str = "identity", unsupported: bool = False) -> None:
        super().__init__()
        self.coding = coding
        self.unsupported = unsupported
        if unsupported:
            self.unsupported_error = DecodeError(
                DecodeErrorKind.UNSUPPORTED_ENCODING,
                f"Content-Encoding {coding!r} is not supported; the body is kept as it came",
                0,
                0,
            )


class _Gzip(_Base):
    coding = "gzip"

    def __init__(self) -> None:
        super().__init__()
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._pending = b""  # after a member ended: bytes that may start the next

    def _decode(self, chunk: bytes, out: list[bytes]) -> None:
        data = self._pending + chunk if self._pending else chunk
        self._pending = b""
        while data:
            if self._z.eof:
                if len(data) < 2:  # cannot tell yet whether a member follows
                    self._pending = data
                    return
                if data[:2] != b"\x1f\x8b":
                    raise zlib.error("bytes after the end of the gzip stream")
                self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out.append(self._z.decompress(data))
            data = self._z.unused_data if self._z.eof else b""

    def _flush(self, out: list[bytes]) -> None:
        if self._pending:
            raise zlib.error("bytes after the end of the gzip stream")
        out.append(self._z.flush())

    def _finished(self) -> bool:
        return self._z.eof


class _Deflate(_Base):
    coding = "deflate"

    def __init__(self) -> None:
        super().__init__()
        self._z: zlib._Decompress | None = None
        self._head = b""  # the first byte, until the second tells the format

    def _decode(self, chunk: bytes, out: list[bytes]) -> None:
        if self._z is None:
            head = self._head + chunk
            if len(head) < 2:
                self._head = head
                return
            self._head = b""
            # RFC 1950 header: CM = 8 and (CMF*256 + FLG) divisible by 31.
            wrapped = head[0] & 0x0F == 8 and (head[0] * 256 + head[1]) % 31 == 0
            self._z = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
            chunk = head
        if self._z.eof:
            raise zlib.error("bytes after the end of the deflate stream")
        out.append(self._z.decompress(chunk))
        if self._z.unused_data:
            raise zlib.error("bytes after the end of the deflate stream")

    def _flush(self, out: list[bytes]) -> None:
        if self._z is not None:
            out.append(self._z.flush())

    def _finished(self) -> bool:
        return self._z is not None and self._z.eof


class _Brotli(_Base):
    coding = "br"

    def __init__(self) -> None:
        super().__init__()
        import brotli

        self._d = brotli.Decompressor()

    def _decode(self, chunk: bytes, out: list[bytes]) -> None:
        if self._d.is_finished():
            raise ValueError("bytes after the end of the brotli stream")
        out.append(self._d.process(chunk))

    def _finished(self) -> bool:
        return bool(self._d.is_finished())


class _Zstd(_Base):
    coding = "zstd"

    def __init__(self) -> None:
        super().__init__()
        import zstandard

        self._new = zstandard.ZstdDecompressor().decompressobj
        self._d = self._new()

    def _decode(self, chunk: bytes, out: list[bytes]) -> None:
        data = chunk
        while data:
            if self._d.eof:  # a further frame follows
                self._d = self._new()
            out.append(self._d.decompress(data))
            data = self._d.unused_data if self._d.eof else b""

    def _finished(self) -> bool:
        return bool(self._d.eof)


class _Chain(_Base):
    """Several codings: ``decoders`` in the order they are undone."""

    def __init__(self, decoders: list[_Base]) -> None:
        super().__init__()
        self.decoders = decoders
        self.coding = ", ".join(d.coding for d in reversed(decoders))
        self.unsupported = any(d.unsupported for d in decoders)
        self.unsupported_error = next(
            (d.unsupported_error for d in decoders if d.unsupported_error), None
        )

    def decode(self, chunk: bytes) -> bytes:
        if self.error is not None or not chunk:
            return b""
        for d in self.decoders:
            chunk = d.decode(chunk)
        return self._done(chunk)

    def flush(self) -> bytes:
        if self.error is not None:
            return b""
        data = b""
        for d in self.decoders:
            data = d.decode(data) + d.flush()
        return self._done(data)

    def _done(self, data: bytes) -> bytes:
        """Count the output; the first failed stage fails the chain after it."""
        self.produced += len(data)
        failed = next((d.error for d in self.decoders if d.error is not None), None)
        if failed is not None:
            self.error = DecodeError(failed.kind, failed.message, self.produced, self.produced)
        return data


def _one(coding: str) -> _Base:
    if coding in ("", "identity"):
        return _Identity()
    if coding in ("gzip", "x-gzip"):
        return _Gzip()
    if coding == "deflate":
        return _Deflate()
    if coding == "br":
        return _Brotli()
    if coding == "zstd":
        return _Zstd()
    return _Identity(coding, unsupported=True)


def make_decoder(content_encoding: str | None) -> Decoder:
    """A fresh incremental decoder for a ``Content-Encoding`` header value.

    Args:
        content_encoding: the header value (``None``, ``""``, ``"gzip"``,
            ``"gzip, br"``...); case and spaces do not matter.

    Returns:
        A :class:`Decoder`. For an unknown coding, an identity decoder with
        ``unsupported = True`` and ``unsupported_error`` set (its bytes pass
        through unchanged; everything after it in the chain is not undone).
    """
    codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        return _Identity()
    if len(codings) == 1:
        return _one(codings[0])
    undo: list[_Base] = []
    for coding in reversed(codings):
        decoder = _one(coding)
        undo.append(decoder)
        if decoder.unsupported:  # cannot undo what lies beneath an unknown coding
            break
    return undo[0] if len(undo) == 1 else _Chain(undo)
