"""docs/scan.md documents every flag of `datalint scan`, `quarantine` and `watch`, and every finding kind."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from datalint.cli import build_parser
from datalint.index.kinds import KINDS, SAMPLE_CONTRACT, of_family

DOC = (Path(__file__).resolve().parents[2] / "docs" / "scan.md").read_text()


def options_of(command: str) -> list[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    subparser = action.choices[command]
    return [
        max(option.option_strings, key=len)
        for option in subparser._actions
        if option.option_strings
        and option.help != argparse.SUPPRESS
        and "--help" not in option.option_strings
    ]


@pytest.mark.parametrize("command", ["scan", "quarantine", "watch"])
def test_every_flag_is_documented(command: str) -> None:
    missing = [option for option in options_of(command) if f"`{option}" not in DOC]
    assert not missing, f"docs/scan.md does not document {missing} of `datalint {command}`"


DATASET_KINDS = of_family(SAMPLE_CONTRACT)


def test_every_dataset_finding_kind_is_documented_with_its_default() -> None:
    for kind in DATASET_KINDS:
        default = "yes" if KINDS[kind].quarantined else "no"
        row = next((line for line in DOC.splitlines() if line.startswith(f"| `{kind}` |")), None)
        assert row is not None and row.endswith(f"| {default} |"), kind
