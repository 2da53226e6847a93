"""Probes: pure measurements of one sample's value, for every data kind a dataset returns."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from datalint.scan import probes


def test_nbytes_counts_payloads_through_nesting() -> None:
    sample = {
        "image": torch.zeros(3, 4, 4),  # 192 bytes
        "mask": np.zeros((4, 4), dtype=np.uint8),  # 16
        "thumb": Image.new("RGB", (2, 2)),  # 12
        "raw": b"abcd",  # 4
        "caption": "héllo",  # 6 bytes in UTF-8
        "meta": [1, 2.5],  # 16
    }
    assert probes.nbytes(sample) == 192 + 16 + 12 + 4 + 6 + 16


def test_signature_names_keys_positions_shapes_dtypes_and_devices() -> None:
    sig = probes.signature((torch.zeros(2, 3, dtype=torch.float16), {"label": 3, "boxes": None}))
    assert sig["type"] == "tuple" and sig["length"] == 2
    assert sig["fields"]["0"] == {"type": "Tensor", "shape": [2, 3], "dtype": "float16", "device": "cpu"}
    assert sig["fields"]["1"]["fields"] == {"label": {"type": "int"}, "boxes": {"type": "NoneType"}}


def test_non_finite_values_are_counted_per_field_in_every_float_kind() -> None:
    sample = {
        "t": torch.tensor([1.0, float("nan"), float("inf")]),
        "half": torch.tensor([float("inf")], dtype=torch.bfloat16),
        "a": np.array([np.nan, 1.0], dtype=np.float32),
        "x": float("-inf"),
        "ints": torch.tensor([1, 2]),
        "big": np.full(4, 3e38, dtype=np.float32),  # the sum overflows, the values are finite
    }
    assert probes.non_finite(sample) == {"t": 2, "half": 1, "a": 1, "x": 1}


def test_describe_reports_grad_and_device_fields() -> None:
    result = probes.describe({"x": torch.ones(2, requires_grad=True), "y": torch.ones(2)})
    assert result["requires_grad"] == 1 and result["info"]["requires_grad_fields"] == ["x"]
    assert result["non_cpu"] == 0 and result["non_finite"] == 0


def test_labels_by_key_position_and_dotted_path() -> None:
    sample = (torch.zeros(1), {"target": {"cls": torch.tensor(7), "mask": torch.tensor([[0, 255], [3, 3]])}})
    assert probes.label_values(sample, "1.target.cls") == [7]
    assert probes.label_values(sample, "1.target.mask") == [0, 3, 255]
    assert probes.label_values(sample, "1.target.missing") is None
    assert probes.describe(sample, ["1.target.cls"])["labels"] == {"1.target.cls": [7]}


def test_long_lists_are_summarised_not_exploded() -> None:
    sig = probes.signature(list(range(1000)))
    assert sig == {"type": "list", "length": 1000, "fields": {"*": {"type": "int"}}}
    records = probes.signature(tuple(range(100)))  # a tuple is a record: one field per position
    assert records["length"] == 100 and len(records["fields"]) == probes.MAX_FIELDS
