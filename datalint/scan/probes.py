"""Per-sample probes: pure functions of one sample's value that return plain data.

Probes measure; policy decides. Nothing here judges a sample: "oversized" or "a shape outlier"
are decided later from the whole index (`datalint.scan.policy`). Every probe works on tensors,
numpy arrays, PIL images, bytes, strings, numbers and nested dicts / tuples / lists, and imports
nothing heavy itself: torch, numpy and PIL are looked up in `sys.modules`, so a sample made of
plain Python values never pulls them in.
"""

from __future__ import annotations

import cmath
import math
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from datalint.scan.quality import image_like, reduction_factor, score_tensor

# A sample is walked at most this deep, and only this many fields of one container are described
# one by one: signatures stay small even for a sample holding a list of 10,000 boxes.
MAX_DEPTH = 8
MAX_FIELDS = 32
# At most this many values of one sample are visited; containers past it keep their type and
# length only ("truncated"). It bounds the walk of a pathological sample (dicts of dicts of dicts);
# lists are summarised (below), so real samples stay far under it.
MAX_NODES = 4096
# A list is a collection: its signature is its length and one element signature, field "*" (the
# elements' common structure, lengths as a range; for a mixed list, its least common kind of
# element, so an odd one is judged against its peers). Tuples and namedtuples are records and keep
# one field per position.
ITEMS = "*"
MAX_NAME = 100  # characters of a dict key kept in a signature
# Label fields with more distinct values than this keep the lowest and highest half of them.
MAX_LABEL_VALUES = 256
ROOT = ""  # the path of the sample itself

_MISSING = object()


def nbytes(sample: Any) -> int:
    """Bytes held by a sample's payload: tensors, arrays, images, bytes and strings, summed over nesting."""
    return sum(leaf_nbytes(leaf) for _, leaf in leaves(sample))


def signature(sample: Any) -> dict[str, Any]:
    """Structure of a sample: types, keys / positions, shapes, dtypes and devices, as plain data."""
    return _Walk().visit(sample, ROOT, 0)  # the walk `describe` makes, so the two always agree


def non_finite(sample: Any) -> dict[str, int]:
    """Count of NaN / Inf values per field path, for float and complex tensors, arrays and numbers."""
    counts = {}
    for path, leaf in leaves(sample):
        count = leaf_non_finite(leaf)
        if count:
            counts[path] = count
    return counts


def requires_grad(sample: Any) -> list[str]:
    """Paths of tensors that require grad (they cannot cross a worker boundary or be collated)."""
    return [path for path, leaf in leaves(sample) if bool(getattr(leaf, "requires_grad", False))]


def non_cpu(sample: Any) -> list[str]:
    """Paths of tensors that live on a device other than the CPU."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    return [
        path for path, leaf in leaves(sample) if isinstance(leaf, torch.Tensor) and leaf.device.type != "cpu"
    ]


def label_values(sample: Any, field: str) -> list[Any] | None:
    """Distinct values of a label field (dict key, tuple position or dotted path), or None if absent."""
    value = lookup(sample, field)
    if value is _MISSING or value is None:
        return None
    return _distinct_values(value)


def open_fd_count() -> int | None:
    """Open file descriptors of this process (Linux /proc, macOS /dev/fd), or None where unknown."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(folder)) - 1  # minus the descriptor listdir itself opened
        except OSError:
            continue
    return None


def describe(sample: Any, labels: Sequence[str] = (), *, scores: bool = True) -> dict[str, Any]:
    """All per-sample measurements in one walk, keyed by the index's `samples` columns; `scores=False`
    (`--no-scores`) leaves out the quality scores of the first image-like tensor."""
    walk = _Walk()
    sig = walk.visit(sample, ROOT, 0)
    info: dict[str, Any] = {}
    if walk.non_finite:
        info["non_finite_fields"] = walk.non_finite
    if walk.grad_paths:
        info["requires_grad_fields"] = walk.grad_paths
    if walk.device_paths:
        info["non_cpu_fields"] = walk.device_paths
    if walk.image is not None and scores:
        info.update(_image_scores(*walk.image))
    return {
        "nbytes": walk.nbytes,
        "signature": sig,
        "non_finite": sum(walk.non_finite.values()),
        "requires_grad": int(bool(walk.grad_paths)),
        "non_cpu": int(bool(walk.device_paths)),
        "labels": {field: label_values(sample, field) for field in labels} if labels else None,
        "info": info or None,
    }


