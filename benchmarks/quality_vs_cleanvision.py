"""cleanvision 0.3.x on the labelled quality corpus, scored like benchmarks/quality_detection.py.

    python -m venv /work/ext/cv-venv && /work/ext/cv-venv/bin/pip install cleanvision  # not the project's
    python benchmarks/quality_vs_cleanvision.py /tmp/qc --workers 2 \
        --cleanvision-python /work/ext/cv-venv/bin/python

Runs `Imagelab(data_path=OUT/images).find_issues(n_jobs=N)` in cleanvision's own interpreter and
prints files/s and per-kind precision and recall on the kinds both tools have (cleanvision's
`odd_aspect_ratio` is our `odd_aspect`; its `near_duplicates` flags every member of a set, so its
near-duplicate line counts files, not pairs).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality_detection import QUALITY, expected

PROGRAM = """
import json, sys, time
from cleanvision import Imagelab
folder, workers = sys.argv[1], int(sys.argv[2])
started = time.perf_counter()
lab = Imagelab(data_path=folder + "/images")
lab.find_issues(n_jobs=workers, verbose=False)
elapsed = time.perf_counter() - started
flags = {}
for column in lab.issues.columns:
    if column.startswith("is_") and column.endswith("_issue"):
        flags[column[3:-6]] = [p.split("/images/", 1)[1] for p in lab.issues.index[lab.issues[column]]]
json.dump({"elapsed": elapsed, "flags": flags}, sys.stdout)
"""
NAMES = {"odd_aspect_ratio": "odd_aspect"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--cleanvision-python", required=True)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    labels = json.loads((args.folder / "labels.json").read_text())
    result = subprocess.run(
        [args.cleanvision_python, "-c", PROGRAM, str(args.folder), str(args.workers)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    report = json.loads(result.stdout)
    got: dict[str, set[str]] = defaultdict(set)
    for name, paths in report["flags"].items():
        got[NAMES.get(name, name)] = set(paths)
    seconds = report["elapsed"]
    print(
        f"cleanvision: {len(labels)} files in {seconds:.1f} s ({len(labels) / seconds:.0f} files/s), "
        f"n_jobs={args.workers}"
    )
    wanted = expected(labels)
    print(f"{'kind':16} {'planted':>7} {'found':>6} {'precision':>9} {'recall':>7}")
    for kind in QUALITY:
        hits = len(wanted[kind] & got[kind])
        precision = hits / len(got[kind]) if got[kind] else 1.0
        recall = hits / len(wanted[kind]) if wanted[kind] else 1.0
        print(f"{kind:16} {len(wanted[kind]):7} {len(got[kind]):6} {precision:9.3f} {recall:7.3f}")
    grouped = {path for path, label in labels.items() if "group" in label}
    near = got["near_duplicates"]
    print(f"near_duplicates: {len(near & grouped)} of {len(grouped)} planted group members flagged, "
          f"{len(near - grouped)} files outside any planted group")  # fmt: skip


if __name__ == "__main__":
    main()
