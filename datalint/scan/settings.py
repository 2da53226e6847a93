"""`[tool.datalint.scan]`: a project's scan settings, under the command line's flags.

Each key is a scan flag's name without its dashes (`timeout = 30`, `max-bytes = "64MB"`,
`label = ["target"]`, `scores = false` for `--no-scores`), and `[tool.datalint.scan.thresholds]`
holds the limits `--threshold KIND=NUMBER` sets (`dark = 0.1`, `near_duplicate = 8`). In a
datalint.toml the same tables are `[scan]` and `[scan.thresholds]`.

One resolver (`layered`) lays the layers: what the caller gave (a flag, a keyword of
`datalint.scan()`, a served dataset's table) over the project file over what the index stored (the
options its last scan ran with, `runs.options`) over the default; limits are merged kind by kind, so
`--threshold dark=0.2` leaves the file's `blurry` as it is. Its answer, a frozen `ScanSettings`, is
what the CLI, `datalint.scan()` and the service's scan jobs pass down. Unknown keys and values of the
wrong type or range are errors that name the file, the key, the value and what is allowed.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from datalint.config import ConfigError, find_pyproject, scan_table
from datalint.index import read
from datalint.index.store import IndexFileError, latest_run
from datalint.text import did_you_mean
from datalint.units import parse_size

DEFAULT = "default"


def _number(low: float, *, above: bool = False, whole: bool = False) -> Callable[[Any], Any]:
    kind = "a whole number" if whole else "a number"
    allowed = f"{kind} {'above' if above else 'of at least'} {low:g}"

    def convert(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int if whole else int | float):
            raise ValueError(f"must be {allowed}, got {value!r}")
        if not (value > low if above else value >= low):
            raise ValueError(f"must be {allowed}, got {value!r}")
        return value if whole else float(value)

    return convert


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"must be a whole number, got {value!r}")
    return value


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, got {value!r}")
    return value


def _strings(value: Any) -> list[str]:
    """A list of strings, or one string of comma-separated items (`"jpg,png"`)."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        raise ValueError(f"must be a list of strings, got {value!r}")
    return list(value)


def _kinds(value: Any) -> str:
    from datalint.errors import UsageError
    from datalint.scan.policy import parse_kinds

    text = ",".join(_strings(value))
    try:
        parse_kinds(text)
    except UsageError as exc:
        raise ValueError(f": {exc}") from None
    return text