_SCALARS = {int: "int", float: "float", bool: "bool", type(None): "NoneType"}


class _Walk:
    """One pass over a sample: its signature, and bytes, NaN/Inf, grad and device per leaf.

    The scan runs this once per sample in every worker, so the common leaves (numbers, strings,
    tensors) take the shortest path; anything unusual falls back to the general leaf functions.
    """

    def __init__(self) -> None:
        torch = sys.modules.get("torch")
        self.tensor = torch.Tensor if torch is not None else None
        self.nodes = 0
        self.nbytes = 0
        self.non_finite: dict[str, int] = {}
        self.grad_paths: list[str] = []
        self.device_paths: list[str] = []
        self.image: tuple[str, Any, str] | None = None  # the first image-like tensor: path, tensor, layout

    def visit(self, value: Any, path: str, depth: int) -> dict[str, Any]:
        self.nodes += 1
        cls = type(value)
        name = _SCALARS.get(cls)
        if name is not None:
            self.nbytes += 8 if value is not None else 0
            if cls is float and not math.isfinite(value):
                self.non_finite[path] = 1
            return {"type": name}
        if cls is str or cls is bytes:
            self.nbytes += leaf_nbytes(value)
            return {"type": cls.__name__}
        if self.tensor is not None and isinstance(value, self.tensor):
            return self._tensor(value, path)
        if depth < MAX_DEPTH:
            fields = _fields(value)
            if fields is not None:
                sig: dict[str, Any] = {"type": _type_name(value)}
                if _is_sequence(value):
                    sig["length"] = len(value)
                if self.nodes > MAX_NODES:
                    sig.update(fields={}, truncated=True)
                    return sig
                prefix = f"{path}." if path else ""
                described = [(key, self.visit(item, prefix + key, depth + 1)) for key, item in fields]
                if cls is list:
                    sig["fields"], mixed = _summarise(described)
                    if mixed:
                        sig["mixed"] = mixed
                else:
                    sig["fields"] = dict(described)
                return sig
        self.nbytes += leaf_nbytes(value)
        count = leaf_non_finite(value)
        if count:
            self.non_finite[path] = count
        return leaf_signature(value)

    def _tensor(self, value: Any, path: str) -> dict[str, Any]:
        self.nbytes += int(value.element_size() * value.numel())
        count = leaf_non_finite(value)
        if count:
            self.non_finite[path] = count
        if value.requires_grad:
            self.grad_paths.append(path)
        if value.device.type != "cpu":
            self.device_paths.append(path)
        if self.image is None:
            layout = image_like(tuple(value.shape))
            if layout is not None:
                self.image = (path, value, layout)
        return leaf_signature(value)


def _image_scores(path: str, tensor: Any, layout: str) -> dict[str, Any]:
    """The quality scores of the tensor the model sees (scan/quality.py), or nothing if it cannot be read."""
    try:
        values = _reduced(tensor.detach().to("cpu"), layout).numpy()
        return {"quality": score_tensor(values, layout), "quality_field": path}
    except Exception:  # per-sample boundary: an odd tensor type is no reason to lose the sample
        return {}


def _reduced(tensor: Any, layout: str) -> Any:
    """The image tensor as float, averaged down by the factor image files are reduced by before
    scoring (`quality.reduction_factor`: to twice the thumbnail's side): the scores read a few
    thousand pixels, never a float copy of a full-size image."""
    import torch

    chw = tensor if layout == "chw" else tensor.permute(2, 0, 1)
    factor = reduction_factor(int(chw.shape[1]), int(chw.shape[2]))
    if factor > 1:
        chw = torch.nn.functional.avg_pool2d(chw.float().unsqueeze(0), factor).squeeze(0)
    chw = chw.float()
    return chw if layout == "chw" else chw.permute(1, 2, 0)


