"""Run a training command as a child and record its process tree until it ends.

The child runs in a process group of its own, so a command that signals its own group (a
launcher's `os.killpg(0, SIGKILL)` on the way out) reaches its workers and not the recorder, which
then says what happened. Where datalint runs in the terminal's foreground, the child's group is made
the foreground while it runs: a Ctrl-C from the terminal reaches it and its DataLoader workers exactly
as it would without datalint, and a Ctrl-Z stops the command and then datalint, handing the
terminal back to the shell (`fg` resumes both). A signal sent to datalint itself (kill, a
scheduler's SIGTERM) is forwarded to the child. The loop waits in `sigtimedwait`, which is both its
clock and the way signals and the child's exit wake it.

datalint makes itself the child subreaper (Linux's PR_SET_CHILD_SUBREAPER): a process the command
forks and leaves behind is handed to datalint when its parent exits, not to init, so the processes
a command left running when it ended are found and named. The command's stderr passes through
flight/output.py, which keeps its last part for the diagnosis (flight/explain.py).

Workers are not datalint's children, so their exit status is read from /proc/PID/stat while they
are zombies (before the training process reaps them): a pidfd per process wakes the exit watcher
at each death (flight/exits.py), which wakes the loop; so does each new in-flight record, through
the in-flight directory's news FIFO. Between those the loop sleeps until the full sample, taken
every SAMPLE_SECONDS: it polls (every POLL_SECONDS) only where the kernel has no pidfds or no FIFO
could be made. A process's death carries the sample it was reading, from the record its
`GuardedDataset` keeps in the run's in-flight directory (flight/inflight.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datalint.flight import inflight, sampling, store
from datalint.flight.exits import ExitWatcher
from datalint.flight.output import OutputTail
from datalint.host import processes
from datalint.host.cgroup import memory_files, read_cgroup, read_memory_files
from datalint.host.cpus import effective_cpu_count
from datalint.host.shm import shm_usage

SAMPLE_SECONDS = 1.0
# PSS needs smaps_rollup, which walks the page tables: ~5 ms for a process with torch loaded, more
# for a bigger one, so with 8 workers every second it would take 5% of a core. RSS (statm) is read
# every second; PSS at the start, as soon as the tree's RSS passes by PSS_GROWTH the highest it had
# when PSS was read (the staircase before an OOM kill), every PSS_SECONDS while the tree's RSS or
# the cgroup's usage (which sees copy-on-write pages turn private while RSS stays put) moves by
# PSS_MOVED, and every PSS_STALE_SECONDS regardless. A training whose memory holds still costs one
# read in five minutes; a new epoch's pool climbing back to the last one's level costs none. The
# tree's memory peak uses RSS where PSS was not read.
PSS_SECONDS = 30.0
PSS_STALE_SECONDS = 300.0
PSS_GROWTH = 1.05
PSS_MOVED = 0.01
POLL_SECONDS = 0.02
LEFTOVER_GRACE = 1.0  # seconds a process may take to follow the main's exit before it counts as left running
# The cgroup's usage and OOM counters are read every second from files found once; its limit, which
# takes a walk of the hierarchy (tens of files on v1, ~3 ms) and rarely changes, every LIMIT_EVERY.
LIMIT_EVERY = 30
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
WANTED = {*FORWARDED, signal.SIGCHLD}  # blocked, and waited for in sigtimedwait
SI_KERNEL = 0x80  # si_code of a signal the terminal generated: the child got its own copy
CLD_STOPPED = 5  # si_code of a SIGCHLD for a child stopped by a signal


def event(t: float, pid: int | None, role: str, kind: str, detail: str = "",
          number: int | None = None) -> dict[str, Any]:
    """One row of the record's `events` table."""
    return {"t": t, "pid": pid, "role": role, "kind": kind, "detail": detail, "signal": number}


@dataclass
class Tracked:
    pid: int
    role: str
    worker: int | None
    cpu_ticks: int
    exe: str | None
    zombie_status: int | None = None
    watched: bool = False  # its death wakes the exit watcher; else it is polled


