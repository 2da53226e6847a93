"""datalint's image scan judged on image libraries' own test files: every file's verdict, and the table.

    git clone https://github.com/python-pillow/Pillow && cp -r Pillow/Tests/images /tmp/pillow-images
    python benchmarks/real_images_verdicts.py pillow /tmp/pillow-images [--update]
    git clone https://github.com/image-rs/image && cp -r image/tests /tmp/image-rs-tests
    python benchmarks/real_images_verdicts.py image-rs /tmp/image-rs-tests [--update]

Held-out corpora (the repository's whole tree; the verdicts name files from its root):

    git clone https://github.com/lunapaint/pngsuite /tmp/pngsuite
    python benchmarks/real_images_verdicts.py pngsuite /tmp/pngsuite
    git clone https://github.com/drewnoakes/metadata-extractor-images /tmp/mei   # its */ImageTestSuite
    python benchmarks/real_images_verdicts.py imagetestsuite /tmp/mei
    python benchmarks/real_images_verdicts.py metadata-extractor-jpeg /tmp/mei   # its jpg/ folder
    git clone https://github.com/openpreserve/jhove && cp -r jhove/test-root/corpora /tmp/jhove-corpora
    python benchmarks/real_images_verdicts.py jhove /tmp/jhove-corpora
    git clone https://github.com/libjpeg-turbo/libjpeg-turbo /tmp/libjpeg-turbo   # its testimages/
    python benchmarks/real_images_verdicts.py libjpeg-turbo /tmp/libjpeg-turbo
    git clone https://github.com/lovell/sharp /tmp/sharp   # its test/fixtures, not expected/
    python benchmarks/real_images_verdicts.py sharp /tmp/sharp
    python benchmarks/real_images_verdicts.py imagetestsuite-jpeg /tmp/mei   # its jpg/ImageTestSuite
    git clone https://github.com/pnggroup/libpng /tmp/libpng   # contrib/testpngs and the sample PNGs
    python benchmarks/real_images_verdicts.py libpng /tmp/libpng
    git clone https://github.com/image-rs/image-tiff /tmp/image-tiff   # tests/, not tests/libtiffpic
    python benchmarks/real_images_verdicts.py image-tiff /tmp/image-tiff

`benchmarks/data/<corpus>-verdicts.csv` holds one row per file of the corpus at the commit it
names: what the file is (`expected`, judged by hand from the corpus's own tests, documentation and
naming convention, the file's name and a look at its pixels, with the `reason`), what datalint said
(`datalint`: the damage or `unsupported` kinds it reported, or `ok`) and the `verdict` that follows.
This script scans the folder with `datalint scan --images DIR --files LIST` (every file, whatever
its extension), recomputes the `datalint` and `verdict` columns, prints the per-format table of
docs/images.md and, with `--update`, writes the columns back; `--recorded` prints the table of the
last recorded run without scanning. No image is copied into the project.

Expected values: `damaged` (the file's bytes are broken where the first frame is read), `later_frame`
(damaged only past the first frame or layer), `valid`, `unsupported` (valid, but this installation
lacks what decodes it), `harmless` (a header field is wrong that no decoder uses), `questionable`
(valid to some readers, not to others) and `not_image` (a palette, a font, notes).
"""

from __future__ import annotations

import argparse
import csv
import os
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
# corpus -> (verdicts file, the folder of the repository the files were taken from)
CORPORA: dict[str, tuple[Path, str]] = {
    "pillow": (HERE / "data" / "pillow-verdicts.csv", "Tests/images/"),
    "image-rs": (HERE / "data" / "image-rs-verdicts.csv", "tests/"),
    # held out: corpora no probe was tuned on before their first measurement (docs/images.md)
    "pngsuite": (HERE / "data" / "pngsuite-verdicts.csv", ""),
    "imagetestsuite": (HERE / "data" / "imagetestsuite-verdicts.csv", ""),
    "jhove": (HERE / "data" / "jhove-verdicts.csv", "test-root/corpora/"),
    "libjpeg-turbo": (HERE / "data" / "libjpeg-turbo-verdicts.csv", ""),
    "sharp": (HERE / "data" / "sharp-verdicts.csv", ""),
    "metadata-extractor-jpeg": (HERE / "data" / "metadata-extractor-jpeg-verdicts.csv", ""),
    # held out, second set: measured once before the probes were changed for them
    "imagetestsuite-jpeg": (HERE / "data" / "imagetestsuite-jpeg-verdicts.csv", ""),
    "libpng": (HERE / "data" / "libpng-verdicts.csv", ""),
    "image-tiff": (HERE / "data" / "image-tiff-verdicts.csv", ""),
}
DAMAGE = frozenset({"corrupt", "empty", "decompression_bomb", "unreadable"})
COLUMNS = ("repo", "commit", "path", "format", "expected", "datalint", "verdict", "reason")
COMMON = ("jpg", "jpeg", "png", "ppm", "pgm", "bmp", "gif", "tif", "tiff", "webp")


