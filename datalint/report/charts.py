"""SVG charts drawn by the generator: no plotting library, no script, a few kilobytes each.

Every chart is bounded in size whatever the number of samples (histograms have fixed bins,
bar charts a fixed number of bars), which keeps a report of 100k samples as small as one of 100.
Colours come from CSS classes in the page's stylesheet.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from datalint.report.markup import Html, el

Formatter = Callable[[float], str]

WIDTH = 560
HEIGHT = 220
LEFT, RIGHT, TOP, BOTTOM = 48, 16, 26, 34  # margins around the plot area
BASE = HEIGHT - BOTTOM  # y of the x axis
MAX_BARS = 16


def format_seconds(seconds: float) -> str:
    if seconds <= 0:
        return "0 s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{_short(seconds / scale)} {unit}"
    return f"{_short(seconds / 1e-9)} ns"


def format_bytes(nbytes: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{_short(nbytes / scale)} {unit}"
    return f"{_short(nbytes)} B"


def format_pixels(pixels: float) -> str:
    for unit, scale in (("Mpx", 1e6), ("kpx", 1e3)):
        if pixels >= scale:
            return f"{_short(pixels / scale)} {unit}"
    return f"{_short(pixels)} px"


def format_count(value: float) -> str:
    return f"{value:,.0f}"


def _short(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def _n(value: float) -> str:
    """A coordinate: one decimal is plenty at this scale and keeps the SVG small."""
    return f"{value:.1f}"


@dataclass(frozen=True)
class Threshold:
    """A policy limit drawn as a dashed line: samples beyond it are flagged."""

    label: str
    value: float


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    css: str = "bar"


def _svg(title: str, parts: Sequence[object], height: int = HEIGHT, width: int = WIDTH) -> Html:
    return el(
        "svg",
        el("text", title, class_="chart-title", x=LEFT, y=16),
        *parts,
        class_="chart",
        viewBox=f"0 0 {width} {height}",
        width=width,
        height=height,
        role="img",
        aria_label=title,
        xmlns="http://www.w3.org/2000/svg",
    )


def empty_chart(title: str, message: str) -> Html:
    return _svg(title, [el("text", message, class_="chart-empty", x=LEFT, y=50)], height=80)


def _line(css: str, x1: float, y1: float, x2: float, y2: float) -> Html:
    return el("line", class_=css, x1=_n(x1), y1=_n(y1), x2=_n(x2), y2=_n(y2))


def y_axis_label(value: str) -> Html:
    """The y axis's name, upright along the axis, left of its tick labels (not under the x axis)."""
    x, y = 11, (TOP + BASE) / 2
    return el(
        "text", value, class_="tick-label axis-name", x=_n(x), y=_n(y), text_anchor="middle",
        transform=f"rotate(-90 {_n(x)} {_n(y)})",
    )  # fmt: skip


def _label(value: str, x: float, y: float, anchor: str = "start", css: str = "tick-label") -> Html:
    return el("text", value, class_=css, x=_n(x), y=_n(y), text_anchor=anchor)


