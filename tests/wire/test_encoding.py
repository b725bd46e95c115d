"""Incremental Content-Encoding decoders: any split decodes the same; bad input is a value."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import brotli
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from chatkit_trace.wire import DecodeErrorKind, make_decoder

BODY = (Path(__file__).parent / "data" / "openai_fake_llm_text.sse").read_bytes()[:700]


def raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


ENCODED = {
    "gzip": gzip.compress(BODY),
    "x-gzip": gzip.compress(BODY),
    "deflate": zlib.compress(BODY),  # zlib-wrapped, as RFC 9110 says
    "deflate-raw": raw_deflate(BODY),  # what some servers send
    "br": brotli.compress(BODY),
    "zstd": zstandard.ZstdCompressor().compress(BODY),
    "identity": BODY,
}


def header(name: str) -> str:
    return "deflate" if name == "deflate-raw" else name


def decode_chunks(coding: str | None, chunks: list[bytes]) -> tuple[bytes, object]:
    decoder = make_decoder(coding)
    out = b"".join(decoder.decode(c) for c in chunks) + decoder.flush()
    return out, decoder.error


@pytest.mark.parametrize("name", sorted(ENCODED))
def test_every_split_decodes_the_same(name: str) -> None:
    data = ENCODED[name]
    for cut in range(len(data) + 1):
        assert decode_chunks(header(name), [data[:cut], data[cut:]]) == (BODY, None), cut
    assert decode_chunks(header(name), [data[i : i + 1] for i in range(len(data))]) == (BODY, None)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(ENCODED)), st.data())
def test_random_splits_decode_the_same(name: str, data: st.DataObject) -> None:
    encoded = ENCODED[name]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(encoded)), max_size=30)))
    bounds = [0, *cuts, len(encoded)]
    chunks = [encoded[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    assert decode_chunks(header(name), chunks) == (BODY, None)


@pytest.mark.parametrize("value", [None, "", "identity", " Identity "])
def test_identity(value: str | None) -> None:
    decoder = make_decoder(value)
    assert decoder.decode(b"abc") == b"abc"
    assert decoder.flush() == b""
    assert (decoder.error, decoder.unsupported) == (None, False)


def test_header_value_is_case_and_space_insensitive() -> None:
    assert decode_chunks(" GZIP ", [ENCODED["gzip"]]) == (BODY, None)


def test_several_codings_are_undone_in_reverse_order() -> None:
    data = brotli.compress(gzip.compress(BODY))  # "gzip, br": gzip first, then br
    for cut in range(0, len(data) + 1, 7):
        assert decode_chunks("gzip, br", [data[:cut], data[cut:]]) == (BODY, None)
    assert make_decoder("gzip, br").coding == "gzip, br"


def test_gzip_with_several_members() -> None:
    data = gzip.compress(BODY[:300]) + gzip.compress(BODY[300:])
    for cut in range(len(data) + 1):
        assert decode_chunks("gzip", [data[:cut], data[cut:]]) == (BODY, None)


def test_zstd_with_several_frames() -> None:
    c = zstandard.ZstdCompressor()
    data = c.compress(BODY[:300]) + c.compress(BODY[300:])
    for cut in range(len(data) + 1):
        assert decode_chunks("zstd", [data[:cut], data[cut:]]) == (BODY, None)


def test_unknown_coding_passes_bytes_and_flags_unsupported() -> None:
    decoder = make_decoder("compress")
    assert decoder.decode(b"\x1f\x9d abc") == b"\x1f\x9d abc"
    assert decoder.flush() == b""
    assert decoder.unsupported and decoder.error is None
    assert decoder.unsupported_error is not None
    assert decoder.unsupported_error.kind == DecodeErrorKind.UNSUPPORTED_ENCODING
    assert not decoder.unsupported_error.stops_reader


def test_unknown_coding_under_a_known_one() -> None:
    # "compress, gzip": gzip is undone; compress is flagged and left in place.
    inner = b"\x1f\x9d pretend-compress"
    decoder = make_decoder("compress, gzip")
    assert decoder.decode(gzip.compress(inner)) + decoder.flush() == inner
    assert decoder.unsupported and decoder.error is None
    # "gzip, compress": nothing under compress can be undone.
    decoder = make_decoder("gzip, compress")
    assert decoder.decode(b"opaque") == b"opaque" and decoder.unsupported


CORRUPT = {
    "gzip": ENCODED["gzip"][:20] + b"\x00" * 40 + ENCODED["gzip"][60:],
    "deflate": ENCODED["deflate"][:10] + b"\xff" * 30 + ENCODED["deflate"][40:],
    "br": b"\xff" * 50,
    "zstd": ENCODED["zstd"][:4] + b"\xff" * 60,
}


@pytest.mark.parametrize("name", sorted(CORRUPT))
@pytest.mark.parametrize("step", [1, 5, 4096])
def test_corrupt_stream_is_a_value_and_then_passes_nothing(name: str, step: int) -> None:
    data = CORRUPT[name]
    decoder = make_decoder(name)
    out = b"".join(decoder.decode(data[i : i + step]) for i in range(0, len(data), step))
    out += decoder.flush()
    error = decoder.error
    assert error is not None and error.kind == DecodeErrorKind.BAD_ENCODING
    assert error.offset == len(out)  # where the decoded output stops
    assert error.stops_reader
    assert BODY.startswith(out)
    assert decoder.decode(ENCODED[name]) == b"" and decoder.flush() == b""


@pytest.mark.parametrize("name", ["gzip", "deflate", "br", "zstd"])
def test_truncated_stream_is_reported_at_flush(name: str) -> None:
    data = ENCODED[name][:-4]
    decoder = make_decoder(name)
    out = decoder.decode(data)
    assert decoder.error is None
    out += decoder.flush()
    assert BODY.startswith(out)
    assert decoder.error is not None and "truncated" in decoder.error.message


@pytest.mark.parametrize("name", ["gzip", "deflate", "br", "zstd"])
def test_empty_body_is_not_an_error(name: str) -> None:
    decoder = make_decoder(name)
    assert decoder.decode(b"") == b"" and decoder.flush() == b""
    assert decoder.error is None


def test_trailing_garbage_after_gzip() -> None:
    out, error = decode_chunks("gzip", [ENCODED["gzip"], b"junk"])
    assert out == BODY
    assert error is not None and error.kind == DecodeErrorKind.BAD_ENCODING


def test_corrupt_inner_coding_of_a_chain() -> None:
    data = brotli.compress(b"\x1f\x8b not really gzip at all")
    out, error = decode_chunks("gzip, br", [data])
    assert out == b""
    assert error is not None and "gzip" in error.message


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["gzip", "deflate", "br", "zstd", "gzip, br", "x-unknown"]),
    st.lists(st.binary(max_size=64), max_size=8),
)
def test_fuzz_arbitrary_bytes_never_raise(coding: str, chunks: list[bytes]) -> None:
    decoder = make_decoder(coding)
    for chunk in chunks:
        assert isinstance(decoder.decode(chunk), bytes)
    assert isinstance(decoder.flush(), bytes)
    assert decoder.error is None or decoder.error.kind == DecodeErrorKind.BAD_ENCODING
