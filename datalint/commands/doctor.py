"""`datalint doctor`: read the limits a DataLoader runs into, and judge a loader config against them."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from datalint.commands.arguments import binary_size, count, positive_float, positive_int
from datalint.errors import UsageError

DESCRIPTION = """\
Read the limits a DataLoader runs into and say what each one means: /dev/shm size and free space,
host and cgroup memory, usable CPUs (count, affinity, cgroup quota), open-file and process limits,
the start method, library versions, thread settings, and whether this is a container.

With a loader config (--dataset SPEC --batch-size B --num-workers W), it also measures a few dozen
real samples in isolated workers (or reads their sizes from a scan index with --index), estimates
one batch's bytes (p50 and p99 samples), and judges the shared memory in flight (W x P batches) and
the peak host memory against those limits; then it says the largest worker count and batch size
that fit, with the formula it used. --shm-bytes and --memory-bytes replace the limits read here,
to ask "would this fit there?".
Exit code 1 when a check fails.
"""

EPILOG = """\
examples:
  datalint doctor
  datalint doctor --dataset mymod:train_ds --batch-size 64 --num-workers 8
  datalint doctor --dataset mymod:train_ds --batch-size 64 --num-workers 8 --shm-bytes 64m  # in Docker?
  datalint doctor --index .datalint/scan.db --batch-size 64 --num-workers 8 --memory-bytes 16g
  datalint doctor --after --clean-shm   # after a crash: OOM records, leaked /dev/shm, leftover workers
  datalint doctor --sample-bytes 600k --batch-size 64 --num-workers 4 --memory-bytes 16g --format json
