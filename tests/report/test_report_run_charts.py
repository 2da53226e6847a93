"""`datalint report --run` on a generated record: every legend label inside its chart, and the
memory chart scaled to the memory used, not to a container limit far above it."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from datalint.cli import main
from datalint.flight import store

MiB, GiB = 2**20, 2**30
SVG = "{http://www.w3.org/2000/svg}"
CHAR_PX = 6.6  # an 11 px sans-serif character, on average (DejaVu Sans's width)


def write_record(path: Path, memory_limit: int) -> Path:
    """20 seconds of a main process and three workers with long names, about 200 MiB each."""
    db = store.open_record(path)
    store.start_run(db, ["python", "train.py"], 1000.0, memory_limit=memory_limit, shm_total=64 * MiB,
                    usable_cpus=4)  # fmt: skip
    for second in range(20):
        t = 1000.0 + second
        processes = [
            {"t": t, "pid": 4_000_000 + n, "role": "main" if n == 0 else f"worker {n - 1}",
             "rss": (180 + n * 10 + second) * MiB, "pss": (150 + n * 10) * MiB, "cpu": 0.5, "fds": 12,
             "read_bytes": second * MiB}
            for n in range(4)
        ]  # fmt: skip
        system = {"t": t, "shm_used": 8 * MiB, "shm_own": 4 * MiB, "cgroup_usage": 900 * MiB, "cpu": 2.0}
        store.write_second(db, processes, system, [])
    store.finish_run(db, 1020.0, 0, "exited 0", [])
    db.close()
    return path


def charts(record: Path, tmp_path: Path) -> dict[str, ET.Element]:
    out = tmp_path / "run.html"
    assert main(["report", "--run", str(record), "-o", str(out)]) == 0
    found = re.findall(r"<svg\b.*?</svg>", out.read_text(encoding="utf-8"), re.S)
    svgs = [ET.fromstring(svg) for svg in found]
    return {svg.attrib["aria-label"]: svg for svg in svgs}


def texts(svg: ET.Element) -> list[ET.Element]:
    return [e for e in svg.iter(f"{SVG}text") if "chart-title" not in e.attrib.get("class", "")]


def memory_chart(found: dict[str, ET.Element]) -> ET.Element:
    (title,) = [title for title in found if title.startswith("memory")]
    return found[title]


@pytest.mark.parametrize("limit", [64 * GiB, 1536 * MiB], ids=["limit-far-above", "limit-within-reach"])
def test_every_label_is_whole_and_inside_its_chart(tmp_path: Path, limit: int) -> None:
    for title, svg in charts(write_record(tmp_path / "run.db", limit), tmp_path).items():
        width = float(svg.attrib["viewBox"].split()[2])
        for text in texts(svg):
            label = text.text or ""
            assert not label.endswith("…"), f"{title}: legend label cut: {label!r}"
            if text.attrib.get("text-anchor", "start") == "start":
                right_edge = float(text.attrib["x"]) + CHAR_PX * len(label)
                assert right_edge <= width, f"{title}: {label!r} ends at {right_edge:.0f} > {width:.0f}"
    legend = [t.text for t in texts(memory_chart(charts(tmp_path / "run.db", tmp_path)))]
    assert "worker 2 (4000003)" in legend, legend


def test_the_memory_chart_is_scaled_to_the_data_and_names_a_limit_far_above(tmp_path: Path) -> None:
    svg = memory_chart(charts(write_record(tmp_path / "run.db", 64 * GiB), tmp_path))
    tops = [float(y) for line in svg.iter(f"{SVG}line") if "axis" in line.attrib.get("class", "")
            for y in (line.attrib["y1"], line.attrib["y2"])]  # fmt: skip
    plot_top, plot_bottom = min(tops), max(tops)
    points = [p for line in svg.iter(f"{SVG}polyline") for p in line.attrib["points"].split()]
    peak_y = min(float(p.split(",")[1]) for p in points)
    assert (plot_bottom - peak_y) / (plot_bottom - plot_top) > 0.5, "the data fills the chart, not its bottom"
    assert not [line for line in svg.iter(f"{SVG}line") if line.attrib.get("class") == "limit"]
    legend = [t.text for t in texts(svg)]
    assert "cgroup limit 64 GiB" in legend and "73x the peak, off the scale" in legend, legend


def test_a_limit_within_reach_is_drawn_on_the_scale(tmp_path: Path) -> None:
    svg = memory_chart(charts(write_record(tmp_path / "run.db", 1536 * MiB), tmp_path))
    y_top_label = next(t.text for t in texts(svg) if t.attrib.get("text-anchor") == "end")
    assert y_top_label == "1.5 GiB"  # the axis reaches the limit
    limits = [line for line in svg.iter(f"{SVG}line") if line.attrib.get("class") == "limit"]
    assert limits and float(limits[0].attrib["y1"]) == float(limits[0].attrib["y2"])
    assert any(t.text == "cgroup limit 1.5 GiB" for t in texts(svg))
