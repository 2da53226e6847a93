"""`datalint-service.toml`, read and validated strictly: every mistake names the key and the file.

[service]
data-dir = "state"          # relative paths are relative to the config file
host = "127.0.0.1"
port = 8765
tokens = "tokens.toml"

[[datasets]]
name = "train"
images = "/data/train"      # or: dataset = "mypkg.data:train_ds"
workers = 2                 # every key of [tool.datalint.scan]: workers, timeout, kinds, label,
kinds = ["default", "dark"] #   max-bytes, max-pixels, scores, require, ... (`datalint docs config`)
config = "../pyproject.toml"  # optional: a project's [tool.datalint.scan], under this table's keys
interval = "6h"             # rescan every 6 hours (or watch = true: rescan when files change,
                            #   with settle = "2s", rescan-every = "1h", or for a spec poll = "5m")

[datasets.thresholds]       # the limits of [tool.datalint.scan.thresholds], for this dataset
dark = 0.1
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datalint.errors import UsageError
from datalint.units import parse_duration

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
# A dataset name is one path segment and one URL segment: no dots first, no slashes, no spaces.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
NAME_RULE = "1-64 letters, digits, '-' or '_', starting with a letter or digit"

_SERVICE_KEYS = {
    "data-dir",
    "host",
    "port",
    "tokens",
    "max-request-bytes",
    "max-batch",
    "log-level",
    "scheduler",
    "http",
    "loop",
    "allowed-hosts",
    "allowed-origins",
    "allow-code-specs",
    "header-timeout",
    "keep-alive",
    "max-connections",
}
# uvicorn's HTTP parsers and event loops; "auto" takes httptools and uvloop where installed
HTTP_IMPLEMENTATIONS = ("auto", "h11", "httptools")
LOOP_IMPLEMENTATIONS = ("auto", "asyncio", "uvloop")
# A dataset's own keys; besides them it takes every key of `[tool.datalint.scan]` (`scan_keys()`).
_DATASET_KEYS = {
    "name",
    "images",
    "dataset",
    "config",
    "watch",
    "interval",
    "backend",
    "settle",
    "poll",
    "rescan-every",
}
# How a watched dataset's watcher decides when to update (`datalint watch`'s flags of the same names).
_WATCH_KEYS = ("settle", "poll", "rescan-every")
_WATCH_USE = {
    "settle": "only for images = DIR (a file is judged once it has been quiet this long)",
    "rescan_every": "only for images = DIR (the folder's periodic walk)",
    "poll": "only for dataset = SPEC (an image folder is watched by its file events)",
}
DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_KEEP_ALIVE_S = 5.0
DEFAULT_MAX_CONNECTIONS = 1024


class ConfigError(UsageError):
    """A service config file that cannot be used as written (exit 2)."""


@dataclass(frozen=True)
class DatasetConfig:
    """One registered dataset: what to scan and how."""

    name: str
    images: Path | None = None
    dataset: str | None = None
    scan_options: dict[str, Any] = field(default_factory=dict)  # keyword arguments of datalint.scan()
    watch: bool = False
    interval: float | None = None  # seconds between scheduled rescans
    # watch = true only: settle, poll, rescan_every in seconds (the watcher's defaults where absent)
    watch_options: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "images": str(self.images) if self.images else None,
            "dataset": self.dataset,
            "scan_options": self.scan_options,
            "watch": self.watch,
            "interval": self.interval,
            "watch_options": self.watch_options,
        }


@dataclass(frozen=True)
class ServiceConfig:
    data_dir: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    tokens: Path | None = None
    max_request_bytes: int = 8 * 1024 * 1024
    max_batch: int = 10_000
    log_level: str = "info"
    scheduler: str | None = None  # a dask scheduler address for every scan
    http: str = "auto"
    loop: str = "auto"
    # Host names (besides the bound address, localhost and loopback addresses) a request may name,
    # and origins (besides the service's own) a state-changing request may come from.
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    # A `module:attr` dataset through the API runs code on this host: opt-in, admin tokens only.
    allow_code_specs: bool = False
    header_timeout: float = DEFAULT_HEADER_TIMEOUT_S  # a request's headers must arrive within this
    keep_alive: float = DEFAULT_KEEP_ALIVE_S  # an idle keep-alive connection is closed after this
    max_connections: int = DEFAULT_MAX_CONNECTIONS  # more open connections are answered 503
    datasets: tuple[DatasetConfig, ...] = ()
    source: Path | None = None

    def dataset(self, name: str) -> DatasetConfig | None:
        return next((d for d in self.datasets if d.name == name), None)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def valid_name(name: object) -> bool:
    return isinstance(name, str) and NAME_PATTERN.fullmatch(name) is not None


def load_config(path: str | Path) -> ServiceConfig:
    """Read and validate the file; a ConfigError names the file and the key."""
    source = Path(path)
    try:
        document = tomllib.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{source}: no such service config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read the service config: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    return parse_config(document, source)


def parse_config(document: dict[str, Any], source: Path) -> ServiceConfig:
    unknown = set(document) - {"service", "datasets"}
    if unknown:
        raise ConfigError(
            f"{source}: unknown table {sorted(unknown)[0]!r} (expected [service], [[datasets]])"
        )
    service = document.get("service", {})
    if not isinstance(service, dict):
        raise ConfigError(f"{source}: [service] must be a table")
    _no_unknown(service, _SERVICE_KEYS, source, "service")
    base = source.resolve().parent
    data_dir = _path(service, "data-dir", source, base) or base / "datalint-service"
    host = _typed(service, "host", str, source, "service", DEFAULT_HOST)
    port = _typed(service, "port", int, source, "service", DEFAULT_PORT)
    if not 0 <= port <= 65535:
        raise ConfigError(f"{source}: service.port: expected 0-65535, got {port}")
    tokens = _path(service, "tokens", source, base)
    max_request = _typed(service, "max-request-bytes", int, source, "service", 8 * 1024 * 1024)
    max_batch = _typed(service, "max-batch", int, source, "service", 10_000)
    for key, value in (("max-request-bytes", max_request), ("max-batch", max_batch)):
        if value < 1:
            raise ConfigError(f"{source}: service.{key}: expected a positive integer, got {value}")
    log_level = _typed(service, "log-level", str, source, "service", "info")
    if log_level not in ("debug", "info", "warning", "error"):
        raise ConfigError(f"{source}: service.log-level: expected debug, info, warning or error")
    http = _choice(service, "http", HTTP_IMPLEMENTATIONS, source)
    loop = _choice(service, "loop", LOOP_IMPLEMENTATIONS, source)
    allowed_hosts = _names(service, "allowed-hosts", source)
    allowed_origins = tuple(_origin(value, source) for value in _names(service, "allowed-origins", source))
    header_timeout = _interval(
        service.get("header-timeout", DEFAULT_HEADER_TIMEOUT_S), source, "service", "header-timeout"
    )
    keep_alive = _interval(service.get("keep-alive", DEFAULT_KEEP_ALIVE_S), source, "service", "keep-alive")
    max_connections = _typed(service, "max-connections", int, source, "service", DEFAULT_MAX_CONNECTIONS)
    if max_connections < 1:
        raise ConfigError(
            f"{source}: service.max-connections: expected a positive integer, got {max_connections}"
        )
    raw_datasets = document.get("datasets", [])
    if not isinstance(raw_datasets, list):
        raise ConfigError(f"{source}: datasets: use [[datasets]] tables")
    datasets = tuple(_dataset(entry, n, source, base) for n, entry in enumerate(raw_datasets))
    names = [d.name for d in datasets]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"{source}: datasets: the name {name!r} is registered twice")
    return ServiceConfig(
        data_dir=data_dir,
        host=host,
        port=port,
        tokens=tokens,
        max_request_bytes=max_request,
        max_batch=max_batch,
        log_level=log_level,
        scheduler=_typed(service, "scheduler", str, source, "service", None),
        http=http,
        loop=loop,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        allow_code_specs=_typed(service, "allow-code-specs", bool, source, "service", False),
        header_timeout=header_timeout or DEFAULT_HEADER_TIMEOUT_S,
        keep_alive=keep_alive or DEFAULT_KEEP_ALIVE_S,
        max_connections=max_connections,
        datasets=datasets,
        source=source,
    )


def _names(table: dict[str, Any], key: str, source: Path) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        raise ConfigError(f"{source}: service.{key}: expected a list of strings, got {value!r}")
    return tuple(item.strip().lower() for item in value)


def _origin(value: str, source: Path) -> str:
    """`https://ci.example:8443` as a browser sends it in `Origin`: scheme, host and port only."""
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise ConfigError(
            f"{source}: service.allowed-origins: expected an origin such as "
            f"'https://ci.example:8443', got {value!r}"
        )
    return f"{parts.scheme}://{parts.netloc}".lower()


def _choice(table: dict[str, Any], key: str, choices: tuple[str, ...], source: Path) -> str:
    value = _typed(table, key, str, source, "service", choices[0])
    if value not in choices:
        raise ConfigError(f"{source}: service.{key}: expected {', '.join(choices)}, got {value!r}")
    return value


def parse_dataset(entry: Any, where: str, base: Path) -> DatasetConfig:
    """One dataset (a [[datasets]] table, or the body of a registration request); errors name `where`."""
    return _dataset(entry, None, Path(where), base)


def _dataset(entry: Any, n: int | None, source: Path, base: Path) -> DatasetConfig:
    table = f"datasets[{n}]" if n is not None else "dataset"
    if not isinstance(entry, dict):
        raise ConfigError(f"{source}: {table}: expected a table")
    name = entry.get("name")
    if name is None:
        raise ConfigError(f"{source}: {table}.name: missing (every dataset needs a name)")
    if not valid_name(name):
        raise ConfigError(f"{source}: {table}.name: {name!r} is not a valid dataset name ({NAME_RULE})")
    table = f"datasets[{n}] ({name})" if n is not None else f"dataset {name}"
    _no_unknown_dataset_key(entry, source, table)
    images = _path(entry, "images", source, base, table)
    spec = _typed(entry, "dataset", str, source, table, None)
    if (images is None) == (spec is None):
        raise ConfigError(f"{source}: {table}: give exactly one of images = DIR or dataset = SPEC")
    options = _scan_options(entry, source, table, base)
    backend = _typed(entry, "backend", str, source, table, None)
    if backend is not None:
        if backend not in ("local", "dask"):
            raise ConfigError(f"{source}: {table}.backend: expected 'local' or 'dask', got {backend!r}")
        options["backend"] = backend
    watch = _typed(entry, "watch", bool, source, table, False)
    interval = _interval(entry.get("interval"), source, table)
    watch_options: dict[str, float] = {}
    for key in _WATCH_KEYS:
        value = _interval(entry.get(key), source, table, key)
        if value is None:
            continue
        if not watch:
            raise ConfigError(f"{source}: {table}.{key}: only for a watched dataset (watch = true)")
        watch_options[key.replace("-", "_")] = value
    for key, only in (("poll", spec), ("settle", images), ("rescan_every", images)):
        if key in watch_options and only is None:
            raise ConfigError(f"{source}: {table}.{key.replace('_', '-')}: {_WATCH_USE[key]}")
    return DatasetConfig(
        name=name,
        images=images,
        dataset=spec,
        scan_options=options,
        watch=watch,
        interval=interval,
        watch_options=watch_options,
    )


def dataset_settings(dataset: DatasetConfig, index: Path | None = None) -> dict[str, Any]:
    """Each scan setting of the dataset's scans, its value and where it comes from (the dataset's
    table, its `config` file, what its `index` stored, or the default), resolved as its next scan
    job resolves them: `scan --show-settings --format json`'s document."""
    from datalint.scan.settings import KEYS, THRESHOLDS_KEY, keyword_settings, settings_document, stored_layer

    options = dataset.scan_options
    keywords = {key: value for key, value in options.items() if key.replace("_", "-") in KEYS}
    project = options.get("config")
    source = _scanned_source(dataset) if index is not None else None
    stored = stored_layer(index, source) if index is not None and source is not None else None
    settings = keyword_settings(
        keywords, options.get(THRESHOLDS_KEY), project or False, where=f"[[datasets]] {dataset.name}",
        stored=stored,
    )  # fmt: skip
    return settings_document(settings)


