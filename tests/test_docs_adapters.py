"""docs/adapters.md runs: every Python block is executed, in order, as one
session; every TOML block parses (and loads as a profile when it is one);
every ``chatkit-trace`` command line of a shell block parses with the real
command line parser, and its ``--profile`` resolves when it names something
installed here (the guide's ``my-proto`` is the reader's own package)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "adapters.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
READERS_OWN = ("my-proto", "my_proto", "my_pkg", "my-agent")


def blocks(lang: str) -> list[str]:
    return [body for kind, body in BLOCK.findall(GUIDE.read_text()) if kind == lang]


def test_the_guide_has_code_of_every_kind():
    assert len(blocks("python")) >= 6 and blocks("toml") and blocks("bash")


def test_the_python_blocks_run_in_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "adapters_guide"}
    for n, code in enumerate(blocks("python"), 1):
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                exec(compile(code, f"docs/adapters.md python block {n}", "exec"), namespace)
            except Exception as err:  # noqa: BLE001 - name the block that failed
                pytest.fail(f"python block {n} raised {type(err).__name__}: {err}")


def test_the_toml_blocks_are_valid_and_profiles_load():
    from chatkit_trace.adapters import load_protocol
    from chatkit_trace.route.profiles import parse_profile

    profiles = 0
    for body in blocks("toml"):
        data = tomllib.loads(body)
        if "routes" in data:
            profile = parse_profile(data, "docs/adapters.md")
            load_protocol(profile.protocol)
            profiles += 1
    assert profiles >= 1


def test_every_command_line_parses():
    from chatkit_trace.cli import build_parser
    from chatkit_trace.route.profiles import load_profile

    parser = build_parser()
    seen = set()
    for body in blocks("bash"):
        for line in body.splitlines():
            argv = shlex.split(line, comments=True)
            if not argv or argv[0] != "chatkit-trace":
                continue
            try:
                args = parser.parse_args(argv[1:])
            except SystemExit:
                pytest.fail(f"docs/adapters.md: {line.strip()!r} does not parse")
            seen.add(argv[1])
            profile = getattr(args, "profile", None)
            if profile and not any(own in profile for own in READERS_OWN):
                load_profile(profile)
    assert {"new-adapter", "record", "check", "view"} <= seen


def test_the_readme_links_the_guide_instead_of_a_paragraph():
    readme = (ROOT / "README.md").read_text()
    assert "[docs/adapters.md](docs/adapters.md)" in readme
    assert "my_scripted_backend" not in readme
