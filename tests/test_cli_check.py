"""`datalint check` through a real subprocess: formats, exit codes, config, noqa, errors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest
from cli_support import datalint

BAD = textwrap.dedent(
    """\
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, prefetch_factor=2)
    other = DataLoader(dataset, persistent_workers=True)  # noqa: DL002
    """
)
CLEAN = "from torch.utils.data import DataLoader\n\nloader = DataLoader(dataset, num_workers=2)\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(BAD)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def test_clean_code_exits_0_and_prints_nothing(project: Path) -> None:
    result = datalint("check", "clean.py", cwd=project)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_findings_exit_1_as_text_with_a_summary_on_stderr(project: Path) -> None:
    result = datalint("check", cwd=project)  # no path: the current folder
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "train.py:3:10: DL001 [error] prefetch_factor=2 with num_workers=0 (the default): DataLoader raises "
        "ValueError; pass prefetch_factor only when num_workers > 0 (prefetch-factor-without-workers)"
    ]
    assert "Found 1 finding (1 error) in 1 of 2 files" in result.stderr


def test_exit_zero_still_reports(project: Path) -> None:
    result = datalint("check", "--exit-zero", ".", cwd=project)
    assert result.returncode == 0 and "DL001" in result.stdout


def test_json_format(project: Path) -> None:
    result = datalint("check", "--format", "json", "train.py", cwd=project)
    assert result.returncode == 1
    (row,) = json.loads(result.stdout)
    assert row == {
        "code": "DL001",
        "name": "prefetch-factor-without-workers",
        "severity": "error",
        "path": "train.py",
        "line": 3,
        "column": 10,
        "end_line": 3,
        "end_column": 48,
        "message": row["message"],
        "fix": {
            "applicability": "safe",
            "message": "Remove `prefetch_factor=2`",
            "edits": [{"content": "", "line": 3, "column": 28, "end_line": 3, "end_column": 47}],
        },
    }


def test_json_format_of_clean_code_is_an_empty_array(project: Path) -> None:
    result = datalint("check", "--format", "json", "clean.py", cwd=project)
    assert (result.returncode, json.loads(result.stdout)) == (0, [])


# The properties GitHub code scanning requires of an uploaded SARIF file (docs: "SARIF support
# for code scanning"), as a schema: non-empty strings, at least one location, a region.
TEXT = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string", "minLength": 1}}}
GITHUB_SARIF = {
    "type": "object",
    "required": ["$schema", "version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "runs": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["tool", "results"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name", "rules"],
                                "properties": {
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["id", "shortDescription", "fullDescription", "help"],
                                            "properties": {
                                                "shortDescription": TEXT,
                                                "fullDescription": TEXT,
                                                "help": TEXT,
                                            },
                                        },
                                    }
                                },
                            }
                        },
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["ruleId", "message", "locations", "partialFingerprints"],
                            "properties": {
                                "level": {"enum": ["none", "note", "warning", "error"]},
                                "message": TEXT,
                                "locations": {
                                    "type": "array",
                                    "minItems": 1,
                                    "maxItems": 10,
                                    "items": {
                                        "type": "object",
                                        "required": ["physicalLocation"],
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "required": ["artifactLocation", "region"],
                                                "properties": {
                                                    "artifactLocation": {
                                                        "type": "object",
                                                        "required": ["uri"],
                                                    },
                                                    "region": {
                                                        "type": "object",
                                                        "required": [
                                                            "startLine",
                                                            "startColumn",
                                                            "endLine",
                                                            "endColumn",
                                                        ],
                                                    },
                                                },
                                            }
                                        },
                                    },
                                },
                                "partialFingerprints": {
                                    "type": "object",
                                    "required": ["primaryLocationLineHash"],
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def test_sarif_has_what_github_code_scanning_requires(project: Path) -> None:
    result = datalint("check", "--format", "sarif", "--output-file", "out.sarif", cwd=project)
    assert result.returncode == 1 and result.stdout == ""
    document = json.loads((project / "out.sarif").read_text())
    jsonschema.validate(document, GITHUB_SARIF)
    run = document["runs"][0]
    (finding,) = run["results"]
    rule = run["tool"]["driver"]["rules"][finding["ruleIndex"]]
    assert rule["id"] == finding["ruleId"] == "DL001"
    assert finding["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "train.py"
    assert finding["locations"][0]["physicalLocation"]["region"]["startLine"] == 3
    assert "ValueError" in rule["fullDescription"]["text"]


def test_sarif_fingerprints_survive_moved_lines(project: Path) -> None:
    first = json.loads(datalint("check", "--format", "sarif", "train.py", cwd=project).stdout)
    (project / "train.py").write_text("# a new first line\n" + BAD)
    second = json.loads(datalint("check", "--format", "sarif", "train.py", cwd=project).stdout)
    hashes = [doc["runs"][0]["results"][0]["partialFingerprints"] for doc in (first, second)]
    assert hashes[0] == hashes[1]


def test_github_annotations(project: Path) -> None:
    result = datalint("check", "--format", "github", "train.py", cwd=project)
    assert result.returncode == 1
    (line,) = result.stdout.splitlines()
    assert line.startswith(
        "::error file=train.py,line=3,endLine=3,col=10,endColumn=48,"
        "title=datalint DL001 (prefetch-factor-without-workers)::DL001 prefetch_factor=2"
    )


def test_statistics(project: Path) -> None:
    (project / "more.py").write_text(BAD.replace("# noqa: DL002", ""))
    result = datalint("check", "--statistics", cwd=project)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "2  DL001  [error] prefetch-factor-without-workers",
        "1  DL002  [error] persistent-workers-without-workers",
    ]


def test_select_and_ignore_flags(project: Path) -> None:
    assert datalint("check", "--ignore", "DL001", cwd=project).returncode == 0
    assert datalint("check", "--select", "DL002,DL003", cwd=project).returncode == 0
    assert datalint("check", "--select", "dl0", cwd=project).returncode == 1


def test_a_folder_without_python_files_exits_0_quietly(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# nothing to lint\n")
    result = datalint("check", ".", cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_a_syntax_error_is_a_finding_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("def f(:\n    pass\n")
    (tmp_path / "binary.py").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    result = datalint("check", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert [line.split(" ")[:2] for line in result.stdout.splitlines()] == [
        ["binary.py:1:1:", "DL000"],
        ["broken.py:1:7:", "DL000"],
    ]


def test_a_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    result = datalint("check", "nope.py", cwd=tmp_path)
    assert result.returncode == 2 and "nope.py: no such file or directory" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_code_on_the_command_line(project: Path) -> None:
    result = datalint("check", "--select", "DL999", cwd=project)
    assert result.returncode == 2 and "'DL999' is not a rule code or prefix" in result.stderr


def write_config(folder: Path, body: str) -> Path:
    path = folder / "pyproject.toml"
    path.write_text("[project]\nname = 'demo'\n\n" + textwrap.dedent(body))
    return path


def test_config_is_read_from_the_nearest_pyproject(project: Path) -> None:
    write_config(
        project,
        """
        [tool.datalint]
        extend-select = ["DL0"]
        exclude = ["generated"]
        per-file-ignores = { "scripts/*" = ["DL001"] }

        [tool.datalint.rules.DL007]
        extend-start-methods = ["thread"]
        """,
    )
    for folder in ("src", "generated", "scripts"):
        (project / folder).mkdir()
        (project / folder / "loader.py").write_text(BAD)
    result = datalint("check", "--format", "json", ".", cwd=project / "src")  # found from a subfolder
    assert [row["path"] for row in json.loads(result.stdout)] == ["loader.py"]
    result = datalint("check", "--format", "json", "..", cwd=project / "src")
    paths = [Path(row["path"]).as_posix() for row in json.loads(result.stdout)]
    assert paths == ["../src/loader.py", "../train.py"]


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ('[tool.datalint]\ncolour = "red"\n', "unknown key(s) colour"),
        ('[tool.datalint]\nselect = ["DL99"]\n', "select: 'DL99' is not a rule code or prefix"),
        ('[tool.datalint]\nignore = "DL001"\n', "ignore must be a list of strings"),
        ('[tool.datalint]\nstart-method = "threads"\n', "start-method must be one of"),
        ('[tool.datalint]\nper-file-ignores = { "tests/*" = ["XX1"] }\n', "'XX1' is not a rule code"),
        ("[tool.datalint.rules.DL007]\ncolour = 1\n", "rules.DL007: unknown option 'colour'"),
        ("[tool.datalint.rules.DL999]\nx = 1\n", "rules.DL999: no such rule"),
        ('[tool.datalint]\nrule-paths = ["missing"]\n', "is not a directory"),
        ("[tool.datalint\n", "not valid TOML"),
    ],
)
def test_config_errors_exit_2_naming_the_key_and_file(project: Path, body: str, complaint: str) -> None:
    path = write_config(project, body)
    result = datalint("check", cwd=project)
    assert result.returncode == 2, result.stderr
    assert complaint in result.stderr and str(path.name) in result.stderr
    assert "Traceback" not in result.stderr


def test_explicit_config_file(project: Path) -> None:
    (project / "datalint.toml").write_text('ignore = ["DL001"]\n')
    assert datalint("check", "--config", "datalint.toml", cwd=project).returncode == 0
    assert datalint("check", "--config", "missing.toml", cwd=project).returncode == 2


def test_rule_prints_docs_with_examples_without_markers(tmp_path: Path) -> None:
    result = datalint("rule", "dl001", cwd=tmp_path)
    assert result.returncode == 0
    for section in (
        "DL001 prefetch-factor-without-workers [error]",
        "Why",
        "Fix",
        "Bad",
        "Good",
        "ValueError",
    ):
        assert section in result.stdout
    assert "# expect" not in result.stdout


def test_rule_with_an_unknown_code(tmp_path: Path) -> None:
    result = datalint("rule", "DL999", cwd=tmp_path)
    assert result.returncode == 2 and "no rule 'DL999'" in result.stderr


def test_rules_lists_the_catalog(tmp_path: Path) -> None:
    from datalint.lint.catalog import load_catalog

    result = datalint("rules", cwd=tmp_path)
    listed = [line.split()[0] for line in result.stdout.splitlines()[1:]]
    assert result.returncode == 0 and listed == [rule.id for rule in load_catalog()]
    rows = json.loads(datalint("rules", "--format", "json", cwd=tmp_path).stdout)
    assert rows[1]["code"] == "DL001" and rows[1]["severity"] == "error"


HEAVY = ("torch", "numpy", "PIL", "cv2", "joblib", "sqlite_utils", "rich", "dask")


def test_check_imports_no_heavy_library(project: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "datalint", "check", "train.py"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "datalint" in imported
    assert not imported & set(HEAVY), f"datalint check imported {sorted(imported & set(HEAVY))}"