def _scanned_source(dataset: DatasetConfig) -> tuple[str, str] | None:
    """(kind, spec) of what the dataset's scan jobs scan (None: its folder is gone, so no index of it
    can lend its settings)."""
    from datalint.service.scanjob import source_of

    job = {"images": str(dataset.images) if dataset.images else None, "dataset": dataset.dataset}
    try:
        source = source_of({**job, "scan_options": dataset.scan_options})
    except UsageError:
        return None
    return ("dataset", source) if isinstance(source, str) else (source.kind, source.spec)


def scan_keys() -> tuple[str, ...]:
    """The scan settings a dataset takes: `[tool.datalint.scan]`'s keys, spelled as there."""
    from datalint.scan.settings import KEYS, THRESHOLDS_KEY

    return (*KEYS, THRESHOLDS_KEY)


def _no_unknown_dataset_key(entry: dict[str, Any], source: Path, table: str) -> None:
    from datalint.scan.policy import THRESHOLDS
    from datalint.scan.settings import THRESHOLDS_KEY

    for key in entry:
        if key in THRESHOLDS:  # a limit where a key goes: say where it belongs
            raise ConfigError(
                f"{source}: {table}.{key}: unknown key: a limit goes in the thresholds table "
                f"({THRESHOLDS_KEY}.{key} = ..., or [datasets.{THRESHOLDS_KEY}] under the [[datasets]] table)"
            )
    _no_unknown(entry, _DATASET_KEYS | set(scan_keys()), source, table)