def log_histogram(
    values: Any,
    *,
    title: str,
    fmt: Formatter,
    thresholds: Sequence[Threshold] = (),
    bins_per_decade: int = 4,
    tick_base: int = 10,
) -> Html:
    """A histogram of positive values on a log-10 x axis, counts on a log y axis.

    Both axes are logarithmic because the interesting samples are the rare ones: one
    oversized sample among 100k must still get a visible bar.
    """
    import numpy as np

    data = np.asarray(values, dtype=np.float64)
    positive = data[np.isfinite(data) & (data > 0)]
    if positive.size == 0:
        return empty_chart(title, "no measurements in the index")
    limits = [t.value for t in thresholds if t.value > 0]
    lo = math.floor(math.log10(min([float(positive.min()), *limits])) * bins_per_decade) / bins_per_decade
    hi = math.ceil(math.log10(max([float(positive.max()), *limits])) * bins_per_decade) / bins_per_decade
    hi = max(hi, lo + 1.0)
    edges = np.arange(lo, hi + 0.5 / bins_per_decade, 1.0 / bins_per_decade)
    logs = np.log10(positive)
    counts, _ = np.histogram(logs, bins=edges)
    # the samples past the first limit, binned the same way and drawn over their bins in red, so a
    # bin that straddles the line shows how many of its samples are past it
    limit = min(limits, default=math.inf)
    over, _ = np.histogram(logs[positive > limit], bins=edges)
    zeros = int(data.size - positive.size)
    top = int(counts.max())
    parts: list[object] = [
        _histogram_bars(counts.tolist(), edges.tolist(), fmt, top, "bar"),
        _histogram_bars(over.tolist(), edges.tolist(), fmt, top, "bar over", " past the limit"),
        _log_x_axis(lo, hi, fmt, tick_base),
        _log_y_axis(top),
        [_threshold_line(t, lo, hi, fmt) for t in thresholds if t.value > 0],
    ]
    if zeros:
        parts.append(_label(f"+ {zeros:,} at zero (not drawn)", WIDTH - RIGHT, 16, "end", "chart-note"))
    return _svg(title, parts)


def _x(position: float, lo: float, hi: float) -> float:
    return LEFT + (position - lo) / (hi - lo) * (WIDTH - LEFT - RIGHT)


def _y_log(count: float, top: int) -> float:
    return BASE - math.log10(1 + count) / math.log10(1 + max(top, 1)) * (BASE - TOP)


def _histogram_bars(
    counts: list[int],
    edges: list[float],
    fmt: Formatter,
    top: int,
    css: str,
    note: str = "",
    log: bool = True,
) -> list[Html]:
    lo, hi = edges[0], edges[-1]
    bars = []
    for count, left, right in zip(counts, edges, edges[1:], strict=False):
        if not count:
            continue
        x0, x1, y = _x(left, lo, hi), _x(right, lo, hi), _y_log(count, top)
        shown = (fmt(10**left), fmt(10**right)) if log else (fmt(left), fmt(right))
        tip = f"{shown[0]} to {shown[1]}: {count:,} samples{note}"
        bars.append(
            el(
                "rect",
                el("title", tip),
                class_=css,
                x=_n(x0 + 0.5),
                y=_n(y),
                width=_n(max(x1 - x0 - 1, 1)),
                height=_n(BASE - y),
            )
        )
    return bars


def _log_x_axis(lo: float, hi: float, fmt: Formatter, base: int) -> list[Html]:
    """Ticks at powers of `base` (10 for seconds; 2 for bytes, so labels read 4 KiB, not 9.54 MiB)."""
    parts = [_line("axis", LEFT, BASE, WIDTH - RIGHT, BASE)]
    for value in _tick_values(lo, hi, base):
        x = _x(math.log10(value), lo, hi)
        parts.append(_line("tick", x, BASE, x, BASE + 4))
        parts.append(_label(fmt(value), x, BASE + 16, "middle"))
    return parts


def _tick_values(lo: float, hi: float, base: int) -> list[float]:
    scale = math.log10(base)
    powers = range(math.ceil(lo / scale), math.floor(hi / scale) + 1)
    step = max(1, math.ceil(len(powers) / 8))  # at most ~8 labels, so they never overlap
    values = [float(base) ** p for p in powers if p % step == 0]
    if base == 10 and len(values) < 3:  # a narrow range: 1-2-5 steps, so the axis still reads
        decades = range(math.floor(lo), math.ceil(hi) + 1)
        values = [m * 10.0**d for d in decades for m in (1, 2, 5) if lo <= math.log10(m * 10.0**d) <= hi]
    return values


def _log_y_axis(top: int) -> list[Html]:
    parts = [_line("axis", LEFT, TOP, LEFT, BASE), y_axis_label("samples (log)")]
    power = 1
    while power <= max(top, 1):
        y = _y_log(power, top)
        parts.append(_line("grid", LEFT, y, WIDTH - RIGHT, y))
        parts.append(_label(format_count(power), LEFT - 4, y + 4, "end"))
        power *= 10
    return parts