@dataclass
class Tree:
    """The processes of the run seen so far: roles, last CPU ticks, deaths."""

    main_pid: int
    main_exe: str | None
    inflight_dir: Path | None = None  # where the training's processes write the sample in flight
    exits: ExitWatcher | None = None  # reads a dying worker's status before the training reaps it
    live: dict[int, Tracked] = field(default_factory=dict)
    known: set[int] = field(default_factory=set)  # every pid tracked so far, the dead ones too
    recorded: set[int] = field(default_factory=set)  # the pids whose in-flight record was read
    events: list[dict[str, Any]] = field(default_factory=list)
    renamed: dict[int, str] = field(default_factory=dict)  # roles corrected since the last write

    def track(self, pid: int, role: str, worker: int | None, stat: processes.ProcStat, exe: str | None,
              now: float) -> Tracked:
        tracked = Tracked(pid, role, worker, stat.cpu_ticks, exe)
        if self.exits is not None and pid != self.main_pid:
            tracked.watched = self.exits.watch(pid)
        self.live[pid] = tracked
        self.known.add(pid)
        self.events.append(event(now, pid, role, "start"))
        return tracked

    def role_for(self, pid: int, exe: str | None) -> tuple[str, int | None]:
        if pid == self.main_pid:
            return "main", None
        if exe is not None and exe == self.main_exe:
            # DataLoader workers run the main's interpreter; numbered as torch numbers them, by start order
            used = {t.worker for t in self.live.values() if t.worker is not None}
            number = next(n for n in range(len(used) + 1) if n not in used)
            return f"worker {number}", number
        return "child", None


def exit_event(tree: Tree, now: float, pid: int, role: str, detail: str,
               number: int | None) -> dict[str, Any]:
    """A process's exit, with the sample it was reading when its training keeps an in-flight record."""
    row = event(now, pid, role, "exit", detail, number)
    sample = inflight.read(tree.inflight_dir, pid) if tree.inflight_dir is not None else None
    if tree.inflight_dir is not None:
        inflight.forget(tree.inflight_dir, pid)  # a new pool each epoch: the directory holds the living
    if sample is not None:
        row.update(sample_index=sample.index, sample_key=sample.key, last_sample=sample.last,
                   sample_started=sample.started, sample_torn=int(sample.torn))
    return row


def discover(tree: Tree, now: float) -> None:
    """Add the tree's new processes (one /proc scan a second)."""
    stats = processes.tree_of(tree.main_pid)
    for pid in sorted(stats, key=lambda p: (stats[p].start_ticks, p)):
        if pid in tree.live or stats[pid].state == "Z":
            continue
        exe = processes.read_exe(pid)
        role, worker = tree.role_for(pid, exe)
        tree.track(pid, role, worker, stats[pid], exe, now)


def discover_recorded(tree: Tree, now: float) -> None:
    """Add the processes that keep an in-flight record, at the 50 Hz poll: a worker that dies on one
    of its first samples is seen (and named by torch's own number) before the 1 s discovery would."""
    if tree.inflight_dir is None:
        return
    for pid in inflight.pids(tree.inflight_dir):
        if pid in tree.recorded:
            continue
        tree.recorded.add(pid)
        sample = inflight.read(tree.inflight_dir, pid)
        worker = sample.worker if sample is not None else None
        if pid in tree.live:
            _renumber(tree, tree.live[pid], worker)
        elif pid not in tree.known:
            _track_recorded(tree, pid, worker, now)


def _renumber(tree: Tree, tracked: Tracked, worker: int | None) -> None:
    """torch's number for a worker over the recorder's guess from the start order."""
    if worker is not None and tracked.role != "main" and tracked.worker != worker:
        tracked.role, tracked.worker = f"worker {worker}", worker
        tree.renamed[tracked.pid] = tracked.role
        for row in tree.events:  # not written yet
            if row["pid"] == tracked.pid:
                row["role"] = tracked.role


