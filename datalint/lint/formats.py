"""Findings -> text, json, sarif or github annotations; plus the summary and statistics.

Every formatter is a pure function of the findings (and the rules, for SARIF's rule
metadata) returning the report as one string; the CLI decides where it goes.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from datalint import __version__
from datalint.lint.catalog import Rule
from datalint.lint.engine import Finding

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVELS: dict[str, str] = {"error": "error", "warning": "warning", "info": "note"}
GITHUB_LEVELS: dict[str, str] = {"error": "error", "warning": "warning", "info": "notice"}

Formatter = Callable[[Sequence[Finding], Sequence[Rule]], str]


def format_text(findings: Sequence[Finding], rules: Sequence[Rule]) -> str:
    """`path:line:col: DL001 [error] message (rule-name)`, one per line; a `note:` line per related place."""
    return "".join(
        f"{f.path}:{f.line}:{f.column}: {f.code} [{f.severity}] {f.message} ({f.name})\n"
        + "".join(f"{r.path}:{r.line}: note: {r.message}\n" for r in f.related)
        for f in findings
    )


def format_json(findings: Sequence[Finding], rules: Sequence[Rule]) -> str:
    """A JSON array; each object carries the rule, the place (1-based) and the message."""
    rows = [
        {
            "code": f.code,
            "name": f.name,
            "severity": f.severity,
            "path": f.path,
            "line": f.line,
            "column": f.column,
            "end_line": f.end_line,
            "end_column": f.end_column,
            "message": f.message,
            **_json_related(f),
        }
        for f in findings
    ]
    return json.dumps(rows, indent=2) + "\n"


def _json_related(finding: Finding) -> dict[str, Any]:
    """`related`: the other files a finding rests on; the key is left out when there are none."""
    if not finding.related:
        return {}
    return {"related": [{"path": r.path, "line": r.line, "message": r.message} for r in finding.related]}


def format_github(findings: Sequence[Finding], rules: Sequence[Rule]) -> str:
    """GitHub Actions workflow commands, which show as annotations on the pull request."""
    lines = []
    for f in findings:
        properties = ",".join(
            f"{key}={_escape_property(str(value))}"
            for key, value in (
                ("file", f.path),
                ("line", f.line),
                ("endLine", f.end_line),
                ("col", f.column),
                ("endColumn", f.end_column),
                ("title", f"datalint {f.code} ({f.name})"),
            )
        )
        lines.append(f"::{GITHUB_LEVELS[f.severity]} {properties}::{_escape_data(f'{f.code} {f.message}')}\n")
    return "".join(lines)


def format_sarif(findings: Sequence[Finding], rules: Sequence[Rule]) -> str:
    """SARIF 2.1.0, as GitHub code scanning accepts it (rules carry their docs)."""
    described = {rule.id: rule for rule in rules}
    for f in findings:  # a finding's rule is always described, even if not passed in
        if f.code not in described:
            described[f.code] = _placeholder_rule(f)
    ordered = sorted(described.values(), key=lambda r: r.id)
    index = {rule.id: position for position, rule in enumerate(ordered)}
    fingerprints = _fingerprints(findings)
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "datalint",
                        "semanticVersion": __version__,
                        "version": __version__,
                        "rules": [_sarif_rule(rule) for rule in ordered],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": [
                    _sarif_result(f, index[f.code], fingerprint)
                    for f, fingerprint in zip(findings, fingerprints, strict=True)
                ],
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"


FORMATTERS: dict[str, Formatter] = {
    "text": format_text,
    "json": format_json,
    "sarif": format_sarif,
    "github": format_github,
}


def summary(findings: Sequence[Finding], files: int) -> str:
    """One line for stderr: counts by severity, and where to read more."""
    if not findings:
        return f"No findings in {_plural(files, 'file')}."
    by_severity = Counter(f.severity for f in findings)
    parts = ", ".join(_plural(by_severity[s], s) for s in ("error", "warning", "info") if by_severity[s])
    affected = len({f.path for f in findings})
    first = min(f.code for f in findings)
    return (
        f"Found {_plural(len(findings), 'finding')} ({parts}) in {affected} of {_plural(files, 'file')}. "
        f"Run `datalint rule {first}` for what a rule means and how to fix it."
    )


def statistics(findings: Sequence[Finding], as_json: bool = False) -> str:
    """Counts per rule, most frequent first."""
    counts = Counter((f.code, f.name, f.severity) for f in findings)
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0][0]))
    if as_json:
        rows = [{"code": c, "name": n, "severity": s, "count": k} for (c, n, s), k in ordered]
        return json.dumps(rows, indent=2) + "\n"
    width = max((len(str(k)) for k in counts.values()), default=1)
    return "".join(f"{k:>{width}}  {c}  [{s}] {n}\n" for (c, n, s), k in ordered)


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    level = SARIF_LEVELS[rule.severity]
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.why},
        "help": {"text": rule.fix, "markdown": rule_markdown(rule)},
        "defaultConfiguration": {"level": level, "enabled": rule.default},
        "properties": {"tags": ["datalint", rule.id[:3]], "precision": "high", "problem.severity": level},
    }


def _sarif_result(finding: Finding, rule_index: int, fingerprint: str) -> dict[str, Any]:
    return {
        "ruleId": finding.code,
        "ruleIndex": rule_index,
        "level": SARIF_LEVELS[finding.severity],
        "message": {"text": finding.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": _uri(finding.path)},
                    "region": {
                        "startLine": finding.line,
                        "startColumn": finding.column,
                        "endLine": finding.end_line,
                        "endColumn": finding.end_column,
                    },
                }
            }
        ],
        "partialFingerprints": {"primaryLocationLineHash": fingerprint},
        **_sarif_related(finding),
    }


def _sarif_related(finding: Finding) -> dict[str, Any]:
    """SARIF `relatedLocations` for the other files a finding rests on (omitted when none)."""
    if not finding.related:
        return {}
    return {
        "relatedLocations": [
            {
                "id": index,
                "physicalLocation": {
                    "artifactLocation": {"uri": _uri(r.path)},
                    "region": {"startLine": r.line},
                },
                "message": {"text": r.message},
            }
            for index, r in enumerate(finding.related)
        ]
    }


def _fingerprints(findings: Sequence[Finding]) -> list[str]:
    """A hash of rule + the flagged line's text, numbered per repeat: stable when lines move."""
    import hashlib  # only SARIF needs it; keeps `datalint check` quick to start

    texts: dict[str, list[str]] = {}
    seen: Counter[str] = Counter()
    result = []
    for f in findings:
        if f.path not in texts:
            texts[f.path] = _read_lines(f.path)
        lines = texts[f.path]
        text = " ".join(lines[f.line - 1].split()) if 0 < f.line <= len(lines) else ""
        digest = hashlib.sha256(f"{f.code}\0{f.path}\0{text}".encode()).hexdigest()[:16]
        seen[digest] += 1
        result.append(f"{digest}:{seen[digest]}")
    return result


def _read_lines(path: str) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _uri(path: str) -> str:
    from urllib.parse import quote

    candidate = Path(path)
    if candidate.is_absolute():
        return candidate.as_uri()
    return quote(candidate.as_posix())


def _placeholder_rule(finding: Finding) -> Rule:
    return Rule(
        id=finding.code,
        name=finding.name,
        severity=finding.severity,
        summary=finding.name,
        message="",
        why=finding.name,
        fix=f"Run `datalint rule {finding.code}`.",
        references=(),
        matcher="",
        params={},
        bad=(),
        good=(),
        path=Path(),
    )


def rule_markdown(rule: Rule) -> str:
    """The rule's documentation as Markdown: summary, why, fix, first examples, references."""
    parts = [f"**{rule.id} {rule.name}** ({rule.severity}): {rule.summary}", "", "## Why", "", rule.why]
    parts += ["", "## Fix", "", rule.fix]
    for title, examples in (("Bad", rule.bad), ("Good", rule.good)):
        if examples:
            parts += ["", f"## {title}", "", "```python", examples[0].display_code, "```"]
    if rule.references:
        parts += ["", "## References", "", *(f"- {url}" for url in rule.references)]
    return "\n".join(parts)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
