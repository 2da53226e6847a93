"""The user code a scanner must run itself, run first in a forked child under a time limit.

The scanner builds the dataset before forking its workers (so the dataset is never pickled), asks
its length and reads every key for the fingerprint. All of that is the user's code: a module that
calls `os._exit(0)` or segfaults at import, a factory that never returns, a `datalint_key` that
hangs. Run in the scanner, any of them would end or hang the scan with no summary, or exit 0 as if
nothing were quarantined. So a forked child does it first, under the same watch as a sample
(journal, faulthandler, a deadline): a failure is a spec error naming the step, the cause and the
place (exit status 2), and the scanner builds the dataset itself only once the child has shown that
building it finishes. The child's length and fingerprint are the scan's.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import json
import os
import select
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datalint.errors import DatalintError
from datalint.scan import runner
from datalint.scan.sources import SourceDescription, build_source, fingerprint
from datalint.scan.specs import SpecError, parse_spec

DEFAULT_SETUP_TIMEOUT = 600.0
_BUILD, _LENGTH, _KEYS = 1, 2, 3  # the step the child is in, kept in its journal slot
_TAIL = 1_500  # characters of the child's output quoted in an error
# Keys a second no dataset's keys are read faster than (a list of paths reads ~2e6): a dataset
# with more than this many per second of --setup-timeout cannot be fingerprinted in it, and is
# told so at once rather than after the whole wait.
KEYS_PER_SECOND = 10_000_000
_SIGNAL_MEANINGS = {
    "SIGSEGV": "segmentation fault",
    "SIGABRT": "aborted by native code",
    "SIGBUS": "bus error",
    "SIGFPE": "arithmetic fault",
    "SIGILL": "illegal instruction",
    "SIGKILL": "killed: most likely out of memory",
    "SIGTERM": "terminated",
}


@dataclass(frozen=True)
class SourceFacts:
    """What the scanner needs to know about a source before its workers start."""

    length: int | None  # None for a stream
    stream: bool
    fingerprint: str | None


def runs_user_code(description: SourceDescription) -> bool:
    """Whether building this source runs code from the user's dataset (images alone do not)."""
    return description.kind == "dataset" or description.option("dataset") is not None


def inspect_source(
    description: SourceDescription, time_limit: float = DEFAULT_SETUP_TIMEOUT
) -> SourceFacts | None:
    """Build the source in a child; its facts, or None when the child met an error that is not the
    user's (the scanner then builds the source itself and reports that error as usual)."""
    _preload(description)
    journal = runner.Journal(1)
    journal.write(0, 0, -1, time.monotonic(), 0, cause=_BUILD)
    reader, writer = os.pipe()
    with tempfile.TemporaryFile(prefix="datalint-setup-") as output:
        pid = _fork_inspector(description, journal, writer, output.fileno(), time_limit)
        os.close(writer)
        try:
            message, status, hung = _wait_for(pid, reader, output, time_limit)
        finally:
            os.close(reader)
            runner.end_group(pid)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        text = runner.read_output(output, 0)
    if message is not None:
        return _facts(description, message)
    raise SpecError(_failure(description, journal.read(0), status, hung, time_limit, text))


# Heavy, trusted libraries a dataset module commonly imports. The scanner would import them anyway
# when it builds the dataset; importing them before the fork spares the child (and the scan) a
# second import of torch, which costs seconds.
PRELOADED = ("torch", "numpy", "PIL")


def _preload(description: SourceDescription) -> None:
    path = _spec_file(description)
    if path is None:
        return
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return  # the child meets the same problem and reports it
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.partition(".")[0])
    for name in PRELOADED:
        if name in imported and name not in sys.modules and importlib.util.find_spec(name) is not None:
            importlib.import_module(name)


def _spec_file(description: SourceDescription) -> Path | None:
    """The file a spec's module lives in, found without running any code (None if not found)."""
    text = description.option("dataset") or description.spec
    try:
        spec = parse_spec(str(text))
    except SpecError:
        return None
    if spec.path is not None:
        return spec.path if spec.path.is_file() else None
    parts = str(spec.module).split(".")
    for base in (os.getcwd(), *sys.path):
        candidate = Path(base or ".", *parts)
        for path in (candidate.with_suffix(".py"), candidate / "__init__.py"):
            if path.is_file():
                return path
    return None


def _fork_inspector(
    description: SourceDescription, journal: runner.Journal, writer: int, output: int, time_limit: float
) -> int:
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            runner.become_worker(parent, output)
            message = json.dumps(_inspect(description, journal, time_limit)).encode()
            runner.leave_if_forked(os.getpid())
            while message:
                message = message[os.write(writer, message) :]
        except BaseException:  # the last resort of the child: its silence is reported by the parent
            code = 70
        finally:
            os._exit(code)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)
    return pid


