"""`[tool.datalint]` in pyproject.toml -> one frozen `Config`, read once at the edge.

Unknown keys, unknown rule codes and values of the wrong type are errors that
name the key and the file; nothing is silently ignored.

Like ruff, each file is checked with the nearest pyproject.toml above it that has a
[tool.datalint] table (`ConfigResolver`); `extend = "../pyproject.toml"` inherits another
file's table; `--config FILE` uses one file for everything and `--config KEY=VALUE` sets
one key on top of whatever file applies.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from datalint import marshal_cache
from datalint.errors import UsageError
from datalint.files import read_regular_file
from datalint.records import field, record, replace

START_METHODS: tuple[str, ...] = ("spawn", "forkserver", "fork")
LIST_KEYS: tuple[str, ...] = ("select", "extend-select", "ignore", "exclude", "extend-exclude", "rule-paths")
KNOWN_KEYS: frozenset[str] = frozenset(
    {
        *LIST_KEYS,
        "per-file-ignores",
        "start-method",
        "rules",
        "extend",
        "respect-gitignore",
        "scan",
        "max-file-size",
    }
)
# Keys whose lists add up along an `extend` chain (the others: the extending file's value wins).
ACCUMULATING_KEYS: tuple[str, ...] = ("extend-select", "extend-exclude")
# A file larger than this is not read (DL000 says so): 10 MB, as `datalint.units.parse_size` reads
# "10MB". Under it, a file is linted in bounded memory (see `datalint.lint.parsing`).
DEFAULT_MAX_FILE_SIZE = 10_000_000
# Python 3.14 made forkserver the default start method on Linux (spawn elsewhere already).
FORKSERVER_SINCE: tuple[int, int] = (3, 14)

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


@record
class Config:
    """Everything `datalint check` needs to know besides the paths."""

    select: tuple[str, ...] | None = None  # None: every rule that is on by default
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()  # exclude + extend-exclude globs
    start_method: str = "spawn"
    default_excludes: bool = True  # False once `exclude` is set: it replaces the default folders, as in ruff
    respect_gitignore: bool = True
    max_file_size: int = DEFAULT_MAX_FILE_SIZE  # bytes; a larger file gets a DL000 and is not read
    # Why start_method has its value, for --show-settings.
    start_method_reason: str = "the default, the safe assumption for code that also runs on macOS and Windows"
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
        if not self.exclude:
            return False
        relative = self.relative(path)
        return any(
            glob_matches(Path(path).resolve().as_posix() if pattern.startswith("/") else relative, pattern)
            for pattern in self.exclude
        )

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
        max_file_size: int | None = None,
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
            start_method_reason="--start-method" if start_method else self.start_method_reason,
            max_file_size=max_file_size or self.max_file_size,
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


# Files a folder's configuration can live in, in the order they win (as ruff.toml beats pyproject.toml).
CONFIG_FILES: tuple[str, ...] = ("datalint.toml", ".datalint.toml", "pyproject.toml")


def config_file_in(folder: Path) -> Path | None:
    """The folder's datalint configuration: a datalint.toml, or a pyproject.toml with [tool.datalint]."""
    for name in CONFIG_FILES:
        candidate = folder / name
        if not candidate.is_file():
            continue
        if name != "pyproject.toml":
            return candidate
        if _mentions_datalint(candidate) and "datalint" in _read_toml(candidate).get("tool", {}):
            return candidate
    return None


def find_pyproject(start: Path) -> Path | None:
    """The nearest configuration at or above `start` (see `config_file_in`)."""
    for folder in (start.resolve(), *start.resolve().parents):
        found = config_file_in(folder)
        if found is not None:
            return found
    return None


def load_config(
    path: Path | str | None = None, start: Path | None = None, inline: Mapping[str, Any] | None = None
) -> Config:
    """Read `path` (`--config`), or discover the nearest pyproject.toml from `start` (the cwd).

    With no [tool.datalint] anywhere, the defaults apply, rooted at `start`. `inline` is a
    table of `--config KEY=VALUE` settings laid over the file's.
    """
    if path is not None:
        source = Path(path)
        if not source.is_file():
            raise ConfigError(f"--config {source}: no such file")
        return config_from_file(source, inline)
    found = find_pyproject(start or Path.cwd())
    if found is None:
        return config_from_table(dict(inline or {}), (start or Path.cwd()).resolve() / "--config", None)
    return config_from_file(found, inline)


