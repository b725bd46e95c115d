"""Start and stop a real ``mitmdump`` (or ``chatkit-trace record``) process for a test.

The process is the one of the Python running the tests (``sys.executable``'s
``bin/``), so the py3.12 run (``run_py312.sh``) tests mitmproxy 12.  Output
is collected by a reader thread; :meth:`Proc.wait_for` waits for a line.
Every process is killed at the end, whatever happened.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from .backend import free_port

REPO = Path(__file__).resolve().parents[2]
ADDON = REPO / "chatkit_trace" / "addon.py"
BIN = Path(sys.executable).parent
MITMDUMP = str(BIN / "mitmdump")
START_TIMEOUT = 30.0


class Proc:
    """A child process with its output collected."""

    def __init__(self, argv: list[str], *, port: int, ready: str | None = "chatkit-trace: recording into", env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.port = port
        self.ready = ready
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            cwd=str(REPO),
            start_new_session=True,  # our own process group: signals go to it alone
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            with self._lock:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    @property
    def output(self) -> str:
        with self._lock:
            return "\n".join(self.lines)

    def wait_for(self, text: str, timeout: float = 15.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if text in self.output:
                return True
            if self.proc.poll() is not None:
                time.sleep(0.2)
                return text in self.output
            time.sleep(0.05)
        return False

    def wait_ready(self) -> None:
        end = time.monotonic() + START_TIMEOUT
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                self._reader.join(2)
                raise RuntimeError(f"process exited with {self.proc.returncode}:\n{self.output}")
            if (self.ready is None or self.ready in self.output) and _accepts(self.port):
                return
            time.sleep(0.05)
        raise RuntimeError(f"process not ready after {START_TIMEOUT}s:\n{self.output}")

    def stop(self, sig: int = signal.SIGINT, timeout: float = 30.0) -> int:
        """Signal the process, wait for it; kill it if it does not end.  Returns its exit code."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise RuntimeError(f"process did not stop on signal {sig} within {timeout}s:\n{self.output}") from None
        self._reader.join(5)
        return int(self.proc.returncode)

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def mitmdump(
    *,
    upstream: str | None,
    db: Path,
    profile: str | None = "myproto",
    options: dict[str, str] | None = None,
    extra: list[str] | None = None,
    mode: str | None = None,
    addon: bool = True,
) -> Proc:
    """A started mitmdump with the addon (reverse mode in front of ``upstream``)."""
    port = free_port()
    argv = [MITMDUMP, "--listen-host", "127.0.0.1", "-p", str(port)]
    if mode is None:
        mode = f"reverse:{upstream}"
    argv += ["--mode", mode, "--set", "connection_strategy=lazy"]
    if addon:
        argv += ["-s", str(ADDON), "--set", f"chatkit_db={db}"]
        if profile:
            argv += ["--set", f"chatkit_profile={profile}"]
    for k, v in (options or {}).items():
        argv += ["--set", f"{k}={v}"]
    argv += extra or []
    p = Proc(argv, port=port, ready="chatkit-trace: recording into" if addon else None)
    try:
        p.wait_ready()
    except BaseException:
        p.kill()
        raise
    return p


def record(*, upstream: str, db: Path, profile: str = "myproto", extra: list[str] | None = None) -> Proc:
    """``chatkit-trace record`` as a subprocess (the installed console script)."""
    port = free_port()
    argv = [str(BIN / "chatkit-trace"), "record", "--profile", profile, "--upstream", upstream, "--port", str(port), "--db", str(db)]
    if extra:
        argv += ["--", *extra]
    p = Proc(argv, port=port)
    try:
        p.wait_ready()
    except BaseException:
        p.kill()
        raise
    return p
