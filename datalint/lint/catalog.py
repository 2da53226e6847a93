"""The rule catalog: one TOML file per rule, loaded strictly into frozen `Rule` values.

A rule is data (id, name, severity, docs, examples, a `[check]` table); its
matcher is code (`datalint.lint.matchers.MATCHERS`). Loading binds each
`[check]` table to its matcher's keyword-only signature, so a typo in a rule
file fails at load time with the file named, not silently at lint time.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datalint import marshal_cache
from datalint.errors import DatalintError
from datalint.records import field, record

if TYPE_CHECKING:
    from datalint.config import Config

SEVERITIES: tuple[str, ...] = ("error", "warning", "info")
START_METHODS: tuple[str, ...] = ("fork", "spawn", "forkserver")
# Patterns as text: `re` compiles (and caches) each on first use, not at import.
CODE_PATTERN = r"^[A-Z]{2,}[0-9]{3}$"
NAME_PATTERN = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
EXPECT_MARKER = r"\s*#\s*expect:\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)\s*$"

REQUIRED_KEYS = frozenset(
    {"id", "name", "severity", "summary", "message", "why", "fix", "references", "check", "bad", "good"}
)
OPTIONAL_KEYS = frozenset({"spawn-severity", "default"})
EXAMPLE_KEYS = frozenset({"code", "title", "start-method", "config"})
_CODE_KEY, _EXAMPLE_OPTIONAL = frozenset({"code"}), EXAMPLE_KEYS - {"code"}

Matcher = Callable[..., Iterator[Any]]


class CatalogError(DatalintError):
    """A rule file that cannot be used: the message names the file and the key."""


@record
class Example:
    """A bad or good snippet of a rule: at once its test and its documentation."""

    code: str
    title: str = ""
    start_method: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict)  # per-rule options, as in [tool.datalint.rules.X]

    def expected(self) -> list[tuple[int, str]]:
        """(line, code) for each `# expect: DLnnn` marker, one entry per code."""
        found: list[tuple[int, str]] = []
        for number, line in enumerate(self.code.splitlines(), start=1):
            marker = re.search(EXPECT_MARKER, line)
            if marker:
                found.extend((number, code.strip()) for code in marker.group("codes").split(","))
        return found

    @property
    def display_code(self) -> str:
        """The snippet with its `# expect:` markers removed, for docs."""
        return "\n".join(re.sub(EXPECT_MARKER, "", line) for line in self.code.strip("\n").splitlines())


@record
class Rule:
    id: str
    name: str
    severity: str
    summary: str
    message: str
    why: str
    fix: str
    references: tuple[str, ...]
    matcher: str
    params: Mapping[str, Any]  # the [check] table, snake_case keys, without `matcher`
    bad: tuple[Example, ...]
    good: tuple[Example, ...]
    path: Path
    spawn_severity: str | None = None  # replaces `severity` under the spawn / forkserver start methods
    default: bool = True  # off-by-default rules run only when selected explicitly

    def severity_for(self, start_method: str) -> str:
        """The severity in context: pickling problems are errors under spawn, warnings under fork."""
        if start_method != "fork" and self.spawn_severity is not None:
            return self.spawn_severity
        return self.severity

    def matcher_function(self) -> Matcher:
        """The matcher; only its family's module is imported."""
        from datalint.lint.matchers import matcher

        return matcher(self.matcher)

    def bind(self, options: Mapping[str, Any] | None = None, where: str = "") -> dict[str, Any]:
        """The matcher's keyword arguments: the rule's [check] table overlaid by user options.

        `options` uses config spelling: `calls = [...]` replaces a parameter,
        `extend-calls = [...]` appends to a list parameter. Errors name `where`.
        """
        return bind_options(self, options or {}, where or f"options of {self.id}")


@record
class Catalog:
    """Every known rule, sorted by id."""

    rules: tuple[Rule, ...]

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def get(self, code: str) -> Rule | None:
        return self._by_id.get(code.upper())

    @cached_property
    def _by_id(self) -> dict[str, Rule]:
        return {rule.id: rule for rule in self.rules}

    def matching(self, prefix: str) -> tuple[Rule, ...]:
        """Rules whose code starts with `prefix` (`DL2`, `DL201`, `DL`)."""
        prefix = prefix.upper()
        return tuple(rule for rule in self.rules if rule.id.startswith(prefix))


