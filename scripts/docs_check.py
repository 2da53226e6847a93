"""Keep the docs honest: README's rule table equals the catalog, and every command is documented.

    python scripts/docs_check.py            check; exit 1 with what to fix
    python scripts/docs_check.py --write    regenerate the README rule table and the kinds table

Checks:
- the section of README.md between `<!-- rules:start -->` and `<!-- rules:end -->` equals
  `datalint rules --format markdown` (skipped, with a note, when the markers are absent);
- the section of docs/index.md between `<!-- kinds:start -->` and `<!-- kinds:end -->` equals the
  table of the finding kinds' registry (`datalint.index.kinds.markdown_table()`);
- every `datalint` subcommand appears in README.md as `datalint <command>`;
- every option of `datalint check` appears in docs/check.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- rules:start -->", "<!-- rules:end -->"
KINDS_START, KINDS_END = "<!-- kinds:start -->", "<!-- kinds:end -->"


def rule_table() -> str:
    from datalint.commands.rules import markdown_table
    from datalint.lint.catalog import load_catalog

    return markdown_table(load_catalog())


def subcommands() -> dict[str, argparse.ArgumentParser]:
    from datalint.cli import build_parser

    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def check_table(readme: str, write: bool, path: Path) -> list[str]:
    if START not in readme or END not in readme:
        print(f"note: {path.name} has no {START} / {END} markers; the rule table check is skipped")
        return []
    head, rest = readme.split(START, 1)
    current, tail = rest.split(END, 1)
    wanted = "\n" + rule_table()
    if current == wanted:
        return []
    if write:
        path.write_text(head + START + wanted + END + tail, encoding="utf-8")
        print(f"wrote the rule table into {path}")
        return []
    return [f"{path.name}: the rule table is stale; run `python scripts/docs_check.py --write`"]


def check_kinds_table(docs: Path, write: bool) -> list[str]:
    """docs/index.md's table of the finding kinds is the registry's (datalint/index/kinds.py)."""
    from datalint.index.kinds import markdown_table

    text = docs.read_text(encoding="utf-8")
    if KINDS_START not in text or KINDS_END not in text:
        return [f"{docs.name}: no {KINDS_START} / {KINDS_END} markers around the finding kinds table"]
    head, rest = text.split(KINDS_START, 1)
    current, tail = rest.split(KINDS_END, 1)
    wanted = "\n" + markdown_table()
    if current == wanted:
        return []
    if write:
        docs.write_text(head + KINDS_START + wanted + KINDS_END + tail, encoding="utf-8")
        print(f"wrote the finding kinds table into {docs}")
        return []
    return [f"{docs.name}: the finding kinds table is stale; run `python scripts/docs_check.py --write`"]


def check_commands(readme: str, path: Path) -> list[str]:
    return [
        f"{path.name}: the command `datalint {name}` is not mentioned"
        for name in subcommands()
        if f"datalint {name}" not in readme
    ]


def check_options(docs: Path) -> list[str]:
    parser = subcommands().get("check")
    if parser is None:
        return []
    if not docs.is_file():
        return [f"{docs} is missing"]
    text = docs.read_text(encoding="utf-8")
    options = [o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
    return [
        f"{docs.name}: the option `{o}` of datalint check is not documented" for o in options if o not in text
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="regenerate the rule and kinds tables")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    parser.add_argument("--check-docs", type=Path, default=ROOT / "docs" / "check.md")
    parser.add_argument("--index-docs", type=Path, default=ROOT / "docs" / "index.md")
    args = parser.parse_args(argv)
    readme = args.readme.read_text(encoding="utf-8")
    problems = check_table(readme, args.write, args.readme)
    problems += check_commands(args.readme.read_text(encoding="utf-8"), args.readme)
    problems += check_options(args.check_docs)
    problems += check_kinds_table(args.index_docs, args.write)
    for problem in problems:
        print(f"docs check: {problem}", file=sys.stderr)
    if not problems:
        print("docs check: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
