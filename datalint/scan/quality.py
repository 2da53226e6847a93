"""Image quality scores, perceptual hashes and the near-duplicate index.

Everything here is a pure function of pixels or of numbers already in the index. A worker scores the
pixels its decoder already produced (`score_pixels`, from the reduced JPEG decode, the image data a
PNG's check inflated, or the image Pillow loaded), so scoring costs a resize and a few array
passes, never a second decode. The parent
turns the stored raw scores into the findings after the scan (`quality_findings`), with thresholds
computed over the whole index, so `datalint quarantine` re-judges them without rescanning.

The scores (all stored under `samples.info.quality`, and in the `scores` view):

- `highlights`: the 99th percentile of luminance, 0..1 (`dark` when low: even the brightest pixels
  are dark; a night scene with lit windows is not dark);
- `shadows`: the 1st percentile of luminance, 0..1 (`light` when high: washed out);
- `sharpness`: the Laplacian energy of the contrast-normalised 64 px grey thumbnail: it judges focus,
  not contrast or exposure; a smooth gradient (no structure at all) scores a neutral 1;
- `focus`: how far from blurred the image looks, 1 at the edge (`blurry` when under it): the lesser of
  its fine-detail share (the Laplacian energy of the normalised thumbnail, 64 px on the long side,
  over that of its half-size copy) over 0.18, and its `sharpness` over 0.04. Blur takes the fine
  scale away and leaves the coarse one, while a smooth scene with a few sharp edges (a sunset over
  a skyline, mist over a village) keeps both, so the share tells the two apart where the energy
  alone cannot; the energy term catches a picture soft throughout (a telescope image), whose
  share looks like any photograph's;
- `entropy`: of the grey histogram, in bits, 0..8 (`low_information` when low);
- `colorfulness`: mean largest channel difference, 0..1;
- `colour_share`: `colorfulness` over the tonal range (`highlights` - `shadows`, at least 0.05);
  `grayscale` when about 0: grey content stored as colour. A photograph darkened or washed out to
  a tenth of its range keeps its share of colour, so it is not called grey;
- `phash`: a 64-bit DCT perceptual hash as 16 hex digits (near-duplicates).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from datalint.scan.hash_index import HashIndex, hashes_from_hex

THUMB = 64  # the normalised grey thumbnail's side
_STRUCTURE = 0.04  # Laplacian energy at half scale (unit-variance image) under which nothing has structure
SCORE_NAMES: tuple[str, ...] = (
    "highlights", "shadows", "sharpness", "focus", "entropy", "colorfulness", "colour_share",
)  # fmt: skip
_RANGE_FLOOR = 0.05  # the tonal range colour is measured against, at least: a flat image's is ~0
# `focus` is 1 where either term reaches its limit. Set on the scan's own thumbnails of the labelled
# sets (benchmarks/README.md, "Quality kinds on real photographs"): a fine-detail share of 0.18
# (blurred copies of photographs reach 0.15, photographs in focus start at 0.38, generated clean
# scenes at 0.22), or a Laplacian energy of 0.04 (a telescope picture soft throughout scores 0.036,
# a misty landscape in focus 0.045: the narrowest margin, and the reason for the share).
_DETAIL_SHARE_LIMIT = 0.18
_SOFT_ENERGY_LIMIT = 0.04
# An index scanned before `focus` was stored was judged on `sharpness` under 0.1: its `focus` is
# worked out as `sharpness` over that limit, so it is judged as it was.
_SHARPNESS_LIMIT_BEFORE_FOCUS = 0.1


# --------------------------------------------------------------------------- per image (workers)


def score_pixels(pixels: Any) -> dict[str, Any]:
    """Raw quality scores and the perceptual hash of a decoded image (H x W or H x W x C, uint8 or
    float in 0..1 or 0..255). Channels beyond 3 (alpha) are ignored."""
    import numpy as np

    array = np.asarray(pixels)
    rgb = _as_float_rgb(array)
    grey = rgb @ np.array([0.299, 0.587, 0.114]) if rgb.ndim == 3 else rgb
    levels = np.clip(grey * 255, 0, 255).astype(np.uint8)
    histogram = np.bincount(levels.ravel(), minlength=256)
    # Integer pixels hold no NaN, whose level is undefined; a float image is checked for one.
    if grey.size and (array.dtype.kind in "biu" or not np.isnan(grey).any()):
        low, high = percentiles_by_level(grey, levels, histogram, (1, 99))
    else:
        low, high = percentiles(grey, (1, 99))
    probabilities = histogram[histogram > 0] / grey.size
    small = np.ascontiguousarray(grey, dtype=np.float32)  # what the thumbnails are resized from
    energy = round(sharpness(small), 4)
    scores: dict[str, float | str] = {
        "highlights": round(high, 4),
        "shadows": round(low, 4),
        "sharpness": energy,
        "entropy": round(float(-(probabilities * np.log2(probabilities)).sum()), 4),
        "colorfulness": round(colorfulness(rgb), 4),
        "phash": phash(small),
    }
    # The index stores JSON, where NaN is not a value: a score that cannot be computed is absent.
    share = detail_share(small)
    if math.isfinite(energy) and (share is None or math.isfinite(share)):
        scores["focus"] = _focus(energy, share)
    finite = {name: value for name, value in scores.items() if isinstance(value, str) or math.isfinite(value)}
    return with_derived_scores(finite)


def _focus(sharpness: float, share: float | None) -> float:
    """`focus` from the stored `sharpness` and the fine-detail share (None: no structure to judge)."""
    from_share = math.inf if share is None else share / _DETAIL_SHARE_LIMIT
    return round(min(from_share, sharpness / _SOFT_ENERGY_LIMIT), 4)


def with_derived_scores(scores: Any) -> Any:
    """`scores` with the scores an index scanned before they existed lacks, worked out from the ones
    it stored (rounded), as the policy, the report and `open_index` read them:

    - `colour_share`: the very value a new scan stores;
    - `focus`: `sharpness` over the limit `blurry` had on it, so an old index is judged as it was
      (a new scan's `focus` also reads the fine detail, which the old scores cannot give).

    Unchanged where a score is there, an input is missing, or `scores` is not a dict of them."""
    if not isinstance(scores, dict) or ("colour_share" in scores and "focus" in scores):
        return scores
    derived = dict(scores)
    with contextlib.suppress(KeyError, TypeError, ZeroDivisionError):
        if "colour_share" not in derived:
            share = derived["colorfulness"] / max(derived["highlights"] - derived["shadows"], _RANGE_FLOOR)
            if math.isfinite(share):
                derived["colour_share"] = round(share, 4)
    with contextlib.suppress(KeyError, TypeError):
        if "focus" not in derived:
            focus = derived["sharpness"] / _SHARPNESS_LIMIT_BEFORE_FOCUS
            if math.isfinite(focus):
                derived["focus"] = round(focus, 4)
    return derived


def reduction_factor(height: int, width: int) -> int:
    """The whole factor an image is averaged down by before it is scored: to no less than twice
    the thumbnail's side on its short side. Image files (Pillow's `reduce`) and image tensors
    (average pooling) are reduced alike, so their scores compare and the limits serve both."""
    return max(1, min(height, width) // THUMB)


def percentiles(values: Any, wanted: Sequence[float]) -> list[float]:
    """`numpy.percentile(values, wanted)` (linear interpolation), to the last bit, from one partition:
    numpy's own spends most of its time in Python around the same partition."""
    import numpy as np

    flat = values.ravel().copy()
    count = flat.size
    positions = [(count - 1) * (percent / 100) for percent in wanted]
    below = [min(math.floor(position), count - 1) for position in positions]
    flat.partition(sorted({0, count - 1, *below, *(min(low + 1, count - 1) for low in below)}))
    if np.isnan(flat[-1]):  # NaN sorts last, and numpy's answer is then NaN
        return [math.nan] * len(wanted)
    found = []
    for position, low in zip(positions, below, strict=True):
        a, b = flat[low], flat[min(low + 1, count - 1)]
        gamma = position - low
        difference = float(b - a)  # in the values' own precision, as numpy subtracts them
        found.append(float(b) - difference * (1 - gamma) if gamma >= 0.5 else float(a) + difference * gamma)
    return found


