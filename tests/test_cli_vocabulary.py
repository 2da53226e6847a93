"""One vocabulary for every command: -o/--output-file is the file a command writes, --format takes
text (not txt) and json; the old spellings still work, with a warning, for one release."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from datalint.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[1]
# `check` keeps --format as the alias of its --output-format; it is checked with that command.
FORMAT_EXEMPT = {"check"}


def subcommand_parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (subparsers,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return {name: sub for name, sub in subparsers.choices.items() if name in COMMANDS}


def visible_options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {
        option: action
        for action in parser._actions
        if action.help is not argparse.SUPPRESS
        for option in action.option_strings
    }


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_spells_its_output_file_and_format_the_same_way(name: str) -> None:
    options = visible_options(subcommand_parsers()[name])
    if "-o" in options:
        assert "--output-file" in options["-o"].option_strings, f"{name}: -o must mean --output-file"
    assert "--output" not in options, f"{name}: --output is the old spelling of -o/--output-file"
    if "--format" in options and name not in FORMAT_EXEMPT:
        choices = tuple(options["--format"].choices or ())
        assert "txt" not in choices and ("text" in choices or "json" in choices), f"{name}: {choices}"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import datalint

    folder = tmp_path_factory.mktemp("vocabulary")
    dataset = f"{ROOT}/fixtures/datasets/kinds.py:dicts()"
    datalint.scan(dataset, db=folder / "d.db", workers=1, label=["label"], num_classes=5)
    return folder / "d.db"


def datalint_process(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "datalint", *argv], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_quarantine_reads_the_old_spellings_as_the_new_ones_and_says_so(index: Path, tmp_path: Path) -> None:
    new, old = tmp_path / "new.txt", tmp_path / "old.txt"
    current = datalint_process("quarantine", str(index), "--format", "text", "-o", str(new))
    former = datalint_process("quarantine", str(index), "--format", "txt", "--output", str(old))
    assert current.returncode == former.returncode == 1  # samples listed
    assert "deprecated" not in current.stderr
    assert "--format txt is deprecated; use --format text" in former.stderr
    assert "--output is deprecated; use -o/--output-file" in former.stderr
    assert old.read_text() == new.read_text()
    assert new.read_text().startswith("2\t\tmissing_field\t")  # one tab-separated line per sample


def test_quarantine_writes_json_with_output_file(index: Path, tmp_path: Path) -> None:
    target = tmp_path / "q.json"
    done = datalint_process("quarantine", str(index), "--output-file", str(target))
    assert done.returncode == 1, done.stderr
    assert [entry["index"] for entry in json.loads(target.read_text())["samples"]] == [2, 3, 4, 5, 6]


def test_report_writes_its_page_under_either_spelling(index: Path, tmp_path: Path) -> None:
    for flag, page in (("-o", tmp_path / "a.html"), ("--output", tmp_path / "b.html")):
        done = datalint_process("report", str(index), flag, str(page))
        assert done.returncode == 0, done.stderr
        assert "</html>" in page.read_text()
