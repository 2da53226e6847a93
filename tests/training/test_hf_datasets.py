"""Hugging Face `datasets`, for real (built locally, no hub): scanned through `--dataset`, its `Image()`
column judged as image files, and the list applied with `hf.drop_quarantined`."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import datalint
from datalint import hf
from datalint.errors import UsageError
from datalint.index.keys import fingerprint
from datalint.scan.sources import SourceDescription
from datalint.training.fit import StaleQuarantineError, StaleQuarantineWarning
from datalint.training.quarantine import Quarantine, load_quarantine

datasets = pytest.importorskip("datasets")

LENGTH = 10
DAMAGED = {1: "corrupt", 2: "corrupt", 4: "empty", 6: "label_out_of_range"}

BUILDER = f'''
import datasets, io
from PIL import Image


def jpeg(seed):
    out = io.BytesIO()
    Image.new("RGB", (48, 48), ((seed * 37) % 256, (seed * 91) % 256, 90)).save(out, format="JPEG")
    return out.getvalue()


def build():
    images = [jpeg(n) for n in range({LENGTH})]
    images[1] = images[1][: len(images[1]) // 2]          # truncated
    images[2] = b"<html>404 not found</html>"             # an error page saved as an image
    images[4] = None                                      # no image at all
    labels = [n % 3 for n in range({LENGTH})]
    labels[6] = 7                                         # outside [0, 3)
    features = datasets.Features(
        {{"id": datasets.Value("string"), "label": datasets.Value("int64"), "image": datasets.Image()}}
    )
    rows = {{
        "id": [f"photo-{{n:03d}}" for n in range({LENGTH})],
        "label": labels,
        "image": [None if b is None else {{"bytes": b, "path": f"{{n}}.jpg"}} for n, b in enumerate(images)],
    }}
    return datasets.Dataset.from_dict(rows, features=features)
'''


@pytest.fixture
def builder(tmp_path: Path) -> Any:
    path = tmp_path / "hfdata.py"
    path.write_text(BUILDER)
    namespace: dict[str, Any] = {}
    exec(compile(BUILDER, str(path), "exec"), namespace)
    return path, namespace["build"]


def scanned(source: Any, db: Path) -> dict[str, Any]:
    datalint.scan(source, db=db, workers=1, label="label", num_classes=3)
    document: dict[str, Any] = json.loads(db.with_name(db.stem + ".quarantine.json").read_text())
    return document


def test_a_spec_giving_a_dataset_is_scanned_row_by_row_keyed_by_its_fingerprint(
    builder: Any, tmp_path: Path
) -> None:
    path, build = builder
    document = scanned(f"{path}:build()", tmp_path / "rows.db")
    found = {sample["index"]: sample["kinds"][0] for sample in document["samples"]}
    assert found == DAMAGED
    fingerprint_now = build()._fingerprint
    assert {sample["key"] for sample in document["samples"]} == {f"{fingerprint_now}#{i}" for i in DAMAGED}
    details = {sample["index"]: sample["detail"] for sample in document["samples"]}
    assert "HTML page" in details[2]

    # The same dataset built again at training time: the list applies by position, one select
    train = hf.drop_quarantined(build(), tmp_path / "rows.quarantine.json")
    assert train["id"] == [f"photo-{n:03d}" for n in range(LENGTH) if n not in DAMAGED]


def test_a_list_by_position_is_refused_for_another_version_of_the_dataset(
    builder: Any, tmp_path: Path
) -> None:
    path, build = builder
    scanned(f"{path}:build()", tmp_path / "rows.db")
    listed = tmp_path / "rows.quarantine.json"
    shuffled = build().shuffle(seed=3)  # the same rows in another order: positions mean other rows
    with pytest.raises(StaleQuarantineError) as refused:
        hf.drop_quarantined(shuffled, listed)
    message = str(refused.value)
    assert build()._fingerprint in message and shuffled._fingerprint in message
    assert f"datalint scan --dataset {path}:build()" in message.replace("'", "")
    with pytest.warns(StaleQuarantineWarning, match="strict=False"):
        forced = hf.drop_quarantined(shuffled, listed, strict=False)
    assert len(forced) == LENGTH - len(DAMAGED)


def test_a_saved_folder_is_scanned_by_its_id_column_and_the_list_follows_rows_that_moved(
    builder: Any, tmp_path: Path
) -> None:
    _, build = builder
    folder = tmp_path / "saved"
    build().save_to_disk(str(folder))
    db = tmp_path / "saved.db"
    document = scanned(SourceDescription.make("dataset", str(folder), key_column="id", labels=("label",)), db)
    assert {sample["key"] for sample in document["samples"]} == {f"photo-{i:03d}" for i in DAMAGED}

    reloaded = datasets.load_from_disk(str(folder))
    kept = hf.drop_quarantined(reloaded, db, key_column="id")  # the index is a list too
    assert sorted(kept["id"]) == [f"photo-{n:03d}" for n in range(LENGTH) if n not in DAMAGED]

    shuffled = reloaded.shuffle(seed=1)
    with pytest.warns(StaleQuarantineWarning, match="no longer at the position"):
        moved = hf.drop_quarantined(shuffled, db, key_column="id")
    assert sorted(moved["id"]) == sorted(kept["id"])

    with pytest.raises(StaleQuarantineError, match="key_column="):
        hf.drop_quarantined(reloaded, db)  # keyed by the column, not by position


def test_a_list_whose_keys_are_not_in_the_column_is_refused_rather_than_dropping_nothing(
    builder: Any,
) -> None:
    _, build = builder
    other = Quarantine.from_indices([0, 3], length=LENGTH, keys=["cat/001.jpg", "cat/002.jpg"])
    with pytest.raises(StaleQuarantineError, match="none of the 2 keys"):
        hf.drop_quarantined(build(), other, key_column="id")
    with pytest.raises(StaleQuarantineError, match="by position only"):
        hf.drop_quarantined(build(), Quarantine.from_indices([1], length=LENGTH), key_column="id")


def test_a_shared_key_drops_every_row_that_has_it_and_says_so() -> None:
    ds = datasets.Dataset.from_dict({"id": ["a", "b", "a", "c"], "x": [0, 1, 2, 3]})
    listed = Quarantine.from_indices([0], length=4, keys=["a"])
    with pytest.warns(StaleQuarantineWarning, match="share a quarantined 'id'"):
        kept = hf.drop_quarantined(ds, listed, key_column="id")
    assert kept["x"] == [1, 3]


def test_a_list_of_a_changed_dataset_still_applies_when_its_rows_are_in_place_with_a_warning() -> None:
    ds = datasets.Dataset.from_dict({"id": ["a", "b", "c", "d"]})
    old = fingerprint(3, lambda i: "abc"[i])
    listed = Quarantine(
        indices=np.array([1]), keys=("b",), kinds=(("corrupt",),), length=3, fingerprint=old
    )
    with pytest.warns(StaleQuarantineWarning, match="changed since the list was made"):
        kept = hf.drop_quarantined(ds, listed, key_column="id")
    assert kept["id"] == ["a", "c", "d"]


def test_the_column_fingerprint_is_the_index_fingerprint() -> None:
    ids = [f"id-{n}" for n in range(1000)]
    values = datasets.Dataset.from_dict({"id": ids}).with_format("arrow")["id"]
    assert hf.column_fingerprint(values) == fingerprint(len(ids), ids.__getitem__)


def test_a_dataset_dict_folder_names_its_splits_and_key_column_needs_a_hf_dataset(
    builder: Any, tmp_path: Path
) -> None:
    _, build = builder
    folder = tmp_path / "dict"
    datasets.DatasetDict({"train": build(), "test": build()}).save_to_disk(str(folder))
    with pytest.raises(UsageError, match="splits: test, train"):
        datalint.scan(str(folder), db=tmp_path / "d.db", workers=1)
    assert len(load_quarantine_or_none(tmp_path / "d.quarantine.json")) == 0
    faults = Path(__file__).resolve().parents[2] / "fixtures" / "datasets" / "demo.py"
    with pytest.raises(UsageError, match="--key-column is for a Hugging Face dataset"):
        keyed = SourceDescription.make("dataset", f"{faults}:demo", key_column="id")
        datalint.scan(keyed, db=tmp_path / "e.db", workers=1)


def load_quarantine_or_none(path: Path) -> Quarantine:
    return load_quarantine(path) if path.exists() else Quarantine.from_indices([], length=None)


def test_import_datalint_does_not_import_datasets() -> None:
    import subprocess
    import sys

    code = "import sys, datalint, datalint.extras; print('datasets' in sys.modules, 'pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_drop_quarantined_with_nothing_listed_returns_the_dataset() -> None:
    ds = datasets.Dataset.from_dict({"id": ["a", "b"]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hf.drop_quarantined(ds, Quarantine.from_indices([], length=2)) is ds


def test_image_columns_get_the_quality_checks_of_image_files(tmp_path: Path) -> None:
    import io
    import sqlite3
    from contextlib import closing

    from PIL import Image

    def png(pixels: Any) -> bytes:
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, format="PNG")
        return out.getvalue()

    noise = np.random.default_rng(0)
    images = [png(noise.integers(0, 255, (64, 64, 3), dtype=np.uint8)) for _ in range(12)]
    images[3] = png(np.zeros((64, 64, 3), np.uint8))  # black
    images[5] = images[4]  # the same bytes twice
    features = datasets.Features({"photo": datasets.Image()})
    rows = {"photo": [{"bytes": b, "path": None} for b in images]}
    ds = datasets.Dataset.from_dict(rows, features=features)
    folder = tmp_path / "photos"
    ds.save_to_disk(str(folder))
    db = tmp_path / "photos.db"
    datalint.scan(str(folder), db=db, workers=1)
    with closing(sqlite3.connect(db)) as index:
        found = set(index.execute("SELECT idx, kind FROM findings").fetchall())
    assert {(3, "dark"), (5, "duplicate")} <= found


def test_a_stale_list_of_a_saved_folder_names_the_scan_of_that_folder(builder: Any, tmp_path: Path) -> None:
    _, build = builder
    folder = tmp_path / "saved"
    build().save_to_disk(str(folder))
    scanned(str(folder), tmp_path / "saved.db")
    with pytest.raises(StaleQuarantineError) as refused:
        hf.drop_quarantined(datasets.load_from_disk(str(folder)).shuffle(seed=2), tmp_path / "saved.db")
    assert f"`datalint scan --dataset {folder}`" in str(refused.value)
    kept = hf.drop_quarantined(datasets.load_from_disk(str(folder)), tmp_path / "saved.db")
    assert len(kept) == LENGTH - len(DAMAGED)


def test_the_command_line_scans_a_saved_folder_by_its_id_column(builder: Any, tmp_path: Path) -> None:
    from tests.scan.scan_support import run_cli

    _, build = builder
    folder = tmp_path / "saved"
    build().save_to_disk(str(folder))
    db = tmp_path / "cli.db"
    code, out, err = run_cli(
        "scan", "--dataset", str(folder), "--key-column", "id", "--label", "label", "--num-classes", "3",
        "--db", str(db), "--workers", "1", "--format", "json",
    )  # fmt: skip
    assert code == 1, err
    document = json.loads(Path(json.loads(out)["quarantine"]).read_text())
    assert {sample["key"] for sample in document["samples"]} == {f"photo-{i:03d}" for i in DAMAGED}
    misspelt = ("--key-column", "nope", "--db", str(tmp_path / "n.db"))
    code, _, err = run_cli("scan", "--dataset", str(folder), *misspelt)
    assert code == 2 and "no column 'nope'" in err


def test_a_dataset_object_handed_to_the_api_is_read_as_one(builder: Any, tmp_path: Path) -> None:
    _, build = builder
    ds = build()
    document = scanned(ds, tmp_path / "object.db")
    assert {sample["key"]: sample["kinds"][0] for sample in document["samples"]} == {
        f"{ds._fingerprint}#{index}": kind for index, kind in DAMAGED.items()
    }
    assert len(hf.drop_quarantined(ds, tmp_path / "object.quarantine.json")) == LENGTH - len(DAMAGED)
