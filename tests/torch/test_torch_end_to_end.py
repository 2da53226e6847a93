"""Scan a dataset with planted faults, then train on it: no bad sample ever reaches the model."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from datalint.scan.api import scan
from datalint.scan.specs import resolve_spec
from datalint.torch import GuardedDataset, QuarantineSampler, load_quarantine

DEMO = str(Path(__file__).resolve().parents[2] / "fixtures" / "datasets" / "demo.py") + ":demo"
# What the demo dataset plants (see fixtures/datasets/demo.py): a segfault, an exception, a SIGKILL,
# a None, a grayscale image, a NaN, a label out of range, a missing label, a float64 image.
PLANTED = {17, 42, 99, 123, 150, 200, 250, 300, 333}


class Indexed(Dataset[dict[str, Any]]):
    """The dataset under training, each sample tagged with its index so the test sees what trained."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        self.samples = dataset.samples  # the keys, as the scan read them

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"index": index, **self.dataset[index]}


@pytest.mark.slow
def test_training_on_the_quarantine_filtered_loader_never_sees_a_bad_sample(tmp_path: Path) -> None:
    index, quarantine = tmp_path / "scan.db", tmp_path / "quarantine.json"
    summary = scan(
        DEMO, db=index, quarantine=quarantine, label=["label"], num_classes=10,
        kinds="default,dtype_mismatch", workers=2,
    )
    assert set(load_quarantine(quarantine)) == PLANTED == set(load_quarantine(index))
    assert summary.quarantined == len(PLANTED)

    # The three-line change: a sampler that reads the list, and the guard.
    dataset = Indexed(resolve_spec(DEMO))
    generator = torch.Generator().manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the list fits the dataset: length, fingerprint and keys agree
        sampler = QuarantineSampler(dataset, quarantine, shuffle=True, generator=generator)
    # On a machine with a GPU the model trains there, from pinned batches, as a real job would.
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(
        GuardedDataset(dataset, record=index), batch_size=32, sampler=sampler, num_workers=2,
        multiprocessing_context="fork", pin_memory=device.type == "cuda",
    )

    torch.manual_seed(0)
    model = torch.nn.Linear(3 * 32 * 32, 10).to(device)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    seen: list[list[int]] = []
    for _ in range(2):
        epoch: list[int] = []
        for batch in loader:
            images, labels = batch["image"].to(device), batch["label"].to(device)
            loss = torch.nn.functional.cross_entropy(model(images.flatten(1)), labels)
            assert torch.isfinite(loss)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            epoch.extend(batch["index"].tolist())
        seen.append(epoch)

    for epoch in seen:
        assert not set(epoch) & PLANTED
        assert sorted(epoch) == sorted(set(range(400)) - PLANTED)  # every good sample, once per epoch
    assert seen[0] != seen[1]
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert load_quarantine(index).indices.tolist() == sorted(PLANTED)  # the guard had nothing to add
