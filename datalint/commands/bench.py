"""`datalint bench`: the real DataLoader at several worker counts, a recommendation, and a soak."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any

from datalint.commands.arguments import binary_size, positive_float, positive_int
from datalint.errors import UsageError

DESCRIPTION = """\
Run the real torch DataLoader at each worker count on the same batches, after a warm-up, and
measure samples/s, time to the first batch, RSS and PSS of the main process plus its workers
(sampled while running; peak reported), peak /dev/shm use, open fds and CPU use. Print a table,
mark where more workers stop paying, and recommend the fastest config that fits the limits
`datalint doctor` reads (with 20% headroom).

--soak then runs the recommended config (or the single --workers value given) for --epochs N
passes or --steps N batches: throughput per epoch, memory growth (a leak is a steady slope), fd
growth, samples that raise (recorded through datalint.torch.GuardedDataset) and, when a worker
dies, the diagnosis from its exit signal. Exit code 1 when no run fits, or the soak finds a dead
worker, failing samples or a leak.
"""

EPILOG = """\
examples:
  datalint bench --dataset mymod:train_ds --batch-size 64 --workers 0,2,4,8 --batches 50
  datalint bench --dataset mymod:train_ds --batch-size 64 --workers 4 --soak --epochs 3
  datalint bench --dataset mymod:train_ds --batch-size 64 --format json --plot bench.svg > bench.json
