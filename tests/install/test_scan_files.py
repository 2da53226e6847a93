"""`datalint scan IMAGE...`: exactly the image files given, as the datalint-images hook passes them.

The real CLI, forked workers and real JPEG/PNG bytes; exit 1 when any file is damaged.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from packaging_support import jpeg_bytes

from datalint import extras
from datalint.cli import main


@pytest.fixture
def staged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with a valid JPEG, a truncated one and an unlisted damaged one; the current directory."""
    whole = jpeg_bytes()
    (tmp_path / "good.jpg").write_bytes(whole)
    (tmp_path / "cut.jpg").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "not-listed.jpg").write_bytes(whole[:100])
    monkeypatch.chdir(tmp_path)
    return tmp_path


def scan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code = main(["scan", *argv, "--workers", "1", "--rescan", "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_exactly_the_listed_files_are_scanned_and_a_truncated_one_fails(
    staged: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, summary = scan_json(capsys, "good.jpg", "cut.jpg")
    assert code == 1
    assert summary["length"] == 2  # not-listed.jpg is not looked at
    worst = summary["worst"]
    assert isinstance(worst, list)
    assert [(entry["key"], entry["kinds"]) for entry in worst] == [("cut.jpg", ["corrupt"])]


def test_valid_files_pass_with_exit_0(staged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, summary = scan_json(capsys, "good.jpg")
    assert (code, summary["quarantined"]) == (0, 0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["missing.jpg"], "no such image file: missing.jpg"),
        (["good.jpg", "--images", "."], "are scanned on their own: not with --dataset, --images or --files"),
        (["good.jpg", "--dataset", "m:ds"], "are scanned on their own"),
    ],
)
def test_file_arguments_that_cannot_be_scanned_are_refused(
    staged: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["scan", *argv]) == 2
    assert message in capsys.readouterr().err


def test_the_install_line_follows_the_installation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extras, "_installed_from", lambda: None)
    assert extras.install_line("scan") == "pip install 'torch-datalint[scan]'"
    monkeypatch.setattr(
        extras.sys, "prefix", os.path.join(os.sep, "home", "u", ".local", "pipx", "venvs", "x")
    )
    assert extras.install_line("scan") == "pipx install --force 'torch-datalint[scan]'"
    monkeypatch.setattr(extras, "_installed_from", lambda: ("/src/datalint", False))
    assert extras.install_line("torch") == "pipx install --force '/src/datalint[torch]'"
    monkeypatch.setattr(extras.sys, "prefix", os.path.join(os.sep, "src", "datalint", ".venv"))
    monkeypatch.setattr(extras, "_installed_from", lambda: ("/src/datalint", True))
    assert extras.install_line("scan") == "pip install -e '/src/datalint[scan]'"
