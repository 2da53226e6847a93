"""`datalint rule CODE` prints one rule's docs; `datalint rules` lists the catalog."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from datalint.errors import UsageError

if TYPE_CHECKING:
    from datalint.lint.catalog import Catalog, Rule


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    one = subparsers.add_parser(
        "rule", help="explain one rule", description="Print a rule's docs: why it matters, the fix, examples."
    )
    one.add_argument(
        "code",
        nargs="?",
        metavar="CODE",
        help="a rule code or name, e.g. DL001 or prefetch-factor-without-workers",
    )
    one.add_argument("--all", action="store_true", help="print every rule's docs")
    one.add_argument("--config", metavar="FILE", help="configuration whose rule-paths add team rules")
    one.set_defaults(run=run_rule)
    every = subparsers.add_parser("rules", help="list every rule", description="List the rule catalog.")
    every.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    every.add_argument("--config", metavar="FILE", help="configuration whose rule-paths add team rules")
    every.set_defaults(run=run_rules)


def _catalog(config_path: str | None) -> Catalog:
    from datalint.config import load_config
    from datalint.lint.catalog import load_catalog

    return load_catalog(load_config(config_path).rule_paths)


def run_rule(args: argparse.Namespace) -> int:
    catalog = _catalog(args.config)
    if args.all:
        if args.code:
            raise UsageError("give a rule code or --all, not both")
        sys.stdout.write("\n".join(rule_text(rule) for rule in catalog))
        return 0
    if not args.code:
        raise UsageError("name a rule (`datalint rule DL001`), or pass --all")
    sys.stdout.write(rule_text(find_rule(catalog, args.code)))
    return 0


def find_rule(catalog: Catalog, wanted: str) -> Rule:
    """A rule by code (DL001, case-insensitive) or by name, as every finding prints it."""
    import difflib

    rule = catalog.get(wanted) or next((r for r in catalog if r.name == wanted.strip().lower()), None)
    if rule is not None:
        return rule
    spellings = [*(r.id for r in catalog), *(r.name for r in catalog)]
    close = difflib.get_close_matches(wanted.strip(), spellings, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise UsageError(f"no rule {wanted!r}{hint} (`datalint rules` lists them)")


def run_rules(args: argparse.Namespace) -> int:
    catalog = _catalog(args.config)
    if args.format == "json":
        rows = [
            {
                "code": r.id,
                "name": r.name,
                "severity": r.severity,
                "spawn_severity": r.spawn_severity,
                "default": r.default,
                "summary": r.summary,
            }
            for r in catalog
        ]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(markdown_table(catalog))
    else:
        sys.stdout.write(text_table(catalog))
    return 0


def rule_text(rule: Rule) -> str:
    """The docs of one rule for a terminal: summary, why, fix, the first bad and good example."""
    severity = rule.severity + (
        f", {rule.spawn_severity} under spawn/forkserver" if rule.spawn_severity else ""
    )
    default = "" if rule.default else " (off by default: enable with --extend-select)"
    parts = [f"{rule.id} {rule.name} [{severity}]{default}", "", rule.summary, "", "Why", _indent(rule.why)]
    parts += ["", "Fix", _indent(rule.fix)]
    for title, examples in (("Bad", rule.bad), ("Good", rule.good)):
        if examples:
            caption = f" ({examples[0].title})" if examples[0].title else ""
            parts += ["", f"{title}{caption}", _indent(examples[0].display_code, 4)]
    options = rule.bind()
    if options:
        parts += ["", f"Options ([tool.datalint.rules.{rule.id}]; `extend-NAME` appends to a list)"]
        parts += [f"  {key.replace('_', '-')} = {_toml_value(v)}" for key, v in sorted(options.items())]
    if rule.references:
        parts += ["", "References", *(f"  - {url}" for url in rule.references)]
    return "\n".join(parts) + "\n"


def _toml_value(value: object) -> str:
    """An option's value as TOML would spell it (JSON's spelling of lists and strings is valid TOML)."""
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def text_table(catalog: Catalog) -> str:
    rows = [(r.id, r.name, _severity(r), r.summary) for r in catalog]
    headers = ("CODE", "NAME", "SEVERITY", "SUMMARY")
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in [headers, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def markdown_table(catalog: Catalog) -> str:
    """The README's rule table (scripts/docs_check.py keeps the README equal to it)."""
    lines = ["| Code | Name | Severity | Summary |", "|---|---|---|---|"]
    for r in catalog:
        summary = r.summary.replace("|", "\\|")
        lines.append(f"| {r.id} | `{r.name}` | {_severity(r)} | {summary} |")
    return "\n".join(lines) + "\n"


def _severity(rule: Rule) -> str:
    text = rule.severity
    if rule.spawn_severity:
        text += f" ({rule.spawn_severity} under spawn)"
    if not rule.default:
        text += ", off by default"
    return text


def _indent(text: str, width: int = 2) -> str:
    import textwrap

    return textwrap.indent(textwrap.dedent(text).strip("\n"), " " * width)
