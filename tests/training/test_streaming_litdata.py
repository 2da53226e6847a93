"""LitData streaming shards, for real (written locally with litdata's own writer, no network): scanned
through `--dataset FOLDER`, image bytes judged as image files, and the list applied while the samples
stream through a DataLoader with two workers."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from datalint.scan.api import scan
from datalint.scan.sources import SourceDescription
from datalint.training.fit import StaleQuarantineError

litdata = pytest.importorskip("litdata")
torch = pytest.importorskip("torch")

from datalint.streaming import drop_quarantined  # noqa: E402  (after the skips: it needs both)

LENGTH = 24
DAMAGED = {3: "corrupt", 10: "corrupt", 17: "label_out_of_range"}


def png(seed: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (32, 32), ((seed * 37) % 256, (seed * 91) % 256, 90)).save(out, format="PNG")
    return out.getvalue()


def samples() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"id": f"clip-{n:03d}", "image": png(n), "label": n % 3} for n in range(LENGTH)
    ]
    rows[3]["image"] = rows[3]["image"][:60]  # truncated inside the image data
    whole = rows[10]["image"]
    rows[10]["image"] = whole[:40] + bytes(len(whole) - 40)  # a PNG header, zeros after it
    rows[17]["label"] = 7  # outside [0, 3)
    return rows


def write(folder: Path, rows: list[dict[str, Any]], chunk_size: int) -> Path:
    from litdata.streaming.writer import BinaryWriter  # type: ignore[import-untyped]

    writer = BinaryWriter(str(folder), chunk_size=chunk_size)
    for number, row in enumerate(rows):
        writer[number] = row
    writer.done()
    writer.merge()
    return folder


def scanned(folder: Path, db: Path, **options: Any) -> dict[str, Any]:
    description = SourceDescription.make("dataset", str(folder), labels=("label",), **options)
    scan(description, db=db, workers=1, num_classes=3)
    document: dict[str, Any] = json.loads(db.with_name(db.stem + ".quarantine.json").read_text())
    return document


def streamed(dataset: Any, epochs: int = 1) -> list[Counter[str]]:
    """The ids each epoch's loop received, through a real DataLoader with two workers."""
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2)
    seen = []
    for epoch in range(epochs):
        dataset.set_epoch(epoch)
        seen.append(Counter(sample_id for batch in loader for sample_id in batch["id"]))
    return seen


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("litdata") / "train", samples(), chunk_size=5)


def test_each_sample_is_judged_and_keyed_by_chunk_and_offset(shards: Path, tmp_path: Path) -> None:
    document = scanned(shards, tmp_path / "places.db")
    found = {sample["index"]: sample["kinds"][0] for sample in document["samples"]}
    assert found == DAMAGED
    keys = {sample["index"]: sample["key"] for sample in document["samples"]}
    assert keys == {3: "chunk-0-0.bin#3", 10: "chunk-0-2.bin#0", 17: "chunk-0-3.bin#2"}


def test_the_list_by_place_never_reaches_the_loop_and_every_other_sample_arrives_once(
    shards: Path, tmp_path: Path
) -> None:
    db = tmp_path / "places.db"
    scanned(shards, db)
    train = drop_quarantined(litdata.StreamingDataset(str(shards), shuffle=True), db)
    first, second = streamed(train, epochs=2)
    wanted = {f"clip-{n:03d}" for n in range(LENGTH) if n not in DAMAGED}
    assert first == second == Counter(wanted)


def test_a_list_by_id_follows_the_samples_into_other_chunks(shards: Path, tmp_path: Path) -> None:
    db = tmp_path / "ids.db"
    document = scanned(shards, db, key_column="id")
    assert {sample["key"] for sample in document["samples"]} == {f"clip-{n:03d}" for n in DAMAGED}

    rewritten = write(tmp_path / "rewritten", samples()[::-1], chunk_size=7)  # other chunks, other order
    train = drop_quarantined(litdata.StreamingDataset(str(rewritten), shuffle=True), db, key_column="id")
    (seen,) = streamed(train)
    assert seen == Counter(f"clip-{n:03d}" for n in range(LENGTH) if n not in DAMAGED)


def test_a_list_by_place_is_refused_for_samples_written_into_other_chunks(
    shards: Path, tmp_path: Path
) -> None:
    db = tmp_path / "places.db"
    scanned(shards, db)
    rewritten = write(tmp_path / "rewritten", samples(), chunk_size=30)  # one chunk: chunk-0-2.bin is gone
    with pytest.raises(StaleQuarantineError, match="written again into other chunks"):
        drop_quarantined(litdata.StreamingDataset(str(rewritten)), db)
    with pytest.raises(StaleQuarantineError, match="not by 'id'"):
        drop_quarantined(litdata.StreamingDataset(str(shards)), db, key_column="id")


def test_the_command_line_scans_a_folder_of_chunks_by_its_id_field(shards: Path, tmp_path: Path) -> None:
    from tests.scan.scan_support import run_cli

    db = tmp_path / "cli.db"
    code, out, err = run_cli(
        "scan", "--dataset", str(shards), "--key-column", "id", "--label", "label", "--num-classes", "3",
        "--db", str(db), "--workers", "1", "--format", "json",
    )  # fmt: skip
    assert code == 1, err
    document = json.loads(Path(json.loads(out)["quarantine"]).read_text())
    assert {sample["key"] for sample in document["samples"]} == {f"clip-{n:03d}" for n in DAMAGED}
    code, _, err = run_cli(
        "scan", "--dataset", str(shards), "--key-column", "nope", "--db", str(tmp_path / "n.db")
    )
    assert code == 2 and "no field 'nope'" in err


def test_without_litdata_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    from datalint.extras import MissingExtraError

    monkeypatch.setitem(sys.modules, "litdata", None)  # what an install without the extra finds
    monkeypatch.delitem(sys.modules, "datalint.streaming")
    with pytest.raises(MissingExtraError, match=r"\[streaming\] extra \(missing: litdata\)"):
        importlib.import_module("datalint.streaming")


def test_by_place_every_rank_gets_as_many_samples_and_together_every_good_one(
    shards: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datalint import streaming

    db = tmp_path / "places.db"
    scanned(shards, db)
    ranks = 2
    per_rank = []
    for rank in range(ranks):
        # the rank torch.distributed would report in a job of two ranks
        monkeypatch.setattr(streaming, "_rank", lambda rank=rank: (rank, ranks))
        train = drop_quarantined(litdata.StreamingDataset(str(shards), shuffle=True), db, seed=7)
        (seen,) = streamed(train)
        assert sum(seen.values()) == len(train)
        per_rank.append(seen)
    good = LENGTH - len(DAMAGED)  # 21: one sample is given twice, to even the ranks
    assert [sum(seen.values()) for seen in per_rank] == [(good + 1) // 2] * ranks
    together = per_rank[0] + per_rank[1]
    assert set(together) == {f"clip-{n:03d}" for n in range(LENGTH) if n not in DAMAGED}
    assert sum(together.values()) == good + 1
