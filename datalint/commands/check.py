"""`datalint check [PATH ...]`: lint Python files and notebooks for DataLoader / Dataset pitfalls.

Exit codes: 0 nothing reported, 1 findings, 2 usage, config or internal error.
The report goes to stdout (or --output-file), the summary to stderr. The flags follow ruff's
where ruff has one (`--output-format`, `-` with `--stdin-filename`, `--fix`, `--diff`,
`--add-noqa`, `--show-settings`, `--show-files`, `--config KEY=VALUE`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datalint.commands.help import HelpFormatter
from datalint.errors import UsageError
from datalint.text import printable, shown_name

if TYPE_CHECKING:
    from datalint.config import Config, ConfigResolver
    from datalint.lint.engine import Finding, LinterCache

# The formats `datalint.lint.formats.FORMATTERS` writes, plus aliases; kept here so that building
# the parser imports nothing but argparse.
FORMATS = ("text", "full", "json", "json-lines", "sarif", "github", "gitlab", "junit", "rdjson")
FORMAT_ALIASES = {"concise": "text", "txt": "text"}
STDIN = "-"
QUIET_WHEN_CLEAN = frozenset({"text", "full", "github", "json-lines"})  # formats whose clean report is empty


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "check",
        help="lint Python files for DataLoader / Dataset pitfalls",
        description="Lint Python files and notebooks for DataLoader and Dataset pitfalls. "
        "Exit 0: nothing reported; 1: findings; 2: usage, config or internal error.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "paths", nargs="*", metavar="PATH", help="files or folders (default: .); - reads stdin"
    )
    parser.add_argument(
        "--output-format",
        "--format",
        dest="format",
        choices=(*FORMATS, *FORMAT_ALIASES),
        default="text",
        metavar="FORMAT",
        help=f"report format: {', '.join(FORMATS)} (default: text)",
    )
    parser.add_argument("--output-file", "-o", metavar="FILE", help="write the report here instead of stdout")
    parser.add_argument("--output", dest="output_file", help=argparse.SUPPRESS)
    parser.add_argument(
        "--select", type=_codes, metavar="CODES", help="only these codes or prefixes (DL0,DL101)"
    )
    parser.add_argument(
        "--extend-select", type=_codes, default=[], metavar="CODES", help="add codes or prefixes"
    )
    parser.add_argument("--ignore", type=_codes, default=[], metavar="CODES", help="skip codes or prefixes")
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="FILE|KEY=VALUE",
        help="a pyproject.toml or datalint.toml to use for every file instead of each file's nearest "
        "pyproject.toml with [tool.datalint]; or one setting in TOML, e.g. 'select = [\"DL0\"]' (repeatable)",
    )
    parser.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    parser.add_argument(
        "--start-method",
        choices=("spawn", "forkserver", "fork"),
        help="start method to assume where the code names none "
        "(default: forkserver if requires-python is >= 3.14, else spawn)",
    )
    parser.add_argument("--stdin-filename", metavar="PATH", help="the path of the code read from stdin (-)")
    fixing = parser.add_argument_group("fixes")
    fixing.add_argument("--fix", action="store_true", help="apply the safe fixes to the files")
    fixing.add_argument("--no-fix", dest="fix", action="store_false", help=argparse.SUPPRESS)
    fixing.add_argument(
        "--unsafe-fixes", action="store_true", help="also apply fixes that may change behaviour"
    )
    fixing.add_argument(
        "--diff", action="store_true", help="print the fixes as a diff instead of applying them"
    )
    fixing.add_argument("--show-fixes", action="store_true", help="list what --fix fixed")
    fixing.add_argument(
        "--exit-non-zero-on-fix", action="store_true", help="exit 1 when --fix changed something"
    )
    fixing.add_argument(
        "--add-noqa", action="store_true", help="add a `# noqa: CODE` for every finding, to adopt datalint"
    )
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even when findings are reported")
    parser.add_argument("--statistics", action="store_true", help="print counts per rule instead of findings")
    parser.add_argument("--show-files", action="store_true", help="list the files that would be checked")
    parser.add_argument(
        "--show-settings", action="store_true", help="print the settings the first file is checked with"
    )
    parser.add_argument(
        "--jobs", "-j", type=_jobs, default=1, metavar="N", help="lint in N processes (default: 1)"
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="do not read or write the per-file summary cache"
    )
    parser.add_argument(
        "--max-file-size",
        type=_file_size,
        metavar="SIZE",
        help="skip larger files with a DL000 (e.g. 10MB, the default; 1GiB)",
    )
    parser.set_defaults(run=run)


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of processes, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 process, got {value}")
    return value


def _file_size(text: str) -> int:
    from datalint.commands.arguments import size

    value = size(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a size above 0, got {text!r}")
    return value


def _codes(text: str) -> list[str]:
    codes = [code.strip().upper() for code in text.split(",") if code.strip()]
    if not codes:  # `--select ''` would check nothing and pass: a usage error, not a silent green
        raise argparse.ArgumentTypeError(f"{text!r} names no rule code; pass codes or prefixes (DL0,DL101)")
    return codes


def resolver_for(args: argparse.Namespace) -> ConfigResolver:
    """Which configuration each file gets: --isolated, one --config FILE, or per-file discovery."""
    from datalint.config import Config, ConfigResolver, config_from_file, is_inline_setting, parse_inline

    files = [value for value in args.config if not is_inline_setting(value)]
    inline = parse_inline([value for value in args.config if is_inline_setting(value)])
    if len(files) > 1:
        raise UsageError(f"--config names {len(files)} files ({', '.join(files)}); give at most one")
    if args.isolated and files:
        raise UsageError("--isolated and --config FILE exclude each other")

    def overrides(config: Config) -> Config:
        return config.with_overrides(
            select=args.select,
            extend_select=args.extend_select,
            ignore=args.ignore,
            start_method=args.start_method,
            max_file_size=args.max_file_size,
        )

    fixed = None
    if files:
        source = Path(files[0])
        if not source.is_file():
            raise UsageError(f"--config {source}: no such file")
        fixed = config_from_file(source, inline)
    elif args.isolated:
        from datalint.config import config_from_table

        fixed = config_from_table(inline, Path.cwd() / "--config") if inline else Config(root=Path.cwd())
    return ConfigResolver(fixed=fixed, inline=inline, overrides=overrides)


def run(args: argparse.Namespace) -> int:
    from datalint.lint.catalog import load_catalog, validate_config
    from datalint.lint.engine import Linter, LinterCache, display_path, iter_python_files

    args.format = FORMAT_ALIASES.get(args.format, args.format)
    _check_combinations(args)
    resolver = resolver_for(args)
    # `-`, or no path at all with --stdin-filename (as ruff reads it), means the code comes on stdin.
    reading_stdin = args.paths == [STDIN] or (not args.paths and args.stdin_filename is not None)
    if STDIN in args.paths and not reading_stdin:
        raise UsageError("- (stdin) cannot be combined with other paths")
    stdin_path = args.stdin_filename or STDIN
    anchor = Path(args.stdin_filename or ".") if reading_stdin else None
    files = (
        []
        if reading_stdin
        else list(iter_python_files(args.paths or ["."], resolver.for_path(Path.cwd()), resolver))
    )
    if anchor is not None:
        resolver.for_path(anchor)
    catalogs = {}
    for config in resolver.configs:
        if config.rule_paths not in catalogs:
            catalogs[config.rule_paths] = load_catalog(config.rule_paths)
        validate_config(config, catalogs[config.rule_paths])
    if args.show_files:
        sys.stdout.write("".join(f"{display_path(path)}\n" for path in files))
        return 0
    first = anchor or (files[0] if files else Path.cwd())
    if args.show_settings:
        sys.stdout.write(settings_text(resolver.for_path(first), display_path(Path(first))))
        return 0
    base = resolver.for_path(first)
    linters = LinterCache(Linter(base, catalogs[base.rule_paths]), resolver)
    if reading_stdin:
        return _check_stdin(args, linters, stdin_path, anchor or Path("."))
    return _check_files(args, linters, files)


def _check_combinations(args: argparse.Namespace) -> None:
    if args.add_noqa and (args.fix or args.diff):
        raise UsageError("--add-noqa cannot be combined with --fix or --diff")
    if args.stdin_filename and args.paths and args.paths != [STDIN]:
        raise UsageError("--stdin-filename names the code read from stdin: give - or no path, not files")


def _check_files(args: argparse.Namespace, linters: LinterCache, files: list[Path]) -> int:
    from datalint.lint.engine import lint_paths

    resolver = linters.resolver
    config, catalog = linters.default.config, linters.default.catalog
    if args.no_cache:
        report = lint_paths(files, config, catalog, resolver=resolver, jobs=args.jobs, cache_dir=None)
    else:
        report = lint_paths(files, config, catalog, resolver=resolver, jobs=args.jobs)
    findings = list(report.findings)
    if args.add_noqa:
        return _add_noqa(findings)
    fixed: list[Finding] = []
    diffs: list[str] = []
    problems = [error.message for error in report.errors]
    if args.fix or args.diff:
        findings, fixed, diffs, not_fixed = _apply_fixes(args, linters, findings)
        problems += not_fixed
    if args.diff:
        sys.stdout.write("".join(diffs))
        for problem in problems:
            print(f"datalint: error: {printable(problem)}", file=sys.stderr)
        if fixed:
            print(f"Would fix {_plural(len(fixed), 'finding')}.", file=sys.stderr)
        return 2 if problems else (1 if diffs else 0)
    _report(args, findings, linters, {})
    for problem in problems:
        print(f"datalint: error: {printable(problem)}", file=sys.stderr)
    _summarize(args, findings, fixed, report.files)
    if problems:
        return 2
    return _exit_code(args, findings, fixed)


def _check_stdin(args: argparse.Namespace, linters: LinterCache, path: str, anchor: Path) -> int:
    from datalint.lint.engine import decode_source, is_notebook
    from datalint.lint.fixes import fix_source, unified_diff

    if args.add_noqa:
        raise UsageError("--add-noqa needs files, not stdin")
    data = sys.stdin.buffer.read()
    linter = linters.for_path(anchor)
    fixed: list[Finding]
    if linter.config.is_excluded(anchor) and args.stdin_filename:
        return 0  # an excluded path stays excluded when its text comes through stdin (editors, hooks)
    if len(data) > linter.config.max_file_size:
        findings, fixed, text = linter.too_large(path, len(data)), [], ""
    elif is_notebook(path):
        findings = linter.check_notebook(data, path)
        text = data.decode("utf-8", errors="replace")
        fixed = []
    else:
        text, problem = decode_source(data)
        if problem is not None:
            findings, fixed = linter.check_source(data, path), []
        elif args.fix or args.diff:
            outcome = fix_source(linter, text, path, unsafe=args.unsafe_fixes)
            findings, fixed = list(outcome.remaining), list(outcome.fixed)
            if args.diff:
                sys.stdout.write(unified_diff(text, outcome.text, path))
                return 1 if fixed else 0
            sys.stdout.write(outcome.text)  # --fix on stdin: the fixed code goes to stdout, as ruff does
            sys.stdout.flush()
            _report(args, findings, linters, {path: outcome.text}, to_stderr=True)
            _summarize(args, findings, fixed, 1)
            return _exit_code(args, findings, fixed)
        else:
            findings, fixed = linter.check_source(text, path), []
    _report(args, findings, linters, {path: text})
    _summarize(args, findings, fixed, 1)
    return _exit_code(args, findings, fixed)


def _apply_fixes(
    args: argparse.Namespace, linters: LinterCache, findings: list[Finding]
) -> tuple[list[Finding], list[Finding], list[str], list[str]]:
    """Fix each file with an applicable fix; (remaining findings, fixed findings, diffs, problems).

    A file that cannot be read as UTF-8 or written keeps its findings and is named in `problems`;
    the other files are still fixed.
    """
    from datalint.lint.engine import is_notebook, sort_key
    from datalint.lint.fixes import fix_notebook, fix_source, unified_diff

    fixable_paths = sorted(
        {f.path for f in findings if f.fix is not None and f.fix.applies(args.unsafe_fixes)}
    )
    remaining = [f for f in findings if f.path not in fixable_paths]
    fixed: list[Finding] = []
    diffs: list[str] = []
    problems: list[str] = []
    for path in fixable_paths:
        file = Path(path)
        try:
            bom, text = _read_for_fix(file)
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{path}: not fixed: cannot read it as UTF-8: {exc}")
            remaining.extend(f for f in findings if f.path == path)
            continue
        if is_notebook(path):
            outcome = fix_notebook(linters.for_path(file), text, path, unsafe=args.unsafe_fixes)
        else:
            outcome = fix_source(linters.for_path(file), text, path, unsafe=args.unsafe_fixes)
        if outcome.text != text and args.diff:
            diffs.append(unified_diff(text, outcome.text, path))
        elif outcome.text != text:
            try:
                file.write_bytes(bom + outcome.text.encode("utf-8"))
            except OSError as exc:
                problems.append(f"{path}: not fixed: cannot write it: {exc.strerror or exc}")
                remaining.extend(f for f in findings if f.path == path)
                continue
        remaining.extend(outcome.remaining)
        fixed.extend(outcome.fixed)
    return sorted(remaining, key=sort_key), fixed, diffs, problems


_BOM = b"\xef\xbb\xbf"


def _read_for_fix(file: Path) -> tuple[bytes, str]:
    """(byte-order mark or b"", text): fixes edit UTF-8 text; line endings are kept as they are."""
    data = file.read_bytes()
    bom = _BOM if data.startswith(_BOM) else b""
    return bom, data[len(bom) :].decode("utf-8")


def _add_noqa(findings: list[Finding]) -> int:
    from datalint.lint.engine import PARSE_ERROR_CODE, UNUSED_NOQA_CODE, is_notebook
    from datalint.lint.noqa import add_noqa

    by_path: dict[str, dict[int, set[str]]] = {}
    for f in findings:
        if f.code in (PARSE_ERROR_CODE, UNUSED_NOQA_CODE) or is_notebook(f.path):
            continue
        by_path.setdefault(f.path, {}).setdefault(f.line, set()).add(f.code)
    total = 0
    problems = 0
    for path, codes in sorted(by_path.items()):
        file = Path(path)
        try:
            bom, text = _read_for_fix(file)
            new_text, added = add_noqa(text, codes)
            if added:
                file.write_bytes(bom + new_text.encode("utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            print(f"datalint: error: {path}: no noqa added: {exc}", file=sys.stderr)
            problems += 1
            continue
        total += added
    print(f"Added {_plural(total, 'noqa directive')}.", file=sys.stderr)
    return 2 if problems else 0


def _report(
    args: argparse.Namespace,
    findings: list[Finding],
    linters: LinterCache,
    texts: dict[str, str],
    to_stderr: bool = False,
) -> None:
    if not findings and args.format in QUIET_WHEN_CLEAN:
        _write("", args.output_file)  # nothing to say: skip loading the formatters
        return
    from datalint.lint.engine import select_rules
    from datalint.lint.formats import FORMATTERS, FileLines, statistics

    if args.statistics:
        output = statistics(findings, as_json=args.format == "json") if findings else ""
    else:
        rules = select_rules(linters.default.catalog, linters.default.config)
        output = FORMATTERS[args.format](findings, rules, FileLines(texts))
    if to_stderr and args.output_file is None:
        sys.stderr.write(output)
        return
    _write(output, args.output_file)


def _summarize(args: argparse.Namespace, findings: list[Finding], fixed: list[Finding], files: int) -> None:
    if fixed:
        print(f"Fixed {_plural(len(fixed), 'finding')} ({len(findings)} remaining).", file=sys.stderr)
        if args.show_fixes:
            for f in fixed:
                message = f.fix.message if f.fix is not None else ""
                print(f"  {shown_name(f.path)}:{f.line}: {f.code} ({f.name}): {message}", file=sys.stderr)
    if findings:
        from datalint.lint.formats import summary

        line = summary(findings, files)
        fixable = sum(1 for f in findings if f.fix is not None)
        safe = sum(1 for f in findings if f.fix is not None and f.fix.applicability == "safe")
        if fixable and not args.fix:
            unsafe = fixable - safe
            line += f" {safe} fixable with --fix" + (
                f" ({unsafe} more with --fix --unsafe-fixes)." if unsafe else "."
            )
        print(line, file=sys.stderr)


def _exit_code(args: argparse.Namespace, findings: list[Finding], fixed: list[Finding]) -> int:
    if findings and not args.exit_zero:
        return 1
    return 1 if fixed and args.exit_non_zero_on_fix else 0


def settings_text(config: Config, path: str) -> str:
    """--show-settings: what the file is checked with, and where each setting comes from."""
    from datalint.config import DEFAULT_EXCLUDES
    from datalint.lint.catalog import load_catalog
    from datalint.lint.engine import select_rules

    rules = select_rules(load_catalog(config.rule_paths), config)
    rows: list[tuple[str, Any]] = [
        ("file", path),
        ("configuration", str(config.source) if config.source else "none found (defaults)"),
        ("root", str(config.root)),
        ("select", list(config.select) if config.select is not None else "every on-by-default rule"),
        ("extend-select", list(config.extend_select)),
        ("ignore", list(config.ignore)),
        ("per-file-ignores", {pattern: list(codes) for pattern, codes in config.per_file_ignores}),
        ("exclude", list(config.exclude)),
        ("default excludes", sorted(DEFAULT_EXCLUDES) if config.default_excludes else "replaced by exclude"),
        ("respect-gitignore", config.respect_gitignore),
        ("max-file-size", f"{config.max_file_size:,} bytes"),
        ("start-method", f"{config.start_method} ({config.start_method_reason})"),
        ("rule-paths", [str(p) for p in config.rule_paths]),
        ("rules", {code: dict(options) for code, options in config.rule_options.items()}),
        ("rules that run", " ".join(rule.id for rule in rules)),
    ]
    return "".join(f"{key}: {value}\n" for key, value in rows)


def _write(output: str, path: str | None) -> None:
    """Write the report (an empty text report prints nothing: quiet when the code is fine)."""
    if path is not None:
        try:
            Path(path).write_text(output, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--output-file {path}: {exc.strerror or exc}") from exc
    elif output:
        sys.stdout.write(output)
        sys.stdout.flush()


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
