"""`[tool.datalint]` in pyproject.toml -> one frozen `Config`, read once at the edge.

Unknown keys, unknown rule codes and values of the wrong type are errors that
name the key and the file; nothing is silently ignored.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datalint.errors import UsageError

if TYPE_CHECKING:
    from datalint.lint.catalog import Catalog

START_METHODS: tuple[str, ...] = ("spawn", "forkserver", "fork")
LIST_KEYS: tuple[str, ...] = ("select", "extend-select", "ignore", "exclude", "rule-paths")
KNOWN_KEYS: frozenset[str] = frozenset({*LIST_KEYS, "per-file-ignores", "start-method", "rules"})

# Folders never worth linting when walking a directory (an explicitly named file is still linted).
DEFAULT_EXCLUDES: frozenset[str] = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".eggs",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        "node_modules",
        "build",
        "dist",
        "site-packages",
    }
)


class ConfigError(UsageError):
    """A configuration value datalint cannot use; the message names the key and the file."""


@dataclass(frozen=True)
class Config:
    """Everything `datalint check` needs to know besides the paths."""

    select: tuple[str, ...] | None = None  # None: every rule that is on by default
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    start_method: str = "spawn"
    rule_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    rule_paths: tuple[Path, ...] = ()
    root: Path = field(default_factory=Path.cwd)  # relative globs are relative to this folder
    source: Path | None = None  # the pyproject.toml it came from

    @property
    def where(self) -> str:
        return str(self.source) if self.source else "the command line"

    def relative(self, path: Path | str) -> str:
        """`path` relative to the config's folder, in POSIX form (absolute when outside it)."""
        resolved = Path(path).resolve()
        try:
            return resolved.relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return resolved.as_posix()

    def is_excluded(self, path: Path | str) -> bool:
        return any(glob_matches(self.relative(path), pattern) for pattern in self.exclude)

    def ignored_for(self, path: Path | str) -> tuple[str, ...]:
        """Codes and prefixes that `per-file-ignores` switches off for `path`."""
        if not self.per_file_ignores:
            return ()
        relative = self.relative(path)
        return tuple(
            code
            for pattern, codes in self.per_file_ignores
            if glob_matches(relative, pattern)
            for code in codes
        )

    def with_overrides(
        self,
        *,
        select: Sequence[str] | None = None,
        extend_select: Sequence[str] = (),
        ignore: Sequence[str] = (),
        start_method: str | None = None,
    ) -> Config:
        """Command-line flags on top: --select replaces, --extend-select and --ignore add."""
        if start_method is not None and start_method not in START_METHODS:
            raise ConfigError(
                f"--start-method must be one of {', '.join(START_METHODS)}, got {start_method!r}"
            )
        return replace(
            self,
            select=tuple(_upper(select)) if select is not None else self.select,
            extend_select=(*self.extend_select, *_upper(extend_select)),
            ignore=(*self.ignore, *_upper(ignore)),
            start_method=start_method or self.start_method,
        )


