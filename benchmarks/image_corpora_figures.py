"""The image scan's two answers judged on three public corpora no probe was tuned on: the figures.

    python benchmarks/image_corpora_figures.py                       # tables from the recorded columns
    python benchmarks/image_corpora_figures.py --rescan /tmp/corpora --column after   # scan again

`image_corpora_repos.csv` names each corpus (repository, commit, the folder taken from it);
`image_corpora_verdicts.csv` holds one row per file: `truth` (judged before any scan from the
corpus's own tests, folder names and file names, then from four independent decoders: Pillow,
OpenCV, ImageMagick, libvips, whose words are in `evidence`; made by
`benchmarks/image_corpora_evidence.py`), and what datalint said, as the damage or `unsupported`
kinds it reported or `ok`: `first_run` (the code before the two-answers work, run once before any
change) and `after`. `--rescan DIR` scans `DIR/<owner>+<name>` for each corpus (a checkout of
the repository's folder, outside the project) with the `datalint` this Python imports, and writes
the column named by `--column`; run it from another checkout to measure that checkout's code.

Per format: damaged files found, valid files quarantined (called damaged or unsupported), and the
confusion between the two kinds of quarantine (an unsupported file called damaged, a damaged one
called unsupported). No image is copied into the project.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPOS = HERE / "image_corpora_repos.csv"
VERDICTS = HERE / "image_corpora_verdicts.csv"
COLUMNS = ("repo", "commit", "path", "truth", "first_run", "after", "evidence")
DAMAGE = frozenset({"corrupt", "empty", "decompression_bomb", "unreadable", "crash", "timeout", "error"})
COMMON = ("jpg", "jpeg", "png", "gif", "bmp", "tif", "tiff", "webp", "tga", "ppm", "jp2")


def said(kinds: str) -> str:
    """`damaged`, `unsupported` or `ok` from a recorded column ("corrupt,unsupported" is damaged)."""
    found = set(kinds.split(","))
    if found & DAMAGE:
        return "damaged"
    return "unsupported" if "unsupported" in found else "ok"


def file_format(path: str) -> str:
    suffix = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
    return suffix if suffix in COMMON else "other"


def figures(rows: Iterable[dict[str, str]], column: str) -> dict[str, Counter[str]]:
    """Per format (and `all`): counts of truth and of truth:answer."""
    groups: dict[str, Counter[str]] = {}
    for row in rows:
        if not row.get(column):
            continue
        answer = said(row[column])
        for key in (file_format(row["path"]), "all"):
            counts = groups.setdefault(key, Counter())
            counts[row["truth"]] += 1
            counts[f"{row['truth']}:{answer}"] += 1
    return groups


def table(rows: Sequence[dict[str, str]], column: str) -> str:
    groups = figures(rows, column)
    lines = [
        "| format | damaged found | valid quarantined | unsupported called damaged "
        "| damaged called unsupported | unsupported reported |",
        "|---|---|---|---|---|---|",
    ]
    order = [fmt for fmt in (*COMMON, "other") if fmt in groups] + ["all"]
    for fmt in order:
        c = groups.get(fmt, Counter())
        damaged = c["damaged"] + c["later_frame"]
        found = c["damaged:damaged"] + c["later_frame:damaged"]
        flagged = c["valid:damaged"] + c["valid:unsupported"]
        lines.append(
            f"| {'**all**' if fmt == 'all' else fmt} | {found}/{damaged} | {flagged}/{c['valid']} "
            f"| {c['unsupported:damaged']}/{c['unsupported']} "
            f"| {c['damaged:unsupported'] + c['later_frame:unsupported']}/{damaged} "
            f"| {c['unsupported:unsupported']}/{c['unsupported']} |"
        )
    return "\n".join(lines)


def rescan(rows: list[dict[str, str]], root: Path, column: str, workers: int) -> None:
    sys.path.insert(0, str(HERE))
    from real_images_verdicts import scan_kinds  # benchmarks/ is no package: the sibling script

    for repo in dict.fromkeys(row["repo"] for row in rows):
        folder = root / repo.replace("/", "+")
        mine = [row for row in rows if row["repo"] == repo and (folder / row["path"]).is_file()]
        kinds = scan_kinds(folder, [row["path"] for row in mine], workers)
        for row in mine:
            row[column] = kinds.get(row["path"], "not scanned")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rescan", type=Path, help="folder holding <owner>+<name> checkouts")
    parser.add_argument("--column", choices=("first_run", "after"), default="after")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    with VERDICTS.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    if args.rescan is not None:
        rescan(rows, args.rescan, args.column, args.workers)
        with VERDICTS.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows({name: row.get(name, "") for name in COLUMNS} for row in rows)
    for repo in [*dict.fromkeys(row["repo"] for row in rows), "all three"]:
        mine = [row for row in rows if repo == "all three" or row["repo"] == repo]
        for column in ("first_run", "after"):
            print(f"\n{repo}, {column}:\n{table(mine, column)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
