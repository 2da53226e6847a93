"""Precision and recall of `datalint check` on a corpus of realistic pipelines.

Every file under `fixtures/lint/corpus/` and `fixtures/lint/demo/` is linted with the default
configuration (every default rule, start method spawn). A line that must be reported ends with
`# expect: DLnnn` (the rule examples' marker); everything else must stay silent. An unmarked
finding is a false positive, a marker without its finding a missed pitfall: either fails the
test, whose message (and `pytest -s` output) gives per-rule recall and precision.

`fixtures/lint/pending/` holds correct code that a matcher still reports (a known false
positive in a matcher being finished elsewhere); a test fails once the matcher is fixed, asking
for the file to move into the corpus.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from datalint.config import Config
from datalint.lint.catalog import Example, load_catalog
from datalint.lint.engine import Linter

ROOT = Path(__file__).resolve().parents[2]
LINT_FIXTURES = ROOT / "fixtures" / "lint"
CORPUS = LINT_FIXTURES / "corpus"
DEMO = LINT_FIXTURES / "demo"
PENDING = LINT_FIXTURES / "pending"

# One finding or marker: (file relative to fixtures/lint, line, rule code).
Place = tuple[str, int, str]


@dataclass(frozen=True)
class Comparison:
    """The corpus's markers against what the linter reported."""

    expected: Counter[Place]
    found: Counter[Place]

    @property
    def missed(self) -> Counter[Place]:
        return self.expected - self.found

    @property
    def extra(self) -> Counter[Place]:
        return self.found - self.expected

    def scores(self) -> dict[str, tuple[int, int, int]]:
        """Per rule: (true positives, false positives, false negatives)."""
        codes = {code for _, _, code in (*self.expected, *self.found)}
        hits = self.expected & self.found
        return {
            code: (_count(hits, code), _count(self.extra, code), _count(self.missed, code))
            for code in sorted(codes)
        }


def _count(places: Counter[Place], code: str) -> int:
    return sum(n for (_, _, c), n in places.items() if c == code)


def _files(*folders: Path) -> list[Path]:
    return sorted(path for folder in folders for path in folder.glob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(LINT_FIXTURES).as_posix()


def compare(paths: list[Path]) -> Comparison:
    linter = Linter(Config())  # the defaults a new user gets: every default rule, spawn
    expected: Counter[Place] = Counter()
    found: Counter[Place] = Counter()
    for path in paths:
        source = path.read_text(encoding="utf-8")
        expected.update((_name(path), line, code) for line, code in Example(source).expected())
        found.update((_name(path), f.line, f.code) for f in linter.check_source(source, str(path)))
    return Comparison(expected, found)


def _ratio(numerator: int, denominator: int) -> str:
    return f"{100 * numerator / denominator:5.1f}%" if denominator else "    -"


def report(comparison: Comparison) -> str:
    """The per-rule table, then every disagreement with its source line."""
    rows = [f"{'rule':<7}{'TP':>4}{'FP':>4}{'FN':>4}{'recall':>9}{'precision':>11}"]
    totals = [0, 0, 0]
    for code, (tp, fp, fn) in comparison.scores().items():
        rows.append(f"{code:<7}{tp:>4}{fp:>4}{fn:>4}{_ratio(tp, tp + fn):>9}{_ratio(tp, tp + fp):>11}")
        totals = [totals[0] + tp, totals[1] + fp, totals[2] + fn]
    tp, fp, fn = totals
    rows.append(f"{'all':<7}{tp:>4}{fp:>4}{fn:>4}{_ratio(tp, tp + fn):>9}{_ratio(tp, tp + fp):>11}")
    for title, places in (
        ("reported, not marked", comparison.extra),
        ("marked, not reported", comparison.missed),
    ):
        for name, line, code in sorted(places.elements()):
            text = (LINT_FIXTURES / name).read_text(encoding="utf-8").splitlines()[line - 1].strip()
            rows.append(f"{title}: {name}:{line} {code}  | {text}")
    return "\n".join(rows)


def test_corpus_is_realistic_and_marked() -> None:
    corpus = _files(CORPUS)
    assert len(corpus) >= 15, f"the corpus should hold at least 15 pipelines, it holds {len(corpus)}"
    comparison = compare(corpus)
    silent = [p.name for p in corpus if not any(n == _name(p) for n, _, _ in comparison.expected)]
    assert len(silent) >= 5, "the corpus needs files of correct near-miss patterns that must stay silent"
    covered = {code for _, _, code in comparison.expected}
    families = {code[:3] for code in covered}
    assert families >= {"DL0", "DL1", "DL2", "DL3", "DL4", "DL5"}, f"families covered: {sorted(families)}"


def test_precision_and_recall_on_the_corpus() -> None:
    comparison = compare(_files(CORPUS, DEMO))
    table = report(comparison)
    print("\n" + table)
    disagreements = comparison.extra + comparison.missed
    assert not disagreements, (
        "datalint check disagrees with the corpus markers (a false positive or a missed pitfall "
        "is a matcher bug):\n" + table
    )


def test_corpus_exercises_most_default_rules() -> None:
    """Rules without a corpus case are listed, so new rules get realistic cases too."""
    comparison = compare(_files(CORPUS, DEMO))
    default_rules = {rule.id for rule in load_catalog() if rule.default and rule.id != "DL000"}
    uncovered = sorted(default_rules - {code for _, _, code in comparison.expected})
    print(f"\ndefault rules without a corpus case: {', '.join(uncovered) or 'none'}")
    assert len(uncovered) <= len(default_rules) // 10, f"no corpus case for: {', '.join(uncovered)}"


def test_demo_shows_every_family_and_only_real_bugs() -> None:
    comparison = compare(_files(DEMO))
    disagreements = comparison.extra + comparison.missed
    assert not disagreements, report(comparison)
    families = {code[:3] for _, _, code in comparison.found}
    # loader arguments, pickling, handles, memory, randomness, sample contract
    assert families == {"DL0", "DL1", "DL2", "DL3", "DL4", "DL5"}, f"the demo shows {sorted(families)}"


def test_make_demo_command_reports_the_demo_findings() -> None:
    """What `make demo` runs: the real CLI in a fresh interpreter, exit code 1 for findings."""
    result = subprocess.run(
        [sys.executable, "-m", "datalint", "check", "--isolated", "fixtures/lint/demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result.stderr
    reported = Counter(_cli_place(line) for line in result.stdout.splitlines())
    expected = Counter(
        (f"fixtures/lint/{name}", line, code) for name, line, code in compare(_files(DEMO)).expected
    )
    assert reported == expected, result.stdout


def _cli_place(line: str) -> tuple[str, int, str]:
    """`fixtures/lint/demo/data.py:37:13: DL301 [warning] ...` -> (path, 37, "DL301")."""
    where, _, rest = line.partition(": ")
    path, line_number, _column = where.rsplit(":", 2)
    return path, int(line_number), rest.split(" ", 1)[0]


def test_pending_false_positives_are_still_reported() -> None:
    """Correct code a matcher still reports waits in pending/; once fixed, it joins the corpus."""
    linter = Linter(Config())
    fixed = [
        _name(path)
        for path in _files(PENDING)
        if not linter.check_source(path.read_text(encoding="utf-8"), str(path))
    ]
    assert not fixed, f"no longer reported, move into fixtures/lint/corpus/: {', '.join(fixed)}"
