"""What the training printed before it failed, read for the failures datalint can explain.

The recorder keeps the last part of the command's stderr (flight/output.py). When the run ends
badly, that tail is matched against the messages PyTorch and Python print for the failures of the
data path whose cause datalint can point to (docs/run.md, "What `run` explains"):

- a worker that cannot start because something it needs cannot be pickled (spawn and forkserver
  start methods send the dataset, `collate_fn` and `worker_init_fn` to each worker by pickle);
- shared memory that ran out (a batch could not be put in /dev/shm);
- too many open files (the descriptors that pass each batch between processes).

Each explanation names what the message names (the object that could not be pickled) and what to
run next; the pickling one also lists what `datalint check` finds in the script's project
(`project_findings`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# The messages, as Python 3.8-3.13 and torch 2.x print them (research: pitfalls B.2, P26, P27).
_PICKLE_PATTERNS = (
    # _pickle.PicklingError: Can't pickle <function <lambda> at 0x7f..>: attribute lookup <lambda> on
    # __main__ failed
    re.compile(r"Can't pickle (?P<object><[^>]*>[^:]*>?|\S+): (?P<why>attribute lookup [^\n]*)"),
    # AttributeError: Can't pickle local object 'Tf.__init__.<locals>.<lambda>'
    re.compile(r"Can't pickle local object '(?P<object>[^']+)'"),
    # AttributeError: Can't get local object 'train.<locals>.<lambda>' (3.12+)
    re.compile(r"Can't get local object '(?P<object>[^']+)'"),
    # AttributeError: Can't get attribute 'collate' on <module '__mp_main__' from 'train.py'>
    re.compile(r"Can't get attribute '(?P<object>[^']+)' on (?P<why><module '__mp_main__'[^>]*>)"),
    # TypeError: cannot pickle '_thread.lock' object
    re.compile(r"cannot pickle '(?P<object>[^']+)' object"),
    # TypeError: h5py objects cannot be pickled
    re.compile(r"(?P<object>h5py) objects cannot be pickled"),
)
_SHM_PATTERN = re.compile(
    r"unable to allocate shared memory|out of shared memory|insufficient shared memory|"
    r"unable to (?:open|write to) shared memory object|No space left on device \(28\)"
)
_FILES_PATTERN = re.compile(r"Too many open files|received 0 items of ancdata")

_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
PICKLING_RULES = ("DL101", "DL102", "DL103", "DL104")


@dataclass(frozen=True)
class Explanation:
    """One failure recognised in the output: what it is, the line it was read from, what to do."""

    cause: str  # "pickling", "shared memory", "open files"
    subject: str  # what the message names (the object that could not be pickled), or ""
    message: str  # the line of the output it was read from
    advice: str


def explain(output: str) -> list[Explanation]:
    """The failures `output` (the tail of the command's stderr) shows, each once, in this order:
    pickling, shared memory, open files."""
    found: list[Explanation] = []
    pickled = _pickling(output)
    if pickled is not None:
        found.append(pickled)
    shm = _SHM_PATTERN.search(output)
    if shm is not None:
        found.append(Explanation(
            "shared memory", "", _line_at(output, shm.start()),
            "a batch did not fit in /dev/shm: "
            "`datalint doctor --dataset SPEC --batch-size B --num-workers W` says what the loader "
            "needs against what /dev/shm holds (its shm line, with the fix: "
            "`docker run --shm-size=...`, fewer workers or a smaller prefetch_factor)",
        ))
    files = _FILES_PATTERN.search(output)
    if files is not None:
        found.append(Explanation(
            "open files", "", _line_at(output, files.start()),
            "each batch passed between processes holds file descriptors: raise `ulimit -n`, or call "
            "`torch.multiprocessing.set_sharing_strategy('file_system')` at the start of the script; "
            "`datalint doctor` prints the limit it sees",
        ))
    return found


def _pickling(output: str) -> Explanation | None:
    for pattern in _PICKLE_PATTERNS:
        found = list(pattern.finditer(output))
        if not found:
            continue
        matched = found[-1]  # the last: the one that ended the run
        subject = re.sub(r" at 0x[0-9a-f]+", "", matched.group("object").strip())  # the address says nothing
        return Explanation(
            "pickling", subject, _line_at(output, matched.start()),
            f"the DataLoader's workers could not start: {subject} could not be pickled. Under the spawn "
            "and forkserver start methods (macOS, Windows, Python 3.14 on Linux, or "
            "multiprocessing_context=) each worker receives the dataset, collate_fn and worker_init_fn "
            "by pickle: define callables at module level (not lambdas or nested functions), and open "
            "files, connections and locks in the worker (lazily in __getitem__), not in __init__. "
            f"`datalint check` finds these before a run ({', '.join(PICKLING_RULES)})",
        )
    return None


def _line_at(text: str, offset: int) -> str:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return text[start : end if end >= 0 else len(text)].strip()[:300]


def script_of(command: Sequence[str]) -> Path | None:
    """The Python file a command runs (`python train.py`, `torchrun train.py`, `./train.py`), when it
    names one that exists."""
    for argument in command[1:] if len(command) > 1 else command:
        if argument.startswith("-"):
            if argument in ("-m", "-c"):
                return None  # a module or a string: no file of its own to start from
            continue
        path = Path(argument)
        if path.suffix == ".py" and path.is_file():
            return path
    return None


def project_of(script: Path) -> Path:
    """The project a script belongs to: the nearest folder above it with a pyproject.toml, setup.py,
    setup.cfg or .git, else the script's own folder."""
    folder = script.resolve().parent
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in _PROJECT_MARKERS):
            return candidate
        if candidate == Path.home():
            break
    return folder


def project_findings(project: Path, rules: Sequence[str] = PICKLING_RULES, timeout: float = 120.0,
                     limit: int = 8) -> list[str]:
    """What `datalint check --select RULES PROJECT` reports, one line a finding (at most `limit`, then
    how many more); [] when it finds nothing or cannot run."""
    command = [sys.executable, "-m", "datalint", "check", "--select", ",".join(rules),
               "--output-format", "text", str(project)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, "NO_COLOR": "1"})
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 1:  # 0: nothing found; 2: it could not check
        return []
    lines = [line for line in done.stdout.splitlines() if re.search(r":\d+:\d+: DL\d{3}", line)]
    if len(lines) > limit:
        lines = [*lines[:limit], f"... and {len(lines) - limit} more (`datalint check {project}`)"]
    return lines
