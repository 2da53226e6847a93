"""The package's layers hold (docs/architecture.md): nothing imports upward, and SQL naming the index's
tables lives in `datalint/index/`. Read from the source with `ast`, function-local imports included.

Two lists below name what does not hold yet. They may only shrink: a file that breaks a rule and is
not on them fails this test, and so does one on them that no longer breaks it (take it off).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "datalint"

GROUND = {"errors", "files", "text", "units", "marshal_cache", "records"}
# Who may import whom, by the top-level module or package under datalint/ (a module of the package
# itself is always allowed). A package not named here may import anything below the top floor.
ALLOWED = {
    **{name: GROUND for name in GROUND},
    "index": GROUND,
    "host": GROUND,
    "lint": GROUND | {"config", "__version__"},
}
FORBIDDEN = {
    # the wings never reach up into the service or the command line
    **{
        wing: {"commands", "cli", "service"} for wing in ("scan", "training", "report", "diagnosis", "flight")
    },
    "scan": {"commands", "cli", "service", "diagnosis", "training"},
    "config": {"commands", "cli", "service"},
    # the service is HTTP over the library: never the CLI, never torch
    "service": {"commands", "cli", "torch"},
}
OUTSIDE_PACKAGES = {"service": {"torch"}}  # third-party packages a layer must not import

# What breaks a rule above today, each to be moved (none now: a new entry needs a reason beside it).
KNOWN_UPWARD: set[tuple[str, str]] = set()

INDEX_TABLES = ("runs", "samples", "findings", "sample_files", "sample_history", "failures", "failure_events")
_SQL = re.compile(
    r"\b(?:FROM|INTO|UPDATE|JOIN|TABLE(?: IF NOT EXISTS)?)\s+(?:" + "|".join(INDEX_TABLES) + r")\b",
    re.IGNORECASE,
)
# Files outside datalint/index/ that hold SQL naming an index table: none now; a new one needs a
# reason beside it (and a plan to move it into datalint/index/).
KNOWN_SQL: set[str] = set()


def _layer(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def _imports(text: str, module: tuple[str, ...]) -> set[str]:
    """Every module the source `text` of `module` imports (absolute, or relative resolved), at any
    depth of the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = module[: -node.level] if node.level else ()
            name = ".".join([*base, *([node.module] if node.module else [])])
            found.add(name)
            found.update(f"{name}.{alias.name}" for alias in node.names)
    return found


def _breaks(layer: str, imports: set[str]) -> set[str]:
    """The imports of a module of `layer` that the rules above refuse."""
    broken: set[str] = set()
    for module in imports:
        parts = module.split(".")
        if parts[0] != "datalint":
            if parts[0] in OUTSIDE_PACKAGES.get(layer, set()):
                broken.add(module)
            continue
        target = parts[1] if len(parts) > 1 else "datalint"
        if target in (layer, "datalint"):
            continue
        allowed = ALLOWED.get(layer)
        if (allowed is not None and target not in allowed) or target in FORBIDDEN.get(layer, set()):
            broken.add(f"datalint.{target}")
    return broken


def _module(path: Path) -> tuple[str, ...]:
    return path.relative_to(PACKAGE.parent).with_suffix("").parts


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_nothing_imports_upward() -> None:
    found = {
        (str(path.relative_to(PACKAGE.parent)), target)
        for path in _sources()
        for target in _breaks(_layer(path), _imports(path.read_text(encoding="utf-8"), _module(path)))
    }
    assert found - KNOWN_UPWARD == set(), "imports that break the layers (docs/architecture.md)"
    assert KNOWN_UPWARD - found == set(), "these hold now: take them off KNOWN_UPWARD"


def test_sql_naming_an_index_table_lives_in_the_index_package() -> None:
    found = {
        str(path.relative_to(PACKAGE.parent))
        for path in _sources()
        if _layer(path) not in ("index", "lint") and _SQL.search(path.read_text(encoding="utf-8"))
    }
    assert found - KNOWN_SQL == set(), "SQL on the index's tables belongs in datalint/index/"
    assert KNOWN_SQL - found == set(), "these hold no index SQL now: take them off KNOWN_SQL"


def test_the_rules_catch_what_they_are_for() -> None:
    # an import inside a function counts, a relative one is resolved, a sibling wing is fine
    text = "import numpy\nfrom . import store\ndef f():\n    from ..scan import api\n"
    text += "    import datalint.commands\n"
    imports = _imports(text, ("datalint", "index", "probe"))
    assert _breaks("index", imports) == {"datalint.scan", "datalint.commands"}
    assert _breaks("service", {"torch.utils.data", "datalint.scan.api"}) == {"torch.utils.data"}
    assert _breaks("scan", {"datalint.training.fit"}) == {"datalint.training"}
    assert _breaks("report", {"datalint.scan.images"}) == set()
    assert _SQL.search("SELECT idx FROM samples WHERE status = 'ok'")
    assert not _SQL.search("the samples from a run")
