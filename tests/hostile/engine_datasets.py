"""Datasets that attack the scan engine from inside a sample, or from code the scanner runs itself.

    tests/hostile/engine_datasets.py:make(length=12, closerange=[4])

Each keyword of `make` names an attack and the indices where it happens; every other index returns
a clean dict of a float and a list, after `pause` seconds (so a delayed attack lands in a later
sample). Module-level specs (`exits_at_import.py`, ...) are written by the tests themselves.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any


def _closerange(state: Any) -> None:
    os.closerange(3, 4096)  # every descriptor the sample did not open, the worker's pipes included


def _fork_return(state: Any) -> None:
    os.fork()  # no exec, no _exit: both processes return the sample


def _thread_segfault(state: Any) -> None:
    def later() -> None:
        time.sleep(0.4)
        ctypes.string_at(0)

    threading.Thread(target=later, daemon=True).start()


def _child_process(state: Any) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    Path(state.folder, f"child-{child.pid}").touch()


def _killpg(state: Any) -> None:
    os.killpg(0, signal.SIGTERM)


def _kill_group_kill(state: Any) -> None:
    os.kill(0, signal.SIGKILL)


def _term_parent(state: Any) -> None:
    os.kill(os.getppid(), signal.SIGTERM)  # as if the process that started it were its launcher


def _kill_parent(state: Any) -> None:
    os.kill(os.getppid(), signal.SIGKILL)
    # Go on as a real attacker's code would. Returning at once races the keeper's death on a loaded
    # machine: the sample can be reported ok before the worker is taken along (docs/scan.md).
    time.sleep(2)


def _print_lots(state: Any) -> None:
    block = "x" * 1023 + "\n"
    sys.stdout.write(block * (4 * 1024))  # 4 MiB per sample


def _print_then_wait(state: Any) -> None:
    block = "y" * 1023 + "\n"
    Path(state.folder, f"printing-{os.getpid()}").touch()
    sys.stdout.write(block * (24 * 1024))  # 24 MiB inside one sample
    sys.stdout.flush()
    Path(state.folder, f"printed-{os.getpid()}").touch()
    time.sleep(1.5)


def _stdin(state: Any) -> None:
    sys.stdin.read()  # a worker's stdin is /dev/null: end-of-file at once


def _sleep(state: Any) -> None:
    time.sleep(state.slow)


def _chdir(state: Any) -> None:
    os.chdir("/")  # later samples in this worker open paths relative to the project


def _close_stdout(state: Any) -> None:
    sys.stdout.close()  # later samples in this worker print


def _alarm(state: Any) -> None:
    signal.alarm(1)  # SIGALRM's default action ends the process: a second later, in another sample


def _patch_clock(state: Any) -> None:
    time.monotonic = lambda: 0.0  # type: ignore[assignment]  # every sample would look hours late
    time.perf_counter = lambda: 0.0  # type: ignore[assignment]


ATTACKS = {
    "closerange": _closerange,
    "fork_return": _fork_return,
    "thread_segfault": _thread_segfault,
    "child_process": _child_process,
    "killpg": _killpg,
    "kill_group": _kill_group_kill,
    "term_parent": _term_parent,
    "kill_parent": _kill_parent,
    "print_lots": _print_lots,
    "print_then_wait": _print_then_wait,
    "stdin": _stdin,
    "slow": _sleep,
    "chdir": _chdir,
    "close_stdout": _close_stdout,
    "alarm": _alarm,
    "patch_clock": _patch_clock,
}


class Hostile:
    def __init__(
        self, length: int, folder: str, pause: float, slow: float, plan: dict[int, str], fussy: bool = False
    ) -> None:
        self.fussy = fussy
        self.length = length
        self.folder = folder
        self.pause = pause
        self.slow = slow
        self.plan = plan

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, Any]:
        attack = self.plan.get(index)
        if attack is not None:
            ATTACKS[attack](self)
        if self.pause:
            time.sleep(self.pause)
        if self.fussy:  # what an innocent sample may rely on in its process
            print(f"sample {index}", Path("pyproject.toml").stat().st_size)
        return {"value": float(index), "boxes": [[1.0, 2.0, 3.0, 4.0]] * 3}

    def datalint_key(self, index: int) -> str:
        return f"sample-{index:03d}"


def make(
    length: int,
    folder: str = ".",
    pause: float = 0.0,
    slow: float = 0.0,
    fussy: bool = False,
    **attacks: list[int],
) -> Hostile:
    plan = {index: attack for attack, indices in attacks.items() for index in indices}
    unknown = set(attacks) - set(ATTACKS)
    if unknown:
        raise ValueError(f"unknown attacks {sorted(unknown)}")
    return Hostile(length, folder, pause, slow, plan, fussy)


# ----------------------------------------------------------------------------------------------
# Keys that attack the scanner itself (the scanner reads every key for the fingerprint)


class BadKeys(Hostile):
    def __init__(self, length: int, how: str, at: int) -> None:
        super().__init__(length, ".", 0.0, 0.0, {})
        self.how = how
        self.at = at

    def datalint_key(self, index: int) -> str:
        if index == self.at:
            if self.how == "system_exit":
                raise SystemExit(3)
            if self.how == "segfault":
                ctypes.string_at(0)
            if self.how == "hang":
                time.sleep(3600)
        return f"sample-{index:03d}"


def bad_keys(length: int, how: str, at: int) -> BadKeys:
    return BadKeys(length, how, at)


def never_returns() -> Hostile:
    time.sleep(3600)
    raise AssertionError("unreachable")


# ----------------------------------------------------------------------------------------------
# Streams whose iteration cannot start


class IterRaises:
    def __iter__(self) -> Any:
        raise OSError("the shard list cannot be read")


class IterNotAnIterator:
    def __iter__(self) -> Any:
        return 42


iter_raises = IterRaises()
iter_not_an_iterator = IterNotAnIterator()