def _threshold_line(threshold: Threshold, lo: float, hi: float, fmt: Formatter, log: bool = True) -> Html:
    x = _x(math.log10(threshold.value) if log else threshold.value, lo, hi)
    right_side = x > WIDTH * 0.7  # keep the label inside the chart
    label = f"{threshold.label} {fmt(threshold.value)}"
    return el(
        "g",
        _line("limit", x, TOP - 4, x, BASE),
        _label(
            label, x - 4 if right_side else x + 4, TOP + 6, "end" if right_side else "start", "limit-label"
        ),
        class_="threshold",
    )


def score_histogram(
    values: Any,
    *,
    title: str,
    fmt: Formatter,
    limits: Sequence[Threshold] = (),
    past: Callable[[Any], Any] | None = None,
    log_x: bool = False,
    bins: int = 40,
) -> Html:
    """A histogram of one score with the limits that judge it drawn as dashed lines, counts on a log
    y axis (the few images past a limit must show). `past` maps the values to a mask of those past
    the limits, drawn over their bins in red; `log_x` for scores spread over decades (sharpness)."""
    import numpy as np

    data = np.asarray(values, dtype=np.float64)
    data = data[np.isfinite(data) & (data > 0)] if log_x else data[np.isfinite(data)]
    if data.size == 0:
        return empty_chart(title, "no scores in the index")
    drawn = [t for t in limits if math.isfinite(t.value) and (t.value > 0 or not log_x)]
    where = np.log10 if log_x else (lambda array: array)
    positions = where(data)
    marks = [math.log10(t.value) if log_x else t.value for t in drawn]
    lo, hi = min([float(positions.min()), *marks]), max([float(positions.max()), *marks])
    pad = (hi - lo) * 0.02 or (0.5 if log_x else 0.05)
    lo, hi = lo - pad, hi + pad
    edges = np.linspace(lo, hi, bins + 1)
    counts, _ = np.histogram(positions, bins=edges)
    over, _ = np.histogram(positions[past(data)] if past else positions[:0], bins=edges)
    top = int(counts.max())
    parts: list[object] = [
        _histogram_bars(counts.tolist(), edges.tolist(), fmt, top, "bar", log=log_x),
        _histogram_bars(over.tolist(), edges.tolist(), fmt, top, "bar over", " past the limit", log=log_x),
        _log_x_axis(lo, hi, fmt, 10) if log_x else _linear_x_axis(lo, hi, fmt),
        _log_y_axis(top),
        [_threshold_line(t, lo, hi, fmt, log=log_x) for t in drawn],
    ]
    return _svg(title, parts)


def _linear_x_axis(lo: float, hi: float, fmt: Formatter) -> list[Html]:
    """About six ticks at round steps (1, 2 or 5 times a power of ten)."""
    raw = (hi - lo) / 6
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    parts = [_line("axis", LEFT, BASE, WIDTH - RIGHT, BASE)]
    value = math.ceil(lo / step) * step
    while value <= hi:
        x = _x(value, lo, hi)
        parts.append(_line("tick", x, BASE, x, BASE + 4))
        parts.append(_label(fmt(value), x, BASE + 16, "middle"))
        value += step
    return parts


def bar_chart(bars: Sequence[Bar], *, title: str, fmt: Formatter = format_count) -> Html:
    """Horizontal bars, in the order given; more than MAX_BARS are folded into one "more" bar."""
    if not bars:
        return empty_chart(title, "nothing to show")
    shown = list(bars[:MAX_BARS])
    rest = bars[MAX_BARS:]
    if rest:
        shown.append(Bar(f"{len(rest)} more", sum(bar.value for bar in rest), "bar other"))
    row, label_width = 20, 150
    top = max(bar.value for bar in shown) or 1.0
    span = WIDTH - label_width - RIGHT - 70
    parts = []
    for i, bar in enumerate(shown):
        y = TOP + i * row
        width = max(bar.value / top * span, 1.0 if bar.value else 0.0)
        value = fmt(bar.value)
        parts.append(_label(_clip(bar.label), label_width - 6, y + 14, "end", "bar-label"))
        parts.append(
            el(
                "rect",
                el("title", f"{bar.label}: {value}"),
                class_=bar.css,
                x=label_width,
                y=y + 3,
                width=_n(width),
                height=row - 6,
            )
        )
        parts.append(_label(value, label_width + width + 4, y + 14, css="bar-value"))
    return _svg(title, parts, height=TOP + row * len(shown) + 8)


