"""Findings -> a report: text, full, json, json-lines, sarif, github, gitlab, junit, rdjson.

Every formatter is a pure function of the findings (the rules, for SARIF's rule metadata,
and a way to read a finding's source line, for `full` and fingerprints) returning the report
as one string; the CLI decides where it goes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from datalint import __version__
from datalint.files import read_regular_file
from datalint.lint.catalog import Rule
from datalint.lint.engine import Finding
from datalint.text import name_bytes, printable, shown_name

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVELS: dict[str, str] = {"error": "error", "warning": "warning", "info": "note"}
GITHUB_LEVELS: dict[str, str] = {"error": "error", "warning": "warning", "info": "notice"}

GITLAB_SEVERITIES: dict[str, str] = {"error": "major", "warning": "minor", "info": "info"}
RDJSON_SEVERITIES: dict[str, str] = {"error": "ERROR", "warning": "WARNING", "info": "INFO"}

LineSource = Callable[[Finding], "str | None"]  # the text of the line a finding starts on


class Formatter(Protocol):
    def __call__(
        self, findings: Sequence[Finding], rules: Sequence[Rule], lines: LineSource | None = None
    ) -> str: ...


def location(finding: Finding) -> str:
    """`path:line:col`, or `path:cell 3:line:col` in a notebook."""
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{shown_name(finding.path)}:{cell}{finding.line}:{finding.column}"  # names may hold escapes


def format_text(findings: Sequence[Finding], rules: Sequence[Rule], lines: LineSource | None = None) -> str:
    """`path:line:col: DL001 [error] message (rule-name)`, one per line; a `note:` line per related place."""
    return "".join(
        f"{location(f)}: {f.code} [{f.severity}] {printable(f.message)} ({f.name})\n"
        + "".join(f"{printable(r.path)}:{r.line}: note: {printable(r.message)}\n" for r in f.related)
        for f in findings
    )


def format_full(findings: Sequence[Finding], rules: Sequence[Rule], lines: LineSource | None = None) -> str:
    """The text line, then the source line with a caret under the finding, and its fix if any."""
    read = lines or FileLines()
    parts = []
    for f in findings:
        parts.append(f"{location(f)}: {f.code} [{f.severity}] {f.message} ({f.name})\n")
        text = read(f)
        if text is not None:
            text = text.expandtabs(1).rstrip("\r\n")
            number = str(f.line)
            gutter = " " * len(number)
            width = (f.end_column - f.column) if f.end_line == f.line else len(text) - f.column + 1
            carets = "^" * max(1, min(width, len(text) - f.column + 1))
            caret_line = f"{gutter} | {' ' * (f.column - 1)}{carets} {f.code}"
            parts.append(f"{gutter} |\n{number} | {text}\n{caret_line}\n")
        parts.extend(f"  = note: {printable(r.path)}:{r.line}: {printable(r.message)}\n" for r in f.related)
        if f.fix is not None:
            parts.append(f"  = fix ({f.fix.applicability}): {f.fix.message}\n")
        parts.append("\n")
    return "".join(parts)


def finding_row(f: Finding) -> dict[str, Any]:
    """One finding as JSON: the rule, the place (1-based), the message, the fix edits (or null)."""
    row: dict[str, Any] = {
        "code": f.code,
        "name": f.name,
        "severity": f.severity,
        "path": f.path,
        "line": f.line,
        "column": f.column,
        "end_line": f.end_line,
        "end_column": f.end_column,
        "message": f.message,
        "fix": None,
    }
    if f.cell is not None:
        row["cell"] = f.cell
    if f.related:  # the other files the finding rests on; the key is left out when there are none
        row["related"] = [{"path": r.path, "line": r.line, "message": r.message} for r in f.related]
    if f.fix is not None:
        row["fix"] = {
            "applicability": f.fix.applicability,
            "message": f.fix.message,
            "edits": [
                {
                    "content": e.content,
                    "line": e.line,
                    "column": e.column,
                    "end_line": e.end_line,
                    "end_column": e.end_column,
                }
                for e in f.fix.edits
            ],
        }
    return row


def format_json(findings: Sequence[Finding], rules: Sequence[Rule], lines: LineSource | None = None) -> str:
    """A JSON array of `finding_row` objects."""
    import json  # imported where used: a clean text run never needs it

    return json.dumps([finding_row(f) for f in findings], indent=2) + "\n"


def format_json_lines(
    findings: Sequence[Finding], rules: Sequence[Rule], lines: LineSource | None = None
) -> str:
    """One `finding_row` JSON object per line, for tools that stream."""
    import json

    return "".join(json.dumps(finding_row(f)) + "\n" for f in findings)


def format_gitlab(findings: Sequence[Finding], rules: Sequence[Rule], lines: LineSource | None = None) -> str:
    """GitLab's code quality report (`artifacts: reports: codequality`): a JSON array of issues."""
    import json

    rows = [
        {
            "type": "issue",
            "check_name": f"{f.code} {f.name}",
            "description": f"{f.code} {f.message}{_related_text(f)}",
            "categories": ["Bug Risk"],
            "severity": GITLAB_SEVERITIES[f.severity],
            "fingerprint": fingerprint.replace(":", "-"),
            "location": {
                "path": f.path,
                "lines": {"begin": f.line, "end": f.end_line},
                "positions": {
                    "begin": {"line": f.line, "column": f.column},
                    "end": {"line": f.end_line, "column": f.end_column},
                },
            },
        }
        for f, fingerprint in zip(findings, _fingerprints(findings, lines), strict=True)
    ]
    return json.dumps(rows, indent=2) + "\n"


