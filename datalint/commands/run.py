"""`datalint run -- CMD ...`: run a training command under the flight recorder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from datalint.errors import UsageError

DESCRIPTION = """\
Run a training command as a child (its output untouched, signals sent to datalint forwarded, its exit
status passed on) and record once a second, for the main process and each DataLoader worker: RSS
and PSS, open files, read/write bytes, CPU against the usable CPUs; /dev/shm used and the training's
own segments; the cgroup's memory usage, limit and OOM counters; GPU memory and utilisation when a
GPU is readable. The series goes to a SQLite file (--record). When the run ends badly (non-zero
exit, a worker killed, an OOM kill counted) it prints a diagnosis: which process died and by which
signal, the kernel's evidence, the peaks against the limits, and what to try. Where the training
wraps its dataset in datalint.torch.GuardedDataset, a death names the sample (index and key) that
process was reading.
"""

EPILOG = """\
examples:
  datalint run -- python train.py --epochs 1
  datalint run --record runs/crash.db -- python train.py
  datalint run --index .datalint/train.db -- python train.py
  datalint report --run runs/crash.db -o crash.html
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a training command and record its memory, shm, CPU and GPU once a second",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--record", type=Path, default=Path(".datalint/run.db"), metavar="PATH",
        help="the SQLite file the series goes to (default: .datalint/run.db, replaced each run)",
    )
    parser.add_argument(
        "--index", type=Path, metavar="PATH",
        help="the index `datalint scan --db PATH` wrote for the dataset the training reads: a worker "
             "that dies unnamed by GuardedDataset is matched against the samples that crashed the scan",
    )
    parser.add_argument("--quiet", action="store_true", help="no diagnosis, only the exit status")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    parser.set_defaults(run=run)  # the standard library only


def run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("name the command to run after `--`: datalint run -- python train.py")
    from datalint.flight.diagnosis import diagnose
    from datalint.flight.store import load_record
    from datalint.flight.supervise import run_and_record
    from datalint.flight.suspects import check_index

    if args.index is not None:
        check_index(args.index)
    result = run_and_record(command, args.record, scan_index=args.index)
    if not args.quiet:
        diagnosis = diagnose(load_record(result.record))
        if diagnosis.bad:
            print(f"datalint run: the run ended badly ({result.outcome})", file=sys.stderr)
            for line in diagnosis.lines:
                print(f"  {line}", file=sys.stderr)
        print(f"datalint run: record in {result.record}", file=sys.stderr)
    return result.returncode
