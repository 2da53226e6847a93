"""The optional inputs of a report: lint findings and bench results, read tolerantly.

Both come from other datalint commands (`check --format json`, `bench --format json`) whose
output may gain or lose optional fields between versions; a missing field shows as a blank,
never as an error. Only a file that is not JSON at all, or has the wrong shape, is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datalint.errors import DatalintError
from datalint.files import UnreadableDocument, load_json_document


@dataclass(frozen=True)
class LintFinding:
    code: str
    name: str
    severity: str
    path: str
    line: int | None
    column: int | None
    message: str


@dataclass(frozen=True)
class BenchRun:
    num_workers: int | None
    samples_per_s: float | None
    first_batch_s: float | None
    rss_bytes: float | None
    pss_bytes: float | None
    shm_peak_bytes: float | None
    fds: float | None
    note: str  # bench's own remark, error or diagnosis for this run
    recommended: bool


@dataclass(frozen=True)
class BenchResult:
    runs: tuple[BenchRun, ...]
    recommendation: dict[str, Any]


def _load_json(path: Path, what: str) -> Any:
    try:
        return load_json_document(path)
    except UnreadableDocument as exc:
        raise DatalintError(f"{path}: the {what} file is not JSON ({exc.problem})") from None


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def load_lint_findings(path: Path) -> tuple[LintFinding, ...]:
    """`datalint check --format json` output: a list of findings (or {"findings": [...]})."""
    data = _load_json(path, "lint findings")
    if isinstance(data, dict):
        data = data.get("findings")
    if not isinstance(data, list):
        raise DatalintError(
            f"{path}: expected a JSON list of findings, as `datalint check --format json` writes"
        )
    findings = [_lint_finding(item) for item in data if isinstance(item, dict)]
    return tuple(sorted(findings, key=lambda f: (f.path, f.line or 0, f.column or 0, f.code)))


def _lint_finding(item: dict[str, Any]) -> LintFinding:
    return LintFinding(
        code=_text(item.get("code")),
        name=_text(item.get("name")),
        severity=_text(item.get("severity")) or "warning",
        path=_text(item.get("path")),
        line=_int(item.get("line")),
        column=_int(item.get("column")),
        message=_text(item.get("message")),
    )


def load_bench(path: Path) -> BenchResult:
    """`datalint bench ... --format json` output: {"runs": [...], "recommended": {...}}."""
    data = _load_json(path, "bench")
    if isinstance(data, list):
        data = {"runs": data}
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise DatalintError(
            f'{path}: expected a JSON object with a "runs" list, as `datalint bench ... --format json` writes'
        )
    recommended = data.get("recommended")
    if recommended is not None and not isinstance(recommended, dict):
        raise DatalintError(f'{path}: "recommended" must be an object, got {type(recommended).__name__}')
    recommendation = recommended if isinstance(recommended, dict) else {}
    for number, item in enumerate(data["runs"]):
        problem = _bench_run_problem(item)
        if problem:
            raise DatalintError(
                f"{path}: runs[{number}] {problem}, not a run as bench's JSON output (--format json) holds it"
            )
    runs = tuple(_bench_run(item, recommendation) for item in data["runs"])
    return BenchResult(runs, recommendation)


_BENCH_NUMBERS = ("samples_per_s", "first_batch_s", "rss_bytes", "pss_bytes", "shm_peak_bytes", "fds")


def _bench_run_problem(item: Any) -> str | None:
    """What makes `item` no bench run (missing fields are fine: they show as blanks), or None."""
    if not isinstance(item, dict):
        return f"is {type(item).__name__}"
    workers = item.get("num_workers")
    if workers is not None and _int(workers) is None:
        return f"has num_workers {workers!r}"
    for name in _BENCH_NUMBERS:
        value = item.get(name)
        if value is not None and _number(value) is None:
            return f"has {name} {value!r}"
    return None


def recommended_workers(recommendation: dict[str, Any]) -> int | None:
    config = recommendation.get("config")
    nested = config.get("num_workers") if isinstance(config, dict) else None
    return _int(recommendation.get("num_workers", nested))


def _bench_run(item: dict[str, Any], recommendation: dict[str, Any]) -> BenchRun:
    workers = _int(item.get("num_workers"))
    remarks = (_text(item.get(name)) for name in ("error", "diagnosis", "note"))
    return BenchRun(
        num_workers=workers,
        samples_per_s=_number(item.get("samples_per_s")),
        first_batch_s=_number(item.get("first_batch_s")),
        rss_bytes=_number(item.get("rss_bytes")),
        pss_bytes=_number(item.get("pss_bytes")),
        shm_peak_bytes=_number(item.get("shm_peak_bytes")),
        fds=_number(item.get("fds")),
        note="; ".join(remark for remark in remarks if remark),
        recommended=workers is not None and workers == recommended_workers(recommendation),
    )
