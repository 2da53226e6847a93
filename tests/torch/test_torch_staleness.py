"""A quarantine list made for another dataset is refused, remapped by key, or (strict=False) warned about."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from torch_test_data import FolderLikeDataset, IndexDataset, write_quarantine

from datalint.torch import (
    DistributedQuarantineSampler,
    GuardedDataset,
    QuarantineSampler,
    StaleQuarantineError,
    StaleQuarantineWarning,
    load_quarantine,
)
from datalint.training.fit import dataset_fingerprint, key_reader

PATHS = [f"train/{name:03d}.jpg" for name in range(40)]


def _fingerprint(dataset: FolderLikeDataset) -> str | None:
    reader = key_reader(dataset)
    assert reader is not None
    return dataset_fingerprint(len(dataset), reader)


def test_list_for_a_dataset_of_another_length_is_refused(tmp_path: Path) -> None:
    path = write_quarantine(tmp_path / "quarantine.json", [3, 7], length=40, dataset="mymod:train")
    with pytest.raises(StaleQuarantineError) as caught:
        QuarantineSampler(IndexDataset(38), path)
    message = str(caught.value)
    assert str(path) in message and "(made for mymod:train)" in message
    assert "length 40 in the list, 38 in the dataset" in message
    assert "`datalint scan --dataset mymod:train`" in message and "strict=False" in message


def test_strict_false_warns_and_applies_what_fits(tmp_path: Path) -> None:
    path = write_quarantine(tmp_path / "quarantine.json", [3, 7, 39], length=40)
    with pytest.warns(StaleQuarantineWarning, match="length 40 in the list, 38 in the dataset"):
        sampler = DistributedQuarantineSampler(IndexDataset(38), path, 1, 0, shuffle=False, strict=False)
    assert list(sampler) == [i for i in range(38) if i not in (3, 7)]


def test_list_without_length_is_still_checked_against_the_end(tmp_path: Path) -> None:
    path = write_quarantine(tmp_path / "quarantine.json", [3, 45], length=None)
    with pytest.raises(StaleQuarantineError, match="index 45 is past the end of a dataset of length 40"):
        QuarantineSampler(IndexDataset(40), path)


def test_matching_keys_and_fingerprint_apply_silently(tmp_path: Path) -> None:
    dataset = FolderLikeDataset(PATHS)
    path = write_quarantine(
        tmp_path / "quarantine.json",
        [4, 9],
        length=40,
        keys=[PATHS[4], PATHS[9]],
        fingerprint=_fingerprint(dataset),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sampler = QuarantineSampler(dataset, path)
    assert 4 not in list(sampler) and 9 not in list(sampler) and len(sampler) == 38


def test_reordered_dataset_is_remapped_by_key(tmp_path: Path) -> None:
    scanned = FolderLikeDataset(PATHS)
    path = write_quarantine(
        tmp_path / "quarantine.json",
        [4, 9],
        length=40,
        keys=[PATHS[4], PATHS[9]],
        fingerprint=_fingerprint(scanned),
    )
    # Files were added and the listing order changed since the scan.
    now = FolderLikeDataset(["train/new.jpg", *reversed(PATHS)])
    with pytest.warns(StaleQuarantineWarning, match="2 of 2 quarantined samples are no longer at the index"):
        sampler = QuarantineSampler(now, path)
    kept = {now.samples[i][0] for i in sampler}
    assert PATHS[4] not in kept and PATHS[9] not in kept and len(kept) == 39


def test_remap_reports_keys_that_left_the_dataset(tmp_path: Path) -> None:
    path = write_quarantine(tmp_path / "quarantine.json", [4, 9], length=40, keys=[PATHS[4], PATHS[9]])
    now = FolderLikeDataset([p for p in PATHS if p != PATHS[4]])
    with pytest.warns(StaleQuarantineWarning, match="1 keys are no longer in the dataset"):
        sampler = QuarantineSampler(now, path)
    assert {now.samples[i][0] for i in sampler} == set(PATHS) - {PATHS[4], PATHS[9]}


def test_grown_dataset_with_keys_in_place_applies_with_a_rescan_warning(tmp_path: Path) -> None:
    path = write_quarantine(
        tmp_path / "quarantine.json",
        [4],
        length=40,
        keys=[PATHS[4]],
        fingerprint=_fingerprint(FolderLikeDataset(PATHS)),
    )
    grown = FolderLikeDataset([*PATHS, "train/late.jpg"])
    with pytest.warns(StaleQuarantineWarning, match=r"dataset changed since the list was made \(length 40"):
        sampler = QuarantineSampler(grown, path)
    assert len(sampler) == 40 and 4 not in list(sampler)


def test_fingerprint_mismatch_without_keys_is_refused(tmp_path: Path) -> None:
    # Same length, nothing quarantined, but the files are not the ones that were scanned.
    path = write_quarantine(
        tmp_path / "quarantine.json", [], length=40, fingerprint=_fingerprint(FolderLikeDataset(PATHS))
    )
    other = FolderLikeDataset([p.replace("train", "val") for p in PATHS])
    with pytest.raises(StaleQuarantineError, match=r"fingerprint [0-9a-f]{12}… in the list"):
        QuarantineSampler(other, path)


def test_guarded_dataset_is_matched_through_to_the_dataset_it_wraps(tmp_path: Path) -> None:
    path = write_quarantine(tmp_path / "quarantine.json", [4], length=40, keys=[PATHS[4]])
    guarded = GuardedDataset(FolderLikeDataset(list(reversed(PATHS))))
    with pytest.warns(StaleQuarantineWarning, match="matched them by key"):
        sampler = QuarantineSampler(guarded, path)
    assert 35 not in list(sampler)  # PATHS[4] is at index 35 once reversed


def test_loaded_list_is_reusable_across_samplers(tmp_path: Path) -> None:
    quarantine = load_quarantine(write_quarantine(tmp_path / "q.json", [1], length=10))
    assert len(QuarantineSampler(IndexDataset(10), quarantine)) == 9
    with pytest.raises(StaleQuarantineError):
        QuarantineSampler(IndexDataset(11), quarantine)


@pytest.mark.parametrize(
    ("made_for", "command"),
    [
        ("mymod:train", "datalint scan --dataset mymod:train"),
        (
            "flowers.py:make(split='train')",
            "datalint scan --dataset 'flowers.py:make(split='\"'\"'train'\"'\"')'",
        ),
        ("data/train", "datalint scan --images data/train"),
        ("<mymod.TrainSet object>", "datalint scan --dataset SPEC"),
        (None, "datalint scan --dataset SPEC"),
    ],
)
def test_the_rescan_hint_is_a_command_that_runs_as_printed(made_for: str | None, command: str) -> None:
    import shlex

    from datalint.cli import build_parser
    from datalint.training.fit import rescan_command

    assert rescan_command(made_for) == command
    args = build_parser().parse_args(shlex.split(command)[1:])
    assert args.command == "scan"
    if made_for and not made_for.startswith("<"):
        assert made_for in (args.dataset, args.images)  # the shell gives back exactly the spec


def test_the_rescan_hint_of_a_file_list_scans_that_list(tmp_path: Path) -> None:
    from datalint.training.fit import rescan_command

    listing = tmp_path / "bad files.txt"
    listing.write_text("a.png\n")
    assert rescan_command(str(listing)) == f"datalint scan --files '{listing}'"


class _ShortKeys(FolderLikeDataset):
    """Names its samples by a short id (`datalint_key`), and keeps its files' paths in `samples`."""

    def datalint_key(self, index: int) -> str:
        return f"id-{index:03d}"