def _track_recorded(tree: Tree, pid: int, worker: int | None, now: float) -> None:
    stat = processes.read_stat(pid)
    role = "main" if pid == tree.main_pid else f"worker {worker}" if worker is not None else "child"
    if stat is None:  # reaped already: its death is all there is to record
        tree.known.add(pid)
        detail = "exited; status not seen (reaped before it was read)"
        tree.events.append(exit_event(tree, now, pid, role, detail, None))
        return
    tracked = tree.track(pid, role, worker, stat, processes.read_exe(pid), now)
    if stat.state == "Z":
        tracked.zombie_status = stat.exit_code


def suspects(tree: Tree) -> list[int]:
    """The processes to look at between samples: those the exit watcher saw die, and those it
    cannot watch."""
    dead = tree.exits.take_dead() if tree.exits is not None else []
    return dead + [pid for pid, tracked in tree.live.items() if not tracked.watched]


def poll_deaths(tree: Tree, now: float, pids: Iterable[int] | None = None) -> None:
    """Catch the exit of each of `pids` (every known process when None): its status while a zombie
    (or as the exit watcher read it), or 'gone' if reaped unseen."""
    for pid in list(tree.live) if pids is None else pids:
        tracked = tree.live.get(pid)
        if tracked is None or pid == tree.main_pid:
            continue  # gone already; the main's status comes from waitpid
        stat = processes.read_stat(pid)
        if stat is not None and stat.state == "Z" and stat.exit_code is not None:
            tracked.zombie_status = stat.exit_code
        if stat is None or stat.state in ("Z", "X"):
            status = tracked.zombie_status
            if status is None and tree.exits is not None:
                status = tree.exits.status(pid)
            if status is None and stat is None:
                detail, number = "exited; status not seen (reaped before it was read)", None
            elif status is None:
                continue
            else:
                detail, number = sampling.describe_status(status)
            del tree.live[pid]
            tree.events.append(exit_event(tree, now, pid, tracked.role, detail, number))


class CgroupReader:
    """The cgroup's memory usage, limit and OOM counters, as cheaply as once a second allows."""

    def __init__(self) -> None:
        self.files = memory_files()
        self.limit = self._limit()
        self.samples = 0

    @staticmethod
    def _limit() -> int | None:
        cgroup = read_cgroup(Path("/"))
        return cgroup.memory_limit if cgroup else None

    def read(self) -> tuple[int | None, int | None, dict[str, int]]:
        """(usage, limit, memory events)."""
        self.samples += 1
        if self.samples % LIMIT_EVERY == 0:
            self.limit = self._limit()
        usage, events = read_memory_files(self.files)
        return usage, self.limit, events


@dataclass
class PssSchedule:
    """When to pay for PSS: see PSS_SECONDS."""

    read_at: float | None = None
    rss_read: int = 0  # the tree's highest RSS at a PSS read
    rss_then: int = 0  # the tree's RSS and the cgroup's usage at the last PSS read
    usage_then: int | None = None
    rss_now: int = 0
    usage_now: int | None = None

    def due(self, now: float) -> bool:
        if self.read_at is None or self.rss_now > self.rss_read * PSS_GROWTH:
            return True
        waited = now - self.read_at
        return waited >= PSS_STALE_SECONDS or (waited >= PSS_SECONDS and self._moved())

    def _moved(self) -> bool:
        if self.usage_now is None or self.usage_then is None:
            return True  # no cgroup to watch: the timer alone
        return (abs(self.rss_now - self.rss_then) > self.rss_then * PSS_MOVED
                or abs(self.usage_now - self.usage_then) > self.usage_then * PSS_MOVED)

    def seen(self, now: float, rows: Sequence[dict[str, Any]], usage: int | None, with_pss: bool) -> None:
        self.rss_now, self.usage_now = sum(row["rss"] or 0 for row in rows), usage
        if with_pss:
            self.read_at, self.rss_read = now, max(self.rss_read, self.rss_now)
            self.rss_then, self.usage_then = self.rss_now, usage