def glob_matches(relative: str, pattern: str) -> bool:
    """Match a POSIX relative path against an exclude / per-file-ignores glob.

    `*` crosses folders (`tests/*` matches everything under tests/); a pattern
    without `/` also matches any single path component (`migrations`, `test_*.py`).
    """
    pattern = pattern.rstrip("/")
    if pattern.startswith("./"):
        pattern = pattern[2:]
    if fnmatch.fnmatchcase(relative, pattern):
        return True
    if pattern.startswith("**/") and fnmatch.fnmatchcase(relative, pattern[3:]):
        return True
    if "/" in pattern:
        return fnmatch.fnmatchcase(relative, pattern + "/*")  # a folder pattern covers what is inside
    return any(fnmatch.fnmatchcase(part, pattern) for part in relative.split("/"))


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start` that has a [tool.datalint] table."""
    for folder in (start.resolve(), *start.resolve().parents):
        candidate = folder / "pyproject.toml"
        if (
            candidate.is_file()
            and _mentions_datalint(candidate)
            and "datalint" in _read_toml(candidate).get("tool", {})
        ):
            return candidate
    return None


def load_config(path: Path | str | None = None, start: Path | None = None) -> Config:
    """Read `path` (`--config`), or discover the nearest pyproject.toml from `start` (the cwd).

    With no [tool.datalint] anywhere, the defaults apply, rooted at `start`.
    """
    if path is not None:
        source = Path(path)
        if not source.is_file():
            raise ConfigError(f"--config {source}: no such file")
        data = _read_toml(source)
        table = data.get("tool", {}).get("datalint", {}) if source.name == "pyproject.toml" else data
        return config_from_table(table, source)
    found = find_pyproject(start or Path.cwd())
    if found is None:
        return Config(root=(start or Path.cwd()).resolve())
    return config_from_table(_read_toml(found)["tool"]["datalint"], found)


def config_from_table(table: Any, source: Path) -> Config:
    """Check the shape of a [tool.datalint] table (types and key names) and build the Config."""
    where = f"{source} [tool.datalint]" if source.name == "pyproject.toml" else str(source)
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        known = ", ".join(sorted(KNOWN_KEYS))
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {known})")
    lists = {key: _string_list(where, key, table[key]) for key in LIST_KEYS if key in table}
    start_method = table.get("start-method", "spawn")
    if start_method not in START_METHODS:
        raise ConfigError(
            f"{where}: start-method must be one of {', '.join(START_METHODS)}, got {start_method!r}"
        )
    root = source.resolve().parent
    for folder in lists.get("rule-paths", ()):
        if not (root / folder).is_dir():
            raise ConfigError(f"{where}: rule-paths: {root / folder} is not a directory")
    return Config(
        select=tuple(_upper(lists["select"])) if "select" in lists else None,
        extend_select=tuple(_upper(lists.get("extend-select", ()))),
        ignore=tuple(_upper(lists.get("ignore", ()))),
        per_file_ignores=_per_file_ignores(where, table.get("per-file-ignores", {})),
        exclude=tuple(lists.get("exclude", ())),
        start_method=start_method,
        rule_options=_rule_options(where, table.get("rules", {})),
        rule_paths=tuple(root / p for p in lists.get("rule-paths", ())),
        root=root,
        source=source,
    )


def validate(config: Config, catalog: Catalog) -> None:
    """Every code and prefix must name a rule; every rule option must fit its matcher."""
    from datalint.lint.catalog import CatalogError

    where = config.where
    for key, codes in (
        ("select", config.select or ()),
        ("extend-select", config.extend_select),
        ("ignore", config.ignore),
        *((f"per-file-ignores.{pattern!r}", codes) for pattern, codes in config.per_file_ignores),
    ):
        for code in codes:
            if not catalog.matching(code):
                raise ConfigError(
                    f"{where}: {key}: {code!r} is not a rule code or prefix (see `datalint rules`)"
                )
    for code, options in config.rule_options.items():
        rule = catalog.get(code)
        if rule is None:
            raise ConfigError(f"{where}: rules.{code}: no such rule (see `datalint rules`)")
        try:
            rule.bind(options, f"{where}: rules.{code}")
        except CatalogError as exc:
            raise ConfigError(str(exc)) from exc


def _mentions_datalint(path: Path) -> bool:
    """A cheap look before parsing: most pyproject.toml files on the way up have no datalint table."""
    try:
        return "datalint" in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True  # let the real read report the problem


def _read_toml(path: Path) -> dict[str, Any]:
    tomllib = _toml()
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc


def _string_list(where: str, key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where}: {key} must be a list of strings, got {value!r}")
    return value


def _per_file_ignores(where: str, value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: per-file-ignores must be a table of glob = [codes]")
    return tuple(
        (pattern, tuple(_upper(_string_list(where, f"per-file-ignores.{pattern!r}", codes))))
        for pattern, codes in value.items()
    )


def _rule_options(where: str, value: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ConfigError(f"{where}: rules must hold one table per rule, e.g. [tool.datalint.rules.DL201]")
    return {code.upper(): dict(options) for code, options in value.items()}


def _upper(codes: Iterable[str]) -> list[str]:
    return [code.strip().upper() for code in codes if code.strip()]


def _toml() -> Any:
    """tomllib, imported on first use: a warm start reads no TOML (parsed catalog cached)."""
    import tomllib

    return tomllib
