"""Policy: each data kind's planted faults become exactly the expected findings, and nothing else."""

from __future__ import annotations

import sys

import pytest
from scan_support import DATASETS, load_json, spec

import datalint

sys.path.insert(0, str(DATASETS))
import kinds  # the fixture module, for its PLANTED tables


def findings_by_index(summary) -> dict[int, set[str]]:
    from datalint.index import store

    db = store.open_index(summary.index_path, create=False)
    try:
        found: dict[int, set[str]] = {}
        for idx, kind in db.execute("SELECT idx, kind FROM findings"):
            found.setdefault(idx, set()).add(kind)
        return found
    finally:
        db.close()


@pytest.mark.parametrize(
    ("factory", "planted", "options"),
    [
        ("tensors", kinds.TENSORS_PLANTED, {}),
        ("dicts", kinds.DICTS_PLANTED, {"label": ["label"], "num_classes": 5}),
        ("tuples", kinds.TUPLES_PLANTED, {}),
        ("arrays", kinds.ARRAYS_PLANTED, {}),
        ("records", kinds.RECORDS_PLANTED, {}),
        ("mixed", kinds.MIXED_PLANTED, {"label": ["label"], "num_classes": 5}),
    ],
)
def test_planted_faults_are_found_and_nothing_else(tmp_path, factory, planted, options) -> None:
    summary = datalint.scan(spec(f"kinds.py:{factory}()"), db=tmp_path / "k.db", workers=1, **options)
    found = findings_by_index(summary)
    assert set(found) == set(planted)
    for index, kind in planted.items():
        assert kind in found[index], f"{factory}[{index}]: expected {kind}, found {found[index]}"


def test_the_grayscale_image_and_the_huge_one_are_named_with_their_shapes(tmp_path) -> None:
    summary = datalint.scan(spec("kinds.py:tensors()"), db=tmp_path / "t.db", workers=1)
    document = load_json(summary.quarantine_path)
    entries = {entry["index"]: entry for entry in document["samples"]}
    assert "shape [1, 8, 8]; most samples have [3, 8, 8]" in entries[4]["detail"]
    assert entries[4]["key"] == "img/004.png"  # the ImageFolder-style `samples` attribute names it
    assert "oversized" in entries[7]["kinds"]
    assert 5 not in entries  # dtype_mismatch is reported, not quarantined, by default


def test_ignore_index_and_required_fields(tmp_path) -> None:
    summary = datalint.scan(
        spec("kinds.py:dicts()"),
        db=tmp_path / "d.db",
        workers=1,
        label=["label"],
        num_classes=5,
        ignore_index=-1,
        require=["image"],
    )
    found = findings_by_index(summary)
    assert 6 not in found  # -1 is the ignore index
    assert found[4] == {"label_out_of_range"}


def test_max_bytes_is_an_absolute_cap(tmp_path) -> None:
    summary = datalint.scan(spec("kinds.py:records()"), db=tmp_path / "r.db", workers=1, max_bytes=100)
    assert summary.findings["oversized"] == 1
    summary = datalint.scan(spec("kinds.py:records()"), db=tmp_path / "r.db", workers=1, max_bytes=50)
    assert summary.findings["oversized"] == 16  # every sample is over 50 bytes; no rescan was needed
    assert summary.scanned == 0


def test_a_dataset_of_pil_images_gets_one_note_not_a_quarantine_of_everything(tmp_path) -> None:
    summary = datalint.scan(spec("kinds.py:images()"), db=tmp_path / "i.db", workers=1)
    assert summary.quarantined == 0
    assert any("PIL.Image" in note and "collate_fn" in note for note in summary.notes)


def test_keys_from_datalint_key_reach_the_quarantine_list(tmp_path) -> None:
    summary = datalint.scan(spec("kinds.py:Named()"), db=tmp_path / "n.db", workers=1)
    document = load_json(summary.quarantine_path)
    assert document["samples"] == [
        {
            "index": 4,
            "key": "shard-0/item-4",
            "kinds": ["error"],
            "detail": document["samples"][0]["detail"],
        }
    ]
    assert document["samples"][0]["detail"].startswith("OSError: image file is truncated")
    assert document["fingerprint"] is not None and len(document["fingerprint"]) == 64


def test_slow_samples_and_fd_leaks_are_reported_but_not_quarantined(tmp_path) -> None:
    summary = datalint.scan(
        spec("faults.py:make(length=20, slow=[3], leak_fd=[7])"), db=tmp_path / "s.db", workers=1, timeout=2.0
    )
    found = findings_by_index(summary)
    assert found == {3: {"slow"}, 7: {"fd_leak"}}
    assert summary.quarantined == 0 and summary.exit_code == 0


def test_field_checks_hold_on_a_mixed_population(tmp_path) -> None:
    # A few None samples and tuples among dicts change nothing about what a dict must hold.
    summary = datalint.scan(
        spec("kinds.py:mixed()"), db=tmp_path / "m.db", workers=1, label=["label"], require=["image"]
    )
    document = load_json(summary.quarantine_path)
    details = {entry["index"]: entry["detail"] for entry in document["samples"]}
    assert "label field 'label' is missing" in details[12]
    assert "label field 'label' is None" in details[15]
    assert "required field 'image' is missing" in details[26]
    assert "required field 'image' is None" in details[29]
    assert details[29].count("'image'") == 1  # said once, not again by the structure check
    assert "the sample is a tuple where most samples have a dict" in details[9]
    assert "position" not in details[9]  # the tuples' own positions are not held against them


def test_a_label_field_missing_everywhere_is_missing_on_every_sample(tmp_path) -> None:
    # --label names a field no sample has: every sample is missing it, majority or not.
    summary = datalint.scan(spec("kinds.py:tensors()"), db=tmp_path / "t.db", workers=1, label=["target"])
    assert summary.findings["missing_field"] == 24
    assert (
        "--label target: no sample has a field 'target', so every sample is missing_field" in summary.notes[0]
    )


def test_a_misspelt_field_name_is_said_once_with_the_likely_name(tmp_path) -> None:
    summary = datalint.scan(
        spec("kinds.py:dicts()"), db=tmp_path / "d.db", workers=1, label=["lable"], require=["imag"]
    )
    assert summary.findings["missing_field"] == 24
    assert [note for note in summary.notes if "no sample has" in note] == [
        "--require imag: no sample has a field 'imag', so every sample is missing_field; did you mean image?",
        "--label lable: no sample has a field 'lable', so every sample is missing_field; did you mean label?",
    ]


def test_each_structure_family_has_its_own_size_median(tmp_path) -> None:
    summary = datalint.scan(spec("kinds.py:two_families()"), db=tmp_path / "f.db", workers=1)
    found = findings_by_index(summary)
    assert found == {index: {"uncollatable"} for index in range(20, 32)}  # dicts among tuples, not oversized


def test_half_dicts_half_tuples_is_a_note_not_a_quarantine(tmp_path) -> None:
    halves = spec("kinds.py:two_families(small=16, large=16)")
    summary = datalint.scan(halves, db=tmp_path / "h.db", workers=1)
    assert summary.quarantined == 0
    (note,) = [note for note in summary.notes if "several structures" in note]
    assert "dict 50%" in note and "tuple 50%" in note and "collate_fn" in note
