"""``view`` leaves nothing behind (issue 32): the side database it derives a
trace into (and the temporary trace a HAR file is imported into) live in one
private folder, ``0700`` with ``0600`` files, removed when the viewer quits,
on Ctrl-C, on SIGTERM, when the app crashes and, after ``kill -9``, by the
next process that makes one.

Each case runs the real viewer headless in a child process with a private
``TMPDIR``: after it is gone, that folder is empty."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from chatkit_trace import tempfiles

from .conftest import corpus_trace

pytestmark = pytest.mark.slow

DRIVER = textwrap.dedent(
    """
    import os
    import sys
    from pathlib import Path
    from chatkit_trace.viewer import ViewerApp, open_source
    from chatkit_trace.viewer import app as app_module
    from chatkit_trace.viewer.messages import AnalysisDone

    trace, how = sys.argv[1], sys.argv[2]

    class App(ViewerApp):
        CSS_PATH = str(Path(app_module.__file__).with_name("viewer.tcss"))  # relative to this file otherwise

        def on_analysis_done(self, message: AnalysisDone) -> None:
            super().on_analysis_done(message)
            os.write(1, f"READY {message.derived_path}\\n".encode())  # Textual captures print()
            if how == "quit":
                self.exit()
            elif how == "crash":
                raise RuntimeError("a crash in the app")

    source = open_source(trace, sys.argv[3] if len(sys.argv) > 3 else None)
    app = App(source, analyse="always", poll=0)
    try:
        app.run(headless=True)
    finally:
        source.discard()
    print("EXIT", flush=True)
    """
)


def start(trace: Path, how: str, tmp: Path, *profile: str) -> tuple[subprocess.Popen[str], Path]:
    env = {**os.environ, "TMPDIR": str(tmp)}
    driver = tmp.parent / "driver.py"  # a file: Textual reads an app's source
    driver.write_text(DRIVER)
    proc = subprocess.Popen([sys.executable, str(driver), str(trace), how, *profile], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the analysis wrote its side database
    assert line.startswith("READY "), (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, Path(line.split(" ", 1)[1].strip())


def private(tmp: Path, derived: Path) -> None:
    """While the viewer runs: its files are in one folder only its user can enter, and only its user can read."""
    [folder] = [p for p in tmp.iterdir()]
    assert folder.name.startswith(tempfiles.PREFIX) and derived.parent == folder
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    files = list(folder.iterdir())
    assert derived in files
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return corpus_trace(tmp_path, "CK102")


@pytest.mark.parametrize("how", ["quit", "crash", "sigint", "sigterm"])
def test_every_way_out_leaves_an_empty_tmpdir(trace, tmp_path, how):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc, derived = start(trace, "wait" if how.startswith("sig") else how, tmp)
    private(tmp, derived)
    if how == "sigint":
        proc.send_signal(signal.SIGINT)
    elif how == "sigterm":
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    if how == "crash":
        assert "a crash in the app" in out + err
    if how == "sigterm":
        assert proc.returncode == -signal.SIGTERM  # the signal still says how the process ended
    assert list(tmp.iterdir()) == [], (how, out, err)


def test_a_har_file_opened_in_the_viewer_leaves_nothing(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc, derived = start(Path(__file__).parents[1] / "data" / "import" / "myproto.har", "wait", tmp, "myproto")
    [folder] = list(tmp.iterdir())
    assert len(list(folder.glob("trace-*.db"))) == 1  # the HAR imported into a temporary trace, in the same folder
    private(tmp, derived)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert list(tmp.iterdir()) == []


def test_after_kill_9_the_next_process_removes_the_folder(trace, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc, derived = start(trace, "wait", tmp)
    proc.kill()
    proc.wait(30)
    assert derived.exists()  # SIGKILL cannot be caught ...
    nxt, _ = start(trace, "quit", tmp)  # ... the next viewer sweeps it
    nxt.communicate(timeout=60)
    deadline = time.monotonic() + 5
    while list(tmp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(tmp.iterdir()) == []
