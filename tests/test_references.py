"""What the project cites exists in the project: every rule number the code,
docs, README and tests cite is defined in docs/rules.md, and every document
they point to (a Markdown link, a ``*.md`` name, a ``docs/`` path) is a file
of the repository, with the anchor a link names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chatkit_trace.rules import RULE_ID, rules

ROOT = Path(__file__).resolve().parents[1]

#: Where rule numbers and document references are checked.
SOURCES = ("chatkit_trace", "viewer", "addons", "tests", "bench", "recordings", "peers", "docs", ".ci")
SUFFIXES = {".py", ".md", ".toml", ".jsonl", ".json", ".sh", ".txt", ".tcss", ""}
MAX_BYTES = 400_000  # recorded fixtures and traces are data, not citations


def _texts() -> list[Path]:
    out = [ROOT / "README.md"]
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*")):
            if (
                path.is_file()
                and path.suffix in SUFFIXES
                and ".venv" not in path.parts
                and "__pycache__" not in path.parts
                and path.stat().st_size <= MAX_BYTES
            ):
                out.append(path)
    return out


TEXTS = _texts()
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("*/README.md")), *sorted(ROOT.glob("*/*/README.md"))]


def _read(path: Path) -> str:
    return path.read_text("utf-8", errors="replace")


def test_the_scan_sees_the_code_and_the_docs():
    names = {p.relative_to(ROOT).as_posix() for p in TEXTS}
    assert {"README.md", "docs/rules.md", "chatkit_trace/analyze/_finding.py", "viewer/diff.py", "addons/faults.py"} <= names
    assert "chatkit_trace/core/_runtime.py" in names and "tests/core/scripts/reject-terminal-sealed.jsonl" in names


def test_every_cited_rule_is_defined_in_docs_rules_md():
    defined = set(rules())
    missing: dict[str, list[str]] = {}
    for path in TEXTS:
        for m in RULE_ID.finditer(_read(path)):
            if m.group(0) not in defined:
                missing.setdefault(m.group(0), []).append(path.relative_to(ROOT).as_posix())
    assert missing == {}, "cited but not defined in docs/rules.md: " + repr({k: sorted(set(v))[:5] for k, v in missing.items()})


def test_an_undefined_rule_number_would_be_caught():
    # The check above must be able to fail: a made-up number is not defined.
    made_up = "R" + "99.9"
    assert RULE_ID.fullmatch(made_up) and made_up not in rules()


# ------------------------------------------------------------------ documents


def _anchors(path: Path) -> set[str]:
    """Explicit ``<a id>`` anchors and GitHub's heading slugs."""
    text = _read(path)
    out = set(re.findall(r'<a id="([^"]+)"></a>', text))
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", _read(path), flags=re.S)
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_markdown_links_resolve(doc):
    bad = []
    for link in _links(doc):
        target, _, anchor = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        if not path.exists():
            bad.append(link)
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            bad.append(link)
    assert bad == []


#: A document named in text: ``docs/recording.md``, ``decisions.md``, ``../README.md``.
MD_NAME = re.compile(r"(?<![\w/.-])((?:\.\./)*[\w./-]*[A-Za-z0-9_-]+\.md)\b")
#: A path into docs/ named in text.
DOCS_PATH = re.compile(r"(?<![\w/.-])(docs/[\w./-]*[\w-])(?![\w\\])")


def _resolves(name: str, where: Path) -> bool:
    for base in (ROOT, where.parent, ROOT / "docs"):
        if (base / name).exists():
            return True
    return False


def test_documents_the_project_names_are_in_the_repository():
    bad: dict[str, list[str]] = {}
    for path in TEXTS:
        if path == Path(__file__).resolve():
            continue  # its own examples of missing documents
        text = _read(path)
        names = set(MD_NAME.findall(text)) | set(DOCS_PATH.findall(text))
        for name in names:
            if re.match(r"[a-z]+://", name) or _resolves(name, path):
                continue
            bad.setdefault(path.relative_to(ROOT).as_posix(), []).append(name)
    assert bad == {}, bad


def test_a_missing_document_would_be_caught(tmp_path):
    assert MD_NAME.findall("see SPEC" + ".md and docs/none.md") == ["SPEC.md", "docs/none.md"]
    assert not _resolves("SPEC" + ".md", ROOT / "README.md")
    assert _resolves("decisions.md", ROOT / "README.md") and _resolves("rules.md", ROOT / "docs" / "x.md")
