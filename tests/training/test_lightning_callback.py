"""QuarantineCallback with the real Lightning on CPU: quarantined samples never reach training_step, every
other sample is seen once per epoch (across ranks under DDP), epochs reshuffle, and the guard's failures
in Lightning's workers reach the local index."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightning")

import lightning.pytorch as pl
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

from datalint.lightning import QuarantineCallback
from datalint.training.quarantine import Quarantine, load_quarantine
from tests.training.lightning_job import LENGTH, QUARANTINED, Numbered, Recorder, seen, trainer

ROOT = Path(__file__).resolve().parents[2]
GOOD = sorted(set(range(LENGTH)) - set(QUARANTINED))


def listed(tmp_path: Path) -> Path:
    """A quarantine.json for QUARANTINED, as a scan writes one (keys absent, length given)."""
    import json

    path = tmp_path / "quarantine.json"
    samples = [{"index": i, "kinds": ["error"]} for i in QUARANTINED]
    path.write_text(json.dumps({"format": "datalint-quarantine/1", "length": LENGTH, "samples": samples}))
    return path


class Data(pl.LightningDataModule):
    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(Numbered(LENGTH), batch_size=4, shuffle=True)


def fit(tmp_path: Path, source: str, use_distributed_sampler: bool, epochs: int = 3) -> None:
    loader = DataLoader(Numbered(LENGTH), batch_size=4, shuffle=True)
    job = trainer(
        QuarantineCallback(listed(tmp_path)),
        epochs,
        accelerator="cpu",
        devices=1,
        use_distributed_sampler=use_distributed_sampler,
    )
    if source == "module":
        job.fit(Recorder(tmp_path, loader))
    elif source == "datamodule":
        job.fit(Recorder(tmp_path), datamodule=Data())
    else:
        job.fit(Recorder(tmp_path), train_dataloaders=loader)


@pytest.mark.parametrize("use_distributed_sampler", [True, False])
@pytest.mark.parametrize("source", ["module", "datamodule", "fit-argument"])
def test_quarantined_samples_never_reach_training_step_and_epochs_reshuffle(
    tmp_path: Path, source: str, use_distributed_sampler: bool
) -> None:
    fit(tmp_path, source, use_distributed_sampler)
    orders = [seen(tmp_path, epoch)[0] for epoch in range(3)]
    for order in orders:
        assert sorted(order) == GOOD  # each good sample once, no quarantined one
    assert len({tuple(order) for order in orders}) == 3  # a new order each epoch


def test_a_batch_sampler_of_its_own_is_filtered_and_keeps_its_batches(tmp_path: Path) -> None:
    class Pairs(BatchSampler):
        """Not torch's BatchSampler: a batch sampler the callback cannot rebuild, only filter."""

    batches = Pairs(SequentialSampler(range(LENGTH)), batch_size=2, drop_last=False)
    loader = DataLoader(Numbered(LENGTH), batch_sampler=batches)
    job = trainer(QuarantineCallback(listed(tmp_path)), 1, accelerator="cpu", devices=1)
    job.fit(Recorder(tmp_path, loader))
    assert seen(tmp_path, 0)[0] == GOOD  # in order, refilled to pairs


def test_the_guard_records_failures_from_lightnings_workers_in_the_local_index(tmp_path: Path) -> None:
    db = tmp_path / "train.db"
    failing = frozenset({11, 26})
    loader = DataLoader(Numbered(LENGTH, failing), batch_size=4, shuffle=True, num_workers=2)
    callback = QuarantineCallback(listed(tmp_path), record=db)
    trainer(callback, 1, accelerator="cpu", devices=1).fit(Recorder(tmp_path, loader))
    trained = seen(tmp_path, 0)[0]
    assert len(trained) == len(GOOD) and not set(trained) & (failing | set(QUARANTINED))
    recorded = load_quarantine(db)
    assert set(recorded.indices.tolist()) == set(failing)  # the next list leaves them out
    assert all("truncated" in (detail or "") for detail in recorded.details)


def test_a_list_made_for_another_dataset_stops_the_fit(tmp_path: Path) -> None:
    from datalint.training.fit import StaleQuarantineError

    other = Quarantine.from_indices([1, 2], length=LENGTH + 5)
    loader = DataLoader(Numbered(LENGTH), batch_size=4, shuffle=True)
    job = trainer(QuarantineCallback(other), 1, accelerator="cpu", devices=1)
    with pytest.raises(StaleQuarantineError, match="length 45 in the list, 40 in the dataset"):
        job.fit(Recorder(tmp_path, loader))


@pytest.mark.parametrize("mode", ["distributed", "own-sampler"])
def test_ddp_on_two_cpu_ranks_sees_each_good_sample_once_per_epoch(tmp_path: Path, mode: str) -> None:
    # Lightning's ddp launcher starts rank 1 by running the script again: a real job, two processes, gloo.
    script = ROOT / "tests" / "training" / "lightning_job.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PL_DISABLE_FORK": "1"}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path), str(listed(tmp_path)), mode],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    epochs = [seen(tmp_path, epoch) for epoch in range(2)]
    for ranks in epochs:
        assert sorted(ranks) == [0, 1]
        assert sorted(ranks[0] + ranks[1]) == GOOD  # disjoint ranks, every good sample once
    assert epochs[0][0] != epochs[1][0]  # set_epoch reached the sampler: a new order


MISSING = [("datalint.lightning", "lightning"), ("datalint.hf", "pyarrow")]


@pytest.mark.parametrize(("module", "hidden"), MISSING)
def test_a_missing_extra_is_named_with_its_install_line(module: str, hidden: str) -> None:
    code = f"import sys; sys.modules[{hidden!r}] = None\nimport {module}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    extra = module.rpartition(".")[2]
    assert done.returncode == 1
    assert f"needs the [{extra}] extra (missing: {hidden})" in done.stderr and "pip install" in done.stderr