def rules_dir() -> Path:
    """The bundled catalog: `datalint/rules` in a wheel, the checkout's `rules/` in an editable install."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "rules", package.parent / "rules"):
        if candidate.is_dir():
            return candidate
    raise CatalogError(
        f"the rule catalog is missing: neither {package / 'rules'} nor {package.parent / 'rules'}"
    )


def load_catalog(rule_paths: Sequence[Path | str] = ()) -> Catalog:
    """The bundled rules plus those in `rule_paths` (a team's own TOML rules)."""
    return _load_catalog(tuple(Path(p).resolve() for p in rule_paths))


@lru_cache(maxsize=8)
def _load_catalog(extra: tuple[Path, ...]) -> Catalog:
    from datalint.lint.matchers import known

    names = dict.fromkeys(known())  # no family is imported: the catalog only names matchers
    rules: dict[str, Rule] = {}
    for directory in (rules_dir(), *extra):
        if not directory.is_dir():
            raise CatalogError(f"rule path {directory} is not a directory")
        for path, data in _rule_tables(directory).items():
            rule = rule_from_table(path, data, names)
            if rule.id in rules:
                raise CatalogError(f"{path}: rule {rule.id} is already defined in {rules[rule.id].path}")
            rules[rule.id] = rule
    return Catalog(tuple(sorted(rules.values(), key=lambda r: r.id)))


def load_rule(path: Path, matchers: Mapping[str, Any]) -> Rule:
    """Read and check one rule file; every problem is a CatalogError naming `path`."""
    return rule_from_table(path, _read_table(path), matchers)


def _read_table(path: Path) -> dict[str, Any]:
    tomllib = _toml()
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{path}: cannot read rule file: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{path}: not valid TOML: {exc}") from exc


def _rule_tables(directory: Path) -> dict[Path, dict[str, Any]]:
    """The parsed TOML of every rule file in `directory`, sorted by name.

    Parsing the catalog's TOML is most of `datalint check`'s start-up, so the parsed tables are
    kept in a marshal file under the user cache folder (the fastest format the interpreter
    reads, one file per Python version), reused while every file's size and mtime are
    unchanged. The tables are validated again on every load; only the parse is cached.
    """
    paths = sorted(directory / name for name in os.listdir(directory) if name.endswith(".toml"))
    stamp = {p.name: _file_stamp(p) for p in paths}
    cache = marshal_cache.cache_path("catalog", directory)
    cached = marshal_cache.read(cache, stamp)
    if cached is not None:
        return {directory / name: table for name, table in cached.items()}
    tables = {p: _read_table(p) for p in paths}
    marshal_cache.write(cache, stamp, {p.name: t for p, t in tables.items()})
    return tables


def _file_stamp(path: Path) -> list[int]:
    status = path.stat()
    return [status.st_mtime_ns, status.st_size]


def rule_from_table(path: Path, data: dict[str, Any], matchers: Mapping[str, Any]) -> Rule:
    """Check one rule file's parsed table; every problem is a CatalogError naming `path`."""
    _check_keys(path, "", data, REQUIRED_KEYS, OPTIONAL_KEYS)
    rule = _build_rule(path, data, matchers)
    _check_identity(path, rule)
    bind_options(rule, {}, f"{path}: [check]")
    for kind, examples in (("bad", rule.bad), ("good", rule.good)):
        for number, example in enumerate(examples, start=1):
            if example.config:
                bind_options(rule, example.config, f"{path}: [[{kind}]] #{number} config")
    return rule


def _build_rule(path: Path, data: dict[str, Any], matchers: Mapping[str, Any]) -> Rule:
    text = {key: _string(path, data, key) for key in ("id", "name", "summary", "message", "why", "fix")}
    check = data["check"]
    if not isinstance(check, dict) or not isinstance(check.get("matcher"), str):
        raise CatalogError(f"{path}: [check] must be a table with a string `matcher`")
    if check["matcher"] not in matchers:
        known = ", ".join(sorted(matchers)) or "none"
        raise CatalogError(f"{path}: [check] matcher {check['matcher']!r} is unknown (known: {known})")
    params = {_snake(key): value for key, value in check.items() if key != "matcher"}
    references = data["references"]
    if not isinstance(references, list) or not all(isinstance(r, str) for r in references):
        raise CatalogError(f"{path}: `references` must be a list of strings")
    default = data.get("default", True)
    if not isinstance(default, bool):
        raise CatalogError(f"{path}: `default` must be true or false")
    return Rule(
        **text,
        severity=_severity(path, data, "severity"),
        spawn_severity=_severity(path, data, "spawn-severity") if "spawn-severity" in data else None,
        references=tuple(references),
        matcher=check["matcher"],
        params=params,
        bad=_examples(path, data, "bad"),
        good=_examples(path, data, "good"),
        path=path,
        default=default,
    )


def _check_identity(path: Path, rule: Rule) -> None:
    if not re.match(CODE_PATTERN, rule.id):
        raise CatalogError(f"{path}: `id` {rule.id!r} must look like DL123 (capital letters, three digits)")
    if not re.match(NAME_PATTERN, rule.name):
        raise CatalogError(f"{path}: `name` {rule.name!r} must be lowercase words joined by '-'")
    if path.stem != f"{rule.id}-{rule.name}":
        raise CatalogError(f"{path}: the file must be named {rule.id}-{rule.name}.toml (its id and name)")


def _examples(path: Path, data: dict[str, Any], kind: str) -> tuple[Example, ...]:
    tables = data[kind]
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise CatalogError(f"{path}: needs at least one [[{kind}]] example table")
    examples = []
    for number, table in enumerate(tables, start=1):
        where = f"[[{kind}]] #{number}"
        _check_keys(path, where, table, _CODE_KEY, _EXAMPLE_OPTIONAL)
        start_method = table.get("start-method")
        if start_method is not None and start_method not in START_METHODS:
            raise CatalogError(f"{path}: {where} start-method must be one of {', '.join(START_METHODS)}")
        config = table.get("config", {})
        if not isinstance(config, dict) or not isinstance(table["code"], str):
            raise CatalogError(f"{path}: {where} needs `code` as a string and `config` as a table")
        examples.append(Example(table["code"], str(table.get("title", "")), start_method, config))
    return tuple(examples)


def bind_options(rule: Rule, options: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Merge the rule's [check] parameters with user `options` and bind them to the matcher."""
    from datalint.lint.matchers import REQUIRED, keyword_parameters

    try:
        parameters = keyword_parameters(rule.matcher)
    except KeyError:
        raise CatalogError(f"{where}: matcher {rule.matcher!r} of {rule.id} is unknown") from None
    if parameters is None:
        raise CatalogError(f"{where}: matcher {rule.matcher!r} must be `def m(module, *, ...)`")
    defaults = {name: _REQUIRED if value is REQUIRED else value for name, value in parameters.items()}
    params = dict(rule.params)
    for key, value in options.items():
        name = _snake(key)
        extend = name.startswith("extend_") and name[len("extend_") :] in defaults
        target = name[len("extend_") :] if extend else name
        if target not in defaults:
            known = ", ".join(k.replace("_", "-") for k in defaults)
            raise CatalogError(f"{where}: unknown option {key!r} for {rule.id} (options: {known or 'none'})")
        current = params.get(target, defaults[target])
        if extend:
            if not isinstance(value, list) or not isinstance(current, list | tuple):
                raise CatalogError(f"{where}: {key!r} needs a list, and {target!r} must be a list option")
            params[target] = [*current, *value]
        else:
            _check_kind(where, key, value, current)
            params[target] = value
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise CatalogError(
            f"{where}: parameters do not fit matcher {rule.matcher!r}: unknown {', '.join(unknown)} "
            f"(it takes: {', '.join(defaults) or 'nothing'})"
        )
    missing = sorted(
        name for name, default in defaults.items() if default is _REQUIRED and name not in params
    )
    if missing:
        raise CatalogError(
            f"{where}: parameters do not fit matcher {rule.matcher!r}: missing {', '.join(missing)}"
        )
    for name, value in params.items():
        _check_kind(where, name.replace("_", "-"), value, defaults[name])
    return params


_REQUIRED = object()  # a keyword-only parameter without a default


def _check_kind(where: str, key: str, value: Any, default: Any) -> None:
    """A user value must have the type of the parameter's default (list, str, int, bool...)."""
    if default is _REQUIRED or default is None:
        return
    sequence = (list, tuple)
    if isinstance(default, sequence) and isinstance(value, sequence):
        return
    if isinstance(default, bool) or isinstance(value, bool):
        ok = isinstance(default, bool) and isinstance(value, bool)
    elif isinstance(default, int | float):
        ok = isinstance(value, int | float)
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise CatalogError(f"{where}: {key!r} must be a {type(default).__name__}, got {value!r}")


def _check_keys(
    path: Path, where: str, table: Mapping[str, Any], required: frozenset[str], optional: frozenset[str]
) -> None:
    keys = table.keys()
    if keys - required - optional or required - keys:  # the messages are built only for a bad file
        place = f"{path}: {where} " if where else f"{path}: "
        unknown = sorted(keys - required - optional)
        if unknown:
            raise CatalogError(f"{place}unknown key(s) {', '.join(unknown)}")
        raise CatalogError(f"{place}missing key(s) {', '.join(sorted(required - keys))}")


def _string(path: Path, data: Mapping[str, Any], key: str) -> str:
    value = data[key]
    if not isinstance(value, str) or not value.strip():
        raise CatalogError(f"{path}: `{key}` must be a non-empty string")
    return value.strip()


def _severity(path: Path, data: Mapping[str, Any], key: str) -> str:
    value = data[key]
    if value not in SEVERITIES:
        raise CatalogError(f"{path}: `{key}` must be one of {', '.join(SEVERITIES)}, got {value!r}")
    return str(value)


def _snake(key: str) -> str:
    return key.replace("-", "_")


def _toml() -> Any:
    """tomllib, imported on first use: a warm start reads no TOML (parsed catalog cached)."""
    import tomllib

    return tomllib


def validate_config(config: Config, catalog: Catalog) -> None:
    """Every code and prefix a configuration names must name a rule of `catalog`, and every rule
    option must fit its matcher; a `ConfigError` naming the file and the key otherwise. (The
    configuration is read below the linter, in datalint/config.py; what it may name is the
    catalog's to say.)"""
    from datalint.config import ConfigError

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
