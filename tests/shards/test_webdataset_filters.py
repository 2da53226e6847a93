"""The list applied where the data is read: a webdataset stage, a datasets filter, a pyarrow mask."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from datalint.errors import UsageError
from datalint.index.binary_list import write_binary_quarantine
from datalint.torch import Quarantine
from datalint.webdataset import arrow_mask, hf_filter, skip_quarantined
from tests.scan.scan_support import run_cli
from tests.shards.shard_support import write_faulty_shards


@pytest.fixture(scope="module")
def scanned_shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("shards")
    write_faulty_shards(folder)
    db = folder / "shards.db"
    code, _, err = run_cli("scan", "--webdataset", str(folder / "train-*.tar"), "--db", str(db))
    assert code == 1, err
    return folder, db.with_name("shards.quarantine.json")


def test_a_real_webdataset_pipeline_never_yields_a_quarantined_sample(
    scanned_shards: tuple[Path, Path],
) -> None:
    wds = pytest.importorskip("webdataset")
    folder, quarantine = scanned_shards
    urls = [str(folder / "train-000000.tar"), str(folder / "train-000001.tar")]
    stage = skip_quarantined(quarantine)
    dataset = wds.WebDataset(urls, shardshuffle=False).compose(stage)
    keys = [f"{Path(sample['__url__']).name}/{sample['__key__']}" for sample in dataset]
    assert keys == [f"train-000000.tar/s000{n}" for n in range(4)] + ["train-000001.tar/s0000"]
    assert stage.skipped == 3
    selected = wds.WebDataset(urls, shardshuffle=False).select(skip_quarantined(quarantine).keep)
    assert len(list(selected)) == 5


def test_a_list_without_keys_is_refused_by_the_stage(tmp_path: Path) -> None:
    path = write_binary_quarantine(tmp_path / "q.bin", [1, 2], length=10)
    with pytest.raises(UsageError, match="by index only"):
        skip_quarantined(path)


def test_a_datasets_filter_drops_the_quarantined_rows_batched_or_not(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"x": n}) + "\n" for n in range(20)))
    table = datasets.Dataset.from_json(str(rows), cache_dir=str(tmp_path / "cache"))
    listed = tmp_path / "q.json"
    listed.write_text(
        json.dumps(
            {
                "format": "datalint-quarantine/1",
                "length": 20,
                "samples": [
                    {"index": i, "key": None, "kinds": ["corrupt"], "detail": "x"} for i in (0, 7, 19)
                ],
            }
        )
    )
    kept = table.filter(hf_filter(listed), with_indices=True)
    assert kept["x"] == [n for n in range(20) if n not in (0, 7, 19)]
    batched = table.filter(hf_filter(listed), with_indices=True, batched=True, batch_size=6)
    assert batched["x"] == kept["x"]


def test_a_pyarrow_table_filtered_by_the_mask(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"x": list(range(10))}), tmp_path / "part-0.parquet")
    table = pq.read_table(tmp_path / "part-0.parquet")
    quarantine = Quarantine.from_indices([2, 3, 9], length=10)
    assert table.filter(arrow_mask(quarantine, table.num_rows))["x"].to_pylist() == [0, 1, 4, 5, 6, 7, 8]
    assert np.array_equal(arrow_mask(quarantine, 2, offset=8), [True, False])