def sample(tree: Tree, now: float, elapsed: float, gpu: sampling.GpuReader, cgroup: CgroupReader,
           usable_cpus: int, with_pss: bool = True) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    held: list[dict[str, int]] = []
    for pid, tracked in tree.live.items():
        stat = processes.read_stat(pid)
        if stat is None:
            continue
        rss, pss = processes.read_memory(pid) if with_pss else (processes.read_rss(pid), None)
        fds, segments = processes.read_fds(pid)
        read_bytes, write_bytes = processes.read_io(pid)
        cpu = (stat.cpu_ticks - tracked.cpu_ticks) / processes.CLOCK_TICKS / elapsed if elapsed > 0 else 0.0
        tracked.cpu_ticks = stat.cpu_ticks
        held.append(segments)
        rows.append({"t": now, "pid": pid, "role": tracked.role, "rss": rss, "pss": pss, "cpu": round(cpu, 3),
                     "fds": fds, "read_bytes": read_bytes, "write_bytes": write_bytes})
    shm_used, shm_total = shm_usage()
    usage, limit, events = cgroup.read()
    gpus = gpu.read()
    system = {
        "t": now, "shm_used": shm_used, "shm_total": shm_total,
        "shm_own": sum(sampling.tree_segments(held).values()),
        "cgroup_usage": usage, "cgroup_limit": limit,
        "oom": events.get("oom"), "oom_kill": events.get("oom_kill"),
        "cpu": round(sum(float(r["cpu"]) for r in rows), 3), "usable_cpus": usable_cpus,
        "gpu_memory_used": sum(g.memory_used for g in gpus) if gpus else None,
        "gpu_memory_total": sum(g.memory_total for g in gpus) if gpus else None,
        "gpu_utilization": max(g.utilization for g in gpus) if gpus else None,
    }
    return rows, system


def exit_code_of(returncode: int) -> int:
    """The shell's convention: a child killed by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


@dataclass(frozen=True)
class RunResult:
    returncode: int  # the exit code to pass on
    outcome: str  # 'exited with 0', 'killed by SIGKILL'
    record: Path
    output_tail: str = ""  # the last part of what the command wrote to stderr


def run_and_record(command: Sequence[str], record: Path, say: Any = None,
                   scan_index: Path | None = None) -> RunResult:
    """Start `command`, record it until it exits, and return its exit status. `scan_index`, the
    scan's index of the dataset, is named in the record for the diagnosis."""
    say = say or (lambda text: print(f"datalint run: {text}", file=sys.stderr))
    db = store.open_record(record)
    gpu = sampling.GpuReader()
    if gpu.source is None:
        say("no GPU readable (neither nvidia-ml-py nor nvidia-smi): GPU columns stay empty")
    usable = effective_cpu_count()
    inflight_dir = _inflight_dir()
    become_subreaper()
    terminal = foreground_terminal()
    tail = OutputTail()
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, WANTED)
    try:
        child = subprocess.Popen(
            list(command), stderr=tail.child_fd, process_group=0,
            preexec_fn=lambda: _start_in_child(old_mask, terminal),
            env={**os.environ, inflight.ENVIRONMENT: str(inflight_dir)} if inflight_dir else None,
        )
    except OSError as exc:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        tail.close_child_end()
        tail.finish(wait=0.0)
        _remove(inflight_dir)
        from datalint.errors import UsageError

        raise UsageError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from None
    tail.close_child_end()
    try:
        outcome = _record(child, command, db, gpu, usable, inflight_dir, old_mask, scan_index, terminal)
    finally:
        take_terminal_back(terminal)
        _remove(inflight_dir)
    return RunResult(exit_code_of(child.returncode), outcome, record, tail.finish())


PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Have the processes the command leaves behind handed to this process (Linux 3.4+), so they can
    be found when it ends; False where the kernel (or libc) has no such call."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def foreground_terminal() -> int | None:
    """The terminal datalint runs in the foreground of (its fd), or None: no terminal, or a job in
    the background, where the child's group is left as the shell would leave it."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
                return fd
        except OSError:
            continue
    return None


def _start_in_child(old_mask: set[int | signal.Signals], terminal: int | None) -> None:
    """In the child before it runs the command: its group (made by Popen) takes the terminal's
    foreground, then the signals datalint blocks are unblocked."""
    if terminal is not None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})  # a background group may take it then
        with contextlib.suppress(OSError):
            os.tcsetpgrp(terminal, os.getpgrp())
    signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def take_terminal_back(terminal: int | None) -> None:
    """Make datalint's own group the terminal's foreground again (the shell's job is datalint)."""
    if terminal is None:
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(terminal, os.getpgrp())
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def stopped_by_signal(pid: int) -> bool:
    """Whether the process is stopped by a signal (state T in /proc/PID/stat), whatever SIGCHLD said."""
    stat = processes.read_stat(pid)
    return stat is not None and stat.state == "T"


def _stopped(child: subprocess.Popen[bytes], terminal: int | None) -> None:
    """The command was stopped (Ctrl-Z in its foreground group): stop datalint too, so the shell sees
    its job stopped and gets the terminal; when continued (`fg`), continue the command."""
    take_terminal_back(terminal)
    os.kill(os.getpid(), signal.SIGSTOP)
    if terminal is not None:  # continued: `fg` gave the terminal to datalint's group
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
        try:
            with contextlib.suppress(OSError):
                os.tcsetpgrp(terminal, child.pid)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGCONT)


def _inflight_dir() -> Path | None:
    """A private directory for the training's in-flight records; None (the samples go unnamed)
    where the temporary directory is not writable."""
    try:
        return Path(tempfile.mkdtemp(prefix="datalint-run-"))
    except OSError:
        return None


def _remove(directory: Path | None) -> None:
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def _record(child: subprocess.Popen[bytes], command: Sequence[str], db: Any, gpu: sampling.GpuReader,
            usable: int, inflight_dir: Path | None, old_mask: set[int | signal.Signals],
            scan_index: Path | None = None, terminal: int | None = None) -> str:
    """The loop: poll deaths, sample once a second, until the child exits; then the final events.
    Returns the child's outcome ('killed by SIGKILL')."""
    cgroup = CgroupReader()
    started = time.time()
    store.start_run(db, command, started, memory_limit=cgroup.limit,
                    shm_total=shm_usage()[1], usable_cpus=usable, gpu_source=gpu.source,
                    scan_index=str(scan_index.resolve()) if scan_index is not None else None)
    loop = threading.get_ident()
    # the watcher wakes the loop with a SIGCHLD, which the loop blocks and waits for
    exits = ExitWatcher(wake=lambda: signal.pthread_kill(loop, signal.SIGCHLD))
    tree = Tree(child.pid, processes.read_exe(child.pid), inflight_dir, exits)
    news = inflight.open_news(inflight_dir) if inflight_dir is not None else None
    listening = news is not None and exits.listen(news[0])
    oom_kills = read_memory_files(cgroup.files)[1].get("oom_kill")
    last_sample, pss, own_cpu = 0.0, PssSchedule(), time.process_time()
    try:
        while True:
            info = signal.sigtimedwait(WANTED, _wait(tree, listening, last_sample))
            if info is not None and info.si_signo != signal.SIGCHLD and info.si_code != SI_KERNEL:
                child.send_signal(info.si_signo)
            elif info is not None and info.si_code == CLD_STOPPED and info.si_pid == child.pid:
                _stopped(child, terminal)
            elif stopped_by_signal(child.pid):
                # Stopped, but its SIGCHLD came while another was pending (the exit watcher's wake):
                # the kernel keeps one of them, and the stop's went unseen.
                _stopped(child, terminal)
            now = time.time()
            if not listening or exits.take_news():
                discover_recorded(tree, now)
            poll_deaths(tree, now, suspects(tree))
            if child.poll() is not None:
                break
            if now - last_sample >= SAMPLE_SECONDS:
                poll_deaths(tree, now)  # all of them, once a second: a watcher's miss is caught here
                discover_recorded(tree, now)
                discover(tree, now)
                elapsed = now - last_sample if last_sample else 0.0
                with_pss = pss.due(now)
                rows, system = sample(tree, now, elapsed, gpu, cgroup, usable, with_pss=with_pss)
                pss.seen(now, rows, system["cgroup_usage"], with_pss)
                own_cpu = _recorder_cpu(system, own_cpu, elapsed)
                oom_kills = _oom_event(tree, system, oom_kills, now)
                reap_orphans(tree)
                store.write_second(db, rows, system, tree.events, tree.renamed)
                tree.events, tree.renamed = [], {}
                last_sample = now
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    now = time.time()
    discover_recorded(tree, now)
    poll_deaths(tree, now)
    for pid, role in left_running(tree, grace=LEFTOVER_GRACE).items():
        detail = f"still running after the main process exited: {processes.read_cmdline(pid) or '?'}"
        tree.events.append(event(now, pid, role, "orphan", detail))
    outcome, number = sampling.describe_status(_wait_status(child.returncode))
    tree.events.append(exit_event(tree, now, child.pid, "main", outcome, number))
    store.finish_run(db, now, child.returncode, outcome, tree.events, tree.renamed)
    exits.close()
    for fd in news or ():
        os.close(fd)
    db.close()
    return outcome


