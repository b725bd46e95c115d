"""The public surface of chatkit_trace.wire, and what it may import."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import chatkit_trace.wire as wire


def _names_bound_by_source(path: Path) -> set[str]:
    """Top-level names the module's own source binds (imports, defs, assignments).

    Read from the source, not from ``vars(module)``: when pytest rewrites the
    package's assertions (it is a pytest plugin distribution, and pip's newer
    editable installs expose it to the rewriter) the module namespace gains
    ``@py_builtins`` and ``@pytest_ar``, which the package never defined.
    """
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom | ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_all_is_sorted_and_lists_every_public_name() -> None:
    source = Path(wire.__file__)
    public = sorted(
        name
        for name in _names_bound_by_source(source)
        if not name.startswith("_") and name != "annotations"
    )
    assert wire.__all__ == sorted(wire.__all__)
    assert wire.__all__ == public
    # every listed name really is importable from the package
    assert all(hasattr(wire, name) for name in wire.__all__)


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
