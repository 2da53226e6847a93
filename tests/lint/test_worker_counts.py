"""Issue 30: how many workers read a dataset. A Hugging Face Trainer reads its datasets with
`dataloader_num_workers` workers (default 0), and a loader factory with `num_workers=0` off the
training branch reads the datasets a call sends there without workers: the worker rules stay silent
on those, and fire where the count is set, or unknown. A helper returning a lazy image that every
caller in another file decodes at once keeps no file open (DL305)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from real_run_support import lint

from datalint.config import Config
from datalint.lint.engine import lint_paths

ROWS = """
import json
import random

import torch
import transformers
from torch.utils.data import Dataset
from transformers import HfArgumentParser, Seq2SeqTrainer, Seq2SeqTrainingArguments
from transformers import Trainer, TrainingArguments


class Rows(Dataset):
    def __init__(self, path):
        self.rows = json.load(open(path))
        self.rng = random.Random(0)
        self.handle = open(path + ".idx", "rb")

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        self.handle.seek(i)
        return self.rows[i], self.rng.random()
"""

TRAINERS = {
    "arguments without dataloader_num_workers": (
        'args = TrainingArguments(output_dir="out", per_device_train_batch_size=8)\n'
        'Trainer(model=model, args=args, train_dataset=Rows("a.json")).train()',
        False,
    ),
    "dataloader_num_workers=0, positional output_dir": (
        'ds = Rows("a.json")\n'
        'Seq2SeqTrainer(model=model, args=Seq2SeqTrainingArguments("out", dataloader_num_workers=0), '
        "train_dataset=ds).train()",
        False,
    ),
    "no args: a default TrainingArguments": (
        'Trainer(model, train_dataset=Rows("a.json"), eval_dataset={"x": Rows("b.json")}).train()',
        False,
    ),
    "a subclass that builds no loader": (
        'MyTrainer(model=model, args=TrainingArguments("out"), train_dataset=Rows("a.json")).train()',
        False,
    ),
    "dataloader_num_workers=4": (
        'args = TrainingArguments(output_dir="out", dataloader_num_workers=4)\n'
        'Trainer(model=model, args=args, train_dataset=Rows("a.json")).train()',
        True,
    ),
    "arguments from a parser": (
        "(args,) = HfArgumentParser((TrainingArguments,)).parse_args_into_dataclasses()\n"
        'Trainer(model=model, args=args, train_dataset=Rows("a.json")).train()',
        True,
    ),
    "arguments changed after they are built": (
        'args = TrainingArguments(output_dir="out")\n'
        "args.dataloader_num_workers = 8\n"
        'Trainer(model=model, args=args, train_dataset=Rows("a.json")).train()',
        True,
    ),
    "a subclass with its own train loader": (
        'LoaderTrainer(model=model, args=TrainingArguments("out"), train_dataset=Rows("a.json")).train()',
        True,
    ),
    "one Trainer without workers, one with": (
        'Trainer(model=model, train_dataset=Rows("a.json"))\n'
        'Trainer(model=model, args=TrainingArguments("o", dataloader_num_workers=2), '
        'eval_dataset=Rows("b.json"))',
        True,
    ),
}

SUBCLASSES = """

class MyTrainer(transformers.Trainer):
    def compute_loss(self, model, inputs):
        return model(**inputs).loss


class LoaderTrainer(Trainer):
    def get_train_dataloader(self):
        return torch.utils.data.DataLoader(self.train_dataset, num_workers=8)
"""


def _trainer_source(body: str) -> str:
    return ROWS + SUBCLASSES + "\n\ndef main(model):\n" + textwrap.indent(body, "    ") + "\n"


# The rules that ask whether a dataset's reader starts workers: copy-on-read (DL301), a handle opened
# in `__init__` (DL201), an RNG created in `__init__` (DL401).
WORKER_RULES = ("DL301", "DL201", "DL401")


@pytest.mark.parametrize("code", WORKER_RULES)
@pytest.mark.parametrize("case", TRAINERS)
def test_a_dataset_read_only_by_trainers_without_workers_is_not_a_worker_finding(
    case: str, code: str
) -> None:
    body, fires = TRAINERS[case]
    findings = lint(code, _trainer_source(body))
    assert bool(findings) is fires, [f"{f.code}:{f.line}" for f in findings]


FACTORY = (
    ROWS
    + """

def create_dataloader(dataset, dataset_opt, num_gpu=1, sampler=None):
    phase = dataset_opt["phase"]
    if phase == "train":
        num_workers = dataset_opt["num_worker_per_gpu"] * num_gpu
        dataloader_args = dict(
            dataset=dataset, batch_size=8, shuffle=False, num_workers=num_workers, sampler=sampler
        )
    elif phase in ["val", "test"]:
        dataloader_args = dict(dataset=dataset, batch_size=1, shuffle=False, num_workers=0)
    else:
        raise ValueError(f"Wrong dataset phase: {phase}.")
    return torch.utils.data.DataLoader(**dataloader_args)