def _inspect(description: SourceDescription, journal: runner.Journal, time_limit: float) -> dict[str, Any]:
    me = os.getpid()
    try:
        source = build_source(description)
        runner.leave_if_forked(me)
        journal.write(0, 0, -1, time.monotonic(), 0, cause=_LENGTH)
        stream = bool(getattr(source, "is_stream", False))
        length = None if stream else len(source)

        def reading_key(index: int) -> None:
            # In the keys step the record's `sequence` holds the length, for the parent's message.
            journal.write(0, length or 0, index, time.monotonic(), 0, cause=_KEYS)
            if index == 1 and length is not None and length > KEYS_PER_SECOND * time_limit:
                raise SpecError(_too_many_keys(description, length, 1, time_limit, None))

        print_ = fingerprint(source, on_key=reading_key)
        runner.leave_if_forked(me)
    except DatalintError as exc:  # a spec error, told the usual way
        return {"error": str(exc), "exit_code": exc.exit_code}
    except BaseException:  # not the user's code failing: let the scanner meet it itself
        return {"defer": True}
    return {"length": length, "stream": stream, "fingerprint": print_}


def _wait_for(
    pid: int, reader: int, output: Any, time_limit: float
) -> tuple[dict[str, Any] | None, int, bool]:
    """(the child's message or None, its exit status, whether it was killed for the time limit)."""
    deadline = time.monotonic() + time_limit
    received = b""
    dumped = False
    while True:
        ready, _, _ = select.select([reader], [], [], 0.1)
        if ready:
            chunk = os.read(reader, 1 << 16)
            if chunk:
                received += chunk
                continue
        finished = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if finished is not None:
            break
        if time.monotonic() > deadline:
            if not dumped:
                runner.send_signal(pid, signal.SIGUSR1)  # the hung stack, even in C
                dumped, deadline = True, time.monotonic() + 0.5
                continue
            runner.send_signal(pid, signal.SIGKILL)
    while True:  # what it wrote just before it left
        chunk = os.read(reader, 1 << 16) if select.select([reader], [], [], 0)[0] else b""
        if not chunk:
            break
        received += chunk
    status = runner.reap(pid)
    try:
        message = json.loads(received) if received else None
    except ValueError:
        message = None
    return message, status, dumped


def _facts(description: SourceDescription, message: dict[str, Any]) -> SourceFacts | None:
    if message.get("defer"):
        return None
    if "error" in message:
        raise SpecError(str(message["error"]))
    return SourceFacts(message["length"], bool(message["stream"]), message["fingerprint"])


def _failure(
    description: SourceDescription,
    entry: runner.JournalEntry,
    status: int,
    hung: bool,
    time_limit: float,
    text: str,
) -> str:
    step = {
        _BUILD: "building the dataset (importing its module, calling its factory)",
        _LENGTH: "len() of the dataset",
        _KEYS: f"reading the key of sample {entry.index} (datalint_key, or its samples / imgs entry)",
    }.get(entry.cause, "building the dataset")
    where = runner.innermost_dumped_frame(text)
    at = f" (at {where})" if where else ""
    if hung and _reading_keys_still(entry):
        return _too_many_keys(description, entry.sequence, entry.index, time_limit, time_limit)
    if hung:
        what = f"did not finish within {time_limit:g} s{' (hung in ' + where + ')' if where else ''}"
        advice = "; raise --setup-timeout if it is only slow"
    elif os.WIFEXITED(status):
        code = os.waitstatus_to_exitcode(status)
        what = f"ended the process with exit status {code}{at}: os._exit(), or a C library calling exit()"
        advice = ""
    else:
        name = runner.status_name(status)
        what = f"crashed the process: {name} ({_SIGNAL_MEANINGS.get(name, 'a fatal signal')}){at}"
        advice = ""
    tail = text.strip()[-_TAIL:]
    said = f"\nits output ended with:\n{tail}" if tail and not hung and where is None else ""
    return f"dataset spec {description.spec!r}: {step} {what}{advice}{said}"


def _reading_keys_still(entry: runner.JournalEntry) -> bool:
    """Whether the child was reading key after key when it was stopped (the key in flight began a
    moment ago, and keys were left), not stuck on one."""
    in_flight = time.monotonic() - entry.started
    return entry.cause == _KEYS and in_flight < _FLOWING and 0 < entry.index < entry.sequence - 1


# A key stuck since before the deadline has been in flight for the 0.5 s the stack dump is given
# before the kill; a child still reading keys began its last one a moment before the kill.
_FLOWING = 0.4


def _too_many_keys(
    description: SourceDescription, length: int, read: int, time_limit: float, spent: float | None
) -> str:
    """The dataset names more samples than its keys can be read in the setup time: said as such,
    with what was read, instead of "hung in" wherever the child happened to be."""
    if spent is None:
        pace = f"more than {KEYS_PER_SECOND:,} keys a second of it"
    else:
        rate = max(read, 1) / spent
        pace = f"{read:,} of {length:,} keys read in {spent:g} s, about {_duration(length / rate)} for all"
    return (
        f"dataset spec {description.spec!r}: len() is {length:,}, too many keys to fingerprint within "
        f"--setup-timeout {time_limit:g} s ({pace}); check the dataset's __len__, or raise "
        "--setup-timeout if it really holds that many samples"
    )


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86_400), ("hours", 3_600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.0f} {unit}"
    return f"{seconds:,.0f} s"
