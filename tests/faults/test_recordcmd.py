"""``chatkit-trace record --fault RULE``: the mitmdump command line, usage errors,
and a real ``record`` process injecting a fault."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from chatkit_trace.addons import faults_path

from chatkit_trace import recordcmd
from tests.integration.backend import free_port
from tests.integration.proxy import BIN, Proc

from .conftest import settled_copy
from .helpers import run


def _args(tmp_path: Path, **kw) -> argparse.Namespace:
    base = {
        "profile": "myproto",
        "upstream": "http://127.0.0.1:8000",
        "port": 9000,
        "host": "127.0.0.1",
        "db": str(tmp_path / "t.db"),
        "redact": "",
        "keep_secrets": False,
        "max_db_mb": 0,
        "max_age": "",
        "web": False,
        "fault": None,
        "fault_seed": None,
        "extra": [],
    }
    return argparse.Namespace(**{**base, **kw})


def test_no_fault_changes_nothing_in_the_command_line(tmp_path):
    argv = recordcmd.mitmdump_args(_args(tmp_path))
    assert faults_path() not in argv and not any("chatkit_fault" in a for a in argv)


def test_faults_load_the_installed_script_with_one_option_per_rule(tmp_path):
    argv = recordcmd.mitmdump_args(
        _args(
            tmp_path,
            fault=["cut:after=5,capability=run,nth=1", "http:status=429"],
            fault_seed=9,
            extra=["--", "-v"],
        )
    )
    assert argv[:2] == ["-s", recordcmd.addon_path()]
    i = argv.index(faults_path())
    assert argv[i - 1] == "-s" and Path(argv[i]).is_file() and Path(argv[i]).name == "faults.py"
    assert argv[i + 1 :] == [
        "--set", "chatkit_fault=cut:after=5,capability=run,nth=1",
        "--set", "chatkit_fault=http:status=429",
        "--set", "chatkit_fault_seed=9",
        "-v",
    ]  # fmt: skip


def test_a_bad_rule_is_one_line_before_mitmproxy_starts(capsys):
    from chatkit_trace.cli import main

    argv = [
        "record",
        "--profile",
        "myproto",
        "--upstream",
        "http://x",
        "--fault",
        "cut:after=5,mode=soft",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--fault: fault rule 'cut:after=5,mode=soft': mode='soft': use reset or close" in err
    assert "Traceback" not in err


@pytest.mark.mitmdump
@pytest.mark.timeout(120)
async def test_record_injects_the_fault_and_records_it(demo, tmp_path):
    server, _ = demo
    port = free_port()
    db = tmp_path / "rec.db"
    argv = [
        str(BIN / "chatkit-trace"),
        "record",
        "--profile",
        "myproto",
        "--upstream",
        server.url,
        "--port",
        str(port),
        "--db",
        str(db),
        "--fault",
        "drop:at=2,capability=run,session=rec-*",
        "--fault-seed",
        "3",
    ]
    p = Proc(argv, port=port)
    try:
        p.wait_ready()
        got = await run(f"http://127.0.0.1:{port}", "rec-1")
        assert got.ids == ["e0", "e2", "e3", "e4"]
        store = settled_copy(db, tmp_path / "copy.db", "rec-1", 1)
        [ex] = list(store.exchanges(session="rec-1"))
        assert (
            ex.notes["fault"]["seed"] == 3 and ex.notes["fault"]["applied"][0]["event_id"] == "e1"
        )
        assert p.stop() == 0
        assert (
            "chatkit-trace fault: drop:at=2,capability=run,session=rec-* on POST /sessions/rec-1/runs"
            in p.output
        )
    finally:
        p.kill()
