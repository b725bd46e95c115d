"""Re-make ``before-20.db``: the shared-socket scenario recorded through a real
mitmdump with the addon **as it was before issue 20** (main at 6ba3661), with
the profile a user wrote from the docs then (``before-20.toml``).

Run it from a checkout of that commit (plus this folder, the backend, client
and example adapter): ``python tests/data/shared_socket/make_before_20.py``.
The file is test data: issue 20's analysis must judge it per session and run
(tests/integration/test_shared_socket.py::test_recording_from_before_issue_20).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.integration.proxy import mitmdump  # noqa: E402
from tests.integration.shared_socket_backend import shared_socket_backend  # noqa: E402
from tests.integration.shared_socket_client import scenario  # noqa: E402


def main() -> None:
    out = HERE / "before-20.db"
    for p in HERE.glob("before-20.db*"):
        p.unlink()
    with shared_socket_backend() as backend:
        proc = mitmdump(upstream=backend.url, db=out, profile=str(HERE / "before-20.toml"))
        try:
            seen = asyncio.run(scenario(f"http://127.0.0.1:{proc.port}"))
        finally:
            rc = proc.stop(signal.SIGINT)
        print(proc.output)
        print("close codes through the proxy:", seen["close_codes"], "rc", rc)


if __name__ == "__main__":
    main()
