"""The same image files scanned as a folder and packed into webdataset shards: the findings per file.

    .venv/bin/python benchmarks/webdataset_vs_images.py FOLDER [--per-shard 1000] [--workers 2]

Every image file of FOLDER (by extension) becomes one webdataset sample (`sNNNNN.<ext>`, one member)
in tar shards written to a scratch folder; `datalint scan --images FOLDER` and `datalint scan
--webdataset SHARDS` run with `--kinds all`, and the finding kinds of each file are compared, the
population kinds (duplicates, near-duplicates, the quality kinds, odd shapes) included. Prints the
kinds counted both ways and every file whose kinds differ. No file is copied into the project.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp", ".tif", ".tiff")


def pack(files: list[Path], shards: Path, per_shard: int) -> dict[str, Path]:
    """The files as webdataset shards; returns scan key -> file."""
    shards.mkdir(parents=True)
    named: dict[str, Path] = {}
    for start in range(0, len(files), per_shard):
        shard = f"train-{start // per_shard:06d}.tar"
        with tarfile.open(shards / shard, "w", format=tarfile.USTAR_FORMAT) as archive:
            for number, path in enumerate(files[start : start + per_shard], start):
                data = path.read_bytes()
                info = tarfile.TarInfo(f"s{number:06d}{path.suffix.lower()}")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
                named[f"{shard}/s{number:06d}"] = path
    return named


def scan(source: str, target: str, db: Path, workers: int) -> None:
    command = [sys.executable, "-m", "datalint", "scan", source, target, "--db", str(db), "--kinds", "all",
               "--workers", str(workers), "--progress", "none"]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr)


def kinds_by_key(db: Path) -> dict[str, set[str]]:
    with contextlib.closing(sqlite3.connect(db)) as connection:
        rows = connection.execute("SELECT s.key, f.kind FROM samples s JOIN findings f ON f.idx = s.idx")
        found: dict[str, set[str]] = {}
        for key, kind in rows:
            found.setdefault(str(key), set()).add(kind)
        return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder", type=Path)
    parser.add_argument("--per-shard", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    folder = args.folder.resolve()
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in EXTENSIONS)
    work = Path(tempfile.mkdtemp(prefix="datalint-wds-vs-images-"))
    try:
        named = pack(files, work / "shards", args.per_shard)
        scan("--images", str(folder), work / "images.db", args.workers)
        scan("--webdataset", str(work / "shards" / "train-*.tar"), work / "shards.db", args.workers)
        as_files = {
            str(path.relative_to(folder)): kinds
            for path, kinds in (
                (folder / key, kinds) for key, kinds in kinds_by_key(work / "images.db").items()
            )
            if path.suffix.lower() in EXTENSIONS
        }
        as_samples = {
            str(named[key].relative_to(folder)): kinds
            for key, kinds in kinds_by_key(work / "shards.db").items()
            if key in named
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(files)} image files in {folder}")
    print(
        "kinds, --images:    ", dict(Counter(k for kinds in as_files.values() for k in kinds).most_common())
    )
    print(
        "kinds, --webdataset:", dict(Counter(k for kinds in as_samples.values() for k in kinds).most_common())
    )
    differ = sorted(
        name for name in set(as_files) | set(as_samples) if as_files.get(name) != as_samples.get(name)
    )
    print(f"files whose kinds differ: {len(differ)}")
    for name in differ:
        mine, theirs = sorted(as_files.get(name, ())), sorted(as_samples.get(name, ()))
        print(f"  {name}: --images {mine}, --webdataset {theirs}")


if __name__ == "__main__":
    main()
