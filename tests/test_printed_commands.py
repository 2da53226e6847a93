"""Every command line datalint prints or documents runs as printed: it parses with the real parser.

Collected, so that a new command, message or page is covered without touching this test:
- from the package's source, every `datalint ...` in backticks inside a string (error messages,
  hints, warnings, help texts; an f-string's fields read as a placeholder value), and every string
  that is itself a command line (`datalint quarantine DB --kinds k1,k2` in the report);
- from `datalint COMMAND --help` of every registered command, the example lines of its epilog;
- from README.md and docs/*.md, `$ datalint ...` lines of console blocks, `datalint ...` lines of
  other code blocks (usage synopses and printed output excepted) and `datalint ...` in backticks.

Placeholders stay as printed (`SPEC`, `DB`): a metavar is a value to argparse. `...` stands for
arguments left out and is dropped; a shell pipe, redirection or comment ends the command.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from datalint.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "datalint"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

PROGRAM = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:python3? -m )?datalint(?=\s|$)")
IN_BACKTICKS = re.compile(r"`((?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:python3? -m )?datalint(?:\s[^`]*)?)`")
SHELL_ENDS = {"|", "||", "&&", ";", ">", ">>", "2>", "2>&1", "<", "&"}
PLACEHOLDER = "X"  # an f-string field, e.g. the spec in f"`datalint scan --dataset {spec}`"
PARSER = build_parser()  # the real one, every command registered; parsing leaves it unchanged


def command_words(line: str) -> list[str] | None:
    """The argv after `datalint` of a printed command line, as the shell splits it (up to a pipe,
    a redirection or a comment); None when the line is not a datalint command."""
    match = PROGRAM.match(line.strip())
    if match is None:
        return None
    try:
        words = shlex.split(line.strip()[match.end() :], comments=True)
    except ValueError:  # unbalanced quotes: not runnable as printed
        return [line]
    argv = []
    for word in words:
        if word in SHELL_ENDS or word.startswith((">", "2>")):
            break
        argv.append("..." if word == "…" else word)
    return argv


def parse_error(argv: list[str]) -> str | None:
    """Why the real parser refuses `datalint ARGV`, or None when it runs as printed.

    `datalint CMD` alone names a command. `...` stands for arguments left out: where it is, an
    argument the parser requires may be among them, and `...` after a flag is its value.
    """
    if not argv or (len(argv) == 1 and argv[0] in (*COMMANDS, PLACEHOLDER)):
        return None  # `datalint`, `datalint CMD`: the program or a command, named
    if "..." not in argv:
        return _placeholder_excused(argv, _refusal(argv))
    errors = [
        _refusal([word for word in argv if word != "..."]),
        _refusal([PLACEHOLDER if w == "..." else w for w in argv]),
    ]
    errors = [_placeholder_excused(argv, error) for error in errors]
    if any(error is None or "the following arguments are required" in error for error in errors):
        return None
    return errors[0]


METAVAR = re.compile(r"^[A-Z][A-Z0-9_]*$")


def _placeholder_excused(argv: list[str], error: str | None) -> str | None:
    # `--timeout S`: a metavar stands where the user puts a number; its value is theirs to choose.
    if error is not None and any(METAVAR.match(word) and repr(word) in error for word in argv):
        return None
    return error


def _refusal(argv: list[str]) -> str | None:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = PARSER.parse_args(argv)
    except SystemExit as exit_:
        return (
            None if exit_.code == 0 else (err.getvalue().strip().splitlines() or [f"exit {exit_.code}"])[-1]
        )
    if getattr(args, "run", None) is None:
        return "no command named"
    return None


# ----------------------------------------------------------------------------------------------
# Where printed commands come from


def _rendered(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            text = _rendered(value)
            parts.append(text if text is not None else PLACEHOLDER)
        return "".join(parts)
    return None


def _looks_like_output(argv: list[str]) -> bool:
    # `datalint scan fixtures/demo.py:demo: 400 samples, ...` is a summary line,
    # "datalint docs TOPIC prints one of:" a sentence, not commands
    # ("datalint run: left running: ..." a line datalint prints, its command word with a colon)
    return any(word.endswith(":") for word in argv)


def from_source() -> Iterator[tuple[str, str]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        seen_inside_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
                                for part in node.values}  # fmt: skip
        for node in ast.walk(tree):
            if id(node) in seen_inside_fstrings:
                continue  # a piece of an f-string: read with the whole string
            text = _rendered(node)
            if text is None:
                continue
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            for match in IN_BACKTICKS.finditer(text):
                yield where, match.group(1)
            argv = command_words(text) if "\n" not in text.strip() else None
            if argv is not None and argv and argv[0] in COMMANDS and not _looks_like_output(argv):
                yield where, text.strip()


def from_help() -> Iterator[tuple[str, str]]:
    (subparsers,) = [action for action in PARSER._actions if isinstance(action, argparse._SubParsersAction)]
    for name, sub in sorted(subparsers.choices.items()):
        for line in (sub.epilog or "").splitlines():
            if PROGRAM.match(line.strip().removeprefix("$ ")):
                yield f"datalint {name} --help", line.strip().removeprefix("$ ")


def _joined_lines(lines: list[str]) -> Iterator[tuple[int, str]]:
    """(line number, line) with shell continuations (a trailing backslash) joined."""
    number, pending = 0, ""
    for index, line in enumerate(lines, 1):
        if not pending:
            number = index
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield number, pending + line
        pending = ""


SYNOPSIS = re.compile(r"\[--|\(--|\{[a-z]+,|\bCOMMAND\b")


def from_docs() -> Iterator[tuple[str, str]]:
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        language: str | None = None
        block: list[str] = []
        start = 0
        for number, line in enumerate(text.splitlines(), 1):
            fence = re.match(r"^\s*```(\S*)", line)
            if fence and language is None:
                language, block, start = fence.group(1) or "text", [], number
                continue
            if fence:
                yield from _block_commands(path, start, language, block)
                language = None
                continue
            if language is not None:
                block.append(line)
        for match in IN_BACKTICKS.finditer(text):
            number = text.count("\n", 0, match.start()) + 1
            yield f"{path.relative_to(ROOT)}:{number}", match.group(1)


def _block_commands(path: Path, start: int, language: str, lines: list[str]) -> Iterator[tuple[str, str]]:
    if language in ("python", "json", "toml", "yaml", "ini", "html", "sql"):
        return
    for offset, line in _joined_lines(lines):
        where = f"{path.relative_to(ROOT)}:{start + offset}"
        stripped = line.strip()
        if language == "console":
            if stripped.startswith("$ ") and PROGRAM.match(stripped[2:]):
                yield where, stripped[2:]
            continue
        argv = command_words(stripped)
        if argv is not None and not SYNOPSIS.search(stripped) and not _looks_like_output(argv):
            yield where, stripped


def printed_commands() -> list[tuple[str, str]]:
    return list(dict.fromkeys([*from_source(), *from_help(), *from_docs()]))


COMMAND_LINES = printed_commands()


def test_the_collection_finds_commands_in_each_kind_of_place() -> None:
    places = {where.split(":")[0].split("/")[0] for where, _ in COMMAND_LINES}
    assert {"datalint", "docs", "README.md"} <= places
    assert any(where.endswith("--help") for where, _ in COMMAND_LINES)
    assert ("datalint report --help", "datalint report .datalint/scan.db -o report.html") in COMMAND_LINES


@pytest.mark.parametrize(("where", "line"), COMMAND_LINES, ids=[f"{w} {c}" for w, c in COMMAND_LINES])
def test_a_printed_command_parses_as_printed(where: str, line: str) -> None:
    argv = command_words(line)
    assert argv is not None
    error = parse_error(argv)
    assert error is None, f"{where}: `{line}` does not run as printed:\n{error}"


@pytest.mark.parametrize(
    "line",
    [
        "datalint scan --dataset",  # a flag without its value
        "datalint quarantine --kinds all",  # DB is required
        "datalint scan --images DIR --no-such-flag",
        "datalint scan --dataset m:ds --no-such-flag",
        "datalint frobnicate",
    ],
)
def test_a_command_that_would_not_run_is_caught(line: str) -> None:
    argv = command_words(line)
    assert argv is not None and parse_error(argv) is not None


def test_a_dataset_spec_given_where_image_files_go_is_refused_with_the_command_to_run(tmp_path) -> None:
    # `datalint scan flowers.py:train_ds` parses (image files are positional); it must not scan
    # a file of that name, but say what to run instead, and that must run as printed.
    from datalint.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["scan", "flowers.py:train_ds", "--db", str(tmp_path / "x.db")])
    assert code == 2
    (hint,) = IN_BACKTICKS.findall(err.getvalue())
    assert hint == "datalint scan --dataset flowers.py:train_ds"
    assert parse_error(command_words(hint) or []) is None
