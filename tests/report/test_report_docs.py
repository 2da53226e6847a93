"""docs/report.md documents every option of `datalint report`."""

from __future__ import annotations

import argparse
from pathlib import Path

from datalint.cli import build_parser

DOCS = Path(__file__).resolve().parents[2] / "docs" / "report.md"


def test_every_report_option_is_documented() -> None:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    report = commands.choices["report"]
    options = [o for a in report._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
    text = DOCS.read_text(encoding="utf-8")
    assert options and [o for o in options if f"`{o}" not in text and f"{o} " not in text] == []