def percentiles_by_level(values: Any, levels: Any, counts: Any, wanted: Sequence[float]) -> list[float]:
    """`percentiles(values, wanted)`, to the last bit, given each value's level (a non-decreasing
    function of the value: the grey histogram's bin) and how many values each level holds.

    Values are ordered as their levels are, so the value of a given rank is the right one among
    those of the level that rank falls in: only that level's few values are partitioned, not the
    whole image (two thirds of the scores' time at 200 x 150 px)."""
    import numpy as np

    count = int(values.size)
    ends = np.cumsum(counts)
    found = []
    for percent in wanted:
        position = (count - 1) * (percent / 100)
        low = min(math.floor(position), count - 1)
        a, b = (_value_of_rank(values, levels, ends, rank) for rank in (low, min(low + 1, count - 1)))
        gamma = position - low
        difference = float(b - a)  # in the values' own precision, as numpy subtracts them
        found.append(float(b) - difference * (1 - gamma) if gamma >= 0.5 else float(a) + difference * gamma)
    return found


def _value_of_rank(values: Any, levels: Any, ends: Any, rank: int) -> Any:
    """The value `rank` places from the smallest (0: the smallest); `ends[level]` counts the values
    of that level and every lower one."""
    import numpy as np

    level = int(np.searchsorted(ends, rank, side="right"))
    start = int(ends[level - 1]) if level else 0
    members = values[levels == level]
    return np.partition(members, rank - start)[rank - start]