def left_running(tree: Tree, grace: float = 0.0) -> dict[int, str]:
    """The processes the command leaves running (pid -> role): those of its tree still alive, and
    those handed to datalint as subreaper (a daemon it forked, whose parent exited), with theirs.
    Those that end within `grace` seconds are not counted: helpers such as multiprocessing's
    resource tracker see their parent's exit and follow it at once."""
    deadline = time.monotonic() + grace
    while True:
        reap_orphans(tree)
        found = {pid: tracked.role for pid, tracked in tree.live.items()
                 if pid != tree.main_pid and _alive(pid)}
        for pid in processes.child_pids(os.getpid()):
            if pid != tree.main_pid and pid not in found and _alive(pid):
                found[pid] = "child"
                found.update({p: "child" for p in processes.tree_of(pid) if p not in found and _alive(p)})
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)


def reap_orphans(tree: Tree) -> None:
    """Reap the processes handed to datalint as subreaper once they exit (the main is Popen's to
    reap): a long run must not collect their zombies. A tracked one's status is read first."""
    for pid in processes.child_pids(os.getpid()):
        if pid == tree.main_pid:
            continue
        stat = processes.read_stat(pid)
        if stat is not None and stat.state == "Z":
            poll_deaths(tree, time.time(), [pid])
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def _alive(pid: int) -> bool:
    stat = processes.read_stat(pid)
    return stat is not None and stat.state not in ("Z", "X")


def _wait(tree: Tree, listening: bool, last_sample: float) -> float:
    """How long the loop may sleep: until the next sample, when every death and every new in-flight
    record wakes it; POLL_SECONDS where something must be polled (no pidfds, no news FIFO)."""
    if not listening or any(not t.watched for pid, t in tree.live.items() if pid != tree.main_pid):
        return POLL_SECONDS
    return max(0.0, last_sample + SAMPLE_SECONDS - time.time())


def _recorder_cpu(system: dict[str, Any], before: float, elapsed: float) -> float:
    """The recorder's own CPU (all its threads) since the last row, as a share of one core, into
    `system`: what the record cost is in the record. Returns the clock's reading."""
    now = time.process_time()
    system["recorder_cpu"] = round((now - before) / elapsed, 5) if elapsed > 0 else None
    return now


def _wait_status(returncode: int) -> int:
    """Popen's returncode back as a waitpid status."""
    return -returncode if returncode < 0 else returncode << 8


def _oom_event(tree: Tree, system: dict[str, Any], before: int | None, now: float) -> int | None:
    after = system.get("oom_kill")
    if before is not None and after is not None and after > before:
        detail = f"the cgroup's oom_kill counter rose by {after - before}"
        tree.events.append(event(now, None, "", "oom_kill", detail))
    return after if after is not None else before
