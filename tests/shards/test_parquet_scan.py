"""`datalint scan --parquet`: real Parquet files, a damaged footer, a corrupt page, a bad image value."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.scan.scan_support import run_cli
from tests.shards.shard_support import jpeg

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def write_part(path: Path, images: list[bytes | None], ids: list[str]) -> Path:
    table = pa.table({"id": ids, "image": pa.array(images, type=pa.binary())})
    pq.write_table(
        table, path, row_group_size=4, compression="none", use_dictionary=False, write_page_checksum=True
    )
    return path


def corrupt_last_row_group(path: Path) -> None:
    """Flip bytes inside the image column's data of the last row group: its page checksum fails."""
    metadata = pq.ParquetFile(path).metadata
    last = metadata.row_group(metadata.num_row_groups - 1).column(1)
    middle = last.data_page_offset + last.total_compressed_size // 2
    data = bytearray(path.read_bytes())
    data[middle : middle + 16] = bytes(16)
    path.write_bytes(bytes(data))


def test_the_scan_reports_damaged_values_files_and_row_groups_and_goes_on(tmp_path: Path) -> None:
    good = [jpeg(n) for n in range(8)]
    write_part(tmp_path / "part-0.parquet", good, [f"a{n}" for n in range(8)])
    broken = list(good)
    broken[1] = good[1][: len(good[1]) // 2]
    broken[2] = None
    write_part(tmp_path / "part-1.parquet", broken, [f"b{n}" for n in range(8)])
    corrupt_last_row_group(write_part(tmp_path / "part-2.parquet", good, [f"c{n}" for n in range(8)]))
    (tmp_path / "part-3.parquet").write_bytes(b"PAR1 this is not parquet")
    db = tmp_path / "parts.db"
    code, out, err = run_cli(
        "scan", "--parquet", str(tmp_path / "part-*.parquet"), "--db", str(db), "--format", "json"
    )
    assert code == 1, err
    document = json.loads(Path(json.loads(out)["quarantine"]).read_text())
    found = {sample["key"]: sample["kinds"][0] for sample in document["samples"]}
    lost_group = {f"part-2.parquet#{row}": "corrupt" for row in range(4, 8)}
    assert found == {
        "part-1.parquet#1": "corrupt",
        "part-1.parquet#2": "empty",
        **lost_group,
        "part-3.parquet": "unreadable",
    }
    assert document["length"] == 8 * 3 + 1
    details = {sample["key"]: sample["detail"] for sample in document["samples"]}
    assert "row group 1 of part-2.parquet" in details["part-2.parquet#5"]


def test_a_key_column_names_the_rows_and_a_missing_column_is_a_usage_error(tmp_path: Path) -> None:
    images = [jpeg(n) for n in range(3)]
    images[0] = b"not an image"
    write_part(tmp_path / "part-0.parquet", images, ["x", "y", "z"])
    pattern = str(tmp_path / "part-*.parquet")
    code, out, err = run_cli(
        "scan", "--parquet", pattern, "--key-column", "id", "--db", str(tmp_path / "k.db"), "--format", "json"
    )
    assert code == 1, err
    document = json.loads(Path(json.loads(out)["quarantine"]).read_text())
    assert [sample["key"] for sample in document["samples"]] == ["x"]
    code, _, err = run_cli("scan", "--parquet", pattern, "--column", "jpg", "--db", str(tmp_path / "m.db"))
    assert code == 2 and "no column 'jpg'" in err


def test_a_file_without_the_image_column_is_its_finding_and_the_others_are_scanned(tmp_path: Path) -> None:
    good = [jpeg(n) for n in range(4)]
    write_part(tmp_path / "part-0.parquet", good, list("abcd"))
    pq.write_table(
        pa.table({"id": ["e"], "img": pa.array(good[:1], type=pa.binary())}), tmp_path / "part-1.parquet"
    )
    pq.write_table(pa.table({"id": ["f"], "image": ["images/f.jpg"]}), tmp_path / "part-2.parquet")
    db = tmp_path / "parts.db"
    code, out, err = run_cli(
        "scan", "--parquet", str(tmp_path / "part-*.parquet"), "--db", str(db), "--format", "json"
    )
    assert code == 1, err  # not 2: the scan went on
    summary = json.loads(out)
    assert summary["length"] == 4 + 1 + 1  # each file without image bytes is one entry
    document = json.loads(Path(summary["quarantine"]).read_text())
    details = {sample["key"]: (sample["kinds"], sample["detail"]) for sample in document["samples"]}
    assert set(details) == {"part-1.parquet", "part-2.parquet"}
    assert details["part-1.parquet"][0] == ["unreadable"]
    assert "has no column 'image' (its columns: id, img)" in details["part-1.parquet"][1]
    assert "holds string in column 'image', not image bytes" in details["part-2.parquet"][1]


def test_a_file_without_the_key_column_is_keyed_by_row_and_said(tmp_path: Path) -> None:
    images = [jpeg(n) for n in range(2)]
    write_part(tmp_path / "part-0.parquet", images, ["x", "y"])
    pq.write_table(pa.table({"image": pa.array(images, type=pa.binary())}), tmp_path / "part-1.parquet")
    pattern = str(tmp_path / "part-*.parquet")
    code, out, err = run_cli(
        "scan", "--parquet", pattern, "--key-column", "id", "--db", str(tmp_path / "k.db"), "--format", "json"
    )
    assert code == 0, err
    notes = json.loads(out)["notes"]
    assert any(note.startswith("1 file(s) have no column 'id' (the first: part-1.parquet)") for note in notes)
    with closing(sqlite3.connect(tmp_path / "k.db")) as connection:
        keys = {row[0] for row in connection.execute("SELECT key FROM samples")}
    assert keys == {"x", "y", "part-1.parquet#0", "part-1.parquet#1"}
    code, _, err = run_cli(
        "scan", "--parquet", pattern, "--key-column", "uid", "--db", str(tmp_path / "u.db")
    )
    assert code == 2 and "no column 'uid'" in err
