"""The lint engine: files -> one parse each -> every selected matcher -> sorted findings.

`lint_source` is the library entry point for one text; `lint_paths` walks files
and folders. A file that cannot be read, decoded or parsed is one DL000 finding,
never an exception; a matcher that crashes on a file is reported as an error for
that file (exit code 2 in the CLI) while every other file is still checked.
"""

from __future__ import annotations

import io
import os
import tokenize
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from datalint.config import DEFAULT_EXCLUDES, Config
from datalint.errors import DatalintError, UsageError
from datalint.lint.catalog import Catalog, Matcher, Rule, load_catalog
from datalint.lint.module import Match, Module, Related, parse_noqa
from datalint.lint.project import Project, default_cache_dir

PARSE_ERROR_CODE = "DL000"


@dataclass(frozen=True, order=True)
class Finding:
    """One reported problem; sorts by path, line, column, code. Lines and columns are 1-based."""

    path: str
    line: int
    column: int
    code: str
    end_line: int = field(compare=False)
    end_column: int = field(compare=False)
    name: str = field(compare=False)
    severity: str = field(compare=False)
    message: str = field(compare=False)
    # Other places the finding rests on (a base class in another file): `note:` lines, JSON
    # `related`, SARIF `relatedLocations`.
    related: tuple[Related, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class FileError:
    """A file datalint itself failed on (a matcher bug): reported, and the run exits 2."""

    path: str
    message: str


@dataclass(frozen=True)
class LintReport:
    findings: tuple[Finding, ...]
    files: int
    errors: tuple[FileError, ...] = ()


class MatcherError(DatalintError):
    """A matcher raised, or its match does not fill the rule's message template."""


@dataclass(frozen=True)
class _ActiveRule:
    rule: Rule
    matcher: Matcher
    params: dict[str, Any]


class Linter:
    """The selected rules with their bound parameters, ready to check many files."""

    def __init__(
        self, config: Config | None = None, catalog: Catalog | None = None, project: Project | None = None
    ) -> None:
        self.config = config or Config()
        # The project the checked files belong to (cross-file facts); None: each text alone.
        self.project = project
        self.catalog = catalog or load_catalog(self.config.rule_paths)
        self.rules = tuple(
            _ActiveRule(rule, rule.matcher_function(), rule.bind(self.config.rule_options.get(rule.id)))
            for rule in select_rules(self.catalog, self.config)
        )

    def check_source(self, source: str | bytes, path: str = "<string>") -> list[Finding]:
        """Findings for one file's text (bytes are decoded like Python does: cookie, else UTF-8)."""
        rules = self._rules_for(path)
        if isinstance(source, bytes):
            text, problem = decode_source(source)
            if problem is not None:
                return self._unparsable(rules, path, "", problem, 1, 1)
        else:
            text = source
        try:
            module = Module.parse(text, path, self.config.start_method, self.project)
            if self.project is not None and path != "<string>" and os.path.isfile(path):
                raw = source if isinstance(source, bytes) else text.encode("utf-8")
                self.project.learn(Path(path), raw, module.tree)  # the same tree: parsed once
        except SyntaxError as exc:
            reason = f"syntax error: {exc.msg}"
            return self._unparsable(rules, path, text, reason, exc.lineno or 1, exc.offset or 1)
        except (ValueError, RecursionError, MemoryError) as exc:
            # NUL bytes (ValueError before 3.12) or nesting too deep for the parser.
            return self._unparsable(rules, path, text, f"cannot parse: {exc or type(exc).__name__}", 1, 1)
        # One place, one rule, one message, once: a base class's method reached through three
        # subclasses is one pitfall, not three.
        found = (f for active in rules for f in self._run(active, module))
        unique = {(f.line, f.column, f.code, f.message): f for f in found}
        return sorted(unique.values())

    def check_file(self, path: Path, shown_as: str | None = None) -> list[Finding]:
        name = shown_as or str(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            return self._unparsable(
                self._rules_for(name), name, "", f"cannot read: {exc.strerror or exc}", 1, 1
            )
        return self.check_source(data, name)

    def _rules_for(self, path: str) -> tuple[_ActiveRule, ...]:
        ignored = self.config.ignored_for(path) if path != "<string>" else ()
        if not ignored:
            return self.rules
        return tuple(a for a in self.rules if not a.rule.id.startswith(ignored))

    def _run(self, active: _ActiveRule, module: Module) -> Iterator[Finding]:
        rule = active.rule
        if rule.id == PARSE_ERROR_CODE:
            return
        try:
            for match in active.matcher(module, **active.params):
                finding = _finding(module, rule, match)
                noqa = module.noqa(finding.line)
                if noqa is None or not noqa.silences(rule.id):
                    yield finding
        except MatcherError:
            raise
        except Exception as exc:  # a bug in one matcher must name itself, not look like bad input
            where = f"{module.path}: rule {rule.id} (matcher {rule.matcher!r})"
            raise MatcherError(f"{where} failed: {type(exc).__name__}: {exc}") from exc

    def _unparsable(
        self, rules: Sequence[_ActiveRule], path: str, text: str, reason: str, line: int, column: int
    ) -> list[Finding]:
        rule = next((a.rule for a in rules if a.rule.id == PARSE_ERROR_CODE), None)
        if rule is None:
            return []
        lines = text.splitlines()
        line = min(max(line, 1), max(len(lines), 1))
        noqa = parse_noqa(lines[line - 1]) if lines else None
        if noqa is not None and noqa.silences(rule.id):
            return []
        message = rule.message.format(reason=reason)
        severity = rule.severity
        return [
            Finding(path, line, max(column, 1), rule.id, line, max(column, 1), rule.name, severity, message)
        ]


def select_rules(catalog: Catalog, config: Config) -> tuple[Rule, ...]:
    """The rules that run: the most specific matching select/ignore entry decides, like ruff.

    With no `select`, the base set is every on-by-default rule. `extend-select` adds
    (an off-by-default rule runs only when a select entry names it or its prefix);
    `ignore` removes; between a select and an ignore entry the longer prefix wins,
    and an ignore wins a tie.
    """
    chosen = []
    selects = (*(config.select or ()), *config.extend_select)
    for rule in catalog:
        selected = _longest(rule.id, selects)
        ignored = _longest(rule.id, config.ignore)
        if selected is None:
            on = config.select is None and rule.default
            if ignored is not None:
                on = False
        else:
            on = ignored is None or len(selected) > len(ignored)
        if on:
            chosen.append(rule)
    return tuple(chosen)


def _longest(code: str, prefixes: Iterable[str]) -> str | None:
    matching = [p for p in prefixes if code.startswith(p)]
    return max(matching, key=len) if matching else None


def decode_source(data: bytes) -> tuple[str, str | None]:
    """Decode source bytes as Python does (a coding cookie, else UTF-8); (text, problem)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        cookie_problem = None
    except SyntaxError as exc:  # a bad cookie, or undecodable first lines
        encoding, cookie_problem = "utf-8", exc.msg
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        detail = f"byte 0x{data[exc.start]:02x} at offset {exc.start} is not valid {encoding.upper()}"
        return "", f"cannot decode: {detail}; save the file as UTF-8 or declare its encoding"
    except LookupError as exc:
        return "", f"cannot decode: {exc}"
    if cookie_problem is not None:
        return "", f"cannot decode: {cookie_problem}"
    return text, None


def _finding(module: Module, rule: Rule, match: Match) -> Finding:
    node = match.node
    line = getattr(node, "lineno", 1)
    end_line = getattr(node, "end_lineno", None) or line
    column = _character_column(module, line, getattr(node, "col_offset", 0))
    end_column = _character_column(module, end_line, getattr(node, "end_col_offset", None) or 0)
    try:
        message = rule.message.format_map(match.fields)
    except (KeyError, IndexError, ValueError) as exc:
        raise MatcherError(
            f"{rule.path}: message template needs field {exc} that matcher {rule.matcher!r} "
            f"did not provide (it gave: {', '.join(match.fields) or 'none'})"
        ) from exc
    severity = rule.severity_for(match.start_method or module.effective_start_method)
    if end_line == line and end_column <= column:
        end_column = column + 1
    related = tuple(
        Related(display_path(Path(r.path)), r.line, r.message)
        for r in (*match.related, *module.related_for(node))
        if Path(r.path).resolve() != Path(module.path).resolve() or r.line != line
    )
    return Finding(
        module.path,
        line,
        column + 1,
        rule.id,
        end_line,
        end_column + 1,
        rule.name,
        severity,
        message,
        related,
    )


def _character_column(module: Module, line: int, byte_offset: int) -> int:
    """ast columns count UTF-8 bytes; reports count characters."""
    if not 0 < line <= len(module.lines):
        return byte_offset
    text = module.lines[line - 1]
    if text.isascii():
        return byte_offset
    return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="replace"))


def lint_source(source: str | bytes, path: str = "<string>", config: Config | None = None) -> list[Finding]:
    """Lint one file's text; the findings are sorted. Raises MatcherError if a rule crashes."""
    return Linter(config).check_source(source, path)


def iter_python_files(paths: Sequence[Path | str], config: Config) -> Iterator[Path]:
    """Files to lint: named files as given, `.py` files under named folders; sorted, no repeats.

    Walking skips DEFAULT_EXCLUDES folders and `exclude` globs; `exclude` also applies to
    named files, so a pre-commit run honours it. A missing path is a usage error.
    """
    seen: set[Path] = set()
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise UsageError(f"{given}: no such file or directory")
        candidates = _walk(path, config) if path.is_dir() else iter([path])
        for candidate in candidates:
            key = candidate.resolve()
            if key not in seen and not config.is_excluded(candidate):
                seen.add(key)
                yield candidate


def _walk(folder: Path, config: Config) -> Iterator[Path]:
    for current, dirs, files in os.walk(folder):
        base = Path(current)
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in DEFAULT_EXCLUDES and not d.endswith(".egg-info") and not config.is_excluded(base / d)
        )
        for name in sorted(files):
            if name.endswith(".py"):
                yield base / name


def lint_paths(
    paths: Sequence[Path | str],
    config: Config | None = None,
    catalog: Catalog | None = None,
    *,
    project: Project | None = None,
    jobs: int = 1,
    cache_dir: Path | Literal["default"] | None = "default",
) -> LintReport:
    """Lint files and folders as one project. Per-file isolation: one file's failure never stops the others.

    The files are first summarized (from the summary cache where their bytes are unchanged), so a
    Dataset in one file makes the reader it holds in another file worker code; then each file is
    linted with the project's cross-file facts. `jobs` > 1 lints in that many processes.
    """
    config = config or Config()
    files_to_lint = list(iter_python_files(paths, config))
    if project is None:
        folder = default_cache_dir() if cache_dir == "default" else cache_dir
        project = Project.for_paths(paths or ["."], folder)
    if jobs > 1 and len(files_to_lint) > 1:
        from datalint.lint.parallel import lint_in_processes

        note_holdings(project, files_to_lint)  # every worker starts knowing the whole project
        findings, errors = lint_in_processes(files_to_lint, config, catalog, project, jobs)
    else:
        findings, errors = _lint_in_one_pass(Linter(config, catalog, project), files_to_lint)
    return LintReport(tuple(sorted(findings)), len(files_to_lint), tuple(errors))


def _lint_in_one_pass(linter: Linter, paths: Sequence[Path]) -> tuple[list[Finding], list[FileError]]:
    """Each file parsed once: its summary comes from the tree its rules read.

    A file's rules may ask what later files will tell (a subclass elsewhere, a Dataset holding
    one of its classes); the project records those answers, and a file whose answers changed by
    the end is linted again (few are: only files whose classes other files extend or hold).
    """
    project = linter.project
    results: dict[Path, tuple[list[Finding], list[FileError], list[Any]]] = {}
    for path in paths:
        if project is not None:
            project.start_log()
        found, failed = _lint_serially(linter, [path])
        log = project.stop_log() if project is not None else []
        results[path] = (found, failed, log)
    findings: list[Finding] = []
    errors: list[FileError] = []
    for path, (found, failed, log) in results.items():
        if project is not None and log and not project.still_true(log):
            found, failed = _lint_serially(linter, [path])
        findings.extend(found)
        errors.extend(failed)
    return findings, errors


def _lint_serially(linter: Linter, paths: Sequence[Path]) -> tuple[list[Finding], list[FileError]]:
    findings: list[Finding] = []
    errors: list[FileError] = []
    for path in paths:
        shown = display_path(path)
        try:
            findings.extend(linter.check_file(path, shown))
        except Exception as exc:  # isolation boundary: per file
            errors.append(FileError(shown, str(exc) if isinstance(exc, MatcherError) else repr(exc)))
    return findings, errors


def note_holdings(project: Project, paths: Sequence[Path]) -> None:
    """Tell the project what every linted file says about the others, before any is linted."""
    for path in paths:
        try:
            project.learn(path)
        except Exception:  # isolation boundary: per file (the file itself is reported when linted)
            continue


def display_path(path: Path) -> str:
    """A path as users want to see it: relative to the current folder when inside it."""
    if not path.is_absolute():
        return os.path.normpath(path)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