def format_rdjson(findings: Sequence[Finding], rules: Sequence[Rule], lines: LineSource | None = None) -> str:
    """reviewdog's Diagnostic Format (rdjson): `reviewdog -f=rdjson` posts them, fixes as suggestions.

    rdjson counts columns in UTF-8 bytes (datalint counts characters): converted from the source.
    """
    import json

    read = lines if isinstance(lines, FileLines) else FileLines()
    diagnostics = []
    for f in findings:

        def position(line: int, column: int, f: Finding = f) -> dict[str, int]:
            text = read.line(f.path, f.cell, line) or ""
            return {"line": line, "column": len(text[: column - 1].encode("utf-8")) + 1}

        diagnostic: dict[str, Any] = {
            "message": f.message,
            "location": {
                "path": f.path,
                "range": {"start": position(f.line, f.column), "end": position(f.end_line, f.end_column)},
            },
            "severity": RDJSON_SEVERITIES[f.severity],
            "code": {"value": f.code},
        }
        if f.related:
            diagnostic["related_locations"] = [
                {"message": r.message, "location": {"path": r.path, "range": {"start": {"line": r.line}}}}
                for r in f.related
            ]
        if f.fix is not None:
            diagnostic["suggestions"] = [
                {
                    "range": {"start": position(e.line, e.column), "end": position(e.end_line, e.end_column)},
                    "text": e.content,
                }
                for e in f.fix.edits
            ]
        diagnostics.append(diagnostic)
    document = {"source": {"name": "datalint"}, "severity": "WARNING", "diagnostics": diagnostics}
    return json.dumps(document, indent=2) + "\n"


def format_junit(findings: Sequence[Finding], rules: Sequence[Rule], lines: LineSource | None = None) -> str:
    """JUnit XML, which CI systems show as test results: one suite per file, one failing case per finding.

    A clean run is one passing case, so the CI's test view shows that datalint ran.
    """
    from xml.etree import ElementTree as ET  # only this format needs XML

    root = ET.Element("testsuites", name="datalint", tests=str(max(len(findings), 1)))
    root.set("failures", str(len(findings)))
    root.set("errors", "0")
    by_path: dict[str, list[Finding]] = {}
    for f in findings:
        by_path.setdefault(f.path, []).append(f)
    if not by_path:
        suite = ET.SubElement(root, "testsuite", name="datalint", tests="1", failures="0", errors="0")
        ET.SubElement(suite, "testcase", name="datalint", classname="datalint")
    for path, found in by_path.items():
        suite = ET.SubElement(root, "testsuite", name=path, tests=str(len(found)), failures=str(len(found)))
        suite.set("errors", "0")
        for f in found:
            case = ET.SubElement(suite, "testcase", name=f"{f.code} {f.name}", classname=path)
            case.set("file", f.path)
            case.set("line", str(f.line))
            failure = ET.SubElement(case, "failure", message=f.message, type=f.severity)
            failure.text = f"{location(f)}: {f.code} {f.message}" + "".join(
                f"\n{r.path}:{r.line}: note: {r.message}" for r in f.related
            )
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def format_github(findings: Sequence[Finding], rules: Sequence[Rule], lines: LineSource | None = None) -> str:
    """GitHub Actions workflow commands, which show as annotations on the pull request."""
    commands = []
    for f in findings:
        properties = ",".join(
            f"{key}={_escape_property(printable(str(value)))}"  # the log viewer obeys terminal escapes
            for key, value in (
                ("file", f.path),
                ("line", f.line),
                ("endLine", f.end_line),
                ("col", f.column),
                ("endColumn", f.end_column),
                ("title", f"datalint {f.code} ({f.name})"),
            )
        )
        message = _escape_data(printable(f"{f.code} {f.message}{_related_text(f)}"))  # the log obeys escapes
        commands.append(f"::{GITHUB_LEVELS[f.severity]} {properties}::{message}\n")
    return "".join(commands)


