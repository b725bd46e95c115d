"""``chatkit-trace new-adapter NAME``: the skeleton it writes passes its own
tests (a real pytest run in the generated folder), its tests catch a
deliberately broken protocol, and the adapter is found by its entry-point
name once installed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(240)


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "chatkit_trace.cli", *args], capture_output=True, text=True, timeout=120, cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def pytest_in(folder: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], capture_output=True, text=True, timeout=200,
        cwd=folder, env=env,
    )


@pytest.fixture
def skeleton(tmp_path) -> Path:
    done = cli("new-adapter", "my-proto", "--dir", str(tmp_path / "my-proto"))
    assert done.returncode == 0, done.stderr
    assert "pip install -e '.[test]' && pytest" in done.stderr
    return tmp_path / "my-proto"


def test_the_skeleton_has_every_part_and_passes_its_own_tests(skeleton):
    files = sorted(str(p.relative_to(skeleton)) for p in skeleton.rglob("*") if p.is_file())
    assert files == [
        "README.md",
        "my_proto/__init__.py",
        "my_proto/backend.py",
        "my_proto/profile.toml",
        "my_proto/protocol.py",
        "pyproject.toml",
        "tests/test_conformance.py",
    ]
    assert "class MyProtoProtocol(AdapterProtocol)" in (skeleton / "my_proto" / "protocol.py").read_text()
    assert 'my-proto = "my_proto.protocol:MyProtoProtocol"' in (skeleton / "pyproject.toml").read_text()
    done = pytest_in(skeleton)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout.strip().splitlines()[-1]
    assert re.match(r"^8 passed\b", summary) and "skipped" not in summary, summary


def test_the_skeletons_tests_catch_a_broken_protocol(skeleton):
    protocol = skeleton / "my_proto" / "protocol.py"
    source = protocol.read_text()
    broken = source.replace('mid = str(event["messageId"])', 'mid = f"msg-{__import__(\'time\').time()}"')
    assert broken != source
    protocol.write_text(broken)
    done = pytest_in(skeleton)
    assert done.returncode == 1, done.stdout
    assert "[R4.3]" in done.stdout


def test_installed_it_is_found_by_its_entry_point_name(skeleton, tmp_path):
    # what `pip install` leaves on sys.path: the package and its entry point
    dist = tmp_path / "site" / "my_proto-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-proto\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[chatkit_trace.adapters]\nmy-proto = my_proto.protocol:MyProtoProtocol\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(skeleton)])}
    code = (
        "from chatkit_trace.route.profiles import load_profile\n"
        "p = load_profile('my-proto')\n"
        "print(p.name, p.protocol, p.capabilities, [r.path for r in p.routes])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(" ", 2)[:2] == ["my-proto", "my_proto.protocol:MyProtoProtocol"]
    assert "/**/chat" in done.stdout and "'abort'" in done.stdout  # the routes it ships, not the catch-all


def test_usage_errors_are_one_line(tmp_path):
    (tmp_path / "taken").mkdir()
    for args, text in (
        (["new-adapter", "taken", "--dir", str(tmp_path / "taken")], "already exists"),
        (["new-adapter", "My Proto"], "adapter name 'My Proto'"),
    ):
        done = cli(*args, cwd=tmp_path)
        assert done.returncode == 2 and text in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
