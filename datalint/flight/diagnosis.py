"""What a finished record says when the run ended badly: who died, by which signal, the kernel's
evidence, the peaks against the limits, and what to try."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from datalint.flight import suspects
from datalint.flight.inflight import SampleInFlight, describe
from datalint.flight.sampling import signal_name
from datalint.units import human_bytes

OOM_PATTERN = re.compile(r"out of memory|killed process|oom-kill|oom_reaper|segfault", re.IGNORECASE)


@dataclass(frozen=True)
class Death:
    pid: int
    role: str
    detail: str
    signal: int | None
    t: float
    sample: SampleInFlight | None = None  # what it was reading, when its training kept the record
    scan: suspects.ScanEvidence | None = None  # else what the scan's index says of its signal

    @property
    def unnamed(self) -> bool:
        return self.sample is None or self.sample.index is None


@dataclass(frozen=True)
class Diagnosis:
    bad: bool
    deaths: tuple[Death, ...]
    oom_kills: int
    kernel_lines: tuple[str, ...]
    kernel_note: str
    lines: tuple[str, ...]


def kernel_log(pattern: re.Pattern[str] = OOM_PATTERN) -> tuple[list[str], str]:
    """Kernel log lines matching `pattern`, from `dmesg` (or /dev/kmsg); with a note when unreadable."""
    try:
        done = subprocess.run(["dmesg", "-T"], capture_output=True, text=True, timeout=10, check=False)
        if done.returncode == 0:
            return [line for line in done.stdout.splitlines() if pattern.search(line)], "dmesg"
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return [], (f"the kernel log is not readable here ({exc.strerror}): run `sudo dmesg -T | grep -iE "
                    "'out of memory|killed process'`, or `sudo sysctl kernel.dmesg_restrict=0`; "
                    "in a container read it on the host")
    lines = []
    try:
        while True:
            try:
                record = os.read(fd, 8192).decode(errors="replace")
            except BlockingIOError:
                break
            except OSError:
                continue  # EPIPE: records overwritten while reading
            message = record.split(";", 1)[-1].strip()
            if pattern.search(message):
                lines.append(message)
    finally:
        os.close(fd)
    return lines, "/dev/kmsg"


def _peak(rows: Sequence[dict[str, Any]], key: str) -> int | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return max(values) if values else None


def tree_memory_peak(processes: Sequence[dict[str, Any]]) -> int | None:
    """The largest sum of PSS (RSS where PSS is unreadable) over one second's processes."""
    per_second: dict[float, int] = {}
    for row in processes:
        value = row["pss"] if row["pss"] is not None else row["rss"]
        if value is not None:
            per_second[row["t"]] = per_second.get(row["t"], 0) + value
    return max(per_second.values()) if per_second else None


def _is_death(event: dict[str, Any], run: dict[str, Any]) -> bool:
    """A signal, a non-zero exit, or the main's failure; a worker's clean exit at an epoch's end is not."""
    if event["kind"] != "exit":
        return False
    if event["role"] == "main":
        return bool(run.get("returncode"))
    return event["signal"] is not None or (
        event["detail"].startswith("exited with") and event["detail"] != "exited with 0"
    ) or event.get("sample_index") is not None  # gone mid-sample, even where its status was not seen


def diagnose(record: dict[str, Any], kernel: tuple[list[str], str] | None = None) -> Diagnosis:
    run, events = record["run"], record["events"]
    found = [Death(e["pid"], e["role"], e["detail"], e["signal"], e["t"], _sample_of(e))
             for e in events if _is_death(e, run)]
    workers_died = any(d.role != "main" for d in found)
    deaths = tuple(_with_scan(d, run.get("scan_index"), workers_died) for d in found)
    oom_kills = sum(1 for e in events if e["kind"] == "oom_kill")
    bad = bool(run.get("returncode")) or oom_kills > 0 or any(d.role != "main" for d in deaths)
    lines: list[str] = []
    if not bad:
        return Diagnosis(False, deaths, oom_kills, (), "", ())
    kernel_lines, note = kernel if kernel is not None else kernel_log()
    started = run.get("started") or 0.0
    for death in sorted(deaths, key=lambda d: d.t):
        reading = f" {describe(death.sample, death.t)}" if death.sample is not None else ""
        lines.append(f"{death.role} (pid {death.pid}) {death.detail} at {death.t - started:.1f}s{reading}")
        if death.scan is not None:
            lines.append(f"  {suspects.describe(death.scan)}")
        for line in kernel_lines:
            if re.search(rf"\b{death.pid}\b", line):
                lines.append(f"  kernel: {line}")
    if oom_kills:
        lines.append("out of memory: the cgroup's memory.events counted an OOM kill during the run")
    elif any(d.signal == 9 for d in deaths):
        lines.append("SIGKILL with no OOM kill counted by the cgroup: the kernel's OOM killer of the host, "
                     "a scheduler, a person, or the command itself signalling its own process group "
                     "(the kernel log names the OOM killer's)")
    if not kernel_lines and note not in ("dmesg", "/dev/kmsg"):
        lines.append(f"kernel log: {note}")
    lines.extend(_peaks(record))
    lines.extend(_advice(deaths, oom_kills))
    return Diagnosis(True, deaths, oom_kills, tuple(kernel_lines), note, tuple(lines))