"""

def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="check shared memory, memory, CPU and fd limits; judge a loader config against them",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    loader = parser.add_argument_group("loader config (optional)")
    source = loader.add_mutually_exclusive_group()
    source.add_argument("--dataset", metavar="SPEC", help="module:attr, module:factory(...) or file.py:attr")
    source.add_argument(
        "--index", metavar="DB", help="take sample sizes from a scan index instead of measuring again",
    )
    source.add_argument(
        "--sample-bytes", type=binary_size, metavar="N",
        help="assume every sample holds N bytes instead of measuring a dataset",
    )
    loader.add_argument("--batch-size", type=positive_int, metavar="B")
    loader.add_argument("--num-workers", type=count, metavar="W")
    loader.add_argument("--prefetch-factor", type=positive_int, default=2, metavar="P", help="(default: 2)")
    loader.add_argument("--pin-memory", action="store_true")
    loader.add_argument(
        "--samples", type=positive_int, default=32, metavar="N",
        help="samples to measure, spread over the dataset (default: 32)",
    )
    loader.add_argument(
        "--timeout", type=positive_float, default=30.0, metavar="S",
        help="seconds one sample may take before it counts as hung (default: 30)",
    )
    limits = parser.add_argument_group("limits (override what is read here)")
    limits.add_argument("--shm-bytes", type=binary_size, metavar="N", help="free shared memory to plan for")
    limits.add_argument("--memory-bytes", type=binary_size, metavar="N", help="memory budget to plan for")
    after = parser.add_argument_group("after a crash")
    after.add_argument(
        "--after", action="store_true",
        help="what a crash left behind: kernel OOM records of the last hour, cgroup OOM counters, "
        "shared-memory segments whose creator is gone, orphaned or zombie workers",
    )
    after.add_argument(
        "--clean-shm", action="store_true",
        help="with --after: remove the leaked segments (creator gone, held by no process), nothing else",
    )
    after.add_argument(
        "--shm-dir", default="/dev/shm", metavar="DIR",
        help="the shared-memory directory to look in (default: /dev/shm)",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(run=run)


def _loader_config(args: argparse.Namespace) -> Any:
    from datalint.diagnosis.doctor import LoaderConfig

    wants_estimate = any(getattr(args, name) is not None for name in ("dataset", "index", "sample_bytes"))
    given = [name for name in ("batch_size", "num_workers") if getattr(args, name) is not None]
    if not wants_estimate:
        if given:
            flags = ", ".join("--" + name.replace("_", "-") for name in given)
            raise UsageError(
                f"{flags} describe a loader: add --dataset SPEC (or --index DB, or --sample-bytes N) "
                "to estimate it"
            )
        return None
    missing = [name for name in ("batch_size", "num_workers") if getattr(args, name) is None]
    if missing:
        flags = " and ".join("--" + name.replace("_", "-") for name in missing)
        raise UsageError(f"an estimate needs {flags} as well (the DataLoader's values)")
    return LoaderConfig(args.batch_size, args.num_workers, args.prefetch_factor, args.pin_memory)


def run(args: argparse.Namespace) -> int:
    from datalint.diagnosis import doctor

    if args.clean_shm and not args.after:
        raise UsageError("--clean-shm goes with --after: datalint doctor --after --clean-shm")
    if args.after:
        return run_after(args)
    config = _loader_config(args)
    facts = doctor.read_host()
    checks = doctor.host_checks(facts, config.num_workers if config else None)
    estimate = None
    if config is not None:
        if args.dataset is not None:
            sizes = doctor.measure_samples(args.dataset, args.samples, args.timeout)
        elif args.index is not None:
            sizes = doctor.sizes_from_index(args.index)
        else:
            sizes = doctor.sample_sizes([args.sample_bytes])
        limits = doctor.limits_from(facts, args.shm_bytes, args.memory_bytes)
        estimate = doctor.estimate_loader(config, sizes, limits, doctor.usable_cpus(facts))
        checks += doctor.estimate_checks(estimate)
    if args.format == "json":
        _print_json(checks, estimate, facts)
    else:
        _print_text(checks, estimate)
    _print_summary(checks)
    return 1 if doctor.worst_status(checks) == doctor.FAIL else 0


def run_after(args: argparse.Namespace) -> int:
    """`doctor --after`: the checks of what a crash left, and with --clean-shm the cleaning."""
    from dataclasses import asdict

    from datalint.diagnosis import doctor

    facts = doctor.read_after(args.shm_dir)
    checks = doctor.after_checks(facts)
    cleaned = doctor.clean_segments(facts.segments) if args.clean_shm else []
    if args.format == "json":
        document = {
            "checks": [asdict(c) for c in checks],
            "segments": [{**asdict(s), "leaked": s.leaked} for s in facts.segments],
            "leftovers": [asdict(p) for p in facts.leftovers],
            "cleaned": [{"path": s.path, "size": s.size, "result": result} for s, result in cleaned],
        }
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_text(checks, None)
        for segment, result in cleaned:
            print(f"clean {segment.path}: {result} ({doctor.human_bytes(segment.size)})")
    _print_summary(checks)
    return 1 if doctor.worst_status(checks) == doctor.FAIL else 0


def _print_json(checks: list[Any], estimate: Any, facts: Any) -> None:
    from dataclasses import asdict

    from datalint.diagnosis.doctor import estimate_as_dict

    document = {
        "checks": [asdict(c) for c in checks],
        "estimate": estimate_as_dict(estimate) if estimate is not None else None,
        "facts": asdict(facts),
    }
    json.dump(document, sys.stdout, indent=2)
    sys.stdout.write("\n")


def _print_text(checks: list[Any], estimate: Any) -> None:
    width = max(len(c.name) for c in checks)
    for check in checks:
        print(f"{check.status:<5} {check.name:<{width}}  {check.value}")
        for line in check.detail.splitlines():
            print(f"{'':<5} {'':<{width}}  {line}")
        if check.fix:
            print(f"{'':<5} {'':<{width}}  fix: {check.fix}")
    if estimate is not None:
        _print_estimate(estimate)


def _print_estimate(estimate: Any) -> None:
    from datalint.units import human_bytes

    cfg, sizes = estimate.config, estimate.sizes
    print()
    print(
        f"loader estimate: batch_size={cfg.batch_size} num_workers={cfg.num_workers} "
        f"prefetch_factor={cfg.prefetch_factor} pin_memory={cfg.pin_memory}"
    )
    failed = f", {sizes.failed} failed" if sizes.failed else ""
    print(
        f"  samples measured  {sizes.measured}{failed}: p50 {human_bytes(sizes.p50)}, "
        f"p99 {human_bytes(sizes.p99)}, largest {human_bytes(sizes.largest)}; "
        f"worker footprint {human_bytes(sizes.worker_footprint)}"
    )
    for name, formula in estimate.formulas.items():
        print(f"  {name.replace('_', ' '):<16}  {formula}")
    workers = "none (not even num_workers=0)" if estimate.max_workers is None else str(estimate.max_workers)
    if estimate.max_workers is not None and estimate.memory_max_workers != estimate.max_workers:
        allowed = f"{estimate.memory_max_workers}{' or more' if estimate.memory_max_workers >= 256 else ''}"
        workers += f" (the usable CPUs; memory alone would allow {allowed})"
    batch = "none" if estimate.max_batch_size is None else str(estimate.max_batch_size)
    print(f"  largest num_workers that fits at batch_size={cfg.batch_size}: {workers}")
    print(f"  largest batch_size that fits at num_workers={cfg.num_workers}: {batch}")
    for line in estimate.left_out:  # the figures above are only as good as what they could measure
        print(f"  left out          {line}")


def _print_summary(checks: list[Any]) -> None:
    warns = sum(c.status == "warn" for c in checks)
    fails = sum(c.status == "fail" for c in checks)
    print(f"doctor: {len(checks)} checks, {warns} warning(s), {fails} failure(s)", file=sys.stderr)