def _summarise(described: list[tuple[str, dict[str, Any]]]) -> tuple[dict[str, Any], int]:
    """({"*": element signature}, number of element kinds when more than one, else 0)."""
    kinds: list[list[Any]] = []  # [signature, count], in order of first appearance
    for _, item in described:
        for kind in kinds:
            merged = unify(kind[0], item)
            if merged is not None:
                kind[0] = merged
                kind[1] += 1
                break
        else:
            kinds.append([item, 1])
    if not kinds:
        return {}, 0
    if len(kinds) == 1:
        return {ITEMS: kinds[0][0]}, 0
    odd = min(reversed(kinds), key=lambda kind: kind[1])  # the rarest; on a tie, the later one
    return {ITEMS: odd[0]}, len(kinds)


_RANGES = frozenset({"length", "min_length", "fields"})


def unify(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any] | None:
    """One signature for two values of the same structure whose lengths may differ, or None.

    Lengths become a range: `length` the longest, `min_length` the shortest (when they differ).
    """
    if a == b:
        return a
    if a.keys() - _RANGES != b.keys() - _RANGES or any(a[k] != b[k] for k in a.keys() - _RANGES):
        return None
    merged = dict(a)
    if "length" in a and "length" in b:
        shortest = min(a.get("min_length", a["length"]), b.get("min_length", b["length"]))
        merged["length"] = max(a["length"], b["length"])
        merged.pop("min_length", None)
        if shortest != merged["length"]:
            merged["min_length"] = shortest
    elif "length" in a or "length" in b:
        return None
    mine, theirs = a.get("fields"), b.get("fields")
    if mine is None or theirs is None:
        return merged if mine is theirs else None
    if mine.keys() != theirs.keys():
        if "length" in a and not (mine and theirs):  # an empty list is like any list of its peers
            merged["fields"] = mine or theirs
            return merged
        return None
    children = {}
    for key, child in mine.items():
        both = unify(child, theirs[key])
        if both is None:
            return None
        children[key] = both
    merged["fields"] = children
    return merged


# ----------------------------------------------------------------------------------------------
# Walking a sample