"""


def worker_counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected worker counts such as 0,1,2,4, got {text!r}") from None
    if not counts or min(counts) < 0:
        raise argparse.ArgumentTypeError(f"expected worker counts of 0 or more (0,1,2,4), got {text!r}")
    return tuple(dict.fromkeys(counts))


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="measure the real DataLoader at several worker counts, recommend one, soak it",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dataset", metavar="SPEC", required=True,
                        help="module:attr, module:factory(...) or file.py:attr")
    parser.add_argument("--batch-size", type=positive_int, required=True, metavar="B")
    parser.add_argument("--workers", type=worker_counts, default=(0, 1, 2, 4), metavar="W,W,...",
                        help="worker counts to compare (default: 0,1,2,4)")
    parser.add_argument("--batches", type=positive_int, default=20, metavar="K",
                        help="batches timed at each worker count (default: 20)")
    parser.add_argument("--warmup", type=positive_int, default=None, metavar="N",
                        help="batches loaded before the clock starts (default: the largest worker count)")
    parser.add_argument("--prefetch-factor", type=positive_int, default=2, metavar="P", help="(default: 2)")
    parser.add_argument("--pin-memory", action="store_true")
    parser.add_argument("--persistent-workers", action="store_true")
    parser.add_argument("--timeout", type=positive_float, default=60.0, metavar="S",
                        help="seconds a worker may take for one batch before the run fails (default: 60)")
    known = parser.add_argument_group("a dataset with known bad samples")
    known.add_argument("--quarantine", metavar="LIST",
                       help="leave out the samples this list names (a quarantine.json, a binary list, a "
                            "scan index or a `datalint serve` URL), matched to the dataset by key as "
                            "training does")
    known.add_argument("--guard", action="store_true",
                       help="wrap the dataset in datalint.torch.GuardedDataset for every run, as the "
                            "training would: samples that raise are recorded (in --record) and replaced")
    limits = parser.add_argument_group("limits (override what is read here)")
    limits.add_argument("--shm-bytes", type=binary_size, metavar="N", help="free shared memory to plan for")
    limits.add_argument("--memory-bytes", type=binary_size, metavar="N", help="memory budget to plan for")
    soak = parser.add_argument_group("soak")
    soak.add_argument("--soak", action="store_true", help="then run the recommended (or given) config long")
    length = soak.add_mutually_exclusive_group()
    length.add_argument("--epochs", type=positive_int, metavar="N", help="passes over the dataset")
    length.add_argument("--steps", type=positive_int, metavar="N", help="batches")
    soak.add_argument("--record", metavar="DB",
                      help="scan index where the guard records failing samples, with --guard or --soak "
                           "(default: a temporary one)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--plot", metavar="SVG",
                        help="also draw throughput and memory against workers, as an SVG file")
    parser.set_defaults(run=run, extras=("torch",))


def _check_args(args: argparse.Namespace) -> None:
    if args.soak and not (args.epochs or args.steps):
        raise UsageError("--soak needs --epochs N or --steps N")
    if (args.epochs or args.steps) and not args.soak:
        raise UsageError("--epochs/--steps set the soak's length: add --soak")
    if args.plot:
        from datalint.diagnosis.bench import check_plot_path

        check_plot_path(args.plot)


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    from datalint.diagnosis import bench, doctor
    from datalint.scan.specs import resolve_spec

    dataset = resolve_spec(args.dataset)
    if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
        raise UsageError(
            f"--dataset {args.dataset}: bench needs a map-style dataset (with __getitem__ and __len__)"
        )
    if len(dataset) == 0:
        raise UsageError(f"--dataset {args.dataset}: the dataset is empty")
    facts = doctor.read_host()
    limits = doctor.limits_from(facts, args.shm_bytes, args.memory_bytes)
    skip = _quarantined(args.quarantine, dataset)
    if len(skip) >= len(dataset):
        raise UsageError(
            f"--quarantine {args.quarantine}: it names every sample of the dataset; nothing to measure"
        )
    config = bench.BenchConfig(
        batch_size=args.batch_size, batches=args.batches, workers=args.workers,
        prefetch_factor=args.prefetch_factor, pin_memory=args.pin_memory,
        persistent_workers=args.persistent_workers, warmup=args.warmup, timeout=args.timeout,
        shm_path=facts.shm.path, skip=skip, guarded=args.guard,
    )
    with tempfile.TemporaryDirectory(prefix="datalint-bench-") as scratch:
        record = args.record or os.path.join(scratch, "guard.db")
        if args.guard:
            from datalint.torch import GuardedDataset

            dataset = GuardedDataset(dataset, record=record, quarantine=args.quarantine)
        progress = None if args.format == "json" else _print_progress
        result = bench.sweep(dataset, config, limits, doctor.usable_cpus(facts), progress)
        soak = _soak(args, dataset, config, result, record if args.guard else args.record)
        guarded = bench.guard_failures(record) if args.guard else []
    if args.plot:
        bench.plot(result, args.plot)
    if args.format == "json":
        _print_json(result, soak, guarded)
    else:
        _print_text(result, soak)
        _print_guarded(guarded, len(skip))
    return 1 if result.recommended.num_workers is None or (soak is not None and _soak_found(soak)) else 0


def _quarantined(source: str | None, dataset: Any) -> frozenset[int]:
    """The positions the list names in this dataset (by key where it has keys), as training applies it."""
    if source is None:
        return frozenset()
    from datalint.training.samplers import resolve_quarantine

    return frozenset(resolve_quarantine(source, dataset, True).index_set())


def _print_guarded(failures: list[Any], skipped: int) -> None:
    if skipped:
        print(f"left out: {skipped:,} sample(s) the quarantine list names")
    for failure in failures:
        print(f"guard: sample {failure.index} raised and was replaced: {failure.error}")


def _soak(args: argparse.Namespace, dataset: Any, config: Any, result: Any, record: str | None) -> Any:
    if not args.soak:
        return None
    from datalint.diagnosis import bench

    workers = config.workers[0] if len(config.workers) == 1 else result.recommended.num_workers
    if workers is None:
        print("datalint: no config to soak: no run fitted the limits", file=sys.stderr)
        return None
    if args.format != "json":
        length = f"{args.epochs} epochs" if args.epochs else f"{args.steps} steps"
        print(f"soak: num_workers={workers}, {length}", file=sys.stderr)
    progress = None if args.format == "json" else _print_segment
    return bench.soak(dataset, config, workers, args.epochs, args.steps, record, progress)


def _soak_found(soak: Any) -> bool:
    return soak.death is not None or bool(soak.failures) or soak.memory.leak


def _print_progress(run: Any) -> None:
    speed = f"{run.samples_per_s:.0f} samples/s" if run.samples_per_s is not None else f"failed: {run.error}"
    print(f"bench: num_workers={run.num_workers}: {speed}", file=sys.stderr)


def _print_segment(segment: Any) -> None:
    from datalint.units import human_bytes

    print(
        f"soak: segment {segment.number}: {segment.samples_per_s:.0f} samples/s, "
        f"memory {human_bytes(segment.memory_bytes)}, fds {segment.fds}",
        file=sys.stderr,
    )


def _print_json(result: Any, soak: Any, guarded: list[Any]) -> None:
    from dataclasses import asdict

    document = {
        "guard_failures": [asdict(failure) for failure in guarded],
        "runs": [asdict(r) for r in result.runs],
        "recommended": asdict(result.recommended),
        "limits": asdict(result.limits),
        "config": {**asdict(result.config), "skip": len(result.config.skip)},  # how many left out
        "usable_cpus": result.usable_cpus,
        "soak": asdict(soak) if soak is not None else None,
    }
    json.dump(document, sys.stdout, indent=2)
    sys.stdout.write("\n")


def _cell(value: Any, kind: str) -> str:
    from datalint.units import human_bytes

    if value is None:
        return "-"
    if kind == "bytes":
        return human_bytes(value)
    if kind == "rate":
        return f"{value:,.0f}"
    if kind == "seconds":
        return f"{value:.2f}"
    if kind == "percent":
        return f"{value:.0f}%"
    return str(value)


_COLUMNS = (  # header, attribute, kind
    ("workers", "num_workers", "int"),
    ("samples/s", "samples_per_s", "rate"),
    ("first batch s", "first_batch_s", "seconds"),
    ("RSS peak", "rss_bytes", "bytes"),
    ("PSS peak", "pss_bytes", "bytes"),
    ("shm peak", "shm_peak_bytes", "bytes"),
    ("fds", "fds", "int"),
    ("CPU", "cpu_percent", "percent"),
    ("note", "note", "text"),
)


def _print_text(result: Any, soak: Any) -> None:
    rows = [[header for header, _, _ in _COLUMNS]]
    rows += [[_cell(getattr(run, attr), kind) for _, attr, kind in _COLUMNS] for run in result.runs]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    for row in rows:
        # numbers right-aligned; the last column (the note) left as it is
        cells = [cell.rjust(width) for cell, width in zip(row[:-1], widths, strict=False)]
        print("  ".join([*cells, row[-1]]).rstrip())
    for run in result.runs:
        if run.diagnosis is not None:
            print(f"num_workers={run.num_workers} failed: {run.diagnosis.message}")
            print(f"  cause: {run.diagnosis.cause}\n  fix: {run.diagnosis.fix}")
    rec = result.recommended
    print()
    if rec.num_workers is None:
        print(f"recommended: none: {rec.reason}")
    else:
        print(f"recommended: num_workers={rec.num_workers}: {rec.reason}")
    if soak is not None:
        _print_soak(soak)


def _print_soak(soak: Any) -> None:
    from datalint.units import human_bytes

    print()
    print(f"soak at num_workers={soak.num_workers}:")
    for s in soak.segments:
        print(f"  segment {s.number}: {s.samples} samples in {s.seconds:.2f} s ({s.samples_per_s:,.0f}/s), "
              f"memory {human_bytes(s.memory_bytes)}, fds {s.fds}")
    print(f"  memory: {soak.memory.detail}")
    print(f"  fds: {soak.fd_growth:+d} over the soak")
    if not soak.guarded:
        print("  failing samples: not recorded (datalint.torch.GuardedDataset unavailable)")
    for failure in soak.failures:
        print(f"  sample {failure.index} failed: {failure.error}")
    if soak.death is not None:
        death = soak.death
        signal = death.diagnosis.signal or "no signal"
        where = f" while loading sample(s) {', '.join(map(str, death.indices))}" if death.indices else ""
        print(f"  worker died ({signal}) in segment {death.segment} after {death.step} batches{where}")
        print(f"    {death.diagnosis.message}")
        print(f"    cause: {death.diagnosis.cause}\n    fix: {death.diagnosis.fix}")
