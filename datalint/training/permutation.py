"""Epoch orders in O(1) memory: a seeded bijection of [0, N) evaluated lazily, split across ranks.

`torch.randperm(N)` holds 8 bytes per sample on every rank (8 GB at N = 1e9) before the first batch,
and the good-indices array another 4. Here the order of an epoch is a function, not an array:

* `FeistelPermutation(n, key)` maps position p to a value in [0, n): a balanced Feistel network on
  the smallest even number of bits that covers n, with cycle walking (apply the network again until
  the value falls below n). A Feistel network is a bijection for any round function, and cycle
  walking keeps it one on [0, n), so every value comes out exactly once per epoch.
* `GoodIndexMap` maps the r-th good sample to its dataset index through the sorted quarantined
  indices: good(r) = r + #{j : q_j - j <= r}. It keeps q_j - j in the smallest unsigned dtype
  (4 bytes per quarantined sample below 2**32 samples); the dataset size never enters memory.
* `rank_order` yields rank `rank`'s indices of an epoch: positions rank, rank + W, ... of the padded
  epoch (wrapping around as `DistributedSampler` pads), through the permutation, then the map;
  evaluated a chunk at a time, so memory is one chunk whatever N is.

Everything is numpy on uint64 arrays (multiplication wraps modulo 2**64, which the mixing relies on).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

U64 = npt.NDArray[np.uint64]

ROUNDS = 6  # four rounds already make a pseudo-random permutation (Luby-Rackoff); two more are cheap
CHUNK = 1 << 16

# Below this many samples the samplers keep their exact `torch.randperm` order (the same order as
# `DistributedSampler` when nothing is quarantined); its 8 bytes per sample are 128 MB here.
EXACT_BELOW = 1 << 24

Order = Literal["auto", "exact", "lazy"]
ORDERS: tuple[str, ...] = ("auto", "exact", "lazy")


def choose_order(order: str, length: int) -> Literal["exact", "lazy"]:
    """ "exact" or "lazy" for a dataset of `length` samples; "auto" is exact below `EXACT_BELOW`."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(map(repr, ORDERS))}, got {order!r}")
    if order == "auto":
        return "exact" if length < EXACT_BELOW else "lazy"
    return "exact" if order == "exact" else "lazy"


def round_keys(seed: int, epoch: int) -> tuple[int, ...]:
    """The round keys for one (seed, epoch): every rank derives the same ones without talking."""
    digest = hashlib.blake2b(f"datalint-order/1:{seed}:{epoch}".encode(), digest_size=8 * ROUNDS).digest()
    return tuple(int.from_bytes(digest[8 * i : 8 * i + 8], "little") for i in range(ROUNDS))


def _mix(values: U64, key: np.uint64) -> U64:
    """A 64-bit mixer (the splitmix64 finaliser) of value xor key: the Feistel round function."""
    z = values ^ key
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    result: U64 = z ^ (z >> np.uint64(31))
    return result


@dataclass(frozen=True)
class FeistelPermutation:
    """A bijection of [0, n) chosen by `keys`; `permutation(positions)` is vectorised."""

    n: int
    keys: tuple[int, ...]
    half_bits: int = field(init=False)

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"a permutation needs at least one element, got n={self.n}")
        bits = max(2, (self.n - 1).bit_length())
        object.__setattr__(self, "half_bits", (bits + 1) // 2)

    @classmethod
    def seeded(cls, n: int, seed: int, epoch: int = 0) -> FeistelPermutation:
        return cls(n, round_keys(seed, epoch))

    def _network(self, values: U64) -> U64:
        half = np.uint64(self.half_bits)
        mask = np.uint64((1 << self.half_bits) - 1)
        left, right = values >> half, values & mask
        for key in self.keys:
            left, right = right, left ^ (_mix(right, np.uint64(key)) & mask)
        result: U64 = (left << half) | right
        return result

    def __call__(self, positions: npt.ArrayLike) -> U64:
        values = np.asarray(positions, dtype=np.uint64)
        if values.size and int(values.max()) >= self.n:
            raise ValueError(f"positions must lie in [0, {self.n})")
        out = self._network(values)
        # Cycle walking: the domain is under 4n, so a value needs fewer than 4 passes on average.
        outside = np.flatnonzero(out >= np.uint64(self.n))
        while outside.size:
            out[outside] = self._network(out[outside])
            outside = outside[out[outside] >= np.uint64(self.n)]
        return out


class GoodIndexMap:
    """The r-th good index of a dataset of `length` samples with sorted quarantined indices `bad`.

    `bad` may be a memory-mapped array (a binary quarantine list); it is read once, in chunks.
    """

    def __init__(self, length: int, bad: npt.NDArray[np.integer[Any]]) -> None:
        self.length = length
        self.good = length - len(bad)
        dtype = np.uint32 if length <= np.iinfo(np.uint32).max else np.uint64
        # steps[j] = q_j - j: the number of good indices before the j-th quarantined one.
        self._steps = np.empty(len(bad), dtype=dtype)
        for start in range(0, len(bad), 1 << 20):
            part = np.asarray(bad[start : start + (1 << 20)], dtype=np.int64)
            self._steps[start : start + len(part)] = part - np.arange(start, start + len(part))

    def __call__(self, ranks: U64) -> npt.NDArray[np.int64]:
        skipped = np.searchsorted(self._steps, ranks.astype(self._steps.dtype), side="right")
        result: npt.NDArray[np.int64] = ranks.astype(np.int64) + skipped
        return result

    @property
    def nbytes(self) -> int:
        return int(self._steps.nbytes)


def rank_order(
    good: GoodIndexMap,
    *,
    seed: int,
    epoch: int,
    rank: int,
    num_replicas: int,
    num_samples: int,
    shuffle: bool,
    chunk: int = CHUNK,
) -> Iterator[int]:
    """Rank `rank`'s `num_samples` indices for one epoch, as Python ints, one chunk at a time.

    Position p of the padded epoch (rank + i * num_replicas) is good-sample p mod G, as
    `DistributedSampler` pads by wrapping around; every rank computes only its own positions.
    """
    permutation = FeistelPermutation.seeded(good.good, seed, epoch) if shuffle else None
    stride = np.uint64(num_replicas)
    for start in range(0, num_samples, chunk):
        steps = np.arange(start, min(start + chunk, num_samples), dtype=np.uint64)
        positions = (np.uint64(rank) + steps * stride) % np.uint64(good.good)
        ranks = permutation(positions) if permutation is not None else positions
        yield from good(ranks).tolist()