def _clip(label: str, limit: int = 22) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def size_heatmap(sizes: dict[tuple[int, int], int], *, title: str) -> Html:
    """Image width x height on log-2 axes; each cell shaded by how many files fall in it."""
    if not sizes:
        return empty_chart(title, "no image sizes in the index")
    cells: dict[tuple[int, int], int] = {}
    for (width, height), count in sizes.items():
        cell = (int(math.log2(width)), int(math.log2(height)))
        cells[cell] = cells.get(cell, 0) + count
    x_lo, x_hi = min(c[0] for c in cells), max(c[0] for c in cells) + 1
    y_lo, y_hi = min(c[1] for c in cells), max(c[1] for c in cells) + 1
    cw, ch = (WIDTH - LEFT - RIGHT) / (x_hi - x_lo), (BASE - TOP) / (y_hi - y_lo)
    top = max(cells.values())
    parts: list[object] = []
    for (cx, cy), count in sorted(cells.items()):
        shade = 0.25 + 0.75 * math.log10(1 + count) / math.log10(1 + top)
        tip = f"width {2**cx}-{2 ** (cx + 1) - 1} px, height {2**cy}-{2 ** (cy + 1) - 1} px: {count:,} files"
        parts.append(
            el(
                "rect",
                el("title", tip),
                class_="cell",
                x=_n(LEFT + (cx - x_lo) * cw + 1),
                y=_n(BASE - (cy - y_lo + 1) * ch + 1),
                width=_n(max(cw - 2, 1)),
                height=_n(max(ch - 2, 1)),
                fill_opacity=f"{shade:.2f}",
            )
        )
    parts += [
        _line("axis", LEFT, BASE, WIDTH - RIGHT, BASE),
        _line("axis", LEFT, TOP, LEFT, BASE),
        _label("width (px)", WIDTH - RIGHT, HEIGHT - 4, "end"),
        y_axis_label("height (px), by powers of 2"),
    ]
    parts += [
        _label(str(2**cx), LEFT + (cx - x_lo) * cw, BASE + 14, "middle") for cx in range(x_lo, x_hi + 1)
    ]
    parts += [
        _label(str(2**cy), LEFT - 4, BASE - (cy - y_lo) * ch + 4, "end") for cy in range(y_lo, y_hi + 1)
    ]
    return _svg(title, parts)


# --- time series (the records of `datalint run`) ---------------------------------------------

MAX_POINTS = 600  # per line: a long run is thinned to this many points, keeping each bucket's peak
LIMIT_REACH = 2.0  # a limit up to this many times the data's peak is drawn on its scale
CHAR_WIDTH = 7.0  # px a character of an 11 px label may take (wide sans-serif, bold limit labels)


@dataclass(frozen=True)
class Series:
    label: str
    points: tuple[tuple[float, float], ...]  # (seconds since start, value)


@dataclass(frozen=True)
class Mark:
    """An event drawn as a vertical line at its time: a worker's death."""

    label: str
    t: float


def thin(points: Sequence[tuple[float, float]], limit: int = MAX_POINTS) -> list[tuple[float, float]]:
    """At most `limit` points, each bucket keeping its largest value (a peak must not vanish)."""
    if len(points) <= limit:
        return list(points)
    size = math.ceil(len(points) / limit)
    return [max(points[i : i + size], key=lambda p: p[1]) for i in range(0, len(points), size)]