class _ShortKeysOverPaths:
    """Names its samples by a short id read from a list of paths it keeps (no `samples` list)."""

    def __init__(self, paths: list[str]) -> None:
        self.files = list(paths)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> int:
        return index

    def datalint_key(self, index: int) -> str:
        return Path(self.files[index]).stem


def test_a_list_keyed_by_file_path_is_matched_by_the_paths_a_dataset_keeps(tmp_path: Path) -> None:
    # `scan --files-from-dataset` keys a list by the files; the dataset's own keys are short ids
    path = write_quarantine(tmp_path / "q.json", [4, 9], length=40, keys=[PATHS[4], PATHS[9]])
    for dataset in (_ShortKeys(PATHS), _ShortKeysOverPaths(PATHS)):
        with pytest.warns(StaleQuarantineWarning, match="its keys are the files' paths"):
            sampler = QuarantineSampler(dataset, path)
        assert sorted(set(range(40)) - set(sampler)) == [4, 9]


def test_a_list_of_another_key_scheme_is_refused_naming_both_and_the_command(tmp_path: Path) -> None:
    class Ids(IndexDataset):
        def datalint_key(self, index: int) -> str:
            return f"id-{index}"

    path = write_quarantine(tmp_path / "q.json", [4, 9], length=40, keys=[PATHS[4], PATHS[9]], dataset="m:ds")
    with pytest.raises(StaleQuarantineError) as caught:
        QuarantineSampler(Ids(40), path, strict=False)  # an error even then: nothing would be matched
    message = str(caught.value)
    assert "'train/004.jpg'" in message and "'id-0'" in message and "datalint_key()" in message
    assert "`datalint scan --dataset m:ds`" in message


def test_a_key_naming_several_samples_says_which_and_how_many(tmp_path: Path) -> None:
    class Repeating(IndexDataset):
        def datalint_key(self, index: int) -> str:
            return "same" if index % 2 else f"k{index}"

    path = write_quarantine(tmp_path / "q.json", [4], length=20, keys=["same"])  # scanned in another order
    with pytest.warns(StaleQuarantineWarning, match="the key 'same' names 10 samples of the dataset"):
        sampler = QuarantineSampler(Repeating(20), path)
    assert set(range(20)) - set(sampler) == {i for i in range(20) if i % 2}
