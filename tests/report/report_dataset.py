"""A dataset with one planted fault per finding kind the report must show, and hostile strings.

Scanned for real by the report tests:
    datalint scan --dataset tests/report/report_dataset.py:make() --label label --num-classes 10
Plain numpy samples, so scan workers never import torch.
"""

import ctypes
import time

import numpy as np

HOSTILE_KEY = 'train/<img src=x onerror="alert(1)">.npy'
HOSTILE_MESSAGE = "</script><script>alert('owned')</script> & <b>bold</b> &amp;"
LENGTH = 150
OUT_OF_RANGE = range(40, 145)  # enough flagged samples for a second page of the table (100 rows)
PLANTED = {
    3: "error",
    4: "crash",
    5: "timeout",
    6: "non_finite",
    7: "shape_mismatch",
    8: "oversized",
    9: "dtype_mismatch",
    10: "slow",
    **{i: "label_out_of_range" for i in OUT_OF_RANGE},
}


class ReportDataset:
    def __init__(self):
        # the ImageFolder convention: (key, class) pairs name the samples
        self.samples = [(f"train/{i % 5}/{i:04d}.npy", i % 5) for i in range(LENGTH)]
        self.samples[3] = (HOSTILE_KEY, 0)

    def __len__(self):
        return LENGTH

    def __getitem__(self, index):
        kind = PLANTED.get(index)
        image = np.full((3, 8, 8), index, dtype=np.float32)
        label = 10 + index if kind == "label_out_of_range" else index % 10
        if kind == "error":
            raise ValueError(HOSTILE_MESSAGE)
        if kind == "crash":
            ctypes.string_at(0)  # SIGSEGV in the worker
        if kind == "timeout":
            time.sleep(3600)
        if kind == "non_finite":
            image[0, 0, 0] = np.nan
        if kind == "shape_mismatch":
            image = np.zeros((1, 8, 8), dtype=np.float32)
        if kind == "oversized":
            image = np.zeros((3, 512, 512), dtype=np.float32)
        if kind == "dtype_mismatch":
            image = image.astype(np.float64)
        if kind == "slow":
            time.sleep(0.4)
        return {"image": image, "label": label}


def make():
    return ReportDataset()
