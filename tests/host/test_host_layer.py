"""`datalint.host` sits on the ground alone, and the scan engine reads the host through it, not
through the diagnosis."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "datalint"
GROUND = {"datalint.errors", "datalint.files", "datalint.text", "datalint.units"}


def imported(folder: Path) -> dict[str, set[str]]:
    """file -> the datalint modules it imports (at module level or inside a function)."""
    found: dict[str, set[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[path.relative_to(PACKAGE.parent).as_posix()] = {n for n in names if n.startswith("datalint")}
    return found


def test_host_imports_only_itself_and_the_ground() -> None:
    wrong = {
        path: sorted(n for n in names if n not in GROUND and not n.startswith("datalint.host"))
        for path, names in imported(PACKAGE / "host").items()
    }
    assert {path: names for path, names in wrong.items() if names} == {}


def test_the_scan_engine_does_not_import_the_diagnosis() -> None:
    upward = {path: sorted(n for n in names if n.startswith("datalint.diagnosis"))
              for path, names in imported(PACKAGE / "scan").items()}
    assert {path: names for path, names in upward.items() if names} == {}