def format_sarif(findings: Sequence[Finding], rules: Sequence[Rule], lines: LineSource | None = None) -> str:
    """SARIF 2.1.0, as GitHub code scanning accepts it (rules carry their docs)."""
    import json

    described = {rule.id: rule for rule in rules}
    for f in findings:  # a finding's rule is always described, even if not passed in
        if f.code not in described:
            described[f.code] = _placeholder_rule(f)
    ordered = sorted(described.values(), key=lambda r: r.id)
    index = {rule.id: position for position, rule in enumerate(ordered)}
    fingerprints = _fingerprints(findings, lines)
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
    "full": format_full,
    "json": format_json,
    "json-lines": format_json_lines,
    "sarif": format_sarif,
    "github": format_github,
    "gitlab": format_gitlab,
    "junit": format_junit,
    "rdjson": format_rdjson,
}
FORMAT_ALIASES: dict[str, str] = {"concise": "text", "txt": "text"}


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
    import json

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


def _fingerprints(findings: Sequence[Finding], lines: LineSource | None = None) -> list[str]:
    """A hash of rule + the flagged line's text, numbered per repeat: stable when lines move."""
    import hashlib  # only SARIF and GitLab need it; keeps `datalint check` quick to start

    read = lines or FileLines()
    seen: Counter[str] = Counter()
    result = []
    for f in findings:
        text = " ".join((read(f) or "").split())
        identity = f"{f.code}\0{f.path}\0{text}".encode("utf-8", "surrogateescape")  # names may not be UTF-8
        digest = hashlib.sha256(identity).hexdigest()[:16]
        seen[digest] += 1
        result.append(f"{digest}:{seen[digest]}")
    return result


class FileLines:
    """A `LineSource` reading each file once from disk (notebooks: the finding's cell)."""

    def __init__(self, overrides: dict[str, str] | None = None) -> None:
        self._texts: dict[tuple[str, int | None], list[str]] = {}
        self._overrides = overrides or {}  # path -> text already in memory (stdin)

    def __call__(self, finding: Finding) -> str | None:
        return self.line(finding.path, finding.cell, finding.line)

    def line(self, path: str, cell: int | None, number: int) -> str | None:
        """The text of one 1-based line of a file (or of one notebook cell), if it has that line."""
        key = (path, cell)
        if key not in self._texts:
            self._texts[key] = self._read(path, cell)
        lines = self._texts[key]
        return lines[number - 1] if 0 < number <= len(lines) else None

    def _read(self, path: str, cell: int | None) -> list[str]:
        text = self._overrides.get(path)
        if text is None:
            try:
                text = read_regular_file(Path(path)).decode("utf-8", errors="replace")  # a FIFO: no wait
            except OSError:
                return []
        if cell is not None:
            from datalint.lint.notebook import cell_sources

            cells = cell_sources(text)
            return cells[cell - 1].splitlines() if 0 < cell <= len(cells) else []
        return text.splitlines()


def _uri(path: str) -> str:
    from urllib.parse import quote

    candidate = Path(path)
    if candidate.is_absolute():
        return candidate.as_uri()
    return quote(name_bytes(candidate.as_posix()))  # a name that is not UTF-8: its bytes, %-encoded


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


def _related_text(finding: Finding) -> str:
    """The related places as trailing text, for formats with one location per finding."""
    return "".join(f" (note: {r.path}:{r.line}: {r.message})" for r in finding.related)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
