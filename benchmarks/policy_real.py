"""The scan's policy on real annotation files no one here wrote: COCO-format JSON from public repos.

    python benchmarks/policy_real.py FILE.json --num-classes N [--workers 2]

Each file is scanned through two datasets a training script would write over it: one raw
annotation record per sample (`Annotations`, label `category_id`) and one image per sample with
its boxes and labels as tensors (`Detection`, label `labels`). Prints one line per finding
(file, view, index, kind, detail); the judged verdicts are kept in policy_real_verdicts.csv.
The files themselves stay outside the project (extract them from a fetched repository).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from torch.utils.data import Dataset

HERE = Path(__file__).resolve()


def _load(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


class Annotations(Dataset):
    """One annotation record per sample, the JSON dict as it is."""

    def __init__(self, path: str) -> None:
        self.records = _load(path)["annotations"]

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> Any:
        return self.records[index]


class Detection(Dataset):
    """One image per sample: {"boxes": (N, 4) float32, "labels": (N,) int64, "iscrowd": (N,)}, the
    way detection tutorials build it (iscrowd through torch.tensor of a plain list)."""

    def __init__(self, path: str) -> None:
        data = _load(path)
        self.images = data["images"]
        self.by_image: dict[Any, list[dict[str, Any]]] = {}
        for annotation in data["annotations"]:
            self.by_image.setdefault(annotation["image_id"], []).append(annotation)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> Any:
        import torch

        annotations = self.by_image.get(self.images[index]["id"], [])
        return {
            "boxes": torch.tensor([a["bbox"] for a in annotations], dtype=torch.float32).reshape(-1, 4),
            "labels": torch.tensor([a["category_id"] for a in annotations], dtype=torch.int64),
            "iscrowd": torch.tensor([a.get("iscrowd", 0) for a in annotations]),
        }


VIEWS = {"Annotations": "category_id", "Detection": "labels"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", metavar="FILE.json")
    parser.add_argument("--num-classes", type=int, required=True)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)

    import datalint
    from datalint.index import store

    print("file\tview\tsamples\tindex\tkind\tdetail")
    with tempfile.TemporaryDirectory(prefix="datalint-policy-real-") as folder:
        for number, path in enumerate(args.files):
            for view, label in VIEWS.items():
                db = Path(folder) / f"{number}-{view}.db"
                summary = datalint.scan(
                    f"{HERE}:{view}({str(Path(path).resolve())!r})",
                    db=db,
                    workers=args.workers,
                    label=[label],
                    num_classes=args.num_classes,
                )
                index = store.open_index(db, create=False)
                try:
                    query = "SELECT idx, kind, detail FROM findings ORDER BY idx, kind"
                    rows = index.execute(query).fetchall()
                finally:
                    index.close()
                for idx, kind, detail in rows or [(None, "", "no finding")]:
                    print(f"{Path(path).name}\t{view}\t{summary.length}\t{idx}\t{kind}\t{detail}")
                for note in summary.notes:
                    print(f"{Path(path).name}\t{view}\t{summary.length}\t\tnote\t{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
