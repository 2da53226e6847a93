"""Which rules fire on large real code that datalint's authors did not write, and where.

Runs every default rule (start method `spawn`, the default config) over real trees, by
default the installed torch package's own `torch/utils/data` and the whole site-packages of
the running interpreter, and prints the findings per rule with the flagged source line, so
each one can be judged a true pitfall or a false positive (verdicts: `benchmarks/README.md`,
section "lint precision"). The precision and recall on the marked corpus are checked by
`tests/lint/test_corpus.py`; this script is for code nobody marked.

    .venv/bin/python benchmarks/lint_precision.py                     # torch/utils/data + site-packages
    .venv/bin/python benchmarks/lint_precision.py --tree PATH --tree PATH2
    .venv/bin/python benchmarks/lint_precision.py --json findings.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from datalint.config import Config  # noqa: E402
from datalint.lint.engine import Finding, Linter  # noqa: E402


@dataclass(frozen=True)
class TreeResult:
    """One tree's findings, with how much code they came from."""

    name: str
    root: Path
    files: int
    lines: int
    seconds: float
    findings: tuple[Finding, ...]
    errors: tuple[str, ...]


def default_trees() -> list[tuple[str, Path]]:
    """torch/utils/data of the installed torch, then the interpreter's whole site-packages."""
    trees = []
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    if spec is not None and spec.origin is not None:
        trees.append(("torch/utils/data", Path(spec.origin).parent / "utils" / "data"))
    trees.append(("site-packages", Path(sysconfig.get_paths()["purelib"])))
    return trees


def python_files(root: Path) -> Iterator[Path]:
    """Every `.py` file under `root` (site-packages' own folders included: nothing is excluded)."""
    if root.is_file():
        yield root
        return
    yield from sorted(p for p in root.rglob("*.py") if p.is_file())


def lint_tree(linter: Linter, name: str, root: Path) -> TreeResult:
    findings: list[Finding] = []
    errors: list[str] = []
    files = lines = 0
    start = time.perf_counter()
    for path in python_files(root):
        files += 1
        try:
            data = path.read_bytes()
            lines += data.count(b"\n")
            # The real path: a rule may depend on where a file lives (torch's own package).
            findings.extend(shorten(f, root) for f in linter.check_source(data, str(path)))
        except Exception as exc:  # isolation boundary: per file (a matcher crash is a finding too)
            errors.append(f"{path}: {type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - start
    return TreeResult(name, root, files, lines, seconds, tuple(sorted(findings)), tuple(errors))


def shorten(finding: Finding, root: Path) -> Finding:
    """The finding with its path shown relative to the tree's parent folder."""
    return replace(finding, path=str(Path(finding.path).relative_to(root.parent)))


def source_line(root: Path, finding: Finding) -> str:
    path = root.parent / finding.path
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
        return text[finding.line - 1].strip()
    except (OSError, IndexError):
        return ""


def report(result: TreeResult, show: int) -> None:
    per_rule = Counter(f.code for f in result.findings)
    print(f"\n== {result.name}: {result.root}")
    print(
        f"   {result.files:,} files, {result.lines:,} lines, {len(result.findings)} findings "
        f"in {result.seconds:.1f} s; {len(result.errors)} internal errors"
    )
    for code, count in sorted(per_rule.items()):
        print(f"\n   {code}: {count}")
        for finding in [f for f in result.findings if f.code == code][:show]:
            print(f"     {finding.path}:{finding.line}:{finding.column}")
            print(f"       | {source_line(result.root, finding)}")
            print(f"       {finding.message}")
    for error in result.errors:
        print(f"   ERROR {error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", action="append", type=Path, help="a folder or file to lint (repeatable)")
    parser.add_argument("--show", type=int, default=50, help="findings printed per rule and tree")
    parser.add_argument("--start-method", default="spawn", choices=("spawn", "fork", "forkserver"))
    parser.add_argument("--json", type=Path, help="also write every finding to this JSON file")
    args = parser.parse_args(argv)

    trees = [(str(t), t.resolve()) for t in args.tree] if args.tree else default_trees()
    linter = Linter(Config(start_method=args.start_method))
    results = [lint_tree(linter, name, root) for name, root in trees]
    for result in results:
        report(result, args.show)

    print("\nfindings per rule")
    codes = sorted({f.code for r in results for f in r.findings})
    print("| rule | " + " | ".join(r.name for r in results) + " |")
    print("|---|" + "---|" * len(results))
    for code in codes:
        counts = [sum(1 for f in r.findings if f.code == code) for r in results]
        print(f"| {code} | " + " | ".join(str(c) for c in counts) + " |")
    if args.json:
        rows = [{"tree": r.name, **asdict(f)} for r in results for f in r.findings]
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 1 if any(r.errors for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
