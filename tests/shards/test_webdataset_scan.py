"""`datalint scan --webdataset`: real tar shards, a damaged member of each kind, a truncated shard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datalint.errors import UsageError
from datalint.scan.webdataset import expand_braces, shard_paths
from tests.scan.scan_support import run_cli
from tests.shards.shard_support import write_faulty_shards, write_shard


def test_braces_expand_ranges_with_their_padding_and_lists() -> None:
    assert expand_braces("t-{008..011}.tar") == ["t-008.tar", "t-009.tar", "t-010.tar", "t-011.tar"]
    assert expand_braces("{a,b}/x-{1..2}.tar") == ["a/x-1.tar", "a/x-2.tar", "b/x-1.tar", "b/x-2.tar"]


def test_a_pattern_naming_missing_shards_is_a_usage_error(tmp_path: Path) -> None:
    write_faulty_shards(tmp_path)
    assert len(shard_paths(str(tmp_path / "train-*.tar"))) == 3
    with pytest.raises(UsageError, match=r"no such shard: .*train-000003\.tar"):
        shard_paths(str(tmp_path / "train-{000000..000003}.tar"))
    code, _, err = run_cli(
        "scan", "--webdataset", str(tmp_path / "nothing-*.tar"), "--db", str(tmp_path / "x.db")
    )
    assert code == 2 and "no shard file matches" in err


def test_the_scan_finds_every_planted_fault_and_goes_on_past_a_truncated_shard(tmp_path: Path) -> None:
    faults = write_faulty_shards(tmp_path)
    db = tmp_path / "index" / "shards.db"
    pattern = str(tmp_path / "train-{000000..000002}.tar")
    code, out, err = run_cli("scan", "--webdataset", pattern, "--db", str(db), "--format", "json")
    assert code == 1, err
    summary = json.loads(out)
    document = json.loads(Path(summary["quarantine"]).read_text())
    found = {sample["key"]: sample["kinds"][0] for sample in document["samples"]}
    assert found == faults
    details = {sample["key"]: sample["detail"] for sample in document["samples"]}
    assert "cut: " in details["train-000002.tar/s0002"]
    assert "the members after it are lost" in details["train-000002.tar"]
    assert "JSON" in details["train-000001.tar/s0002"]
    # Every sample the truncated shard still holds whole is scanned: 4 + 4 + 3 samples + 1 shard entry.
    assert document["length"] == 12


def test_a_second_scan_of_the_same_shards_resumes_instead_of_rescanning(tmp_path: Path) -> None:
    write_faulty_shards(tmp_path)
    db = tmp_path / "shards.db"
    argv = ("scan", "--webdataset", str(tmp_path / "train-*.tar"), "--db", str(db), "--format", "json")
    first = json.loads(run_cli(*argv)[1])
    second = json.loads(run_cli(*argv)[1])
    assert first["scanned"] == 12
    assert second["scanned"] == 0 and second["resumed"] == 12
    assert second["quarantined"] == first["quarantined"] == 5


def test_image_members_are_judged_against_the_population_as_image_files_are(tmp_path: Path) -> None:
    """The same photo in two shards is a `duplicate`, a black one among noisy ones is `dark`, and a
    tiny one is `tiny`: the population kinds of `--images`, from the samples' image members."""
    import io

    import numpy as np
    from PIL import Image

    def png(pixels: np.ndarray) -> bytes:
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, format="PNG")
        return out.getvalue()

    rng = np.random.default_rng(18)
    photos = [png(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)) for _ in range(12)]
    first = [{"__key__": f"a{n}".encode(), "png": photos[n], "cls": b"1"} for n in range(6)]
    second = [{"__key__": f"b{n}".encode(), "png": photos[6 + n], "cls": b"2"} for n in range(6)]
    second[0]["png"] = photos[2]  # the same bytes as a2 in the other shard
    second[1]["png"] = png(np.zeros((64, 64, 3), dtype=np.uint8))
    second[2]["png"] = png(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8))
    write_shard(tmp_path / "train-000000.tar", first)
    write_shard(tmp_path / "train-000001.tar", second)
    db = tmp_path / "shards.db"
    pattern = str(tmp_path / "train-*.tar")
    argv = ("scan", "--webdataset", pattern, "--db", str(db), "--format", "json", "--kinds", "all")
    code, out, err = run_cli(*argv)
    assert code == 1, err
    document = json.loads(Path(json.loads(out)["quarantine"]).read_text())
    kinds = {sample["key"]: set(sample["kinds"]) for sample in document["samples"]}
    details = {sample["key"]: sample["detail"] for sample in document["samples"]}
    assert "duplicate" in kinds["train-000001.tar/b0"]  # the later copy, naming the first
    assert "train-000000.tar/a2" in details["train-000001.tar/b0"]
    assert "dark" in kinds["train-000001.tar/b1"]
    assert "tiny" in kinds["train-000001.tar/b2"]
    assert "train-000000.tar/a0" not in kinds  # a noisy photo of its own: nothing to say


def test_members_repeating_a_name_in_one_sample_are_said_to_be_folded(tmp_path: Path) -> None:
    import io
    import sqlite3
    import tarfile

    from tests.shards.shard_support import jpeg

    shard = tmp_path / "dup-000000.tar"
    with tarfile.open(shard, "w", format=tarfile.USTAR_FORMAT) as archive:
        for name, data in [
            ("0001.jpg", jpeg(1)),
            ("0001.jpg", jpeg(2)),
            ("0001.cls", b"3"),
            ("0002.jpg", jpeg(4)),
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    db = tmp_path / "dup.db"
    code, out, err = run_cli("scan", "--webdataset", str(shard), "--db", str(db), "--format", "json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["length"] == 2
    folded = [note for note in summary["notes"] if "folded" in note]
    assert folded and folded[0].startswith("1 tar member(s) repeat a name their sample already has")
    assert "dup-000000.tar/0001" in folded[0]
    with sqlite3.connect(db) as connection:
        infos = dict(connection.execute("SELECT key, info FROM samples").fetchall())
    assert json.loads(infos["dup-000000.tar/0001"])["folded"] == {"jpg": 1}
    assert "folded" not in json.loads(infos["dup-000000.tar/0002"])
    code, out, err = run_cli("scan", "--webdataset", str(shard), "--db", str(db))
    assert "folded into 1 sample(s)" in out  # said again by an incremental scan that measures nothing
