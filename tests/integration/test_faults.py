"""An exception inside the addon never reaches the user's traffic.

``chatkit_test_raise`` (a test-only option) makes the stream callable, the
hooks or the writer thread raise on purpose; the client must still receive
every byte, and the trace must say what went wrong.
"""

from __future__ import annotations

import pytest

from .client import fetch
from .conftest import stopped_store

pytestmark = pytest.mark.mitmdump


@pytest.mark.parametrize(
    "where, stored",
    [("tap", "tap"), ("writer", "writer:c"), ("hooks", "requestheaders")],
)
async def test_an_addon_exception_leaves_the_stream_intact_and_is_stored(server, proxy, tmp_path, where, stored):
    p = proxy(options={"chatkit_test_raise": where})
    base = f"http://127.0.0.1:{p.port}"
    for i, enc in enumerate(["", "gzip"]):
        rid = f"f{i}"
        got = await fetch("POST", f"{base}/sessions/s1/runs?n=10&enc={enc}&split=tiny", json={"runId": rid})
        assert got.status == 200 and got.error is None
        assert got.raw == bytes(server.sent[rid])
    hist = await fetch("GET", f"{base}/sessions/s1/runs")
    assert hist.status == 200 and b'"f1"' in hist.raw
    store = stopped_store(p, tmp_path / "trace.db")
    errors = store.capture_errors()
    assert any(e["where"] == stored for e in errors), errors
    assert all("injected" in e["message"] for e in errors)
    # logged once per place, however often it happened
    assert p.output.count(f"capture error in {stored.split(':')[0]}") <= 1 or where == "writer"
    assert p.output.count("capture error") <= 8