def leaves(sample: Any, path: str = ROOT, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(path, value) for every non-container value, paths joined with '.' ("image", "target.boxes")."""
    fields = _fields(sample) if depth < MAX_DEPTH else None
    if fields is None:
        yield path, sample
        return
    for name, value in fields:
        yield from leaves(value, f"{path}.{name}" if path else name, depth + 1)


def lookup(sample: Any, field: str) -> Any:
    """The value at a dotted path: dict keys, tuple / list positions or attributes; a sentinel if absent."""
    value = sample
    for part in field.split(".") if field else ():
        value = _child(value, part)
        if value is _MISSING:
            return _MISSING
    return value


def is_missing(value: Any) -> bool:
    return value is _MISSING


def _child(value: Any, part: str) -> Any:
    if isinstance(value, Mapping):
        if part in value:
            return value[part]
        if part.lstrip("-").isdigit() and int(part) in value:
            return value[int(part)]
        return _MISSING
    if _is_sequence(value):
        if part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            return value[int(part)]
        return getattr(value, part, _MISSING)  # a namedtuple field by name
    return getattr(value, part, _MISSING)


def _fields(value: Any) -> list[tuple[str, Any]] | None:
    """The named children of a container, or None for a leaf. Capped at MAX_FIELDS."""
    if isinstance(value, Mapping):
        return [(_name(key), item) for key, item in list(value.items())[:MAX_FIELDS]]
    if _is_sequence(value):
        names = getattr(value, "_fields", None)  # namedtuple: its field names read better than positions
        if names is not None:
            return list(zip(names, value, strict=False))[:MAX_FIELDS]
        return [(str(position), item) for position, item in enumerate(value[:MAX_FIELDS])]
    return None


def _name(key: Any) -> str:
    # A key is a name; a 10 MB string used as a key must not make every row of the index 10 MB.
    text = key if type(key) is str else str(key)
    return text if len(text) <= MAX_NAME else text[: MAX_NAME - 3] + "..."


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple))


# ----------------------------------------------------------------------------------------------
# One leaf


def leaf_signature(value: Any) -> dict[str, Any]:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        sig: dict[str, Any] = {
            "type": "Tensor",
            "shape": list(value.shape),
            "dtype": str(value.dtype).removeprefix("torch."),
            "device": str(value.device),
        }
        if value.requires_grad:
            sig["requires_grad"] = True
        return sig
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        return {"type": "ndarray", "shape": list(value.shape), "dtype": str(value.dtype)}
    if np is not None and isinstance(value, np.generic):
        return {"type": "numpy." + type(value).__name__, "dtype": str(value.dtype)}
    image = _pil_image_class()
    if image is not None and isinstance(value, image):
        return {"type": "PIL.Image", "mode": value.mode, "size": list(value.size)}
    return {"type": _type_name(value)}


def leaf_nbytes(value: Any) -> int:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return int(value.element_size() * value.numel())
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, (np.ndarray, np.generic)):
        return int(value.nbytes)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    if isinstance(value, str):
        return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    image = _pil_image_class()
    if image is not None and isinstance(value, image):
        width, height = value.size
        return width * height * _pil_bytes_per_pixel(value.mode)
    if value is None:
        return 0
    if isinstance(value, (int, float, bool, complex)):
        return 8
    return sys.getsizeof(value)


def leaf_non_finite(value: Any) -> int:
    if isinstance(value, float):
        return 0 if math.isfinite(value) else 1
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return _tensor_non_finite(torch, value)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, (np.ndarray, np.floating, np.complexfloating)):
        return _array_non_finite(np, value)
    return 0


def _tensor_non_finite(torch: Any, value: Any) -> int:
    if not (value.is_floating_point() or value.is_complex()) or value.numel() == 0:
        return 0
    # The sum of finite values is finite unless it overflows, so one reduction without a mask
    # clears the common case; only a non-finite sum pays for the exact count.
    value = value.detach()
    if cmath.isfinite(value.sum().item()):
        return 0
    return int(value.numel() - torch.isfinite(value).sum().item())


def _array_non_finite(np: Any, value: Any) -> int:
    if value.dtype.kind not in "fc" or value.size == 0:
        return 0
    with np.errstate(over="ignore", invalid="ignore"):  # the cheap test, as for tensors above
        if np.isfinite(value.sum()):
            return 0
    return int(value.size - np.count_nonzero(np.isfinite(value)))


def _distinct_values(value: Any) -> list[Any]:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        values = value.unique().tolist() if value.numel() > 1 else [value.item()] if value.numel() else []
    else:
        np = sys.modules.get("numpy")
        if np is not None and isinstance(value, (np.ndarray, np.generic)):
            values = np.unique(value).tolist() if value.size else []
        elif isinstance(value, (list, tuple, set, frozenset)):
            values = sorted({_plain(v) for v in value}, key=repr)
        else:
            values = [_plain(value)]
    if len(values) > MAX_LABEL_VALUES:
        half = MAX_LABEL_VALUES // 2
        values = values[:half] + values[-half:]
    return [_plain(v) for v in values]


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    item = getattr(value, "item", None)  # numpy / torch scalars
    if callable(item):
        try:
            return _plain(item())
        except (TypeError, ValueError, RuntimeError):
            pass
    return repr(value)[:200]


def _type_name(value: Any) -> str:
    cls = type(value)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _pil_image_class() -> Any:
    module = sys.modules.get("PIL.Image")
    return getattr(module, "Image", None) if module is not None else None


_PIL_BYTES = {"1": 1, "L": 1, "P": 1, "LA": 2, "I;16": 2, "RGB": 3, "YCbCr": 3, "LAB": 3, "HSV": 3}


def _pil_bytes_per_pixel(mode: str) -> int:
    return _PIL_BYTES.get(mode, 4)
