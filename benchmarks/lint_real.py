"""Precision and recall of `datalint check` on public repositories datalint's authors did not write.

Each repository of `benchmarks/lint_real_repos.csv` (name, pinned commit) is expected as a whole
tree under `--ext` (default `/work/ext/<owner>+<name>`, a checkout of that commit; the script
never downloads anything and no third-party code is kept in this project). Every tree is linted
as one project (default rules, start method spawn, no configuration), and each finding is looked
up in `benchmarks/lint_real_verdicts.csv`, a file of facts written by reading every finding and
the data code around it:

    repo, commit, path, line, code, verdict, scope, reason

`verdict` is `true` (a real pitfall), `false` (a false positive) or `missed` (a pitfall read in
the code that no finding reports); `scope` is `in-file` or `cross-file` (the pitfall can only be
seen with another file of the project: a base class, a reader, a transform defined elsewhere).
Precision per rule = true / (true + false) over the findings; recall = true / (true + missed),
per scope, where a pitfall once reported and judged true that is no longer reported counts as
missed too (so an older or changed linter is scored on the same facts). A finding with no
verdict is listed as unjudged (and counts in neither).

    .venv/bin/python benchmarks/lint_real.py                      # every repository, the tables
    .venv/bin/python benchmarks/lint_real.py --repo pytorch/examples --unjudged   # findings to judge
    .venv/bin/python benchmarks/lint_real.py --jobs 2
    .venv/bin/python benchmarks/lint_real.py --per-repo    # each repository scored alone, too
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from datalint.config import Config  # noqa: E402
from datalint.lint.engine import Finding, lint_paths  # noqa: E402
from datalint.lint.project import peak_rss_mib  # noqa: E402

REPOS = Path(__file__).with_name("lint_real_repos.csv")
VERDICTS = Path(__file__).with_name("lint_real_verdicts.csv")
Key = tuple[str, str, int, str]  # repo, path, line, code


@dataclass(frozen=True)
class Verdict:
    repo: str
    commit: str
    path: str
    line: int
    code: str
    verdict: str
    scope: str
    reason: str


@dataclass(frozen=True)
class RepoRun:
    repo: str
    commit: str
    files: int
    seconds: float
    findings: tuple[Finding, ...]


def read_repos(path: Path = REPOS) -> list[tuple[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return [(row["repo"], row["commit"]) for row in csv.DictReader(handle)]


def read_verdicts(path: Path = VERDICTS) -> list[Verdict]:
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for number, row in enumerate(rows, start=2):
        if None in row or None in row.values():  # a reason with an unquoted comma, or a short row
            raise SystemExit(f"{path}:{number}: not 8 fields (quote a reason that holds a comma)")
    return [
        Verdict(
            r["repo"], r["commit"], r["path"], int(r["line"]),
            r["code"], r["verdict"], r["scope"], r["reason"],
        )
        for r in rows
    ]


def tree_of(ext: Path, repo: str) -> Path:
    return ext / repo.replace("/", "+")


def checked_out_commit(tree: Path) -> str | None:
    """The commit of a git checkout, or the `COMMIT` file an export left; None when unknown."""
    marker = tree / "COMMIT"
    if marker.is_file():
        return marker.read_text(encoding="utf-8").strip()
    try:
        done = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True)
    except OSError:
        return None
    return done.stdout.strip() or None


def lint_repo(tree: Path, repo: str, commit: str, jobs: int, cache: bool) -> RepoRun:
    cwd = os.getcwd()
    os.chdir(tree)  # paths in findings relative to the repository root
    try:
        start = time.perf_counter()
        kwargs = {} if cache else {"cache_dir": None}
        report = lint_paths(["."], Config(), jobs=jobs, **kwargs)  # type: ignore[arg-type]
        seconds = time.perf_counter() - start
    finally:
        os.chdir(cwd)
    for error in report.errors:  # a file that could not be linted is no finding: say so, never hide it
        print(f"{repo}: not linted: {error}", file=sys.stderr)
    return RepoRun(repo, commit, report.files, seconds, report.findings)


def score(runs: list[RepoRun], verdicts: list[Verdict]) -> dict[str, Counter[str]]:
    """Per rule: counts of true, false, unjudged findings and missed pitfalls, by scope."""
    judged = {(v.repo, v.path, v.line, v.code): v for v in verdicts if v.verdict in ("true", "false")}
    per_rule: dict[str, Counter[str]] = defaultdict(Counter)
    linted = {run.repo for run in runs}
    for run in runs:
        for finding in run.findings:
            verdict = judged.get((run.repo, finding.path, finding.line, finding.code))
            if verdict is None:
                per_rule[finding.code]["unjudged"] += 1
            else:
                per_rule[finding.code][verdict.verdict] += 1
                if verdict.verdict == "true":
                    per_rule[finding.code][f"true {verdict.scope}"] += 1
    reported = {(run.repo, f.path, f.line, f.code) for run in runs for f in run.findings}
    for verdict in verdicts:
        key = (verdict.repo, verdict.path, verdict.line, verdict.code)
        if verdict.repo not in linted:
            continue
        if key in reported:
            continue
        if verdict.verdict in ("missed", "true"):
            # A real pitfall (read in the code, or reported once and judged true) not reported now.
            per_rule[verdict.code][f"missed {verdict.scope}"] += 1
        if verdict.verdict in ("true", "false"):
            per_rule[verdict.code]["gone"] += 1  # judged once, no longer reported
    return per_rule


def ratio(numerator: int, denominator: int) -> str:
    return f"{numerator / denominator:.2f}" if denominator else "-"


def print_tables(runs: list[RepoRun], per_rule: dict[str, Counter[str]]) -> None:
    print("| repository | commit | files | findings | seconds |")
    print("|---|---|---:|---:|---:|")
    for run in runs:
        print(f"| {run.repo} | {run.commit[:10]} | {run.files:,} | {len(run.findings)} | {run.seconds:.1f} |")
    print()
    print(
        "| rule | true | false | precision | missed in-file | recall in-file | missed cross-file "
        "| recall cross-file | unjudged | gone |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    total: Counter[str] = Counter()
    others: Counter[str] = Counter()
    for code in sorted(per_rule):
        c = per_rule[code]
        print(_row(code, c))
        if code != "DL000":  # a file that does not parse is a fact, not a pitfall judged
            total.update(c)
            if code != "DL301":
                others.update(c)
    print(_row("all pitfall rules", total))
    print(_row("all but DL301", others))


def print_per_repo(runs: list[RepoRun], verdicts: list[Verdict]) -> None:
    """One line per repository: its findings scored alone (DL000 left out, as in the totals)."""
    print("| repository | true | false | precision | recall in-file | recall cross-file |")
    print("|---|---:|---:|---:|---:|---:|")
    for run in runs:
        c: Counter[str] = Counter()
        for code, counts in score([run], verdicts).items():
            if code != "DL000":
                c.update(counts)
        print(
            f"| {run.repo} | {c['true']} | {c['false']} | {ratio(c['true'], c['true'] + c['false'])} "
            f"| {ratio(c['true in-file'], c['true in-file'] + c['missed in-file'])} "
            f"| {ratio(c['true cross-file'], c['true cross-file'] + c['missed cross-file'])} |"
        )
    print()


def _row(code: str, c: Counter[str]) -> str:
    precision = ratio(c["true"], c["true"] + c["false"])
    recall_in = ratio(c["true in-file"], c["true in-file"] + c["missed in-file"])
    recall_cross = ratio(c["true cross-file"], c["true cross-file"] + c["missed cross-file"])
    return (
        f"| {code} | {c['true']} | {c['false']} | {precision} | {c['missed in-file']} | {recall_in} "
        f"| {c['missed cross-file']} | {recall_cross} | {c['unjudged']} | {c['gone']} |"
    )


def print_unjudged(tree: Path, run: RepoRun, verdicts: list[Verdict]) -> None:
    judged = {(v.path, v.line, v.code) for v in verdicts if v.repo == run.repo}
    for finding in run.findings:
        if (finding.path, finding.line, finding.code) in judged:
            continue
        try:
            lines = (tree / finding.path).read_text(encoding="utf-8", errors="replace").splitlines()
            text = lines[finding.line - 1].strip()
        except (OSError, IndexError):
            text = ""
        print(f"{run.repo},{run.commit},{finding.path},{finding.line},{finding.code}")
        print(f"    | {text}")
        print(f"    {finding.message}")
        for related in finding.related:
            print(f"    note: {related.path}:{related.line}: {related.message}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ext", type=Path, default=Path("/work/ext"), help="folder holding the checkouts")
    parser.add_argument("--repo", action="append", help="only this repository (repeatable)")
    parser.add_argument(
        "--repos", type=Path, default=REPOS, help="the repositories and commits (default: %(default)s)"
    )
    parser.add_argument(
        "--verdicts", type=Path, default=VERDICTS, help="the verdicts to score against (default: %(default)s)"
    )
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--no-cache", action="store_true", help="summarize every file afresh")
    parser.add_argument("--unjudged", action="store_true", help="print the findings without a verdict")
    parser.add_argument("--per-repo", action="store_true", help="also score each repository alone")
    args = parser.parse_args(argv)

    verdicts = read_verdicts(args.verdicts)
    runs: list[RepoRun] = []
    for repo, commit in read_repos(args.repos):
        if args.repo and repo not in args.repo:
            continue
        tree = tree_of(args.ext, repo)
        if not tree.is_dir():
            print(f"skipped {repo}: no checkout at {tree}", file=sys.stderr)
            continue
        found = checked_out_commit(tree)
        if found is not None and found != commit:
            print(f"skipped {repo}: {tree} is at {found}, the verdicts are for {commit}", file=sys.stderr)
            continue
        run = lint_repo(tree, repo, commit, args.jobs, not args.no_cache)
        runs.append(run)
        if args.unjudged:
            print_unjudged(tree, run, verdicts)
    if not args.unjudged:
        if args.per_repo:
            print_per_repo(runs, verdicts)
        print_tables(runs, score(runs, verdicts))
        print(f"\npeak RSS of this process: {peak_rss_mib():.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
