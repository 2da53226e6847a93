"""Property: on any population, mixed or not, every planted fault is found with its kind and no
clean sample gets a finding.

Hypothesis generates plans (fixtures/datasets/populations.py): a majority family of dicts, tuples
or tensors, a few samples of another family or None, and faults at random positions (missing or
None fields, wrong shapes, NaN, labels out of range, oversized, raising, crashing the worker).
Each plan runs through the real scan: worker processes, the SQLite index, the quarantine file.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, example, given, note, settings
from hypothesis import strategies as st
from scan_support import load_json, spec

import datalint

# planted fault -> the finding kind it must produce
FAULT_KINDS = {
    "wrong_shape": "shape_mismatch",
    "oversized": "oversized",
    "nan": "non_finite",
    "missing_image": "missing_field",
    "none_image": "missing_field",
    "missing_label": "missing_field",
    "none_label": "missing_field",
    "label_out_of_range": "label_out_of_range",
    "raise": "error",
    "crash": "crash",
}
# Faults are drawn per slot, at most one per slot, so two faults never cancel each other out.
IMAGE_FAULTS = ("wrong_shape", "oversized", "nan")
LABEL_FAULTS = ("missing_label", "none_label", "label_out_of_range")
SLOTS: dict[str, tuple[tuple[str, ...], ...]] = {
    "dict": ((*IMAGE_FAULTS, "missing_image", "none_image"), LABEL_FAULTS),
    "tuple": (IMAGE_FAULTS, LABEL_FAULTS),
    "tensor": (IMAGE_FAULTS,),
}
LABEL_FIELD = {"dict": "label", "tuple": "1"}
OTHER_FAMILIES = ("dict", "tuple", "tensor", "none")


@st.composite
def sample_faults(draw: Any, family: str) -> list[str]:
    """One to three faults for a sample of `family`: a whole-sample one, or one per field slot."""
    if draw(st.integers(0, 5)) == 0:
        return [draw(st.sampled_from(("raise", "raise", "crash")))]
    faults = [draw(st.one_of(st.none(), st.sampled_from(slot))) for slot in SLOTS[family]]
    chosen = [fault for fault in faults if fault is not None]
    return chosen or [SLOTS[family][0][0]]


@st.composite
def populations(draw: Any) -> dict[str, Any]:
    """A plan, the scan options that go with it, and index -> the kinds planted there."""
    family = draw(st.sampled_from(("dict", "tuple", "tensor")))
    length = draw(st.integers(16, 36))
    positions = draw(st.permutations(range(length)))
    faulty = draw(st.integers(1, length // 4))  # a quarter at most: the majority stays clean
    strangers = draw(st.integers(0, min(3, faulty)))  # samples of another family, or None
    plan: list[dict[str, Any]] = [{"family": family, "faults": []} for _ in range(length)]
    planted: dict[int, set[str]] = {}
    crashed = False
    for rank, index in enumerate(positions[:faulty]):
        if rank < strangers:
            other = draw(st.sampled_from([name for name in OTHER_FAMILIES if name != family]))
            plan[index]["family"] = other
            planted[index] = {"uncollatable"}
            continue
        faults = draw(sample_faults(family))
        if "crash" in faults and crashed:
            faults = ["raise"]  # one worker death per plan keeps each example quick
        crashed = crashed or "crash" in faults
        plan[index]["faults"] = faults
        planted[index] = {FAULT_KINDS[fault] for fault in faults}
    options: dict[str, Any] = {}
    if family in LABEL_FIELD:
        options = {"label": [LABEL_FIELD[family]], "num_classes": 5}
    if family == "dict" and draw(st.booleans()):
        options["require"] = ["image"]
    return {"plan": plan, "options": options, "planted": planted}


def _issue_example() -> dict[str, Any]:
    """Mostly dicts, a None and a tuple among them, a missing and a None label (the reported case)."""
    plan: list[dict[str, Any]] = [{"family": "dict", "faults": []} for _ in range(24)]
    plan[3]["family"], plan[7]["family"] = "none", "tuple"
    plan[11]["faults"], plan[17]["faults"] = ["missing_label"], ["none_label"]
    planted = {3: {"uncollatable"}, 7: {"uncollatable"}, 11: {"missing_field"}, 17: {"missing_field"}}
    return {"plan": plan, "options": {"label": ["label"], "num_classes": 5}, "planted": planted}


def _every_fault(family: str) -> dict[str, Any]:
    """Each fault of `family` once, in its own sample, and one stranger of every other family:
    every planted kind is met in every family on every run, whatever the generated plans draw."""
    faults = [[fault] for slot in SLOTS[family] for fault in slot] + [["raise"], ["crash"]]
    strangers = [name for name in OTHER_FAMILIES if name != family]
    length = 4 * (len(faults) + len(strangers))  # a quarter faulty at most, as generated plans are
    plan: list[dict[str, Any]] = [{"family": family, "faults": []} for _ in range(length)]
    planted: dict[int, set[str]] = {}
    for index, chosen in enumerate(faults):
        plan[4 * index + 1]["faults"] = chosen
        planted[4 * index + 1] = {FAULT_KINDS[fault] for fault in chosen}
    for offset, other in enumerate(strangers, start=len(faults)):
        plan[4 * offset + 2]["family"] = other
        planted[4 * offset + 2] = {"uncollatable"}
    options: dict[str, Any] = {}
    if family in LABEL_FIELD:
        options = {"label": [LABEL_FIELD[family]], "num_classes": 5}
    if family == "dict":
        options["require"] = ["image"]
    return {"plan": plan, "options": options, "planted": planted}


def _scan(population: dict[str, Any], folder: Path) -> tuple[dict[int, set[str]], set[int]]:
    plan_path = folder / "plan.json"
    plan_path.write_text(json.dumps(population["plan"]))
    summary = datalint.scan(
        spec(f"populations.py:from_plan({str(plan_path)!r})"),
        db=folder / "p.db",
        workers=1,
        **population["options"],
    )
    from datalint.index import store

    db = store.open_index(summary.index_path, create=False)
    try:
        found: dict[int, set[str]] = {}
        for idx, kind in db.execute("SELECT idx, kind FROM findings"):
            found.setdefault(idx, set()).add(kind)
    finally:
        db.close()
    quarantined = {entry["index"] for entry in load_json(summary.quarantine_path)["samples"]}
    return found, quarantined


# Each generated example is a real scan (about 0.6 s); the explicit examples plant every fault in
# every family, so the generated ones look for interactions (positions, mixes, options), and 15 of
# them on each run, drawn afresh, are enough for that.
@settings(
    max_examples=15,
    deadline=None,
    database=None,
    # No shrinking: each example is a real scan of a few seconds; a failure prints its whole plan.
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=(HealthCheck.too_slow,),
)
@example(population=_issue_example())
@example(population=_every_fault("dict"))
@example(population=_every_fault("tuple"))
@example(population=_every_fault("tensor"))
@given(population=populations())
def test_every_planted_fault_is_found_and_no_clean_sample_is_flagged(population: dict[str, Any]) -> None:
    note(json.dumps({"options": population["options"], "plan": population["plan"]}))
    with tempfile.TemporaryDirectory(prefix="datalint-population-") as folder:
        found, quarantined = _scan(population, Path(folder))
    planted = population["planted"]
    clean_but_flagged = {index: kinds for index, kinds in found.items() if index not in planted}
    assert clean_but_flagged == {}
    for index, kinds in planted.items():
        assert kinds <= found.get(index, set()), f"sample {index}: planted {kinds}, found {found.get(index)}"
    assert quarantined == set(planted)  # every planted kind is quarantined by default
