"""The wheel ships exactly the tree (issue 31).

A wheel built as a user's ``pip install .`` builds it (``python -m build``:
an sdist first, the wheel from it, in an isolated environment) must hold
every module and every data file of ``chatkit_trace/`` and of the card's
top-level ``viewer/`` and ``addons/`` (shipped as ``chatkit_trace.viewer`` and
``chatkit_trace.addons``), and nothing else: a package the hand-written list
missed (``chatkit_trace.route`` once was) makes an installed ``check`` die
with ``ModuleNotFoundError``.  ``.ci/smoke-installed.sh`` then runs the built
distributions installed outside the checkout.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: folder in the tree -> where it lands in the wheel
SHIPPED = {"chatkit_trace": "chatkit_trace", "viewer": "chatkit_trace/viewer", "addons": "chatkit_trace/addons"}


def tree_files() -> set[str]:
    """Every file of the shipped folders as the wheel must name it (caches and
    editable-install residue aside)."""
    out = set()
    for folder, target in SHIPPED.items():
        root = REPO / folder
        for path in root.rglob("*"):
            rel = path.relative_to(root)
            if not path.is_file() or "__pycache__" in rel.parts or path.suffix in (".pyc", ".pyo"):
                continue
            out.add(f"{target}/{rel.as_posix()}")
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # setuptools' own warnings (a deprecated configuration, a license
    # classifier) are Python warnings in the build's output
    noisy = [line for line in (done.stdout + done.stderr).splitlines() if "Warning" in line and "is ignored" not in line]
    assert not noisy, noisy
    [whl] = out.glob("*.whl")
    return whl


@pytest.mark.slow
def test_the_wheel_holds_every_module_and_data_file_of_the_tree_and_nothing_else(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {n for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    expected = tree_files()
    assert expected - shipped == set(), "in the tree, missing from the wheel"
    assert shipped - expected == set(), "in the wheel, not in the tree"
    # the packages the lost hand-written list once missed, by name
    for module in ("chatkit_trace/route/__init__.py", "chatkit_trace/viewer/app.py", "chatkit_trace/addons/faults.py",
                   "chatkit_trace/route/presets/openai.toml", "chatkit_trace/report/template/report.js"):
        assert module in shipped, module


@pytest.mark.slow
def test_the_wheel_metadata_names_the_license_and_the_entry_points(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        info = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(z.read(info).decode())
        entry = z.read(info.replace("METADATA", "entry_points.txt")).decode()
        licenses = [n for n in z.namelist() if "/licenses/" in n]
    assert meta["License-Expression"] == "MIT"
    assert not [c for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    assert any(n.endswith("/LICENSE") for n in licenses), licenses
    assert "chatkit-trace = chatkit_trace.cli:main" in entry
    assert "chatkit_trace = chatkit_trace.fixtures.plugin" in entry
