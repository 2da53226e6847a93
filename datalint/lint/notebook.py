"""Jupyter notebooks (.ipynb) as Python source: the code cells joined, each line traced to its cell.

Cells are linted together, as the kernel runs them (an import in cell 1 is known in cell 5),
and every finding is reported at its cell and the line inside that cell. IPython syntax that
is not Python (`%magic`, `!shell`, `x = !ls`, `obj?`, a `%%cell` magic's whole cell, a magic
continued over `\\` lines, an automagic such as `ls -l`) becomes `pass` or a placeholder of the
same indentation, so line numbers stay put and nothing shifts. A code cell whose metadata says
it is another language (VS Code's `vscode.languageId`, Polyglot Notebooks' kernel name: a shell
command, a pasted log marked `plaintext`) is left blank like a `%%bash` cell. A cell that still does
not parse is left out on its own (the kernel compiles each cell apart too), and named in `skipped`.
"""

from __future__ import annotations

import ast
import json
import re

from datalint.records import record

_MAGIC_LINE = re.compile(r"^(?P<indent>\s*)(?:[%!]|\?\??\w)|^\s*[\w.]+\?\??\s*$")
_MAGIC_ASSIGNMENT = re.compile(r"^(?P<target>\s*[\w.]+\s*=)\s*[%!]")
# IPython's automagics and default shell aliases, written without `%` (`ls -l`, `cd data`,
# `pip install x`): tried only on a cell that does not parse otherwise.
_AUTOMAGIC = re.compile(
    r"^\s*(?:cat|cd|conda|cp|env|ldir|less|lf|lk|ll|load_ext|ls|lx|man|matplotlib|mkdir|more|mv"
    r"|pip|pwd|reload_ext|rm|rmdir|run|time|timeit|who|whos)(?:\s+[^\s=(\[.,:]|\s*$)"
)


# Where editors record a cell's own language in its metadata: (metadata key, field).
_LANGUAGE_KEYS = (
    ("vscode", "languageId"),
    ("polyglot_notebook", "kernelName"),
    ("dotnet_interactive", "language"),
)


class NotebookError(ValueError):
    """A file named .ipynb that is not a notebook datalint can read; the message says why."""


@record
class SkippedCell:
    """A code cell that is not Python even with IPython's syntax set aside: left out of `text`."""

    cell: int  # 1-based, counting every cell as the notebook does
    line: int  # where the parser stopped, in the cell's own lines
    column: int
    reason: str


@record
class NotebookCode:
    text: str  # the code cells, joined, IPython syntax neutralised
    origins: tuple[tuple[int, int], ...]  # line n of `text` (1-based) -> (cell number, line in cell)
    skipped: tuple[SkippedCell, ...] = ()

    def origin(self, line: int) -> tuple[int, int]:
        if 0 < line <= len(self.origins):
            return self.origins[line - 1]
        return self.origins[-1] if self.origins else (1, 1)


def _cells(document: str) -> list[dict[str, object]]:
    try:
        notebook = json.loads(document)
    except ValueError as exc:
        raise NotebookError(f"not a notebook: invalid JSON ({exc})") from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise NotebookError("not a notebook: no `cells` list (nbformat 4 is supported)")
    return cells


def _source(cell: dict[str, object]) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(str(part) for part in source)
    return str(source)


def cell_sources(document: str) -> list[str]:
    """Every cell's source, by position (cell n is item n - 1); empty for unreadable notebooks."""
    try:
        return [_source(cell) for cell in _cells(document)]
    except NotebookError:
        return []


def notebook_code(document: str) -> NotebookCode:
    """The notebook's code cells as one Python text, and where each of its lines came from."""
    lines: list[str] = []
    origins: list[tuple[int, int]] = []
    skipped: list[SkippedCell] = []
    for number, cell in enumerate(_cells(document), start=1):
        if cell.get("cell_type") != "code":
            continue
        cell_lines = _source(cell).splitlines()
        if _declared_language(cell) in (None, "python"):
            python, problem = _python_cell(cell_lines)
        else:  # another language, by the editor's own record: left blank, as a `%%bash` cell
            python, problem = [""] * len(cell_lines), None
        if problem is not None:
            skipped.append(SkippedCell(number, *problem))
        lines.extend(python)
        origins.extend((number, index) for index in range(1, len(cell_lines) + 1))
    return NotebookCode("\n".join(lines) + "\n" if lines else "", tuple(origins), tuple(skipped))


def _declared_language(cell: dict[str, object]) -> str | None:
    """The language a cell's metadata names, lower-cased, or None where it names none: VS Code
    writes `{"vscode": {"languageId": "shellscript"}}` when a cell's language is changed, Polyglot
    Notebooks `{"polyglot_notebook": {"kernelName": "pwsh"}}` (`dotnet_interactive.language`
    before it). A Jupyter cell without them runs in the notebook's kernel."""
    metadata = cell.get("metadata")
    if not isinstance(metadata, dict):
        return None
    for editor, key in _LANGUAGE_KEYS:
        entry = metadata.get(editor)
        if isinstance(entry, dict) and isinstance(entry.get(key), str):
            return str(entry[key]).lower()
    return None


def _python_cell(cell_lines: list[str]) -> tuple[list[str], tuple[int, int, str] | None]:
    """The cell's lines as Python, one for one; blank lines and (line, column, reason) when the
    cell is not Python whatever is set aside."""
    if cell_lines and cell_lines[0].lstrip().startswith("%%"):
        return [""] * len(cell_lines), None  # a cell magic: the whole cell is another language
    python = _python_lines(cell_lines)
    problem = _syntax_error(python)
    if problem is None:
        return python, None
    relaxed = _without_leading_indent([("" if _AUTOMAGIC.match(line) else line) for line in python])
    if _syntax_error(relaxed) is None:
        return relaxed, None
    return [""] * len(cell_lines), problem


def _without_leading_indent(lines: list[str]) -> list[str]:
    """IPython removes the first line's indentation from a whole cell before compiling it (a cell
    pasted from inside a block); columns in such a cell then count from the removed indent."""
    first = next((line for line in lines if line.strip()), "")
    indent = first[: len(first) - len(first.lstrip())]
    if not indent:
        return lines
    return [line[len(indent) :] if line.startswith(indent) else line for line in lines]


def _python_lines(cell_lines: list[str]) -> list[str]:
    python: list[str] = []
    continued = False  # the line before was a magic or shell line ending in a backslash
    for line in cell_lines:
        if continued:
            python.append("")
        else:
            python.append(_python_line(line))
            continued = python[-1] != line
        continued = continued and line.rstrip().endswith("\\")
    return python


def _syntax_error(lines: list[str]) -> tuple[int, int, str] | None:
    try:
        ast.parse("\n".join(lines) + "\n")  # as the joined text is parsed: no top-level await
    except SyntaxError as exc:
        return exc.lineno or 1, exc.offset or 1, f"syntax error: {exc.msg}"
    except ValueError as exc:  # NUL bytes
        return 1, 1, str(exc)
    return None


def _python_line(line: str) -> str:
    assignment = _MAGIC_ASSIGNMENT.match(line)
    if assignment:
        return f"{assignment.group('target')} None"
    magic = _MAGIC_LINE.match(line)
    if magic:
        return " " * (len(line) - len(line.lstrip())) + "pass"
    return line
