"""The docs check that `make test` runs: README rule table, commands, and check options documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "docs_check.py"


def docs_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=ROOT
    )


def test_the_docs_match_the_code() -> None:
    result = docs_check()
    assert result.returncode == 0, result.stderr


def test_a_stale_rule_table_is_caught_and_rewritten(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text((ROOT / "README.md").read_text().replace("| DL001 |", "| DL00X |"))
    stale = docs_check("--readme", str(readme))
    assert stale.returncode == 1 and "rule table is stale" in stale.stderr
    rewritten = docs_check("--readme", str(readme), "--write")
    assert "wrote the rule table" in rewritten.stdout and "stale" not in rewritten.stderr
    assert "| DL001 |" in readme.read_text() and "DL00X" not in readme.read_text()


def test_an_undocumented_command_is_caught(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text((ROOT / "README.md").read_text().replace("datalint check", "datalint chek"))
    result = docs_check("--readme", str(readme))
    assert result.returncode == 1 and "`datalint check` is not mentioned" in result.stderr


def test_without_markers_the_table_check_is_skipped(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    text = (
        (ROOT / "README.md").read_text().replace("<!-- rules:start -->", "").replace("<!-- rules:end -->", "")
    )
    readme.write_text(text)
    result = docs_check("--readme", str(readme))
    assert "rule table check is skipped" in result.stdout