def _size(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if not isinstance(value, str):
        raise ValueError(f"must be a size in bytes (a whole number, or text such as '64MB'), got {value!r}")
    try:
        return parse_size(value)
    except ValueError:
        raise ValueError(f"must be a size such as 500000, '64MB' or '1GiB', got {value!r}") from None


@dataclass(frozen=True)
class Key:
    """One key of the scan table and the flag it stands for."""

    name: str  # in the file: the flag's name without the dashes
    dest: str  # where argparse puts the flag's value
    convert: Callable[[Any], Any]  # the file's value -> the setting (ValueError says what is allowed)
    default: Any
    unset: Any = None  # what `dest` holds when the flag was not given
    verdict: bool = False  # decides verdicts only: `datalint quarantine` re-derives with it too
    stored: tuple[str, ...] = ()  # where a run's options keep the value (empty: the index keeps none)

    @property
    def switch(self) -> bool:
        """A yes/no key: its flag comes in two forms, `--scores` and `--no-scores`, so a flag can undo
        what the file set either way."""
        return isinstance(self.default, bool)

    def flag_for(self, value: Any) -> str:
        """The flag that gives `value` (for a switch, the form that says it)."""
        return f"--no-{self.name}" if self.switch and not value else f"--{self.name}"

    def given(self, args: argparse.Namespace) -> bool:
        return getattr(args, self.dest, self.unset) != self.unset

    def from_flag(self, args: argparse.Namespace) -> Any:
        return getattr(args, self.dest)


KEYS: dict[str, Key] = {
    key.name: key
    for key in (
        Key("kinds", "kinds", _kinds, DEFAULT, verdict=True, stored=("policy", "kinds")),
        Key("timeout", "timeout", _number(0, above=True), 60.0, stored=("timeout",)),
        Key("setup-timeout", "setup_timeout", _number(0), 600.0),
        Key("workers", "workers", _number(0, whole=True), None),
        Key("max-bytes", "max_bytes", _size, None, verdict=True, stored=("policy", "max_bytes")),
        Key("max-pixels", "max_pixels", _number(1, whole=True), None),
        Key("num-classes", "num_classes", _number(1, whole=True), None, verdict=True,
            stored=("policy", "num_classes")),
        Key("ignore-index", "ignore_index", _integer, None, verdict=True, stored=("policy", "ignore_index")),
        Key("require", "require", _strings, [], verdict=True, stored=("policy", "require")),
        Key("label", "label", _strings, [], stored=("labels",)),
        Key("ext", "ext", _strings, None),
        Key("all-frames", "all_frames", _boolean, False),
        Key("scores", "scores", _boolean, True),
        Key("verify-content", "verify_content", _boolean, False),
        Key("incremental", "incremental", _boolean, True),
    )
}
THRESHOLDS_KEY = "thresholds"


@dataclass(frozen=True)
class ScanSettings:
    """The effective value of every key and where it came from (`--show-settings` prints them)."""

    values: Mapping[str, Any]
    # key -> "--timeout", "<file> [tool.datalint.scan]", "the index <db> (run 3)" or "default"
    origins: Mapping[str, str]
    thresholds: tuple[tuple[str, float], ...] = ()  # the limits set, by a flag, the file or the index
    threshold_origins: Mapping[str, str] = field(default_factory=dict)
    source: Path | None = None  # the configuration file read (None: none found, or --isolated)
    where: str = ""
    stored: Stored | None = None  # what the index's last scan ran with, under the file


def configuration_file(args: argparse.Namespace, cwd: Path | None = None) -> Path | None:
    """`--config FILE`, nothing with `--isolated`, else the nearest configuration above the cwd."""
    given = getattr(args, "config", None)
    if given is not None:
        if getattr(args, "isolated", False):
            raise ConfigError("--isolated and --config FILE exclude each other")
        path = Path(given)
        if not path.is_file():
            raise ConfigError(f"--config {given}: no such file")
        return path
    if getattr(args, "isolated", False):
        return None
    return find_pyproject(cwd or Path.cwd())


def file_settings(
    source: Path, keys: Mapping[str, Key] = KEYS
) -> tuple[dict[str, Any], dict[str, float], str]:
    """The file's scan keys (converted) and limits, checked, and how to name the table."""
    table, where = scan_table(source)
    values, limits = table_settings(table, where, keys)
    return values, limits, where


def table_settings(
    table: Mapping[str, Any], where: str, keys: Mapping[str, Key] = KEYS
) -> tuple[dict[str, Any], dict[str, float]]:
    """A scan table's keys (converted) and limits; anything else is a `ConfigError` naming `where`."""
    values: dict[str, Any] = {}
    for name, raw in table.items():
        if name == THRESHOLDS_KEY:
            continue
        if name not in KEYS:
            raise ConfigError(f"{where}: {_unknown(name)}")
        try:
            value = KEYS[name].convert(raw)
        except ValueError as exc:
            separator = "" if str(exc).startswith(":") else " "
            raise ConfigError(f"{where}: {name}{separator}{exc}") from None
        if name in keys:  # the others measure: checked, but this command does not measure
            values[name] = value
    return values, _file_thresholds(table.get(THRESHOLDS_KEY, {}), where)


def _unknown(name: str) -> str:
    if name in _limit_names():
        return f"unknown key {name!r}: a limit goes in the thresholds table ({THRESHOLDS_KEY}.{name} = ...)"
    return f"unknown key {name!r}{did_you_mean(name, (*KEYS, THRESHOLDS_KEY))}; known keys: " + ", ".join(
        (*KEYS, THRESHOLDS_KEY)
    )


def _limit_names() -> tuple[str, ...]:
    from datalint.scan.policy import THRESHOLDS

    return tuple(THRESHOLDS)


def _file_thresholds(table: Any, where: str) -> dict[str, float]:
    from datalint.scan.policy import threshold_problem

    if not isinstance(table, dict):
        raise ConfigError(f"{where}: {THRESHOLDS_KEY} must be a table of KIND = NUMBER, got {table!r}")
    for name, value in table.items():
        if name not in _limit_names():
            hint = f"{did_you_mean(name, _limit_names())}; the limits: {', '.join(_limit_names())}"
            raise ConfigError(f"{where}: {THRESHOLDS_KEY}: unknown limit {name!r}{hint}")
        problem = threshold_problem(name, value)
        if problem is not None:
            raise ConfigError(f"{where}: {THRESHOLDS_KEY}.{problem}")
    return {name: float(value) for name, value in table.items()}


@dataclass(frozen=True)
class Stored:
    """The layer under the project file: what the index's last scan ran with (`runs.options`)."""

    index: str  # the index's path, as the caller named it
    run: int
    values: Mapping[str, Any]  # key -> value, converted as the file's are
    thresholds: tuple[tuple[str, float], ...] = ()

    @property
    def origin(self) -> str:
        return f"the index {self.index} (run {self.run})"


def stored_values(
    run_options: Mapping[str, Any], keys: Mapping[str, Key] = KEYS
) -> tuple[dict[str, Any], tuple[tuple[str, float], ...]]:
    """The keys and limits a run's options hold. A value equal to the default is left out (the index
    then adds nothing), and so is one this version would refuse from the file (an older index's)."""
    values: dict[str, Any] = {}
    for name, key in keys.items():
        raw = _stored_at(run_options, key.stored)
        if raw is None:
            continue
        try:
            value = key.convert(_kinds_text(raw) if name == "kinds" else raw)
        except ValueError:
            continue
        if not _is_default(key, value):
            values[name] = value
    return values, _stored_thresholds(_stored_at(run_options, ("policy", THRESHOLDS_KEY)))


def _stored_at(run_options: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    found: Any = run_options if path else None
    for part in path:
        found = found.get(part) if isinstance(found, Mapping) else None
    return found


def _kinds_text(stored: Any) -> Any:
    """A run's kinds as `--kinds` would give them: `default,dark` for the default kinds and dark,
    `all` for every kind (the same kinds in the same order, in the words the user chose)."""
    from datalint.index.kinds import KINDS
    from datalint.scan.policy import parse_kinds

    if not isinstance(stored, list | tuple) or not all(isinstance(name, str) for name in stored):
        return stored
    names, defaults = tuple(stored), parse_kinds(None)
    if names == tuple(KINDS):
        return "all"
    if names[: len(defaults)] == defaults:
        return ",".join(("default", *names[len(defaults) :]))
    return ",".join(names)


def _is_default(key: Key, value: Any) -> bool:
    if key.name == "kinds":
        from datalint.scan.policy import parse_kinds

        return parse_kinds(value) == parse_kinds(None)
    return bool(value == key.default)


def _stored_thresholds(pairs: Any) -> tuple[tuple[str, float], ...]:
    from datalint.scan.policy import threshold_problem

    kept: list[tuple[str, float]] = []
    for pair in pairs if isinstance(pairs, list | tuple) else ():
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            continue
        if threshold_problem(str(pair[0]), pair[1]) is None:
            kept.append((str(pair[0]), float(pair[1])))
    return tuple(kept)


def stored_layer(
    index: str | os.PathLike[str], source: tuple[str, str] | None = None, keys: Mapping[str, Key] = KEYS
) -> Stored | None:
    """What the last scan of the index at `index` ran with, read without writing. None: no index
    there yet, a file the scan itself will refuse (in its own words), no scan in it, or (`source`:
    (kind, spec)) a scan of another source, whose options are not this one's."""
    path = Path(index)
    if not path.is_file():
        return None
    try:
        connection = read.open_index(path)
    except (IndexFileError, sqlite3.Error):
        return None
    try:
        run = latest_run(connection)
    except sqlite3.Error:
        return None
    finally:
        connection.close()
    if run is None or (source is not None and (run.kind, run.spec) != source):
        return None
    values, thresholds = stored_values(run.options, keys)
    return Stored(str(index), run.id, values, thresholds)


def resolve(
    args: argparse.Namespace,
    keys: Mapping[str, Key] = KEYS,
    cwd: Path | None = None,
    stored: Stored | None = None,
) -> ScanSettings:
    """The flags of a command (`keys`: those it has) through the one resolver."""
    from datalint.scan.policy import parse_thresholds

    from_flags = {name: key.from_flag(args) for name, key in keys.items() if key.given(args)}
    given = {name: (value, keys[name].flag_for(value)) for name, value in from_flags.items()}
    flagged = parse_thresholds(getattr(args, "threshold", None))
    return layered(given, flagged, "--threshold", configuration_file(args, cwd), keys, stored)


def layered(
    given: Mapping[str, tuple[Any, str]],
    given_limits: Iterable[tuple[str, float]],
    limits_origin: str,
    source: Path | None,
    keys: Mapping[str, Key] = KEYS,
    stored: Stored | None = None,
) -> ScanSettings:
    """The one resolver: what the caller gave (`given`: key -> (value, where from)) over the file
    `source` over what the index stored over the defaults; limits merged kind by kind. The CLI's
    flags, `datalint.scan()`'s keywords and a served dataset's table all come through here."""
    from datalint.scan.policy import merged_thresholds

    values: dict[str, Any] = {}
    limits: dict[str, float] = {}
    where = ""
    if source is not None:
        values, limits, where = file_settings(source, keys)
    kept: Mapping[str, Any] = stored.values if stored is not None else {}
    effective: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for name, key in keys.items():
        if name in given:
            effective[name], origins[name] = given[name]
        elif name in values:
            effective[name], origins[name] = values[name], where
        elif name in kept and stored is not None:
            effective[name], origins[name] = kept[name], stored.origin
        else:
            effective[name], origins[name] = key.default, DEFAULT
    given_limits = tuple(given_limits)
    scanned = stored.thresholds if stored is not None else ()
    in_file = limits_where(where)
    threshold_origins = {name: stored.origin for name, _ in scanned} if stored is not None else {}
    threshold_origins |= {name: in_file for name in limits}
    threshold_origins |= {name: limits_origin for name, _ in given_limits}
    thresholds = merged_thresholds(scanned, limits.items(), given_limits)
    return ScanSettings(effective, origins, thresholds, threshold_origins, source, where, stored)


def limits_where(where: str) -> str:
    """`FILE [tool.datalint.scan]` -> `FILE [tool.datalint.scan.thresholds]` (empty for none)."""
    return where[:-1] + f".{THRESHOLDS_KEY}]" if where else ""


API = "datalint.scan()"


def keyword_settings(
    keywords: Mapping[str, Any],
    thresholds: Mapping[str, Any] | None,
    config: str | os.PathLike[str] | bool = False,
    cwd: Path | None = None,
    where: str = API,
    stored: Stored | None = None,
) -> ScanSettings:
    """`datalint.scan()`'s keywords (None: not given) over the file `config` names over the defaults.

    The keywords are checked by the keys' own converters and the limits by `policy.threshold_problem`,
    so a bad value raises the `ConfigError` the file would, worded for the keyword
    (`datalint.scan(): max_bytes must be a size such as ...`). `where` names who gave them (a served
    dataset's table), for the origins `--show-settings` prints."""
    table: dict[str, Any] = {}
    for keyword, value in keywords.items():
        if value is not None:
            table[keyword.replace("_", "-")] = list(value) if isinstance(value, tuple | frozenset) else value
    if thresholds is not None:
        table[THRESHOLDS_KEY] = dict(thresholds) if isinstance(thresholds, Mapping) else thresholds
    try:
        values, limits = table_settings(table, API)
    except ConfigError as exc:  # the keyword as Python spells it, not as the file does
        raise ConfigError(_python_spelling(str(exc))) from None
    if where == API:
        given = {name: (value, f"{API} {name.replace('-', '_')}=") for name, value in values.items()}
        limits_origin = f"{API} thresholds="
    else:
        given, limits_origin = {name: (value, where) for name, value in values.items()}, where
    return layered(given, limits.items(), limits_origin, configuration_argument(config, cwd), stored=stored)


def _python_spelling(message: str) -> str:
    prefix = f"{API}: "
    rest = message.removeprefix(prefix)
    for name in sorted(KEYS, key=len, reverse=True):
        if rest.startswith(name) and "-" in name:
            return prefix + name.replace("-", "_") + rest[len(name) :]
    return message


def configuration_argument(config: str | os.PathLike[str] | bool, cwd: Path | None = None) -> Path | None:
    """`datalint.scan(config=...)`: False reads no file, True the nearest one above the cwd (as the
    CLI finds it), a path that file."""
    if config is False:
        return None
    if config is True:
        return find_pyproject(cwd or Path.cwd())
    if isinstance(config, bool) or not isinstance(config, str | os.PathLike):
        raise ConfigError(f"{API}: config must be a path, True or False, got {config!r}")
    path = Path(config)
    if not path.is_file():
        raise ConfigError(f"{API}: config={str(config)!r}: no such file")
    return path


def settings_rows(settings: ScanSettings) -> list[tuple[str, Any, str]]:
    """(name, value, where from) for every key and every limit, defaults included."""
    from datalint.scan import images, quality

    rows = [(name, _shown(value), settings.origins[name]) for name, value in settings.values.items()]
    shapes = images.ShapeThresholds()
    defaults = {**asdict(quality.QualityThresholds()), "tiny": shapes.min_side}
    defaults["extreme_aspect"] = shapes.max_aspect
    given = dict(settings.thresholds)
    for name in _limit_names():
        origin = settings.threshold_origins.get(name, DEFAULT)
        rows.append((f"{THRESHOLDS_KEY}.{name}", _shown(given.get(name, defaults.get(name))), origin))
    return rows


def _shown(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def from_file_note(settings: ScanSettings, hint: str = " (--show-settings lists them all)") -> str | None:
    """One line naming the file and the keys it set, or None when it set none: a value from a
    project file should never be a surprise in a scan's outcome."""
    keys = [name for name, origin in settings.origins.items() if origin == settings.where and settings.where]
    in_file = limits_where(settings.where)
    keys += [f"{THRESHOLDS_KEY}.{name}" for name, origin in settings.threshold_origins.items()
             if origin == in_file and in_file]  # fmt: skip
    if not keys:
        return None
    return f"settings from {settings.source}: {', '.join(keys)}{hint}"


def from_index_note(settings: ScanSettings) -> str | None:
    """One line naming the index and the keys its last scan set that this one keeps, or None: a rescan
    that keeps `--label target` without being given it should say so."""
    stored = settings.stored
    if stored is None:
        return None
    keys = [name for name, origin in settings.origins.items() if origin == stored.origin]
    keys += [f"{THRESHOLDS_KEY}.{name}" for name, origin in settings.threshold_origins.items()
             if origin == stored.origin]  # fmt: skip
    if not keys:
        return None
    overrides = "(a flag or the project file overrides them)"
    return f"settings kept from {stored.origin}: {', '.join(keys)} {overrides}"


def settings_text(settings: ScanSettings) -> str:
    """`--show-settings`: one `name: value (where from)` line per setting."""
    configuration = str(settings.source) if settings.source else "none found (defaults)"
    lines = [f"configuration: {configuration}"]
    lines += [f"{name}: {value_text(value)} ({origin})" for name, value, origin in settings_rows(settings)]
    return "".join(line + "\n" for line in lines)


def settings_document(settings: ScanSettings) -> dict[str, Any]:
    rows = settings_rows(settings)
    return {
        "configuration": str(settings.source) if settings.source else None,
        "settings": {name: {"value": value, "from": origin} for name, value, origin in rows},
    }


def value_text(value: Any) -> str:
    """A setting's value as `--show-settings` prints it."""
    if value is None:
        return "(none)"
    if isinstance(value, list):
        return ",".join(map(str, value)) or "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def verdict_keys() -> dict[str, Key]:
    """The keys `datalint quarantine` uses: those that decide verdicts from what is measured."""
    return {name: key for name, key in KEYS.items() if key.verdict}


def as_flags(values: Mapping[str, Any], thresholds: Mapping[str, float] | None = None) -> list[str]:
    """The command line that sets `values` (key -> converted value, as `table_settings` gives them)
    and the limits: what a `datalint watch` started for a served dataset is given."""
    flags: list[str] = []
    for name, value in values.items():
        key = KEYS[name]
        if key.switch:  # --all-frames, --no-scores, --no-incremental, ...
            if value != key.default:
                flags.append(key.flag_for(value))
        elif isinstance(value, list):
            for item in value:
                flags += [f"--{name}", str(item)]
        elif value is not None:
            flags += [f"--{name}", str(value)]
    for kind, limit in (thresholds or {}).items():
        flags += ["--threshold", f"{kind}={limit!r}"]
    return flags
