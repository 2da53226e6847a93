"""`datalint check [PATH ...]`: lint Python files for DataLoader / Dataset pitfalls.

Exit codes: 0 nothing reported, 1 findings, 2 usage, config or internal error.
The report goes to stdout (or --output-file), the summary to stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from datalint.errors import UsageError

FORMATS = ("text", "json", "sarif", "github")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "check",
        help="lint Python files for DataLoader / Dataset pitfalls",
        description="Lint Python files for DataLoader and Dataset pitfalls. "
        "Exit 0: nothing reported; 1: findings; 2: usage, config or internal error.",
    )
    parser.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .)")
    parser.add_argument("--format", choices=FORMATS, default="text", help="report format (default: text)")
    parser.add_argument("--output-file", "-o", metavar="FILE", help="write the report here instead of stdout")
    parser.add_argument(
        "--select", type=_codes, metavar="CODES", help="only these codes or prefixes (DL0,DL101)"
    )
    parser.add_argument(
        "--extend-select", type=_codes, default=[], metavar="CODES", help="add codes or prefixes"
    )
    parser.add_argument("--ignore", type=_codes, default=[], metavar="CODES", help="skip codes or prefixes")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="pyproject.toml (or datalint.toml) to read instead of "
        "the nearest pyproject.toml with [tool.datalint]",
    )
    parser.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    parser.add_argument(
        "--start-method",
        choices=("spawn", "forkserver", "fork"),
        help="start method to assume where the code names none (default: spawn)",
    )
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even when findings are reported")
    parser.add_argument("--statistics", action="store_true", help="print counts per rule instead of findings")
    parser.add_argument(
        "--jobs", "-j", type=_jobs, default=1, metavar="N", help="lint in N processes (default: 1)"
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="do not read or write the per-file summary cache"
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


def _codes(text: str) -> list[str]:
    return [code.strip().upper() for code in text.split(",") if code.strip()]


def run(args: argparse.Namespace) -> int:
    from datalint.config import Config, load_config, validate
    from datalint.lint.catalog import load_catalog
    from datalint.lint.engine import lint_paths, select_rules
    from datalint.lint.formats import FORMATTERS, statistics, summary

    if args.isolated and args.config:
        raise UsageError("--isolated and --config exclude each other")
    config = Config() if args.isolated else load_config(args.config)
    config = config.with_overrides(
        select=args.select,
        extend_select=args.extend_select,
        ignore=args.ignore,
        start_method=args.start_method,
    )
    catalog = load_catalog(config.rule_paths)
    validate(config, catalog)
    if args.no_cache:
        report = lint_paths(args.paths or ["."], config, catalog, jobs=args.jobs, cache_dir=None)
    else:
        report = lint_paths(args.paths or ["."], config, catalog, jobs=args.jobs)

    findings = list(report.findings)
    if args.statistics:
        output = statistics(findings, as_json=args.format == "json") if findings else ""
    else:
        output = FORMATTERS[args.format](findings, select_rules(catalog, config))
    _write(output, args.output_file)
    for error in report.errors:
        print(f"datalint: error: {error.message}", file=sys.stderr)
    if findings:
        print(summary(findings, report.files), file=sys.stderr)
    if report.errors:
        return 2
    return 1 if findings and not args.exit_zero else 0


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
