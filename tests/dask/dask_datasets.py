"""A map-style dataset with planted faults for the dask backend tests; numpy only, no torch, so
that dask workers (fresh interpreters, restarted after every death) start in a second.

    tests/dask/dask_datasets.py:make(length=200, segfault=[3], nan=[9], kill_worker=[50])

Each keyword names a fault and the indices where it happens; every other sample is
{"image": float32 (3, 4, 4), "label": index % 10}, named "sample-00042" by `datalint_key`.
"""

import ctypes
import os
import signal
import time

import numpy as np


def _segfault():
    ctypes.string_at(0)


def _sigkill():
    os.kill(os.getpid(), signal.SIGKILL)  # what the OOM killer does to the process measuring it


def _kill_worker():
    # Kills the dask worker running the shard. The process measuring the sample is the child of an
    # engine keeper (which shields its own parent from the sample's signals), the keeper the dask
    # worker's child: the dask worker is the parent's parent.
    keeper = os.getppid()
    with open(f"/proc/{keeper}/stat") as stat:
        dask_worker = int(stat.read().rpartition(")")[2].split()[1])
    os.kill(dask_worker, signal.SIGKILL)
    time.sleep(60)


def _hang_c():
    ctypes.PyDLL(None).sleep(3600)  # libc sleep with the GIL held


def _raise():
    raise ValueError("corrupt record")


RAISING = {
    "segfault": _segfault,
    "sigkill": _sigkill,
    "kill_worker": _kill_worker,
    "hang_c": _hang_c,
    "error": _raise,
}
CHANGING = ("nan", "short", "bad_label")  # faults in the value returned, found by the probes


class Samples:
    def __init__(self, length, faults, delay):
        self.length = length
        self.faults = faults
        self.delay = delay

    def __len__(self):
        return self.length

    def datalint_key(self, index):
        return f"sample-{index:05d}"

    def __getitem__(self, index):
        fault = self.faults.get(index)
        if fault in RAISING:
            RAISING[fault]()
        if self.delay:
            time.sleep(self.delay)
        image = np.full((3, 4, 4), index, dtype=np.float32)
        label = index % 10
        if fault == "nan":
            image[0, 0, 0] = np.nan
        elif fault == "short":
            image = image[:, :2]
        elif fault == "bad_label":
            label = 99
        return {"image": image, "label": label}


def make(length=100, delay=0.0, **faults):
    plan = {}
    for name, indices in faults.items():
        if name not in RAISING and name not in CHANGING:
            raise ValueError(f"unknown fault {name!r}")
        for index in indices:
            plan[index] = name
    return Samples(length, plan, delay)


class Counting:
    """An iterable without __getitem__: scanned as a stream."""

    def __init__(self, length):
        self.length = length

    def __iter__(self):
        for index in range(self.length):
            yield {"x": np.float32(index)}


def counting(length=8):
    return Counting(length)
