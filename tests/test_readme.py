"""The README keeps its promises: the two set-up commands, .ci/run using the
test command verbatim, the command table and finding codes matching the CLI
and the catalogue, the generated CLI reference in sync, the profile example
valid."""

from __future__ import annotations

import re
from pathlib import Path

from chatkit_trace.analyze import CATALOGUE
from chatkit_trace.cli._docgen import cli_reference, finding_codes_table

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def two_commands() -> tuple[str, str]:
    section = README.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)\n```", section, re.S)
    assert len(blocks) == 2, blocks
    return blocks[0].strip(), blocks[1].strip()


def test_the_two_commands_run_the_demo_and_the_tests():
    demo, tests = two_commands()
    assert "chatkit-trace demo" in demo and "pip install -e ." in demo
    assert tests == "pip install -e '.[test]' && pytest"


def test_ci_runs_the_readme_test_command_verbatim():
    _, tests = two_commands()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in [line.strip() for line in ci], "the README's test command must be a line of .ci/run"


def test_command_table_matches_the_cli():
    from chatkit_trace.cli import COMMANDS

    table = README.split("**Commands**", 1)[1].split("**Finding codes**", 1)[0]
    listed = set(re.findall(r"^\| `([a-z-]+)` \|", table, re.M))
    assert listed == set(COMMANDS)


def test_finding_codes_table_matches_the_catalogue():
    block = README.split("<!-- finding-codes", 1)[1].split("<!-- /finding-codes -->", 1)[0]
    assert block.split("\n", 1)[1].strip() == finding_codes_table(), (
        "regenerate: python -m chatkit_trace.cli._docgen --finding-codes"
    )
    # Read back, the table says what the catalogue says, and links each code
    # and rule to its explanation.
    rows = re.findall(r"^\| \[(CK\d+)\]\(docs/rules\.md#(ck\d+)\) \| (\w+) \| ([^|]+) \| ([^|]+) \|$", block, re.M)
    assert [(c, a, s, re.sub(r"\[([^]]+)\]\([^)]+\)", r"\1", r).strip(), t.strip()) for c, a, s, r, t in rows] == [
        (c.code, c.code.lower(), c.severity, c.rule, c.title) for c in CATALOGUE.values()
    ]


def test_cli_reference_is_generated_from_the_cli():
    committed = (ROOT / "docs" / "cli-reference.md").read_text()
    assert committed == cli_reference(), "regenerate: python -m chatkit_trace.cli._docgen > docs/cli-reference.md"


def test_the_profile_example_is_a_valid_profile(tmp_path):
    from chatkit_trace.route import load_profile

    toml = re.search(r"```toml\n(.*?)\n```", README, re.S).group(1)
    path = tmp_path / "my-backend.toml"
    path.write_text(toml)
    profile = load_profile(str(path))
    assert profile.name == "my-backend"
    match = profile.match("GET", "http://127.0.0.1:9000/api/threads/t1/messages", [], None)
    assert match is not None and match.capability == "history" and match.session_id == "t1"
    stop = profile.match("POST", "http://127.0.0.1:9000/api/threads/t1/runs/r9/cancel", [], None)
    assert stop is not None and (stop.capability, stop.session_id, stop.run_id) == ("abort", "t1", "r9")


def test_linked_docs_exist():
    for link in re.findall(r"\]\(((?:docs|chatkit_trace)/[^)#]+)\)", README):
        assert (ROOT / link).exists(), link
