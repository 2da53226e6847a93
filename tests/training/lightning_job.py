"""A real Lightning job for the QuarantineCallback tests: a model that records every sample index its
training_step sees, per rank and epoch. Imported by the tests, and run as a script for DDP (Lightning's
ddp launcher starts the other rank by running this file again):

    python tests/training/lightning_job.py OUT LIST (distributed|own-sampler) [EPOCHS]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from datalint.lightning import QuarantineCallback


class Numbered(Dataset[Any]):
    """Sample i is the tensor [i]; the samples in `failing` raise, as a damaged file would."""

    def __init__(self, length: int, failing: frozenset[int] = frozenset()) -> None:
        self.length = length
        self.failing = failing

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> torch.Tensor:
        if index in self.failing:
            raise OSError(f"image file is truncated: sample {index}")
        return torch.tensor([float(index)])


class Recorder(pl.LightningModule):
    """Writes the indices each epoch's training_step saw to OUT/rank<r>-epoch<e>.json."""

    def __init__(self, out: Path, loader: Any = None) -> None:
        super().__init__()
        self.out = Path(out)
        self.layer = torch.nn.Linear(1, 1)
        self.loader = loader
        self.seen: list[int] = []

    def train_dataloader(self) -> Any:
        return self.loader() if callable(self.loader) else self.loader

    def training_step(self, batch: torch.Tensor, batch_index: int) -> torch.Tensor:
        self.seen.extend(int(value) for value in batch.flatten().tolist())
        loss: torch.Tensor = self.layer(batch).pow(2).mean()
        return loss

    def on_train_epoch_end(self) -> None:
        path = self.out / f"rank{self.global_rank}-epoch{self.current_epoch}.json"
        path.write_text(json.dumps(self.seen))
        self.seen = []

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def trainer(callback: QuarantineCallback, epochs: int, **options: Any) -> pl.Trainer:
    return pl.Trainer(
        max_epochs=epochs,
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **options,
    )


def seen(out: Path, epoch: int) -> dict[int, list[int]]:
    """rank -> the indices it trained on in `epoch`."""
    found = sorted(out.glob(f"rank*-epoch{epoch}.json"))
    return {int(path.name[4 : path.name.index("-")]): json.loads(path.read_text()) for path in found}


LENGTH = 40
QUARANTINED = (3, 7, 20, 33)


def _own_sampler_loader() -> DataLoader[Any]:
    # The user's own DistributedSampler over the whole dataset, kept by Lightning
    # (use_distributed_sampler=False): the callback must put it over the good samples, not filter it.
    dataset = Numbered(LENGTH)
    return DataLoader(dataset, batch_size=4, sampler=DistributedSampler(dataset, shuffle=True, seed=5))


def main() -> None:
    out, listed, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    epochs = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    own = mode == "own-sampler"
    loader: Any = _own_sampler_loader if own else DataLoader(Numbered(LENGTH), batch_size=4, shuffle=True)
    pl.seed_everything(0, verbose=False)
    job = trainer(
        QuarantineCallback(listed),
        epochs,
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        use_distributed_sampler=not own,
    )
    job.fit(Recorder(out, loader))


if __name__ == "__main__":
    main()