def _scan_options(entry: dict[str, Any], source: Path, table: str, base: Path) -> dict[str, Any]:
    """`datalint.scan()`'s keywords from a dataset's scan keys, checked as `[tool.datalint.scan]` is
    (`datalint.scan.settings.table_settings`: the same converters, ranges and messages)."""
    from datalint.config import ConfigError as ScanConfigError
    from datalint.scan.settings import THRESHOLDS_KEY, table_settings

    given = {key: value for key, value in entry.items() if key in scan_keys()}
    try:
        values, limits = table_settings(given, f"{source}: {table}")
    except ScanConfigError as exc:
        raise ConfigError(str(exc)) from None
    options: dict[str, Any] = {key.replace("-", "_"): value for key, value in values.items()}
    if limits:
        options[THRESHOLDS_KEY] = limits
    project = _path(entry, "config", source, base, table)
    if project is not None:
        options["config"] = str(_project_settings(project, source, table))
    return options


def _project_settings(project: Path, source: Path, table: str) -> Path:
    """`config = "pyproject.toml"`: a project's `[tool.datalint.scan]`, checked now, read by each scan."""
    from datalint.config import ConfigError as ScanConfigError
    from datalint.scan.settings import file_settings

    if not project.is_file():
        raise ConfigError(f"{source}: {table}.config: {project}: no such file")
    try:
        file_settings(project)
    except ScanConfigError as exc:
        raise ConfigError(f"{source}: {table}.config: {exc}") from None
    return project


