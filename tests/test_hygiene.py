"""Guards: the Core imports only the standard library (SPEC R1.3), public
modules export what they say, and nothing reads the steering repository's
shared folder at run time (users clone the project without it)."""

from __future__ import annotations

import ast
import re
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


@pytest.mark.parametrize(
    "module", ["chatkit_trace.core", "chatkit_trace.wire", "chatkit_trace.adapters", "chatkit_trace.store", "chatkit_trace.analyze", "chatkit_trace.rules"]
)
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


# ---------------------------------------------------------------------------- the store owns its SQL

#: What SQL looks like in a string: statements, clauses, and the fragments a
#: ``WHERE`` is built from (uppercase: prose says "select" and "where").
SQL = re.compile(
    r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE TABLE|CREATE INDEX|PRAGMA|DROP TABLE|ALTER TABLE|WITH RECURSIVE|BEGIN|COMMIT"
    r"|ROLLBACK|VACUUM)\b|\bFROM\s+\w+|\bWHERE\b|\bJOIN\b.*\bON\b|\bORDER BY\b|\bGROUP BY\b|\bIS (NOT )?NULL\b|\bLIMIT \d"
)
#: Calls that run SQL (on a connection, a cursor, a sqlite-utils database).
SQL_CALLS = {"execute", "executemany", "executescript", "rows_where", "connect", "backup"}
STORE = PACKAGE / "store"


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _sql_outside_the_store() -> list[str]:
    offenders = []
    for root in ("chatkit_trace", "viewer", "addons"):
        for path in sorted((ROOT / root).rglob("*.py")):
            if STORE not in path.parents:
                where = path.relative_to(ROOT)
                offenders += [f"{where}:{line}: {what}" for line, what in _offenders(path.read_text(encoding="utf-8"))]
    return offenders


def _offenders(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` for each SQL string, SQL call, or reach into a store's database in ``source``."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            m = SQL.search(node.value)
            if m:
                out.append((node.lineno, f"{m.group(0)!r} in {node.value[:60]!r}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SQL_CALLS:
            owner = node.func.value
            if node.func.attr != "connect" or (isinstance(owner, ast.Name) and owner.id == "sqlite3"):
                out.append((node.lineno, f".{node.func.attr}()"))
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.value, ast.Attribute) and node.value.attr == "db":
            if isinstance(node, ast.Subscript) or node.attr == "conn":  # a TraceStore's database: a table, its connection
                out.append((node.lineno, ".db[...]" if isinstance(node, ast.Subscript) else ".db.conn"))
    return sorted(out)


def test_every_sql_statement_lives_in_the_store():
    """The store owns the schema: everything else reads and writes through
    TraceStore / TraceReader methods (issue 15), so a schema change touches
    chatkit_trace/store/ alone."""
    assert _sql_outside_the_store() == []


def test_the_sql_detector_sees_sql():
    text = (
        '"""A module that says SELECT in its docstring."""\n'
        'x = f"SELECT a FROM t WHERE b = {c}"\ny = "capability IS NOT NULL"\nconn.execute(q)\ns.db.conn\ns.db["facts"]\n'
        'sqlite3.connect(p)\nconfig.db\nsocket.connect(a)\n'
    )
    found = _offenders(text)
    assert [line for line, _ in found] == [2, 3, 4, 5, 6, 7], found


def test_the_store_knows_nothing_of_what_made_its_rows():
    """The store writes plain rows; the derive engine makes them from a replay."""
    forbidden = ("pipeline", "adapters", "analyze", "derive", "capture", "fixtures", "viewer", "loading")
    for path in sorted(STORE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                mod = (node.module or "").split(".")[0]
                assert mod not in forbidden, f"{path.name} imports ..{node.module}"
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                assert not any(n.startswith("chatkit_trace.") and n.split(".")[1] in forbidden for n in names), path.name


def test_every_module_compiles_without_a_syntax_warning():
    """A SyntaxWarning (an invalid escape in a docstring) is printed on stderr
    by every process that imports the module the first time, before any byte
    is cached: a recorder's one-line refusal became three lines in CI."""
    import warnings

    sources = [p for top in ("chatkit_trace", "tests", "bench") for p in sorted((ROOT / top).rglob("*.py"))]
    assert len(sources) > 300
    bad = []
    for path in sources:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                compile(path.read_text(encoding="utf-8"), str(path), "exec")
            except SyntaxError as exc:
                bad.append(f"{path.relative_to(ROOT)}: {exc}")
    assert bad == []
