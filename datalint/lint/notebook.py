"""Jupyter notebooks (.ipynb) as Python source: the code cells joined, each line traced to its cell.

Cells are linted together, as the kernel runs them (an import in cell 1 is known in cell 5),
and every finding is reported at its cell and the line inside that cell. IPython syntax that
is not Python (`%magic`, `!shell`, `x = !ls`, `obj?`, a `%%cell` magic's whole cell) becomes
`pass` or a placeholder of the same indentation, so line numbers stay put and nothing shifts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_MAGIC_LINE = re.compile(r"^(?P<indent>\s*)(?:[%!]|\?\??\w)|^\s*[\w.]+\?\??\s*$")
_MAGIC_ASSIGNMENT = re.compile(r"^(?P<target>\s*[\w.]+\s*=)\s*[%!]")


class NotebookError(ValueError):
    """A file named .ipynb that is not a notebook datalint can read; the message says why."""


@dataclass(frozen=True)
class NotebookCode:
    text: str  # the code cells, joined, IPython syntax neutralised
    origins: tuple[tuple[int, int], ...]  # line n of `text` (1-based) -> (cell number, line in cell)

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
    for number, cell in enumerate(_cells(document), start=1):
        if cell.get("cell_type") != "code":
            continue
        cell_lines = _source(cell).splitlines()
        whole_cell_magic = bool(cell_lines) and cell_lines[0].lstrip().startswith("%%")
        for index, line in enumerate(cell_lines, start=1):
            lines.append("" if whole_cell_magic else _python_line(line))
            origins.append((number, index))
    return NotebookCode("\n".join(lines) + "\n" if lines else "", tuple(origins))


def _python_line(line: str) -> str:
    assignment = _MAGIC_ASSIGNMENT.match(line)
    if assignment:
        return f"{assignment.group('target')} None"
    magic = _MAGIC_LINE.match(line)
    if magic:
        return " " * (len(line) - len(line.lstrip())) + "pass"
    return line
