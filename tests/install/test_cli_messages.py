"""What a user reads when something is off: the subcommand's usage, the closest flag or value, the
missing extra, the docs that ship, a `.datalint/` that stays out of git."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from packaging_support import ROOT, clean_env, git

from datalint.cli import build_parser, main
from datalint.index.store import create_parent
from datalint.scan.policy import KINDS
from datalint.text import did_you_mean


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    assert exit_info.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "usage", "suggestion"),
    [
        (["chek", "src"], "usage: datalint [-h]", "did you mean 'check'?"),
        (
            ["scan", "--dataset", "m:ds", "--foramt", "json"],
            "usage: datalint scan",
            "did you mean '--format'?",
        ),
        (["scan", "--dataset", "m:ds", "--format", "jsn"], "usage: datalint scan", "did you mean 'json'?"),
        (
            ["scan", "--dataset", "m:ds", "--porgress=none"],
            "usage: datalint scan",
            "did you mean '--progress'?",
        ),
        (["rules", "--format", "markdwn"], "usage: datalint rules", "did you mean 'markdown'?"),
        (["doctor", "--numworkers", "8"], "usage: datalint doctor", "did you mean '--num-workers'?"),
        (["bench", "--dataset", "m:ds", "--batch-size", "4", "--sok"], "usage: datalint bench", "'--soak'"),
        (["report", "x.db", "--max-row", "3", "--lnt", "l.json"], "usage: datalint report", "'--lint'"),
        (["docs", "scan", "--paht"], "usage: datalint docs", "did you mean '--path'?"),
    ],
)
def test_a_usage_error_shows_the_subcommands_usage_and_the_closest_flag_or_value(
    capsys: pytest.CaptureFixture[str], argv: list[str], usage: str, suggestion: str
) -> None:
    err = usage_error(capsys, *argv)
    assert err.startswith(usage)
    assert suggestion in err.splitlines()[-1]


def test_nothing_close_suggests_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "scan", "--dataset", "m:ds", "--xyzzy")
    assert err.splitlines()[-1] == "datalint scan: error: unrecognized arguments: --xyzzy"


def test_did_you_mean_serves_values_that_commands_check_themselves() -> None:
    assert did_you_mean("corupt", KINDS) == " (did you mean 'corrupt'?)"
    assert did_you_mean("timout", KINDS) == " (did you mean 'timeout'?)"
    assert did_you_mean("banana", KINDS) == ""


def test_every_command_parser_is_built_to_suggest() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert all(type(sub) is type(parser) for sub in commands.values())


def python_without(module: str, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter where `module` cannot be imported (as when it is not installed)."""
    prelude = f"import sys; sys.modules[{module!r}] = None\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(PYTHONPATH=str(ROOT)),
    )


def test_scan_without_numpy_names_the_scan_extra_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "cat.jpg").write_bytes(b"\xff\xd8\xff")
    code = "from datalint.cli import main; sys.exit(main(['scan', 'cat.jpg']))"
    result = python_without("numpy", code, tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(
        "datalint: error: `datalint scan` needs the [scan] extra (missing: numpy)"
    )
    assert "torch-datalint[scan]" in result.stderr or str(ROOT) in result.stderr
    assert not (tmp_path / ".datalint").exists()


def test_bench_without_torch_names_the_torch_extra_not_an_internal_error(tmp_path: Path) -> None:
    code = (
        "from datalint.cli import main; sys.exit(main(['bench', '--dataset', 'm:ds', '--batch-size', '2']))"
    )
    result = python_without("torch", code, tmp_path)
    assert result.returncode == 2
    assert "`datalint bench` needs the [torch] extra (missing: torch)" in result.stderr
    assert "internal error" not in result.stderr


def test_import_datalint_torch_without_torch_is_an_import_error_naming_the_extra(tmp_path: Path) -> None:
    code = (
        "try:\n    import datalint.torch\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc.extra, exc.name, '|', exc)\n"
    )
    result = python_without("torch", code, tmp_path)
    assert result.stdout.startswith(
        "MissingExtraError torch torch | `import datalint.torch` needs the [torch]"
    )


def test_datalint_docs_lists_every_topic_and_prints_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["docs"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]}
    assert listed == {path.stem for path in (ROOT / "docs").glob("*.md")}
    assert main(["docs", "training"]) == 0
    assert capsys.readouterr().out == (ROOT / "docs" / "training.md").read_text()
    assert main(["docs", "bench"]) == 0  # bench is documented with doctor
    assert capsys.readouterr().out.startswith("# `datalint doctor` and `datalint bench`")


def test_an_unknown_docs_topic_suggests_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["docs", "scna"]) == 2
    assert "no docs topic 'scna' (did you mean 'scan'?)" in capsys.readouterr().err


def test_help_and_the_report_footer_point_to_datalint_docs_not_repository_paths() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name, sub in commands.items():
        assert "docs/" not in sub.format_help(), name
    footer_sources = [
        ROOT / "datalint" / "report" / "render.py",
        ROOT / "datalint" / "report" / "datasette-metadata.json",
    ]
    for source in footer_sources:
        assert not [line for line in source.read_text().splitlines() if "docs/" in line and ".md" in line]


def test_a_created_datalint_folder_keeps_itself_out_of_git(tmp_path: Path) -> None:
    git("init", "-q", cwd=tmp_path)
    create_parent(tmp_path / ".datalint" / "scan.db")
    (tmp_path / ".datalint" / "scan.db").write_bytes(b"")
    assert git("status", "--porcelain", "--untracked-files=all", cwd=tmp_path) == ""
    # A folder that exists is the team's: a removed .gitignore stays removed.
    (tmp_path / ".datalint" / ".gitignore").unlink()
    create_parent(tmp_path / ".datalint" / "other.db")
    assert not (tmp_path / ".datalint" / ".gitignore").exists()
    # Other folders (--db out/scan.db) get no .gitignore.
    create_parent(tmp_path / "out" / "scan.db")
    assert not (tmp_path / "out" / ".gitignore").exists()


def test_the_library_entry_points_name_the_scan_extra(tmp_path: Path) -> None:
    code = (
        "import datalint\n"
        "for call in (lambda: datalint.scan([1, 2]), lambda: datalint.write_report('x.db', 'r.html')):\n"
        "    try:\n        call()\n"
        "    except ImportError as exc:\n        print(exc)\n"
    )
    result = python_without("sqlite_utils", code, tmp_path)
    scan, report = result.stdout.splitlines()
    assert scan.startswith("datalint.scan() needs the [scan] extra (missing: sqlite_utils)")
    assert report.startswith("datalint.write_report() needs the [scan] extra")
    assert not (tmp_path / ".datalint").exists()