def _with_scan(death: Death, index: str | None, workers_died: bool) -> Death:
    """The death with what the scan's index says, where no in-flight record names the sample and
    `--index` named one: the samples that crashed the scan by its signal; for a main that failed with
    no worker's death seen (a worker that dies in its first second goes unseen), those that crashed
    it by any."""
    if index is None or not death.unnamed:
        return death
    if death.signal is not None:
        found = suspects.evidence(index, signal_name(death.signal))
    elif death.role == "main" and not workers_died:
        found = suspects.evidence(index, None)
    else:
        return death
    return replace(death, scan=found) if found is not None else death


def _sample_of(event: dict[str, Any]) -> SampleInFlight | None:
    """The sample on a death's event: `sample_torn` is set where the process kept an in-flight record
    (records of schema 1 have none of these columns)."""
    if event.get("sample_torn") is None:
        return None
    return SampleInFlight(event.get("sample_index"), event.get("last_sample"), event.get("sample_key"),
                          event.get("sample_started"), bool(event.get("sample_torn")))


def _peaks(record: dict[str, Any]) -> list[str]:
    system, run = record["system"], record["run"]
    peak = tree_memory_peak(record["processes"])
    cgroup_peak, limit = _peak(system, "cgroup_usage"), run.get("memory_limit")
    lines = [f"memory peak: tree {human_bytes(peak)} (sum of PSS where read, else RSS), "
             f"cgroup {human_bytes(cgroup_peak)} "
             f"of limit {human_bytes(limit) if limit else 'none'}"]
    shm_peak, shm_total, own = _peak(system, "shm_used"), run.get("shm_total"), _peak(system, "shm_own")
    lines.append(f"/dev/shm peak: {human_bytes(shm_peak)} of {human_bytes(shm_total)} "
                 f"(segments the training held: {human_bytes(own)})")
    return lines


def _advice(deaths: Sequence[Death], oom_kills: int) -> list[str]:
    advice = _crash_advice(deaths)
    workers = [d for d in deaths if d.role.startswith("worker")]
    if oom_kills or any(d.signal == 9 for d in workers):
        advice.append("try: `datalint doctor --dataset SPEC --batch-size B --num-workers W` for what fits "
                      "((num_workers x prefetch_factor + 1) x batch bytes + num_workers x worker footprint), "
                      "then fewer workers or a smaller batch; `datalint doctor --after` for what the crash "
                      "left in /dev/shm")
    elif any(d.signal == 7 for d in deaths):
        advice.append("try: SIGBUS in a worker is /dev/shm full: `datalint doctor` (shared memory), "
                      "`docker run --shm-size=8g`")
    return advice


# A process that dies of these while reading a sample most likely died of that sample (a decoder's
# bug on a malformed file); SIGKILL and SIGBUS are the memory's, said by the other advice.
CRASH_SIGNALS = {4: "SIGILL", 6: "SIGABRT", 8: "SIGFPE", 11: "SIGSEGV"}


def _crash_advice(deaths: Sequence[Death]) -> list[str]:
    for death in deaths:
        if death.signal in CRASH_SIGNALS and death.sample is not None and death.sample.index is not None:
            index = death.sample.index
            return [f"try: sample {index} crashed the process reading it ({CRASH_SIGNALS[death.signal]}): "
                    f"reproduce it alone (`dataset[{index}]` in a plain Python process); "
                    "`datalint scan SPEC` reads every sample in an isolated worker and records each one "
                    "that crashes, and `GuardedDataset(dataset, quarantine=LIST)` keeps them out"]
    for death in deaths:
        crash = death.signal in CRASH_SIGNALS or death.signal is None
        if crash and death.scan is not None and death.scan.suspects:
            return [f"try: keep the samples the scan saw crash out of the training: `datalint quarantine "
                    f"{death.scan.path} -o quarantine.json` and `GuardedDataset(dataset, "
                    "quarantine='quarantine.json')`; `GuardedDataset` alone names the sample for certain "
                    "next time"]
    return []
