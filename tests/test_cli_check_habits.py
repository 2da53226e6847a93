"""`datalint check`'s ruff habits through real subprocesses: formats CI tools read, stdin,
--fix / --diff / --add-noqa on real files, per-file configuration, .gitignore, notebooks,
`datalint rule` by name, and check's own usage errors."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest
from cli_support import datalint

BAD = "from torch.utils.data import DataLoader\n\nloader = DataLoader(dataset, prefetch_factor=2)\n"
CLEAN = "from torch.utils.data import DataLoader\n\nloader = DataLoader(dataset, num_workers=2)\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(BAD)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


# ---- formats ---------------------------------------------------------------------------------

# reviewdog's Diagnostic Format (proto/rdf/reviewdog.proto): the fields reviewdog reads.
POSITION = {
    "type": "object",
    "required": ["line", "column"],
    "properties": {"line": {"type": "integer", "minimum": 1}, "column": {"type": "integer", "minimum": 1}},
}
RANGE = {"type": "object", "required": ["start"], "properties": {"start": POSITION, "end": POSITION}}
RDJSON = {
    "type": "object",
    "required": ["source", "diagnostics"],
    "properties": {
        "source": {"type": "object", "required": ["name"]},
        "diagnostics": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["message", "location", "severity", "code"],
                "properties": {
                    "message": {"type": "string", "minLength": 1},
                    "location": {
                        "type": "object",
                        "required": ["path", "range"],
                        "properties": {"path": {"type": "string"}, "range": RANGE},
                    },
                    "severity": {"enum": ["UNKNOWN_SEVERITY", "ERROR", "WARNING", "INFO"]},
                    "code": {"type": "object", "required": ["value"]},
                    "suggestions": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["range", "text"],
                            "properties": {"range": RANGE},
                        },
                    },
                },
            },
        },
    },
}
# GitLab's code quality report ("Code Quality report format"): the required fields of each issue.
GITLAB = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["description", "check_name", "fingerprint", "severity", "location"],
        "properties": {
            "description": {"type": "string", "minLength": 1},
            "check_name": {"type": "string", "minLength": 1},
            "fingerprint": {"type": "string", "minLength": 1},
            "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
            "location": {
                "type": "object",
                "required": ["path", "lines"],
                "properties": {
                    "path": {"type": "string"},
                    "lines": {
                        "type": "object",
                        "required": ["begin"],
                        "properties": {"begin": {"type": "integer"}},
                    },
                },
            },
        },
    },
}


def test_rdjson_has_reviewdogs_fields_and_fixes_as_suggestions(project: Path) -> None:
    result = datalint("check", "--output-format", "rdjson", "train.py", cwd=project)
    assert result.returncode == 1
    document = json.loads(result.stdout)
    jsonschema.validate(document, RDJSON)
    (diagnostic,) = document["diagnostics"]
    assert diagnostic["code"]["value"] == "DL001" and diagnostic["location"]["range"]["start"] == {
        "line": 3,
        "column": 10,
    }
    assert diagnostic["suggestions"] == [
        {"range": {"start": {"line": 3, "column": 28}, "end": {"line": 3, "column": 47}}, "text": ""}
    ]
    (project / "naïve.py").write_text(BAD.replace("loader =", "naïve ="), encoding="utf-8")
    document = json.loads(datalint("check", "--output-format", "rdjson", "naïve.py", cwd=project).stdout)
    start = document["diagnostics"][0]["location"]["range"]["start"]
    assert start == {"line": 3, "column": 10}  # character 9, but rdjson counts UTF-8 bytes


def test_gitlab_code_quality_with_unique_fingerprints(project: Path) -> None:
    (project / "more.py").write_text(BAD + "again = DataLoader(dataset, prefetch_factor=2)\n")
    result = datalint("check", "--output-format", "gitlab", cwd=project)
    issues = json.loads(result.stdout)
    jsonschema.validate(issues, GITLAB)
    assert len(issues) == 3
    assert len({issue["fingerprint"] for issue in issues}) == 3
    assert {issue["location"]["path"] for issue in issues} == {"more.py", "train.py"}


def test_junit_xml_one_suite_per_file_one_failure_per_finding(project: Path) -> None:
    result = datalint("check", "--output-format", "junit", cwd=project)
    root = ET.fromstring(result.stdout)
    assert root.tag == "testsuites" and root.get("failures") == "1"
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "train.py" and suite.get("tests") == "1"
    (case,) = suite.findall("testcase")
    assert case.get("classname") == "train.py" and case.get("line") == "3"
    (failure,) = case.findall("failure")
    assert "prefetch_factor" in (failure.get("message") or "")
    clean = ET.fromstring(datalint("check", "--output-format", "junit", "clean.py", cwd=project).stdout)
    assert clean.get("failures") == "0" and len(clean.findall("testsuite/testcase")) == 1


def test_full_format_shows_the_line_and_a_caret(project: Path) -> None:
    result = datalint("check", "--output-format", "full", "train.py", cwd=project)
    lines = result.stdout.splitlines()
    assert lines[2] == "3 | loader = DataLoader(dataset, prefetch_factor=2)"
    assert lines[3] == "  |          " + "^" * 38 + " DL001"
    assert "fix (safe): Remove `prefetch_factor=2`" in lines[4]


def test_format_is_an_alias_and_a_typo_suggests_the_value(project: Path) -> None:
    assert (
        json.loads(datalint("check", "--format", "json", "train.py", cwd=project).stdout)[0]["code"]
        == "DL001"
    )
    result = datalint("check", "--output-format", "jsn", "train.py", cwd=project)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: datalint check")
    assert "did you mean 'json'?" in result.stderr


def test_an_unknown_flag_shows_checks_usage_and_the_closest_flag(project: Path) -> None:
    result = datalint("check", "--output-fromat", "json", cwd=project)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: datalint check")
    assert "unrecognized arguments: --output-fromat (did you mean '--output-format'?)" in result.stderr


# ---- stdin -----------------------------------------------------------------------------------


def test_stdin_with_a_filename_uses_that_files_configuration(project: Path) -> None:
    sub = project / "pkg"
    sub.mkdir()
    (sub / "pyproject.toml").write_text('[tool.datalint]\nignore = ["DL001"]\n')
    shown = datalint("check", "-", "--stdin-filename", "src/model.py", cwd=project, stdin=BAD)
    assert shown.returncode == 1 and shown.stdout.startswith("src/model.py:3:10: DL001")
    ignored = datalint("check", "-", "--stdin-filename", "pkg/model.py", cwd=project, stdin=BAD)
    assert (ignored.returncode, ignored.stdout) == (0, "")
    no_dash = datalint("check", "--stdin-filename", "src/model.py", cwd=project, stdin=BAD)
    assert no_dash.stdout == shown.stdout
    fixed = datalint("check", "-", "--fix", cwd=project, stdin=BAD)
    assert fixed.stdout == BAD.replace(", prefetch_factor=2", "") and fixed.returncode == 0


# ---- fixes on files ---------------------------------------------------------------------------


def test_diff_then_fix_then_clean(project: Path) -> None:
    diff = datalint("check", "--diff", "train.py", cwd=project)
    assert diff.returncode == 1
    assert "-loader = DataLoader(dataset, prefetch_factor=2)\n+loader = DataLoader(dataset)\n" in diff.stdout
    assert (project / "train.py").read_text() == BAD  # --diff changes nothing
    fixed = datalint("check", "--fix", "--show-fixes", "--exit-non-zero-on-fix", "train.py", cwd=project)
    assert fixed.returncode == 1 and fixed.stdout == ""
    assert "Fixed 1 finding (0 remaining)" in fixed.stderr and "Remove `prefetch_factor=2`" in fixed.stderr
    assert (project / "train.py").read_text() == BAD.replace(", prefetch_factor=2", "")
    assert datalint("check", "train.py", cwd=project).returncode == 0


def test_add_noqa_then_clean(project: Path) -> None:
    added = datalint("check", "--add-noqa", cwd=project)
    assert added.returncode == 0 and "Added 1 noqa directive" in added.stderr
    assert "prefetch_factor=2)  # noqa: DL001\n" in (project / "train.py").read_text()
    assert datalint("check", cwd=project).returncode == 0


def test_noqa_inside_a_string_silences_nothing(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text(
        'from torch.utils.data import DataLoader\nx = ("# noqa", DataLoader(d, prefetch_factor=2))\n'
    )
    assert "DL001" in datalint("check", "s.py", cwd=tmp_path).stdout


def test_file_level_directive(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("# datalint: noqa: DL001\n" + BAD)
    (tmp_path / "b.py").write_text("# datalint: noqa: DL002\n" + BAD)
    result = datalint("check", cwd=tmp_path)
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == ["b.py"]


# ---- discovery and configuration --------------------------------------------------------------


def test_each_file_uses_its_nearest_configuration(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.datalint]\nselect = ["DL0"]\n')
    pkg = project / "pkg"
    pkg.mkdir()
    (pkg / "pyproject.toml").write_text('[tool.datalint]\nextend = "../pyproject.toml"\nignore = ["DL001"]\n')
    (pkg / "train.py").write_text(BAD)
    result = datalint("check", cwd=project)
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == ["train.py"]
    settings = datalint("check", "--show-settings", "pkg/train.py", cwd=project).stdout
    assert f"configuration: {pkg / 'pyproject.toml'}" in settings and "ignore: ['DL001']" in settings
    assert "select: ['DL0']" in settings  # inherited through `extend`
    inline = datalint("check", "--config", 'ignore = ["DL001"]', cwd=project)
    assert (inline.returncode, inline.stdout) == (0, "")


def test_gitignore_exclude_and_packages_named_dist(project: Path) -> None:
    (project / ".git").mkdir()
    (project / ".gitignore").write_text("generated/\n*_pb2.py\n!keep_pb2.py\n")
    for name in ("generated/a.py", "x_pb2.py", "keep_pb2.py", "dist/__init__.py", "build/tmp.py", "sub/b.py"):
        (project / name).parent.mkdir(exist_ok=True)
        (project / name).write_text(CLEAN)
    files = sorted(datalint("check", "--show-files", cwd=project).stdout.split())
    assert files == ["clean.py", "dist/__init__.py", "keep_pb2.py", "sub/b.py", "train.py"]
    (project / "pyproject.toml").write_text('[tool.datalint]\nexclude = ["sub"]\nrespect-gitignore = false\n')
    files = datalint("check", "--show-files", cwd=project).stdout.split()
    assert "build/tmp.py" in files and "generated/a.py" in files and "sub/b.py" not in files


def test_requires_python_314_means_forkserver(project: Path) -> None:
    (project / "pyproject.toml").write_text('[project]\nrequires-python = ">=3.14"\n\n[tool.datalint]\n')
    settings = datalint("check", "--show-settings", cwd=project).stdout
    assert "start-method: forkserver (requires-python '>=3.14'" in settings


def test_notebook_findings_name_their_cell(tmp_path: Path) -> None:
    cells = [
        {"cell_type": "markdown", "source": ["# Training\n"]},
        {
            "cell_type": "code",
            "source": ["%matplotlib inline\n", "from torch.utils.data import DataLoader\n"],
        },
        {"cell_type": "code", "source": ["!pip list\n", "loader = DataLoader(ds, prefetch_factor=2)"]},
    ]
    (tmp_path / "train.ipynb").write_text(json.dumps({"cells": cells, "nbformat": 4, "nbformat_minor": 5}))
    result = datalint("check", "--output-format", "json", cwd=tmp_path)
    (row,) = json.loads(result.stdout)
    assert (row["path"], row["cell"], row["line"], row["column"], row["code"]) == (
        "train.ipynb",
        3,
        2,
        10,
        "DL001",
    )
    text = datalint("check", cwd=tmp_path).stdout
    assert text.startswith("train.ipynb:cell 3:2:10: DL001")
    (tmp_path / "broken.ipynb").write_text("{not json")
    assert "broken.ipynb:1:1: DL000" in datalint("check", cwd=tmp_path).stdout


def test_ipython_syntax_is_set_aside_and_a_cell_that_is_not_python_costs_only_itself(tmp_path: Path) -> None:
    def code(*lines: str) -> dict[str, object]:
        return {"cell_type": "code", "source": [line + "\n" for line in lines]}

    cells = [
        code("%run train.py \\", "    --epochs 3 \\", "--data /data"),  # a magic continued over lines
        code("ls -l data", "pip install h5py"),  # automagics, without %
        code("    x = 1", "    y = x"),  # pasted from a block: IPython drops the first line's indent
        code("from torch.utils.data import DataLoader"),
        code("for x in :", "    pass"),  # not Python however it is read
        code("loader = DataLoader(ds, prefetch_factor=2)"),
    ]
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": cells, "nbformat": 4, "nbformat_minor": 5}))
    lines = datalint("check", "nb.ipynb", cwd=tmp_path).stdout.splitlines()
    findings = [line.split(" [")[0] for line in lines if line.startswith("nb.ipynb")]
    assert findings == ["nb.ipynb:cell 5:1:10: DL000", "nb.ipynb:cell 6:1:10: DL001"]
    assert "cell 5 (syntax error: invalid syntax); only this cell was skipped" in lines[0]


def test_a_cell_its_metadata_declares_another_language_is_not_python(tmp_path: Path) -> None:
    def code(language: str | None, *lines: str) -> dict[str, object]:
        metadata = {"vscode": {"languageId": language}} if language else {}
        return {"cell_type": "code", "metadata": metadata, "source": [line + "\n" for line in lines]}

    cells = [
        code("shellscript", "python -u run.py \\", "  --data ETTh1"),  # a shell cell, as VS Code marks it
        code("plaintext", "Epoch: 1 | loss: 0.47", ">>>> testing : ETTh1 <<<<"),  # a pasted log
        code(None, "from torch.utils.data import DataLoader"),
        code("python", "loader = DataLoader(ds, prefetch_factor=2)"),
        code(None, "with open(path):", "", "...", ""),  # the kernel's own language, and not Python
    ]
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": cells, "nbformat": 4, "nbformat_minor": 5}))
    lines = datalint("check", "nb.ipynb", cwd=tmp_path).stdout.splitlines()
    findings = [line.split(" [")[0] for line in lines if line.startswith("nb.ipynb")]
    assert findings == ["nb.ipynb:cell 4:1:10: DL001", "nb.ipynb:cell 5:3:1: DL000"]


def test_a_notebook_reports_classes_defined_in_cells_not_a_missing_guard(tmp_path: Path) -> None:
    # Spawned workers start from the kernel's launcher, never from the cells: a loop over a loader
    # in a cell needs no guard (DL104), but a class or hook defined in a cell cannot be unpickled
    # there (`Can't get attribute 'Squares' on <module '__main__' (built-in)>`).
    def code(*lines: str) -> dict[str, object]:
        return {"cell_type": "code", "source": [line + "\n" for line in lines]}

    cells = [
        code("from torch.utils.data import DataLoader, Dataset", "from squares import Cubes"),
        code("class Squares(Dataset):", "    def __len__(self):", "        return 8",
             "    def __getitem__(self, i):", "        return i * i"),
        code("loader = DataLoader(Squares(), batch_size=2, num_workers=2, collate_fn=lambda b: b)",
             "for batch in loader:", "    print(batch)"),
        code("for batch in DataLoader(Cubes(), batch_size=2, num_workers=2):", "    print(batch)"),
        code("def target_transform(t):", "    return 0"),
        code("dataset = Cubes(target_transform=target_transform)",
             "for batch in DataLoader(dataset, batch_size=2, num_workers=2):", "    print(batch)"),
    ]  # fmt: skip
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": cells, "nbformat": 4, "nbformat_minor": 5}))
    rows = json.loads(datalint("check", "--output-format", "json", "nb.ipynb", cwd=tmp_path).stdout)
    found = {(row["cell"], row["line"], row["code"]): row["message"] for row in rows}
    assert sorted(found) == [(2, 1, "DL103"), (3, 1, "DL101"), (6, 1, "DL102")]
    assert "`Squares` is defined in a notebook cell" in found[(2, 1, "DL103")]
    assert "the function `target_transform` defined in a notebook cell" in found[(6, 1, "DL102")]
    for message in found.values():
        assert "`.py` module beside the notebook" in message


# ---- datalint rule ------------------------------------------------------------------------------


def test_rule_by_name_and_all(tmp_path: Path) -> None:
    by_name = datalint("rule", "unpicklable-loader-callable", cwd=tmp_path)
    assert by_name.returncode == 0 and by_name.stdout.startswith("DL101 unpicklable-loader-callable")
    typo = datalint("rule", "unpicklable-loader-calable", cwd=tmp_path)
    assert typo.returncode == 2 and "did you mean 'unpicklable-loader-callable'" in typo.stderr
    every = datalint("rule", "--all", cwd=tmp_path).stdout
    assert "DL001 prefetch-factor-without-workers" in every and "DL900 unused-noqa" in every


def test_fix_keeps_a_byte_order_mark_and_goes_on_past_a_file_it_cannot_fix(tmp_path: Path) -> None:
    private = "from torch.utils.data._utils.collate import default_collate\r\n"
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + private.encode())
    latin = "# -*- coding: latin-1 -*-\nNAME = 'caf\xe9'\n" + BAD
    (tmp_path / "latin.py").write_bytes(latin.encode("latin-1"))
    result = datalint("check", "--fix", cwd=tmp_path)
    assert result.returncode == 2
    assert "latin.py: not fixed: cannot read it as UTF-8" in result.stderr
    fixed = b"\xef\xbb\xbffrom torch.utils.data import default_collate\r\n"
    assert (tmp_path / "bom.py").read_bytes() == fixed
    assert "latin.py:5:10: DL001" in result.stdout  # still reported


def test_fix_in_a_notebook_edits_the_cell_and_keeps_the_json_layout(tmp_path: Path) -> None:
    cells = [
        {"cell_type": "code", "metadata": {}, "source": ["%load_ext autoreload\n", "import torch\n"]},
        {"cell_type": "markdown", "metadata": {}, "source": ["Loading\n"]},
        {
            "cell_type": "code",
            "metadata": {},
            "source": [
                "from torch.utils.data import DataLoader\n",
                "loader = DataLoader(ds, prefetch_factor=2)",
            ],
        },
    ]
    document = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    notebook = tmp_path / "train.ipynb"
    notebook.write_text(json.dumps(document, indent=1) + "\n")
    (row,) = json.loads(datalint("check", "--output-format", "json", cwd=tmp_path).stdout)
    assert row["cell"] == 3 and row["fix"]["edits"][0]["line"] == 2  # the cell's own line
    result = datalint("check", "--fix", cwd=tmp_path)
    assert result.returncode == 0 and "Fixed 1 finding" in result.stderr
    cells[2]["source"][1] = "loader = DataLoader(ds)"
    assert notebook.read_text() == json.dumps(document, indent=1) + "\n"
