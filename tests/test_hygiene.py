"""Guards: the Core imports only the standard library (SPEC R1.3), public
modules export what they say, and nothing reads the steering repository's
shared folder at run time (users clone the project without it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "chatkit_trace"


def test_core_imports_only_the_standard_library_at_run_time():
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import chatkit_trace.core\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "bad = sorted(m for m in new if m not in sys.stdlib_module_names and m != 'chatkit_trace' and not m.startswith('_'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"chatkit_trace.core pulled in: {out}"


@pytest.mark.parametrize("path", sorted((PACKAGE / "core").glob("*.py")), ids=lambda p: p.name)
def test_core_source_imports_are_stdlib_or_relative(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                continue
            names = [(node.module or "").split(".")[0]]
        else:
            continue
        for name in names:
            assert name in sys.stdlib_module_names or name == "__future__", f"{path.name} imports {name}"


@pytest.mark.parametrize("module", ["chatkit_trace.core", "chatkit_trace.wire", "chatkit_trace.adapters", "chatkit_trace.store", "chatkit_trace.analyze", "chatkit_trace.rules"])
def test_exported_members_exist_and_are_sorted(module):
    import importlib

    mod = importlib.import_module(module)
    names = list(mod.__all__)
    for name in names:
        assert hasattr(mod, name), f"{module}.__all__ names missing {name}"
    assert len(set(names)) == len(names)


def test_nothing_reads_the_shared_folder():
    offenders = []
    needles = ("work/" + "shared", "../" + "shared")
    for path in list(PACKAGE.rglob("*.py")) + list((ROOT / "tests").rglob("*.py")) + list((ROOT / "viewer").rglob("*.py")):
        text = path.read_text(errors="replace")
        if any(n in text for n in needles):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def _package_asserts():
    for root in ("chatkit_trace", "viewer", "addons"):
        for path in sorted((ROOT / root).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Assert):
                    yield path.relative_to(ROOT), node


def _narrows_a_type(test: ast.expr) -> bool:
    """``assert isinstance(x, T)`` and ``assert x is not None`` only tell the
    type checker what is already true; anything else is behaviour."""
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance":
        return True
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.IsNot)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    )


def test_no_package_code_relies_on_assert_for_behaviour():
    # The package is a pytest plugin distribution: under pip's newer editable
    # installs pytest rewrites its modules' assertions, and `python -O` drops
    # them.  Neither may change what the package does.
    offenders = [f"{path}:{node.lineno}" for path, node in _package_asserts() if not _narrows_a_type(node.test)]
    assert offenders == []
