"""The page `datalint report --run RECORD` writes: a `datalint run` record drawn over time.

Memory per process (PSS) and the tree's total against the cgroup limit, /dev/shm against its size,
CPU against the usable CPUs, open files, read/write bytes and GPU memory; each worker's death is a
vertical line. Self-contained like the scan report: its stylesheet inline, no script, no network.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from datalint.flight.diagnosis import diagnose, tree_memory_peak
from datalint.flight.store import load_record
from datalint.report.charts import Mark, Series, Threshold, format_bytes, format_count, time_series
from datalint.report.markup import Html, el
from datalint.report.render import _asset, _csp_hash

Row = dict[str, Any]


def _series(rows: Sequence[Row], key: str, started: float, label: str,
            scale: Callable[[float], float] = float) -> Series:
    return Series(label, tuple((r["t"] - started, scale(r[key])) for r in rows if r.get(key) is not None))


def _per_process(processes: Sequence[Row], key: str, started: float) -> list[Series]:
    by_role: dict[str, list[Row]] = {}
    for row in processes:
        label = "main" if row["role"] == "main" else f"{row['role']} ({row['pid']})"
        by_role.setdefault(label, []).append(row)
    return [_series(rows, key, started, label) for label, rows in by_role.items()]


def _tree_total(processes: Sequence[Row], started: float) -> Series:
    per_second: dict[float, float] = {}
    for row in processes:
        value = row["pss"] if row["pss"] is not None else row["rss"]
        if value is not None:
            per_second[row["t"]] = per_second.get(row["t"], 0) + value
    return Series("tree total", tuple(sorted((t - started, v) for t, v in per_second.items())))


def _deaths(events: Sequence[Row], started: float) -> list[Mark]:
    return [Mark(f"{e['role']} {e['detail']}", e["t"] - started) for e in events
            if e["kind"] == "exit" and e["role"] != "main" and e["signal"] is not None]


def run_charts(record: dict[str, Any]) -> list[Html]:
    run, system, processes = record["run"], record["system"], record["processes"]
    started = run.get("started") or (system[0]["t"] if system else 0.0)
    marks = _deaths(record["events"], started)
    memory_limits = [Threshold("cgroup limit", run["memory_limit"])] if run.get("memory_limit") else []
    shm_limits = [Threshold("/dev/shm size", run["shm_total"])] if run.get("shm_total") else []
    cpu_limits = [Threshold("usable CPUs", run["usable_cpus"])] if run.get("usable_cpus") else []
    charts = [
        time_series([_tree_total(processes, started), _series(system, "cgroup_usage", started, "cgroup"),
                     *_per_process(processes, "rss", started)],
                    title="memory (RSS per process; tree: PSS where read)", fmt=format_bytes,
                    limits=memory_limits, marks=marks),
        time_series([_series(system, "shm_used", started, "/dev/shm used"),
                     _series(system, "shm_own", started, "training's")],
                    title="shared memory", fmt=format_bytes, limits=shm_limits, marks=marks),
        time_series([_series(system, "cpu", started, "tree"), *_per_process(processes, "cpu", started)],
                    title="CPU (cores busy)", fmt=lambda v: f"{v:.2g}", limits=cpu_limits, marks=marks),
        time_series(_per_process(processes, "fds", started), title="open files", fmt=format_count,
                    marks=marks),
        time_series(_per_process(processes, "read_bytes", started), title="bytes read (cumulative)",
                    fmt=format_bytes, marks=marks),
    ]
    if any(r.get("gpu_memory_used") is not None for r in system):
        gpu_total = max((r["gpu_memory_total"] or 0) for r in system)
        gpu_limits = [Threshold("GPU total", gpu_total)] if gpu_total else []
        gpu = [_series(system, "gpu_memory_used", started, "GPU memory")]
        charts.append(time_series(gpu, title="GPU memory", fmt=format_bytes, limits=gpu_limits, marks=marks))
    return charts


def render_run_page(path: Path, title: str | None = None) -> str:
    record = load_record(path)
    run = record["run"]
    command = " ".join(json.loads(run.get("command") or "[]"))
    title = title or f"datalint run: {command}"
    diagnosis = diagnose(record, kernel=([], "not read (report)"))
    started = dt.datetime.fromtimestamp(run.get("started") or 0, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    peak = tree_memory_peak(record["processes"]) or 0
    summary = [
        el("p", "command ", el("code", command), f" · started {started} · ",
           run.get("outcome") or "unfinished", f" · peak tree memory {format_bytes(peak)}", class_="sub"),
    ]
    if diagnosis.bad:
        shown = [el("div", line) for line in diagnosis.lines if not line.startswith("kernel log")]
        summary.append(el("div", *shown, class_="warnbox"))
    css = _asset("report.css")
    policy = f"default-src 'none'; style-src {_csp_hash(css)}; base-uri 'none'; form-action 'none'"
    csp = el("meta", http_equiv="Content-Security-Policy", content=policy)
    head = el("head", Html('<meta charset="utf-8">'), csp, el("title", title), el("style", Html(css)))
    main = el("main", el("section", el("h2", "Run"), *summary),
              el("section", el("h2", "Over time"), *run_charts(record), id="charts"))
    body = el("body", el("header", el("h1", title), class_="top"), main)
    return "<!DOCTYPE html>\n" + el("html", head, body, lang="en") + "\n"