def _interval(value: Any, source: Path, table: str, key: str = "interval") -> float | None:
    """A positive duration: seconds, or a string such as '500ms', '30m', '6h'."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < float("inf"):
        return float(value)
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return parse_duration(value)
    raise ConfigError(
        f"{source}: {table}.{key}: expected seconds or a duration such as '30m', '6h', got {value!r}"
    )


def _no_unknown(table: dict[str, Any], known: set[str], source: Path, where: str) -> None:
    import difflib

    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{source}: {where}.{key}: unknown key{hint}")


def _typed(table: dict[str, Any], key: str, kind: type, source: Path, where: str, default: Any) -> Any:
    value = table.get(key, default)
    if value is None:
        return None
    wrong = isinstance(value, bool) != (kind is bool) or not isinstance(value, kind)
    if wrong:
        names = {int: "an integer", str: "a string", bool: "true or false"}
        raise ConfigError(f"{source}: {where}.{key}: expected {names[kind]}, got {value!r}")
    return value


def _path(table: dict[str, Any], key: str, source: Path, base: Path, where: str = "service") -> Path | None:
    value = _typed(table, key, str, source, where, None)
    if value is None:
        return None
    if not value.strip() or "\x00" in value:
        raise ConfigError(f"{source}: {where}.{key}: expected a path, got {value!r}")
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path
