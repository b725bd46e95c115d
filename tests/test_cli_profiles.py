"""``--profile`` takes the same names in every command: a preset, an adapter
name (an entry point), ``module:Class``, or a file (issue 19).  Each command
runs through the real CLI (a subprocess)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chatkit_trace.store import TraceStore

from .analyze.corpus import CORPUS, load_case

ROOT = Path(__file__).resolve().parents[1]
HAR = ROOT / "tests" / "data" / "import" / "myproto.har"
MODULE = "chatkit_trace.examples.my_protocol:MyProtocol"


@pytest.fixture
def site(tmp_path) -> Path:
    """An installed adapter package's entry point (what ``pip install`` leaves)."""
    dist = tmp_path / "site" / "example_adapter-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: example-adapter\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[chatkit_trace.adapters]\nexample-proto = {MODULE}\n")
    return tmp_path / "site"


def cli(*args: str, site: Path | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run(
        [sys.executable, "-m", "chatkit_trace.cli", *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )


def trace(tmp_path: Path, name: str = "clean-myproto") -> Path:
    case, exchanges, _ = load_case(CORPUS / f"{name}.json")
    path = tmp_path / f"{name}.db"
    with TraceStore(path, create=True) as store:
        store.set_meta("protocol", "myproto")
        store.set_meta("profile", "myproto")
        store.set_meta("capabilities", ["abort", "history", "resume", "subscribe", "regenerate", "edit"])
        for ex in exchanges:
            store.add_exchange(ex)
    return path


def profile_file(tmp_path: Path) -> Path:
    path = tmp_path / "mine.toml"
    # a profile file re-classifies the stored exchanges (issue 14): its routes
    # match the trace's own paths, so the classification comes out the same
    path.write_text(
        f'name = "mine"\nprotocol = "{MODULE}"\ncapabilities = ["run", "history", "abort"]\n'
        '[[routes]]\ncapability = "run"\nmethod = "POST"\npath = "/run/{session}"\n'
        'session = "path:session"\nrun = "body:runId"\n'
        '[[routes]]\ncapability = "history"\nmethod = "GET"\npath = "/history/{session}"\nsession = "path:session"\n'
    )
    return path


SPECS = ["myproto", "example-proto", MODULE, "FILE"]


@pytest.mark.parametrize("spec", SPECS, ids=["preset", "entry-point", "module-class", "file"])
def test_every_analysis_command_takes_every_kind_of_profile(tmp_path, site, spec):
    spec = str(profile_file(tmp_path)) if spec == "FILE" else spec
    db = trace(tmp_path)
    done = cli("check", str(db), "--profile", spec, "--format", "json", site=site)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["findings"] == []  # decoded with the same protocol: still clean
    done = cli("runs", str(db), "--profile", spec, "--format", "json", site=site)
    assert done.returncode == 0 and [r["status"] for r in json.loads(done.stdout)] == ["completed", "completed"], done.stderr
    done = cli("diff", str(db), "--profile", spec, site=site)
    assert done.returncode == 0, done.stderr
    done = cli("export", str(db), "--session", "s1", "--profile", spec, "-o", str(tmp_path / "s1.chatkit.json"), site=site)
    assert done.returncode == 0 and (tmp_path / "s1.chatkit.json").exists(), done.stderr
    copy = tmp_path / "copy.db"
    shutil.copy(db, copy)
    done = cli("redecode", str(copy), "--profile", spec, site=site)
    assert done.returncode == 0, done.stderr
    assert cli("check", str(copy), "--format", "json", site=site).returncode == 0  # later commands follow the redecode
    out = tmp_path / "imported.db"
    done = cli("import", str(HAR), "--profile", spec, "-o", str(out), "-q", site=site)
    assert done.returncode == 0, done.stderr
    assert cli("runs", str(out), site=site).returncode == 0


def test_the_viewer_opens_with_an_adapter_as_profile(tmp_path):
    from chatkit_trace.viewer.app import open_source

    source = open_source(trace(tmp_path), MODULE)
    assert type(source.adapter.protocol).__name__ == "MyProtocol"
    assert "resume" in source.capabilities  # the recorded capabilities


def test_an_adapter_keeps_the_recorded_capabilities_a_preset_brings_its_own(tmp_path):
    from chatkit_trace.loading import open_trace

    db = trace(tmp_path)
    with_adapter = open_trace(db, profile=MODULE)
    with_preset = open_trace(db, profile="openai")
    try:
        assert "resume" in with_adapter.capabilities and "regenerate" in with_adapter.capabilities
        assert with_preset.capabilities == frozenset({"run", "subscribe", "history"})
    finally:
        with_adapter.close()
        with_preset.close()


def test_unknown_names_say_what_exists_and_where_adapters_are_imported(tmp_path):
    db = trace(tmp_path)
    done = cli("check", str(db), "--profile", "nosuch")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "presets are" in done.stderr and "adapters are" in done.stderr and "module:Class" in done.stderr
    done = cli("runs", str(db), "--profile", "nosuch_pkg.protocol:Nope")
    assert done.returncode == 2 and "chatkit-trace imports adapters in its own environment" in done.stderr
    done = cli("record", "--profile", "nosuch_pkg.protocol:Nope", "--upstream", "http://127.0.0.1:9")
    assert done.returncode == 2 and "cannot import adapter" in done.stderr and "Traceback" not in done.stderr
