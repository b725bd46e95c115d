"""``chatkit-trace new-adapter NAME``: a package skeleton for a new adapter.

Like ``cargo new``: writes ``NAME/`` with the protocol class, a scripted
backend acting out the conformance scenarios, a route profile, the
conformance tests and a README, from the templates in
``chatkit_trace/templates/new_adapter`` (``$name``, ``$pkg`` and ``$cls``
are filled in; ``__pkg__`` in a path is the package directory).  The
skeleton passes its own tests out of the box (``pip install -e '.[test]' &&
pytest`` in it); docs/adapters.md is the guide to changing it.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from string import Template

from ..errors import UsageError

__all__ = ["add_parser", "run", "generate", "TEMPLATES"]

TEMPLATES = Path(__file__).parent.parent / "templates" / "new_adapter"  # chatkit_trace/templates
_NAME = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")


def names(name: str) -> dict[str, str]:
    """``my-proto`` -> ``{"name": "my-proto", "pkg": "my_proto", "cls": "MyProtoProtocol"}``."""

    if not _NAME.fullmatch(name):
        raise UsageError(
            f"adapter name {name!r}: use lower-case letters, digits and single - or _ between them, starting with a "
            "letter (e.g. my-proto)"
        )
    pkg = name.replace("-", "_")
    cls = "".join(w.capitalize() for w in re.split(r"[-_]", name)) + "Protocol"
    return {"name": name, "pkg": pkg, "cls": cls}


def generate(name: str, dest: Path) -> list[Path]:
    """Write the skeleton of adapter ``name`` into ``dest`` (which must not exist)."""

    values = names(name)
    if dest.exists():
        raise UsageError(f"{dest} already exists: choose another name or --dir")
    written: list[Path] = []
    for src in sorted(TEMPLATES.rglob("*.tmpl")):
        rel = src.relative_to(TEMPLATES).with_suffix("")
        target = dest / Path(*(values["pkg"] if part == "__pkg__" else part for part in rel.parts))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(Template(src.read_text("utf-8")).substitute(values), "utf-8")
        written.append(target)
    return written


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "new-adapter",
        help="create a package skeleton for a new protocol adapter (protocol, scripted backend, profile, tests)",
        description=(
            "Write NAME/ with an adapter package: the protocol class, a scripted backend acting out the "
            "conformance scenarios, a route profile, the conformance tests and a README. It passes its own "
            "tests out of the box; docs/adapters.md is the guide to making it speak your protocol."
        ),
    )
    p.add_argument("name", metavar="NAME", help="the adapter's name, e.g. my-proto (package my_proto, --profile my-proto)")
    p.add_argument("--dir", metavar="PATH", default=None, help="where to write it (default: ./NAME)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    dest = Path(args.dir) if args.dir else Path(args.name)
    written = generate(args.name, dest)
    values = names(args.name)
    for path in written:
        print(path)
    print(
        f"\nnext: cd {dest} && pip install -e '.[test]' && pytest\n"
        f"then: chatkit-trace record --profile {values['name']} --upstream http://127.0.0.1:8000 --db trace.db\n"
        "(install it in the environment chatkit-trace runs from: the recorder imports it inside mitmdump)",
        file=sys.stderr,
    )
    return 0
