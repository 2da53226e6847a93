"""For the rule tests that run the real thing: one rule's findings, and a source imported as a module
file (so forked or spawned workers see its classes as they see a user's)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from datalint.config import Config
from datalint.lint.catalog import Catalog, load_rule, rules_dir
from datalint.lint.engine import Finding, Linter
from datalint.lint.matchers import MATCHERS


def lint(code: str, source: str) -> list[Finding]:
    """Findings of one rule, loaded on its own so other rule files cannot break the test."""
    path = next(rules_dir().glob(f"{code}-*.toml"))
    rule = load_rule(path, MATCHERS)
    return Linter(Config(select=(code,)), Catalog((rule,))).check_source(source, f"{code.lower()}_case.py")


def load(tmp_path: Path, source: str, name: str) -> ModuleType:
    """Import `source` as a real module file, so forked workers see its classes like a user's."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
