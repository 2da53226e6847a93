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
process was reading. The command's stderr passes through untouched; its last part is read for what
datalint can explain (a worker that could not start because something could not be pickled, with
what `datalint check` finds in the script's project; shared memory or open files running out). The
processes the command leaves running when it ends are named.
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
        record = load_record(result.record)
        diagnosis = diagnose(record)
        if diagnosis.bad:
            print(f"datalint run: the run ended badly ({result.outcome})", file=sys.stderr)
            for line in (*diagnosis.lines, *explained(result.output_tail, command)):
                print(f"  {line}", file=sys.stderr)
        for line in left_running(record):
            print(f"datalint run: {line}", file=sys.stderr)
        print(f"datalint run: record in {result.record}", file=sys.stderr)
    return result.returncode


def explained(output_tail: str, command: list[str]) -> list[str]:
    """What the command's last output shows that datalint can explain; for a pickling failure, what
    `datalint check` finds in the script's project."""
    from datalint.flight.explain import explain, project_findings, project_of, script_of

    lines: list[str] = []
    for found in explain(output_tail):
        lines.append(f"{found.cause}: {found.message}")
        lines.append(f"try: {found.advice}")
        script = script_of(command)
        if found.cause == "pickling" and script is not None:
            project = project_of(script)
            findings = project_findings(project)
            if findings:
                lines.append(f"`datalint check` in {project} finds:")
                lines.extend(f"  {finding}" for finding in findings)
    return lines


def left_running(record: dict[str, Any]) -> list[str]:
    """One line a process the command left running when it ended (a daemon it forked, a worker
    nobody stopped): still there now, using the machine."""
    return [f"left running: pid {event['pid']} ({event['role']}): {event['detail'].split(': ', 1)[-1]}"
            for event in record["events"] if event["kind"] == "orphan"]
