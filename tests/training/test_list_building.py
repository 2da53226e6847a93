"""Lists built from indices: numpy all the way (no Python object per entry), the same list as before."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datalint.files import json_parts
from datalint.index import binary_list
from datalint.scan.api import write_json_atomically
from datalint.training.quarantine import Quarantine, QuarantineFormatError


def built_as_before(
    indices: Iterable[int],
    *,
    length: int | None,
    keys: Sequence[str | None] | None = None,
    kind: str = "manual",
) -> Quarantine:
    """Quarantine.from_indices as it was: Python ints, tuples and a keyed sort."""
    index_list = [int(i) for i in indices]
    key_list = list(keys) if keys is not None else [None] * len(index_list)
    if len(key_list) != len(index_list):
        raise ValueError(f"Quarantine.from_indices: {len(index_list)} indices but {len(key_list)} keys")
    pairs = sorted(zip(index_list, key_list, strict=True), key=lambda pair: pair[0])
    for (before, _), (after, _) in itertools.pairwise(pairs):
        if before == after:
            raise QuarantineFormatError(f"<in memory>: samples: index {after} is listed twice")
    return Quarantine(
        indices=np.array([i for i, _ in pairs], dtype=np.int64),
        keys=tuple(k for _, k in pairs),
        kinds=((kind,),) * len(pairs),
        length=length,
    )


def same(a: Quarantine, b: Quarantine) -> None:
    assert a.indices.tolist() == b.indices.tolist() and a.indices.dtype == b.indices.dtype
    assert (
        list(a.keys) == list(b.keys) and list(a.kinds) == list(b.kinds) and list(a.details) == list(b.details)
    )
    assert (a.length, a.has_keys, repr(a), a.index_set()) == (b.length, b.has_keys, repr(b), b.index_set())
    assert not a.indices.flags.writeable
    half = a.indices % 2 == 0
    restricted, before = a.restricted_to(half), b.restricted_to(half)
    assert restricted.indices.tolist() == before.indices.tolist() and list(restricted.keys) == list(
        before.keys
    )
    assert list(restricted.kinds) == list(before.kinds) and list(restricted.details) == list(before.details)


def outcome(build, *args, **kwargs) -> Quarantine | str:  # type: ignore[no-untyped-def]
    try:
        return build(*args, **kwargs)
    except (ValueError, QuarantineFormatError) as exc:
        return f"{type(exc).__name__}: {exc}"


@settings(max_examples=200, deadline=None)
@given(
    indices=st.lists(st.integers(-3, 400), max_size=60),
    keyed=st.booleans(),
    form=st.sampled_from(["list", "tuple", "array", "generator", "array32"]),
)
def test_from_indices_builds_the_list_it_built_before(indices: list[int], keyed: bool, form: str) -> None:
    keys = [f"k{i}-{n}" for n, i in enumerate(indices)] if keyed else None
    given_as = {
        "list": lambda: list(indices),
        "tuple": lambda: tuple(indices),
        "array": lambda: np.array(indices, dtype=np.int64),
        "array32": lambda: np.array(indices, dtype=np.int32),
        "generator": lambda: (i for i in indices),
    }[form]
    now = outcome(Quarantine.from_indices, given_as(), length=500, keys=keys, kind="corrupt")
    before = outcome(built_as_before, list(indices), length=500, keys=keys, kind="corrupt")
    if isinstance(before, str) or isinstance(now, str):
        assert now == before
    else:
        same(now, before)


@pytest.mark.parametrize(
    "indices", [range(0, 300, 7), range(50), [3.0, 1.0], np.array([True, False]), np.array([9, 2], np.uint16)]
)
def test_other_iterables_give_the_same_list(indices: Iterable[int]) -> None:
    same(Quarantine.from_indices(indices, length=None), built_as_before(indices, length=None))


def test_the_array_it_builds_is_not_the_callers() -> None:
    given = np.array([5, 1, 3])
    quarantine = Quarantine.from_indices(given, length=10)
    given[0] = 7
    assert quarantine.indices.tolist() == [1, 3, 5] and 7 not in quarantine


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 10**12), max_size=40, unique=True), st.booleans())
def test_the_scan_list_json_is_written_byte_for_byte_as_before(indices: list[int], detailed: bool) -> None:
    document = {
        "format": "datalint-quarantine/1",
        "dataset": "ds.py:ds é",
        "length": None,
        "policy": ["corrupt"],
        "samples": [
            {
                "index": i,
                "key": f"img/{i}.jpg",
                "kinds": ["corrupt"],
                "detail": "libjpeg: ✓" if detailed else None,
            }
            for i in indices
        ],
    }
    assert "".join(json_parts(document, indent=1, part_chars=16)) == json.dumps(document, indent=1)


def test_write_json_atomically_writes_what_json_dumps_wrote(tmp_path: Path) -> None:
    document = {"samples": [{"index": i, "kinds": ["corrupt"]} for i in range(5000)], "nan": float("nan")}
    write_json_atomically(tmp_path / "q.json", document)
    assert (tmp_path / "q.json").read_text(encoding="utf-8") == json.dumps(document, indent=1) + "\n"


PEAK = """
import resource, sys
import numpy as np
from datalint.training.quarantine import Quarantine
indices = np.random.default_rng(0).permutation(3_000_000)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
quarantine = Quarantine.from_indices(indices, length=3_000_000)
quarantine = quarantine.restricted_to(quarantine.indices < 2_000_000)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def test_three_million_indices_cost_their_arrays_not_a_python_object_each() -> None:
    # Peak RSS in a child process (a load on the machine changes the time, not the memory). The
    # arrays are 24 MB each; Python ints and tuples cost ~400 MB for as many.
    done = subprocess.run(
        [sys.executable, "-c", PEAK], capture_output=True, text=True, check=True, timeout=600
    )
    assert int(done.stdout) < 100, f"{done.stdout} MB over the input's"
    assert isinstance(Quarantine.from_indices(range(3), length=3).keys, binary_list.Repeated)