def scan_kinds(
    images: Path, relpaths: Sequence[str], workers: int, extra: Sequence[str] = ()
) -> dict[str, str]:
    """relpath -> the damage / unsupported kinds datalint reports (comma-joined), or `ok`."""
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "files.txt"
        listing.write_text("".join(f"{path}\n" for path in relpaths), encoding="utf-8")
        db = Path(tmp) / "scan.db"
        command = [
            sys.executable, "-m", "datalint", "scan", "--images", str(images), "--files", str(listing),
            "--db", str(db), "--workers", str(workers), "--timeout", "30", "--progress", "none", *extra,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ}, check=False)
        if done.returncode not in (0, 1):
            raise SystemExit(f"datalint scan failed ({done.returncode}):\n{done.stderr[-2000:]}")
        with sqlite3.connect(db) as conn:
            rows = conn.execute(
                "SELECT s.key, s.status, f.kind FROM samples s LEFT JOIN findings f ON f.idx = s.idx"
            ).fetchall()
    kinds: dict[str, set[str]] = {}
    for key, status, kind in rows:
        found = kinds.setdefault(key, set())
        if status != "ok":
            found.add(status)  # a crash or a timeout of one file would show here
        if kind in DAMAGE or kind == "unsupported":
            found.add(kind)
    return {key: ",".join(sorted(found)) or "ok" for key, found in kinds.items()}


def verdict(expected: str, said: str) -> str:
    kinds = set(said.split(","))
    damaged = bool(kinds & (DAMAGE | {"crash", "timeout", "error"}))
    if expected in ("damaged", "later_frame"):
        if damaged:
            return "found"
        return "first frame only" if expected == "later_frame" else "missed"
    if expected in ("valid", "unsupported"):
        if damaged:
            return "false alarm"
        if expected == "unsupported":
            return "reported unsupported" if "unsupported" in kinds else "not reported"
        return "called unsupported" if "unsupported" in kinds else "ok"
    return "damage" if damaged else ("unsupported" if "unsupported" in kinds else "ok")


def table(rows: Iterable[dict[str, str]]) -> str:
    """Markdown: per format, damaged found / total, valid called damaged, unsupported reported."""
    groups: dict[str, Counter[str]] = {}
    for row in rows:
        fmt = row["format"] if row["format"] in COMMON else "other formats"
        counts = groups.setdefault(fmt, Counter())
        counts["files"] += 1
        counts[f"{row['expected']}:{row['verdict']}"] += 1
        counts[row["expected"]] += 1
    order = [fmt for fmt in COMMON if fmt in groups] + (
        ["other formats"] if "other formats" in groups else []
    )
    lines = [
        "| format | files | damaged found | damaged past frame 1 found | valid called damaged "
        "| unsupported reported | harmless / questionable / not an image |",
        "|---|---|---|---|---|---|---|",
    ]
    total: Counter[str] = Counter()
    for fmt in [*order, "all"]:
        counts = total if fmt == "all" else groups[fmt]
        if fmt != "all":
            total.update(counts)
        lines.append(
            f"| {'**all**' if fmt == 'all' else fmt} | {counts['files']} "
            f"| {counts['damaged:found']}/{counts['damaged']} "
            f"| {counts['later_frame:found']}/{counts['later_frame']} "
            f"| {counts['valid:false alarm']}/{counts['valid']} "
            f"| {counts['unsupported:reported unsupported']}/{counts['unsupported']} "
            f"| {counts['harmless']} / {counts['questionable']} / {counts['not_image']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", choices=sorted(CORPORA))
    parser.add_argument(
        "images", type=Path, nargs="?", help="the corpus folder, extracted (Pillow's Tests/images...)"
    )
    parser.add_argument(
        "--recorded", action="store_true",
        help="no scan: the table from the datalint column the verdicts file holds (its last --update)",
    )  # fmt: skip
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--update", action="store_true", help="write the datalint and verdict columns back")
    parser.add_argument(
        "--all-frames", action="store_true", help="scan with --all-frames (the table's past-frame-1 column)"
    )
    args = parser.parse_args(argv)
    verdicts, prefix = CORPORA[args.corpus]
    with verdicts.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    if args.recorded:
        present = [row for row in rows if row["datalint"]]
    elif args.images is None:
        parser.error("the corpus folder is needed, unless --recorded")
    else:
        present = [row for row in rows if (args.images / row["path"].removeprefix(prefix)).is_file()]
        extra = ["--all-frames"] if args.all_frames else []
        relpaths = [row["path"].removeprefix(prefix) for row in present]
        said = scan_kinds(args.images, relpaths, args.workers, extra)
        for row in present:
            row["datalint"] = said.get(row["path"].removeprefix(prefix), "not scanned")
    for row in present:
        row["verdict"] = verdict(row["expected"], row["datalint"])
    print(table(present))
    wrong = [row for row in present if row["verdict"] in ("missed", "false alarm")]
    for row in wrong:
        print(f"{row['verdict']}: {row['path']} (expected {row['expected']}, datalint {row['datalint']})")
    if args.update:
        with verdicts.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows({name: row.get(name, "") for name in COLUMNS} for row in rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