def config_from_file(source: Path, inline: Mapping[str, Any] | None = None) -> Config:
    """The Config of one file (a pyproject.toml's [tool.datalint], or a datalint.toml), `extend` resolved."""
    table = _merged(_table_with_extends(source, ()), inline or {})
    return config_from_table(table, source, _requires_python(source))


def _table_of(source: Path) -> Any:
    data = _read_toml(source)
    return data.get("tool", {}).get("datalint", {}) if source.name == "pyproject.toml" else data


def _table_with_extends(source: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    """The file's table over the one it `extend`s (recursively); relative paths made absolute."""
    resolved = source.resolve()
    if resolved in seen:
        chain = " -> ".join(str(p) for p in (*seen, resolved))
        raise ConfigError(f"{source}: `extend` goes round in a circle: {chain}")
    table = _table_of(source)
    if not isinstance(table, dict):
        raise ConfigError(f"{source} [tool.datalint]: must be a table")
    if "extend" not in table:
        return table
    base_path = table["extend"]
    if not isinstance(base_path, str):
        raise ConfigError(f"{source} [tool.datalint]: extend must be a path (a string), got {base_path!r}")
    base_file = (resolved.parent / base_path).resolve()
    if not base_file.is_file():
        raise ConfigError(f"{source} [tool.datalint]: extend: {base_file} is not a file")
    base = _rooted(_table_with_extends(base_file, (*seen, resolved)), base_file.parent)
    own = {key: value for key, value in table.items() if key != "extend"}
    return _merged(base, own)


def _rooted(table: dict[str, Any], root: Path) -> dict[str, Any]:
    """An extended file's paths and folder globs, made absolute so they keep pointing where they did."""
    rooted = dict(table)
    if isinstance(table.get("rule-paths"), list):
        rooted["rule-paths"] = [str(root / p) for p in table["rule-paths"] if isinstance(p, str)]
    for key in ("exclude", "extend-exclude"):
        if isinstance(table.get(key), list):
            rooted[key] = [_rooted_glob(p, root) if isinstance(p, str) else p for p in table[key]]
    if isinstance(table.get("per-file-ignores"), dict):
        rooted["per-file-ignores"] = {_rooted_glob(p, root): v for p, v in table["per-file-ignores"].items()}
    return rooted


def _rooted_glob(pattern: str, root: Path) -> str:
    stripped = pattern.rstrip("/").removeprefix("./")
    return pattern if "/" not in stripped or stripped.startswith("/") else f"{root.as_posix()}/{stripped}"


def _merged(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """`top` over `base`: tables merge key by key, accumulating lists add up, other values replace."""
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        elif key in ACCUMULATING_KEYS and isinstance(value, list) and isinstance(merged.get(key), list):
            merged[key] = [*merged[key], *value]
        else:
            merged[key] = value
    return merged


def parse_inline(settings: Sequence[str]) -> dict[str, Any]:
    """`--config KEY=VALUE` settings (TOML values: `select=["DL0"]`, `start-method="fork"`) as one table."""
    table: dict[str, Any] = {}
    if not settings:
        return table  # no TOML to parse: a plain run never imports tomllib
    tomllib = _toml()
    for setting in settings:
        try:
            parsed = tomllib.loads(setting)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(
                f"--config {setting!r}: not a file and not a TOML `KEY = VALUE` setting ({exc}); "
                "write e.g. --config 'select = [\"DL0\"]'"
            ) from None
        table = _merged(table, parsed)
    return table


def is_inline_setting(value: str) -> bool:
    """`--config` takes a path or a `KEY = VALUE` setting; an `=` that is not in an existing path decides."""
    return "=" in value and not Path(value).exists()


def _requires_python(source: Path) -> str | None:
    """The project's `requires-python`: from the pyproject.toml itself, or the one beside a datalint.toml."""
    if source.name != "pyproject.toml":
        source = source.parent / "pyproject.toml"
        if not source.is_file():
            return None
    project = _read_toml(source).get("project", {})
    value = project.get("requires-python") if isinstance(project, dict) else None
    return value if isinstance(value, str) else None


def minimum_python(requires: str) -> tuple[int, int] | None:
    """The lowest Python a `requires-python` specifier allows (`>=3.14,<4` -> (3, 14)), if it says."""
    import re

    bounds = [
        (int(major), int(minor)) for major, minor in re.findall(r"(?:>=|~=|==|>)\s*(\d+)\.(\d+)", requires)
    ]
    return max(bounds) if bounds else None


def config_from_table(table: Any, source: Path, requires_python: str | None = None) -> Config:
    """Check the shape of a [tool.datalint] table (types and key names) and build the Config.

    `source` is the file it came from; its folder roots relative globs and paths.
    `requires_python` (the project's) decides the start method when `start-method` is not set.
    """
    where = f"{source} [tool.datalint]" if source.name == "pyproject.toml" else str(source)
    if source.name == "--config":
        where = "--config"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        known = ", ".join(sorted(KNOWN_KEYS))
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {known})")
    lists = {key: _string_list(where, key, table[key]) for key in LIST_KEYS if key in table}
    start_method, reason = table.get("start-method"), f"start-method in {where}"
    if start_method is None:
        start_method, reason = _start_method_for(requires_python)
    if start_method not in START_METHODS:
        raise ConfigError(
            f"{where}: start-method must be one of {', '.join(START_METHODS)}, got {start_method!r}"
        )
    if not isinstance(table.get("scan", {}), dict):  # its keys are `datalint scan`'s to check
        raise ConfigError(f"{where}: scan must be a table ([tool.datalint.scan]), got {table['scan']!r}")
    respect_gitignore = table.get("respect-gitignore", True)
    if not isinstance(respect_gitignore, bool):
        raise ConfigError(f"{where}: respect-gitignore must be true or false, got {respect_gitignore!r}")
    max_file_size = _size(where, "max-file-size", table.get("max-file-size", DEFAULT_MAX_FILE_SIZE))
    root = source.resolve().parent
    for folder in lists.get("rule-paths", ()):
        if not (root / folder).is_dir():
            raise ConfigError(f"{where}: rule-paths: {root / folder} is not a directory")
    return Config(
        select=tuple(_upper(lists["select"])) if "select" in lists else None,
        extend_select=tuple(_upper(lists.get("extend-select", ()))),
        ignore=tuple(_upper(lists.get("ignore", ()))),
        per_file_ignores=_per_file_ignores(where, table.get("per-file-ignores", {})),
        exclude=(*lists.get("exclude", ()), *lists.get("extend-exclude", ())),
        default_excludes="exclude" not in lists,
        respect_gitignore=respect_gitignore,
        max_file_size=max_file_size,
        start_method=start_method,
        start_method_reason=reason,
        rule_options=_rule_options(where, table.get("rules", {})),
        rule_paths=tuple(root / p for p in lists.get("rule-paths", ())),
        root=root,
        source=source if source.name != "--config" else None,
    )


def scan_table(source: Path) -> tuple[dict[str, Any], str]:
    """The file's scan table (`[tool.datalint.scan]`, or `[scan]` in a datalint.toml), `extend`
    resolved, and how to name it in an error. `datalint scan` checks its keys (datalint.scan.settings)."""
    table = _table_with_extends(source, ())
    where = f"{source} [tool.datalint.scan]" if source.name == "pyproject.toml" else f"{source} [scan]"
    scan = table.get("scan", {})
    if not isinstance(scan, dict):
        raise ConfigError(f"{where}: must be a table, got {scan!r}")
    return scan, where


def _start_method_for(requires_python: str | None) -> tuple[str, str]:
    minimum = minimum_python(requires_python) if requires_python else None
    if minimum is not None and minimum >= FORKSERVER_SINCE:
        return "forkserver", f"requires-python {requires_python!r}: Linux starts workers with forkserver"
    return "spawn", "the default, the safe assumption for code that also runs on macOS and Windows"


class ConfigResolver:
    """The Config for each file: the nearest pyproject.toml with [tool.datalint] above it.

    `fixed` (from `--config FILE` or `--isolated`) applies to every file instead. `overrides`
    (the command line's flags) is applied on top of whichever Config a file gets. Discovery is
    cached per folder, so a tree of thousands of files reads each pyproject.toml once.
    """

    def __init__(
        self,
        *,
        fixed: Config | None = None,
        inline: Mapping[str, Any] | None = None,
        overrides: Callable[[Config], Config] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.fixed = overrides(fixed) if fixed is not None and overrides else fixed
        self.inline = dict(inline or {})
        self.overrides = overrides
        self.cwd = (cwd or Path.cwd()).resolve()
        self._by_folder: dict[Path, Path | None] = {}
        self._by_source: dict[Path | None, Config] = {}
        self._resolved: dict[Path, Path] = {}

    def for_path(self, path: Path | str) -> Config:
        if self.fixed is not None:
            return self.fixed
        target = Path(path)
        folder = self._resolve_folder(target if target.is_dir() else target.parent)
        source = self._source_for(folder)
        if source not in self._by_source:
            config = (
                config_from_file(source, self.inline)
                if source is not None
                else config_from_table(dict(self.inline), self.cwd / "--config", None)
            )
            self._by_source[source] = self.overrides(config) if self.overrides else config
        return self._by_source[source]

    @property
    def configs(self) -> list[Config]:
        """Every Config handed out so far (each is validated against the catalog once)."""
        return [self.fixed] if self.fixed is not None else list(self._by_source.values())

    def _resolve_folder(self, folder: Path) -> Path:
        """`folder.resolve()`, from its parent's answer when the walk asked for the parent first:
        resolving every folder of a tree 1,000 deep from scratch costs a million `lstat` calls."""
        known = self._resolved.get(folder)
        if known is not None:
            return known
        parent = self._resolved.get(folder.parent)
        if parent is not None and folder.name not in ("", ".", "..") and not folder.is_symlink():
            resolved = parent / folder.name
        else:
            resolved = folder.resolve()
        self._resolved[folder] = resolved
        return resolved

    def _source_for(self, folder: Path) -> Path | None:
        walked = []
        found: Path | None = None
        current: Path | None = folder
        while current is not None:
            if current in self._by_folder:
                found = self._by_folder[current]
                break
            walked.append(current)
            found = config_file_in(current)
            if found is not None:
                break
            current = current.parent if current.parent != current else None
        for visited in walked:
            self._by_folder[visited] = found
        return found


def _mentions_datalint(path: Path) -> bool:
    """A cheap look before parsing: most pyproject.toml files on the way up have no datalint table."""
    try:
        return "datalint" in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True  # let the real read report the problem


def _read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's table; parsed tables are cached, so a run in a configured project skips tomllib.

    Importing tomllib and parsing a pyproject.toml cost about as much as linting a small file, on
    every run. The cache (one marshal file per configuration file, under the user cache folder,
    like the rule catalog's) is used while the file's size and mtime are unchanged.
    """
    try:
        status = path.stat()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    stamp = (status.st_mtime_ns, status.st_size)
    cache = marshal_cache.cache_path("toml", path)
    cached = marshal_cache.read(cache, stamp)
    if cached is not None:
        return cached
    tomllib = _toml()
    try:
        data = read_regular_file(path)  # a FIFO named pyproject.toml must not block `check`
        table: dict[str, Any] = tomllib.loads(data.decode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to read as TOML") from None
    marshal_cache.write(cache, stamp, table)
    return table


def _size(where: str, key: str, value: Any) -> int:
    """A size in bytes: a whole number, or text such as "10MB" or "1GiB" (`--max-file-size`'s words)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if isinstance(value, str):
        from datalint.units import parse_size  # only when the key is set: no regex at every start

        try:
            if parse_size(value) >= 1:
                return parse_size(value)
        except ValueError:
            pass
    raise ConfigError(f"{where}: {key} must be a size such as 10000000, \"10MB\" or \"1GiB\", got {value!r}")


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
