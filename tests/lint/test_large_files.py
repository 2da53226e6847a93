"""Large files: over `max-file-size` a DL000 that names the limit; under it, bounded memory."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from datalint.config import ConfigError, config_from_file
from datalint.lint import parsing
from datalint.lint.engine import lint_paths
from datalint.lint.module import parse_source


def datalint(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "datalint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DATALINT_DEBUG": ""},
    )


def test_a_file_over_the_default_limit_is_one_dl000_that_names_the_limit(tmp_path: Path) -> None:
    (tmp_path / "generated.py").write_text("x = 1\n" * 1_666_667)  # 10,000,002 bytes: over 10 MB
    result = datalint("check", "--no-cache", "generated.py", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "generated.py:1:1: DL000" in result.stdout
    assert "10,000,002 bytes, over the max-file-size limit of 10,000,000 bytes" in result.stdout


def test_the_limit_comes_from_the_flag_or_the_configuration(tmp_path: Path) -> None:
    (tmp_path / "big.py").write_text("x = 1\n" * 500)  # 3,000 bytes
    flagged = datalint("check", "--no-cache", "--max-file-size", "2KB", "big.py", cwd=tmp_path)
    assert flagged.returncode == 1 and "over the max-file-size limit of 2,000 bytes" in flagged.stdout
    (tmp_path / "pyproject.toml").write_text('[tool.datalint]\nmax-file-size = "1KiB"\n')
    configured = datalint("check", "--no-cache", "big.py", cwd=tmp_path)
    assert configured.returncode == 1 and "limit of 1,024 bytes" in configured.stdout
    raised = datalint("check", "--no-cache", "--max-file-size", "1MB", "big.py", cwd=tmp_path)
    assert raised.returncode == 0 and raised.stdout == ""


@pytest.mark.parametrize("value", ["ten megabytes", 0, True, "0MB"])
def test_a_size_that_is_not_one_names_the_key(tmp_path: Path, value: object) -> None:
    toml = f'"{value}"' if isinstance(value, str) else str(value).lower()
    (tmp_path / "pyproject.toml").write_text(f"[tool.datalint]\nmax-file-size = {toml}\n")
    with pytest.raises(ConfigError, match="max-file-size must be a size such as"):
        config_from_file(tmp_path / "pyproject.toml")


def test_a_file_over_the_limit_is_not_read_for_another_files_question(tmp_path: Path) -> None:
    (tmp_path / "base.py").write_text(
        "from torch.utils.data import Dataset\n\nclass Base(Dataset):\n    pass\n"
    )
    (tmp_path / "data.py").write_text(
        textwrap.dedent(
            """\
            from torch.utils.data import DataLoader
            from base import Base

            class Clips(Base):
                def __init__(self, root):
                    self.paths = [line for line in open(root)]

                def __getitem__(self, index):
                    return self.paths[index]

            loader = DataLoader(Clips("list.txt"), num_workers=4)
            """
        )
    )
    from datalint.config import Config

    def codes(limit: int) -> list[tuple[str, str]]:
        report = lint_paths([tmp_path / "data.py"], Config(max_file_size=limit), cache_dir=None)
        return [(Path(f.path).name, f.code) for f in report.findings]

    assert ("data.py", "DL301") in codes(10_000_000)  # a Dataset through base.py
    assert codes(100) == [("data.py", "DL000")]  # data.py itself is over; base.py is never read


SOURCES = {
    "brackets, strings and clauses across lines": '''\
"""A docstring."""
import os

x = [
1,
2]
s = """
y = 3
"""
if x:
    pass
else:
    pass
try:
    pass
except OSError:
    pass
finally:
    pass
@property
def f(a,
b):
    return a + \\
b
t = 'ab\\
cd'
class C:
    def g(self):
        return (
1)
''',
}


@pytest.mark.parametrize("source", SOURCES.values(), ids=SOURCES.keys())
def test_a_text_parsed_in_pieces_is_the_text_parsed_whole(
    monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    monkeypatch.setattr(parsing, "PIECE_BYTES", 1)  # a cut tried before every line
    whole = ast.parse(source)
    pieces = parsing.parse_in_pieces(source, "x.py")
    assert ast.dump(pieces, include_attributes=True) == ast.dump(whole, include_attributes=True)


def test_a_syntax_error_in_a_later_piece_keeps_the_files_line_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parsing, "PIECE_BYTES", 1)
    with pytest.raises(SyntaxError) as raised:
        parsing.parse_in_pieces("a = 1\nb = 2\nc = (\nd = 4 +\n", "x.py")
    assert raised.value.lineno == 3  # `(` never closed, as `ast.parse` says


def test_a_run_of_constant_bindings_keeps_the_last_binding_of_each_name() -> None:
    body = ast.parse('"""doc"""\nx = 1\ny = 2\nx = 3\n"text"\npass\nprint(x)\nx = 4\nx = -5\n').body
    kept = [ast.unparse(statement) for statement in parsing.compact(body)]
    assert kept == ["'doc'", "y = 2", "x = 3", "print(x)", "x = -5"]


def test_a_large_file_is_linted_with_its_own_line_numbers(tmp_path: Path) -> None:
    # 100-byte lines (a statement and a comment): over 1 MiB in 10,500 statements, not 175,000 of
    # `x = 1`, which cost the parser 25 times the CPU and tested nothing more.
    line = "x = 1  # " + "." * 90 + "\n"
    source = "from torch.utils.data import DataLoader\n" + line * 10_500
    source += "loader = DataLoader(dataset, prefetch_factor=2)\n"
    assert len(source) > 4 * (256 << 10)  # over 1 MiB: parsed in pieces, five of them
    tree = parse_source(source, "big.py")
    assert len(tree.body) == 3  # the import, one `x = 1`, the loader
    (tmp_path / "big.py").write_text(source)
    from datalint.config import Config

    report = lint_paths([tmp_path / "big.py"], Config(), cache_dir=None)
    assert [(f.code, f.line) for f in report.findings] == [("DL001", 10_502)]


def test_code_on_stdin_over_the_limit_is_the_same_dl000(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "datalint", "check", "--max-file-size", "1KB", "-"],
        cwd=tmp_path,
        input="x = 1\n" * 200,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1 and "-:1:1: DL000" in result.stdout
    assert "1,200 bytes, over the max-file-size limit of 1,000 bytes" in result.stdout