def colorfulness(rgb: Any) -> float:
    """Mean of each pixel's largest channel difference (0 for grey, however it is stored)."""
    import numpy as np

    if rgb.ndim != 3:
        return 0.0
    # Channel by channel: numpy's reduction over a 3-long last axis costs ten times as much.
    channels = [rgb[:, :, channel] for channel in range(rgb.shape[2])]
    highest, lowest = functools.reduce(np.maximum, channels), functools.reduce(np.minimum, channels)
    return float(np.mean(highest - lowest))


def _as_float_rgb(array: Any) -> Any:
    import numpy as np

    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim == 3:
        array = array[:, :, :3]
    scale = 255.0 if array.dtype == np.uint8 or float(array.max(initial=0)) > 1.0 else 1.0
    if array.dtype == np.uint16:
        scale = 65535.0
    rgb = array.astype(np.float32)
    rgb /= scale  # in place: the same float32 quotients without a second image-sized array
    return rgb


def _resized(grey: Any, side: int) -> Any:
    import cv2
    import numpy as np

    return cv2.resize(
        np.ascontiguousarray(grey, dtype=np.float32), (side, side), interpolation=cv2.INTER_AREA
    )


def sharpness(grey: Any) -> float:
    """Laplacian energy of the unit-variance grey thumbnail (64 px, or the decoded size when that is
    smaller): low when out of focus.

    Dividing by the spread first makes it blind to exposure and contrast (a dark but detailed image is
    sharp). An image with no structure even at 32 px (flat, a smooth gradient) has nothing to be in
    focus about, and scores a neutral 1 rather than looking blurred.
    """
    import cv2

    side = max(8, min(THUMB, *grey.shape[:2]))  # never upscaled: that would blur it
    thumb = _resized(grey, side)
    spread = float(thumb.std())
    if spread < 1e-4:
        return 1.0
    thumb = (thumb - thumb.mean()) / spread
    coarse = float(cv2.Laplacian(_resized(thumb, side // 2), cv2.CV_32F).var())
    if coarse < _STRUCTURE:
        return 1.0
    return float(cv2.Laplacian(thumb, cv2.CV_32F).var())


def detail_share(grey: Any) -> float | None:
    """The Laplacian energy of the unit-variance grey thumbnail (64 px on its long side, its shape
    kept) over that of its half-size copy: the share of the image's structure that is fine. Blur
    lowers it; a scene's content hardly moves it. None when there is no structure at the coarse
    scale (flat, a smooth gradient): nothing to be in focus about."""
    import cv2
    import numpy as np

    height, width = grey.shape[:2]
    scale = min(1.0, THUMB / max(height, width))  # never upscaled: that would blur it
    size = (max(8, round(width * scale)), max(8, round(height * scale)))
    thumb = cv2.resize(np.ascontiguousarray(grey, dtype=np.float32), size, interpolation=cv2.INTER_AREA)
    spread = float(thumb.std())
    if spread < 1e-4:
        return None
    thumb = (thumb - thumb.mean()) / spread
    half = cv2.resize(thumb, (size[0] // 2, size[1] // 2), interpolation=cv2.INTER_AREA)
    coarse = float(cv2.Laplacian(half, cv2.CV_32F).var())
    if coarse < _STRUCTURE:
        return None
    return float(cv2.Laplacian(thumb, cv2.CV_32F).var()) / coarse


def phash(grey: Any) -> str:
    """64-bit DCT hash: the 8x8 lowest frequencies of a 32x32 thumbnail against their median."""
    import cv2
    import numpy as np

    ac = cv2.dct(_resized(grey, 32))[:8, :8].ravel()[1:]  # the DC term says only the brightness
    # numpy.median of the 63 terms, without its Python overhead: the middle one, NaN when one is
    ordered = np.partition(ac, [len(ac) // 2, len(ac) - 1])
    bits = ac > (math.nan if np.isnan(ordered[-1]) else ordered[len(ac) // 2])
    return np.packbits(np.append(bits, False)).tobytes().hex()  # 63 bits, first the highest, then a 0


def image_like(shape: Sequence[int]) -> str | None:
    """`chw` or `hwc` for a tensor shape that looks like one image (1-4 channels, sides >= 16: an 8x8
    tensor is more likely a feature map than a picture)."""
    if len(shape) != 3:
        return None
    if shape[0] in (1, 2, 3, 4) and min(shape[1:]) >= 16:
        return "chw"
    if shape[2] in (1, 2, 3, 4) and min(shape[:2]) >= 16:
        return "hwc"
    return None


def score_tensor(array: Any, layout: str) -> dict[str, Any]:
    """Scores of an image-like tensor as the model sees it: min-max scaled to 0..1 over the tensor, so
    a normalised image scores as its picture would; a constant tensor (a transform that blanks every
    image) stays constant and is `low_information`."""
    import numpy as np

    values = np.asarray(array, dtype=np.float32)
    if layout == "chw":
        values = np.moveaxis(values, 0, -1)
    if values.shape[-1] == 2:
        values = values[..., :1]
    values = np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)  # NaN is `non_finite`'s to report
    low, high = float(values.min()), float(values.max())
    scaled = (values - low) / (high - low) if high > low else np.zeros_like(values)
    if low >= 0 and high <= 1:
        scaled = values  # already a picture in 0..1: keep its real brightness
    return score_pixels(scaled)


# --------------------------------------------------------------------------- thresholds (the parent)


@dataclass(frozen=True)
class QualityThresholds:
    """Defaults for the quality kinds.

    `dark`, `light`, `blurry`, `low_information` and `grayscale` are absolute limits on the scores;
    where the population's median is itself past one (a set of night photos, every image blacked out
    by a transform), the limit becomes `outlier_mads` robust deviations (1.4826 x MAD) from the median
    instead, so only that population's outliers are flagged and the population warning says what
    most images share. A limit the user sets is used as given. `odd_size` and `odd_aspect` are
    relative: robust deviations of log size (sqrt of area) or log aspect (long side over short, so
    portrait and landscape are alike) from the median, the spread
    floored at 0.1 so a uniform set needs a real difference.
    """

    dark: float = 0.14
    light: float = 0.8
    blurry: float = 1.0
    low_information: float = 1.3
    grayscale: float = 0.012
    outlier_mads: float = 4.0
    odd_size: float = 4.0
    odd_aspect: float = 4.0
    near_duplicate: int = 10  # Hamming distance of the 64-bit hashes, at most

    def with_overrides(self, overrides: Mapping[str, float]) -> QualityThresholds:
        known = {name: value for name, value in overrides.items() if name in self.__dataclass_fields__}
        if "near_duplicate" in known:
            known["near_duplicate"] = int(known["near_duplicate"])
        return QualityThresholds(**{**self.__dict__, **known})


# kind -> (score, direction): "low" flags scores under the limit, "high" over it.
SCORED_KINDS: dict[str, tuple[str, str]] = {
    "dark": ("highlights", "low"),
    "light": ("shadows", "high"),
    "blurry": ("focus", "low"),
    "low_information": ("entropy", "low"),
    "grayscale": ("colour_share", "low"),
}


@dataclass(frozen=True)
class KindLimit:
    """The limit one quality kind was judged with, and the population it came from."""

    kind: str
    score: str
    direction: str
    limit: float
    median: float | None
    spread: float | None
    past_absolute: int  # how many images are past the absolute limit (the population warning)
    total: int


def robust_center(values: Sequence[float] | Any) -> tuple[float, float]:  # or an array
    """(median, 1.4826 x MAD): a Gaussian's standard deviation, unmoved by a few outliers."""
    import numpy as np

    array = np.asarray(values, dtype=np.float64)
    median = float(np.median(array))
    return median, float(1.4826 * np.median(np.abs(array - median)))


def kind_limits(
    scores: Mapping[str, Sequence[float]], thresholds: QualityThresholds, fixed: Iterable[str] = ()
) -> dict[str, KindLimit]:
    """The limit of each scored kind over a population: `scores` maps a score name to its values.
    The kinds in `fixed` (limits the user set) keep their absolute limit whatever the population."""
    fixed = set(fixed)
    limits: dict[str, KindLimit] = {}
    for kind, (score, direction) in SCORED_KINDS.items():
        values = scores.get(score) or []
        absolute = float(getattr(thresholds, kind))
        if not values:
            continue
        median, spread = robust_center(values)
        if direction == "high":
            past = sum(value > absolute for value in values)
            shifted = median > absolute and kind not in fixed
            limit = median + thresholds.outlier_mads * spread if shifted else absolute
        else:
            past = sum(value < absolute for value in values)
            shifted = median < absolute and kind not in fixed
            limit = median - thresholds.outlier_mads * spread if shifted else absolute
        limits[kind] = KindLimit(kind, score, direction, limit, median, spread, past, len(values))
    return limits


def past_limit(value: float, limit: KindLimit) -> bool:
    return value > limit.limit if limit.direction == "high" else value < limit.limit


@dataclass(frozen=True)
class ShapeLimit:
    """`odd_size` or `odd_aspect` over a population, in log terms: the measure is the log of the side
    (sqrt of the area, px) or of the aspect (long side / short side); an image more than `factor` robust
    deviations from the median is odd."""

    kind: str
    median: float
    spread: float
    factor: float

    def deviation(self, width: int, height: int) -> float:
        return (SHAPE_MEASURES[self.kind](width, height) - self.median) / self.spread

    @property
    def typical(self) -> float:
        return math.exp(self.median)

    @property
    def band(self) -> tuple[float, float]:
        """The side (px) or aspect below and above which images are odd."""
        reach = self.factor * self.spread
        return math.exp(self.median - reach), math.exp(self.median + reach)


def _log_side(width: int, height: int) -> float:
    return 0.5 * math.log(max(1, width * height))


def _log_aspect(width: int, height: int) -> float:
    """The log of the long side over the short one: a portrait photo and a landscape one of the same
    shape are alike (photo sets hold both; a third portrait would otherwise all be odd), while a
    banner or a strip is far from either."""
    return abs(math.log(max(1, width) / max(1, height)))


def aspect(width: int, height: int) -> float:
    """The long side over the short one, as `odd_aspect` measures it (>= 1)."""
    return math.exp(_log_aspect(width, height))


SHAPE_MEASURES = {"odd_size": _log_side, "odd_aspect": _log_aspect}


def shape_limits(
    shapes: Mapping[int, tuple[int, int]], thresholds: QualityThresholds
) -> dict[str, ShapeLimit]:
    """The limits of `odd_size` and `odd_aspect` over a population (index -> (width, height)); the
    spread is floored at 10% in log terms, so a uniform set needs a real difference."""
    if not shapes:
        return {}
    import numpy as np

    # Most images share a handful of shapes: measure each shape once and repeat it by its count
    # (the same values as one per image, so the same median and spread).
    counts = Counter(shapes.values())
    limits: dict[str, ShapeLimit] = {}
    for kind, measure in SHAPE_MEASURES.items():
        values = np.repeat([measure(w, h) for w, h in counts], list(counts.values()))
        median, spread = robust_center(values)
        limits[kind] = ShapeLimit(kind, median, max(spread, 0.1), float(getattr(thresholds, kind)))
    return limits


def shape_outliers(
    shapes: Mapping[int, tuple[int, int]], thresholds: QualityThresholds, min_peers: int = 8
) -> list[tuple[int, str, str]]:
    """(index, kind, detail) for `odd_size` and `odd_aspect` (`shape_limits`)."""
    if len(shapes) < min_peers:
        return []
    return odd_shapes(shapes, shape_limits(shapes, thresholds))


def odd_shapes(
    shapes: Mapping[int, tuple[int, int]], limits: Mapping[str, ShapeLimit]
) -> list[tuple[int, str, str]]:
    """(index, kind, detail) for the images of `shapes` outside the population's `limits`: the
    images of any part of a population can be judged alone, once the limits are known."""
    found: list[tuple[int, str, str]] = []
    distinct = set(shapes.values())
    for kind, limit in limits.items():
        odd: dict[tuple[int, int], str] = {}
        for w, h in distinct:  # judged once per shape, reported per image
            deviation = limit.deviation(w, h)
            if abs(deviation) > limit.factor:
                what = (
                    f"{w}x{h}: side {math.sqrt(w * h):.0f} px against a typical {limit.typical:.0f}"
                    if kind == "odd_size"
                    else f"{w}x{h}: aspect {aspect(w, h):.2f} against a typical {limit.typical:.2f}"
                )
                odd[(w, h)] = f"{what} ({abs(deviation):.1f} robust deviations)"
        if odd:
            found.extend((idx, kind, odd[shape]) for idx, shape in shapes.items() if shape in odd)
    return found


# --------------------------------------------------------------------------- near-duplicates


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()


def brute_force_pairs(hashes: Sequence[int], radius: int) -> set[tuple[int, int]]:
    """The reference the index is tested against."""
    return {
        (i, j)
        for i in range(len(hashes))
        for j in range(i + 1, len(hashes))
        if hamming(hashes[i], hashes[j]) <= radius
    }


def near_duplicate_findings(
    hashed: Sequence[tuple[int, str, str]],
    radius: int,
    grouping: Callable[[Sequence[tuple[int, str, str]], Any, int], list[list[int]]] | None = None,
    label: Callable[[int], int] | None = None,
) -> list[tuple[int, str, str]]:
    """`hashed` is (index, key, phash hex) per image -> `near_duplicate` for every member of a group
    but its representative (the first by key), naming the group and the representative.

    `grouping(ordered, values, radius)` finds the groups (positions in `ordered`, members sorted)
    another way: a scan updates the groups it stored last time (datalint/scan/hash_groups.py).
    `label`: the position a group is named by, from its representative's row (the row itself when
    not given)."""
    ordered = sorted(hashed, key=lambda item: (item[1], item[0]))
    values = hashes_from_hex([digest for _idx, _key, digest in ordered])
    found: list[tuple[int, str, str]] = []
    groups = HashIndex(values, radius).groups() if grouping is None else grouping(ordered, values, radius)
    for members in groups:
        found.extend(group_findings([(*ordered[m][:2], int(values[m])) for m in members], label))
    return found


def group_findings(
    members: Sequence[tuple[int, str, int]], label: Callable[[int], int] | None = None
) -> list[tuple[int, str, str]]:
    """`near_duplicate` for each member of one group, (row, key, hash) sorted by key, but the first;
    the group is named by `label(row)` of the first (its position), or its row when not given."""
    representative = members[0]
    group = f"group {representative[0] if label is None else label(representative[0])}"
    others = f" ({len(members)} images)" if len(members) > 2 else ""
    return [
        (idx, "near_duplicate", f"{group}{others}: looks like {representative[1]} (hash distance "
         f"{hamming(value, representative[2])})")
        for idx, _key, value in members[1:]
    ]  # fmt: skip


def group_of(detail: str) -> int | None:
    """The representative's position that a `near_duplicate` finding's detail names ("group 12 ...")."""
    head = detail.split(":", 1)[0].split()
    return int(head[1]) if len(head) >= 2 and head[0] == "group" and head[1].isdigit() else None


def leak_source(detail: str, split: str) -> str | None:
    """The other split's key that a `leak` finding's detail names."""
    for prefix in ("the same bytes as ", "looks like "):
        if detail.startswith(prefix):
            rest = detail[len(prefix) :]
            cut = rest.rfind(f" in {split}")
            return rest[:cut] if cut >= 0 else None
    return None


def leak_findings(
    ours: Sequence[tuple[int, str, str | None, str | None]],
    theirs: Sequence[tuple[str, str | None, str | None]],
    radius: int,
    split: str,
) -> list[tuple[int, str, str]]:
    """`ours` is (index, key, sha256, phash) of this scan, `theirs` (key, sha256, phash) of the other
    split -> `leak` for each of ours with the same bytes or a hash within `radius` of one of theirs."""
    by_digest = {digest: key for key, digest, _hash in theirs if digest}
    their_keys = [key for key, _digest, value in theirs if value]
    index = HashIndex(hashes_from_hex([value for _key, _digest, value in theirs if value]), radius)
    hashed = [
        (idx, digest, value) for idx, _key, digest, value in ours if not (digest and digest in by_digest)
    ]
    matches = index.nearest_all(hashes_from_hex([value for _idx, _digest, value in hashed if value]))
    nearest = dict(zip([idx for idx, _digest, value in hashed if value], matches, strict=True))
    found: list[tuple[int, str, str]] = []
    for idx, _key, digest, _value in ours:
        if digest and digest in by_digest:
            found.append((idx, "leak", f"the same bytes as {by_digest[digest]} in {split}"))
            continue
        match = nearest.get(idx)
        if match is not None:
            position, distance = match
            found.append(
                (idx, "leak", f"looks like {their_keys[position]} in {split} (hash distance {distance})")
            )
    return found
