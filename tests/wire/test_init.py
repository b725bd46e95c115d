"""The public surface of chatkit_trace.wire, and what it may import."""

from __future__ import annotations

import subprocess
import sys

import chatkit_trace.wire as wire


def test_all_is_sorted_and_lists_every_public_name() -> None:
    submodule = "chatkit_trace.wire."
    public = sorted(
        name
        for name, value in vars(wire).items()
        if not name.startswith("_") and not getattr(value, "__name__", "").startswith(submodule)
    )
    assert wire.__all__ == sorted(wire.__all__)
    assert wire.__all__ == public


def test_wire_imports_no_proxy_or_network_library() -> None:
    code = (
        "import sys, chatkit_trace.wire; "
        "heavy = ('mitmproxy', 'aiohttp', 'textual', 'sqlite_utils'); "
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""