"""
)

FACTORY_CALLS = {
    "the validation phase, a dict literal": ('create_dataloader(Rows("v.json"), {"phase": "val"})', False),
    "the test phase, a dict() bound to a name": (
        'val_opt = dict(phase="test")\nval_set = Rows("v.json")\n'
        "create_dataloader(val_set, val_opt, num_gpu=1)",
        False,
    ),
    "the training phase": (
        'create_dataloader(Rows("t.json"), {"phase": "train", "num_worker_per_gpu": 4})',
        True,
    ),
    "a phase from the options": (
        'for name, dataset_opt in opt["datasets"].items():\n'
        '    create_dataloader(Rows("t.json"), dataset_opt)',
        True,
    ),
    "one call per phase": (
        'create_dataloader(Rows("v.json"), {"phase": "val"})\n'
        'create_dataloader(Rows("t.json"), {"phase": "train", "num_worker_per_gpu": 4})',
        True,
    ),
}


@pytest.mark.parametrize("code", WORKER_RULES)
@pytest.mark.parametrize("case", FACTORY_CALLS)
def test_a_loader_factory_branch_without_workers_reads_the_dataset_in_process(case: str, code: str) -> None:
    body, fires = FACTORY_CALLS[case]
    source = FACTORY + "\n\ndef main(opt):\n" + textwrap.indent(body, "    ") + "\n"
    findings = lint(code, source)
    assert bool(findings) is fires, [f"{f.code}:{f.line}" for f in findings]


def test_a_factory_that_also_hands_the_dataset_elsewhere_is_not_known_to_have_no_workers() -> None:
    source = (
        FACTORY.replace("    phase = dataset_opt", "    prefetch(dataset)\n    phase = dataset_opt")
        + '\n\ndef main():\n    create_dataloader(Rows("v.json"), {"phase": "val"})\n'
    )
    assert [f.code for f in lint("DL301", source)] == ["DL301"]


# ---- DL305: a helper's lazy image decoded at once by its callers in other files ----------------

FRAME_UTILS = """
from PIL import Image


def read_gen(path):
    return Image.open(path)
"""

DATASETS = """
import numpy as np
from torch.utils.data import DataLoader, Dataset

from pkg import frame_utils


class Flow(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        img1 = frame_utils.read_gen(self.paths[i])
        img2 = frame_utils.read_gen(self.paths[i + 1]).convert("RGB")
        img1 = np.array(img1).astype(np.uint8)
        return img1, np.asarray(img2)


def loader(paths):
    return DataLoader(Flow(paths), num_workers=4)
"""

KEEPER = """
from pkg.frame_utils import read_gen


class Frames:
    def __init__(self, paths):
        self.frames = [read_gen(p) for p in paths]
"""


def _project(tmp_path: Path, files: dict[str, str]) -> list[str]:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    for name, source in files.items():
        (tmp_path / "pkg" / name).write_text(source)
    report = lint_paths([tmp_path], Config(select=("DL305",)), cache_dir=None)
    return [f"{Path(f.path).name}:{f.line}" for f in report.findings]


def test_dl305_a_helper_whose_callers_in_other_files_decode_at_once_is_silent(tmp_path: Path) -> None:
    assert _project(tmp_path, {"frame_utils.py": FRAME_UTILS, "datasets.py": DATASETS}) == []


def test_dl305_a_caller_in_another_file_keeping_the_lazy_image_is_reported_at_the_helper(
    tmp_path: Path,
) -> None:
    files = {"frame_utils.py": FRAME_UTILS, "datasets.py": DATASETS, "keep.py": KEEPER}
    assert _project(tmp_path, files) == ["frame_utils.py:6"]


def test_dl305_a_caller_binding_the_image_and_keeping_it_is_reported(tmp_path: Path) -> None:
    kept = DATASETS.replace("img1 = np.array(img1).astype(np.uint8)", "self.last = img1")
    assert _project(tmp_path, {"frame_utils.py": FRAME_UTILS, "datasets.py": kept}) == ["frame_utils.py:6"]


# ---- DL501: a stream fed from a shared torch.multiprocessing queue ------------------------------

FED = """
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, IterableDataset


class Fed(IterableDataset):
    def __init__(self, jobs):
        self.jobs = jobs

    def __iter__(self):
        while True:
            item = self.jobs.get()
            if item is None:
                return
            yield item


loader = DataLoader(Fed(QUEUE), num_workers=2)
"""


@pytest.mark.parametrize("queue", ["mp.Queue()", "mp.get_context('spawn').SimpleQueue()"])
def test_dl501_a_torch_multiprocessing_queue_shares_its_items_between_workers(queue: str) -> None:
    assert lint("DL501", FED.replace("QUEUE", queue)) == []