def time_series(
    series: Sequence[Series],
    *,
    title: str,
    fmt: Formatter = format_count,
    limits: Sequence[Threshold] = (),
    marks: Sequence[Mark] = (),
) -> Html:
    """Lines over time, with limits as dashed horizontal lines and events as vertical ones.

    The y axis is scaled to the data: a limit within LIMIT_REACH times the peak is drawn and
    included, one further above is named in the legend instead (a 64 GiB container limit would
    flatten 300 MiB of workers into the axis). The legend is as wide as its longest label.
    """
    drawn = [s for s in series if s.points]
    if not drawn:
        return empty_chart(title, "nothing recorded")
    t_end = max(max(t for t, _ in s.points) for s in drawn) or 1.0
    peak = max(max(v for _, v in s.points) for s in drawn)
    near = [lim for lim in limits if lim.value <= LIMIT_REACH * peak]
    top = max([peak] + [lim.value for lim in near]) or 1.0
    left, right = LEFT + 14, WIDTH - RIGHT - 90

    def x(t: float) -> float:
        return left + t / t_end * (right - left)

    def y(v: float) -> float:
        return BASE - v / top * (BASE - TOP)

    parts: list[object] = [_line("axis", left, BASE, right, BASE), _line("axis", left, TOP, left, BASE)]
    parts += [_label(fmt(top), left - 4, TOP + 4, "end"), _label("0", left - 4, BASE, "end")]
    parts += [_label(format_seconds(t_end), right, BASE + 14, "end"), _label("0 s", left, BASE + 14)]
    for lim in near:
        parts.append(el("g", _line("limit", left, y(lim.value), right, y(lim.value)), class_="threshold"))
    for mark in marks:
        parts.append(
            el(
                "g",
                el("title", mark.label),
                _line("death", x(mark.t), TOP, x(mark.t), BASE),
                _label(f"✕ {_clip(mark.label, 14)}", x(mark.t) + 3, TOP + 8, css="death-label"),
                class_="mark",
            )
        )
    legend: list[tuple[str, str, str]] = []  # (key's css, label's css, text) per row
    for i, s in enumerate(drawn[:6]):
        coords = " ".join(f"{_n(x(t))},{_n(y(v))}" for t, v in thin(s.points))
        parts.append(el("polyline", el("title", s.label), class_=f"series s{i}", points=coords))
        legend.append((f"series s{i}", "tick-label", s.label))
    legend += [entry for lim in limits for entry in _limit_entries(lim, lim in near, peak, fmt)]
    parts += _legend(legend, right)
    widest = max(len(text) for _, _, text in legend)
    return _svg(title, parts, width=max(WIDTH, math.ceil(right + 19 + widest * CHAR_WIDTH + RIGHT)))


def _limit_entries(limit: Threshold, drawn: bool, peak: float, fmt: Formatter) -> list[tuple[str, str, str]]:
    """A limit's legend rows: its dashed line and value, or, far above the data, an arrow and a
    second row saying how far (two short rows keep the chart narrow)."""
    text = f"{limit.label} {fmt(limit.value)}"
    if drawn:
        return [("limit", "limit-label", text)]
    far = f"{limit.value / peak:,.0f}x the peak, off the scale" if peak > 0 else "off the scale"
    return [("", "limit-label", text), (" ", "tick-label", far)]


def _legend(entries: Sequence[tuple[str, str, str]], right: float) -> list[Html]:
    """One row per entry right of the plot: a line in the series' style (an arrow for a limit
    above the scale) and the whole label; the chart is made as wide as the longest."""
    rows = []
    for row, (key_css, label_css, text) in enumerate(entries):
        y = TOP + 24 + 14 * row
        if key_css.strip():
            key: Html | None = _line(key_css, right + 4, y, right + 16, y)
        else:  # a limit above the scale has an arrow; its second row, nothing
            key = _label("↑", right + 6, y + 4) if not key_css else None
        rows.append(el("g", key, _label(text, right + 19, y + 4, css=label_css), class_="legend"))
    return rows
