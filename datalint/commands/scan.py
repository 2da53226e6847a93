"""`datalint scan`: measure every sample in isolated workers; write the index and the quarantine list.

Exit status: 0 when nothing is quarantined, 1 when something is, 2 on usage errors (a bad spec,
a dataset whose len() raises, a flag that cannot be used).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from datalint.commands.arguments import count, non_negative_float, positive_float, positive_int, size
from datalint.errors import UsageError
from datalint.index import kinds
from datalint.text import printable, shown_name

KIND_HELP = (
    f"finding kinds to quarantine: 'default' ({kinds.default_help()}), 'all', or a comma-separated list"
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "scan",
        help="scan every sample of a dataset in isolated workers; index it and list the bad ones",
        description=(
            "Run every sample of a dataset in isolated worker processes. A sample that raises, crashes "
            "its process (segfault, abort, OOM kill, os._exit) or hangs becomes a finding for that one "
            "sample; everything is written to an SQLite index and the bad samples to a quarantine list."
        ),
    )
    add_source_arguments(parser)
    add_scan_arguments(parser)
    parser.add_argument(
        "--show-settings",
        action="store_true",
        help="print every scan setting, its value and where it comes from (a flag, [tool.datalint.scan], "
        "what the index's last scan ran with, or the default), and exit",
    )
    parser.set_defaults(run=run, extras=("scan",))


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """What to scan. Each source kind adds its flags here and its branch to `choose_source()`."""
    group = parser.add_argument_group("what to scan")
    group.add_argument(
        "--dataset",
        metavar="SPEC",
        help="mymod:ds, mymod:make_ds(split='train') (literal arguments) or path/to/file.py:ds; or the "
        "folder a Hugging Face Dataset was saved to (save_to_disk)",
    )
    add_image_arguments(group)
    group.add_argument(
        "--webdataset",
        metavar="PATTERN",
        help="webdataset tar shards, e.g. 'shards/train-{000000..000999}.tar' (braces and globs, local "
        "paths); keys are SHARD/__key__",
    )
    group.add_argument(
        "--parquet",
        metavar="PATTERN",
        help="Parquet files with image bytes in a column, e.g. 'data/part-*.parquet' "
        "(needs the parquet extra)",
    )
    group.add_argument(
        "--column", default="image", metavar="NAME", help="with --parquet: the image column (default: image)"
    )
    group.add_argument(
        "--limit",
        type=positive_int,
        metavar="N",
        help="with --dataset giving an IterableDataset: stop after N samples (an endless stream); the "
        "summary says the scan was capped",
    )
    group.add_argument(
        "--key-column",
        metavar="NAME",
        help="with --parquet, or --dataset giving a Hugging Face Dataset: the column that names each row "
        "(default: FILE#ROW; a Dataset's FINGERPRINT#ROW)",
    )


def add_image_arguments(group: Any) -> None:
    """Image files (`datalint docs images`): decode every file, find the damaged ones."""
    group.add_argument(
        "paths",
        nargs="*",
        metavar="IMAGE",
        help="image files to scan, exactly these (what the datalint-images pre-commit hook passes); "
        "exit 1 when any is damaged",
    )
    group.add_argument(
        "--images", metavar="DIR", help="an image folder, scanned recursively; keys are paths in DIR"
    )
    group.add_argument(
        "--files",
        metavar="LIST",
        help="a text file of image paths, one per line (relative to --images DIR or .)",
    )
    group.add_argument(
        "--files-from-dataset",
        action="store_true",
        help="with --dataset: also check the file behind each sample (ImageFolder's samples / imgs)",
    )
    group.add_argument(
        "--image-root",
        metavar="DIR",
        help="with --files-from-dataset: the folder the dataset's relative paths are in "
        "(default: the dataset's `root`, else the current directory)",
    )
    group.add_argument(
        "--ext",
        action="append",
        metavar="EXT[,EXT]",
        help="image extensions to scan in DIR, repeatable (default: jpg jpeg jpe jfif png gif bmp webp "
        "tif tiff ppm pgm pbm pnm)",
    )
    group.add_argument(
        "--max-pixels",
        type=positive_int,
        metavar="N",
        help="an image whose header claims more pixels is a decompression bomb (default: Pillow's 89478485)",
    )
    group.add_argument(
        "--all-frames",
        action=argparse.BooleanOptionalAction,
        help="decode every frame / page, not only the first (--no-all-frames: the first only, the default)",
    )
    group.add_argument(
        "--scores",
        action=argparse.BooleanOptionalAction,
        help="--no-scores skips the quality scores and perceptual hashes (no dark, blurry, near_duplicate, "
        "leak...), of image files and of a dataset's image tensors alike: a faster scan; --scores computes "
        "them (the default)",
    )


def choose_source(args: argparse.Namespace, values: Mapping[str, Any]) -> Any:
    """The SourceDescription the flags ask for (one source per scan), with the effective settings
    `values` (`ScanSettings.values`: the image keys and the label fields)."""
    from datalint.scan.sources import SourceDescription

    if args.parquet:
        if args.dataset or args.images or args.files or args.paths or args.webdataset:
            raise UsageError("scan either --parquet PATTERN or another source, not both")
        from datalint.scan.parquet import parquet_description

        return parquet_description(
            args.parquet,
            column=args.column,
            key_column=args.key_column,
            max_pixels=values["max-pixels"] or 89_478_485,
            all_frames=values["all-frames"],
        )
    if args.webdataset:
        if args.dataset or args.images or args.files or args.paths:
            raise UsageError("scan either --webdataset PATTERN or another source, not both")
        from datalint.scan.webdataset import webdataset_description

        return webdataset_description(
            args.webdataset,
            max_pixels=values["max-pixels"] or 89_478_485,
            all_frames=values["all-frames"],
        )
    if args.images or args.files or args.files_from_dataset or args.paths:
        _refuse_specs_as_images(args.paths)
        return _image_source(args, values)
    if args.dataset:
        unscored = {"scores": False} if values["scores"] is False else {}  # --no-scores: no image scores
        keyed = {"key_column": args.key_column} if args.key_column else {}  # a Hugging Face Dataset's ids
        capped = {"limit": args.limit} if args.limit is not None else {}  # an endless stream's cap
        labels = tuple(values["label"])
        return SourceDescription.make("dataset", args.dataset, labels=labels, **unscored, **keyed, **capped)
    raise UsageError(
        "nothing to scan: pass --dataset SPEC (e.g. --dataset mymod:ds), --images DIR or image files"
    )


def _refuse_specs_as_images(paths: list[str]) -> None:
    """`datalint scan flowers.py:train_ds`: a dataset spec where image files go, not a file to decode."""
    import os
    import shlex

    from datalint.scan.specs import SpecError, parse_spec

    for path in paths:
        if os.path.exists(path):
            continue
        try:
            parse_spec(path)
        except SpecError:
            continue
        raise UsageError(
            f"{path} is not an image file but looks like a dataset spec; scan the dataset with "
            f"`datalint scan --dataset {shlex.quote(path)}`"
        )


def _image_source(args: argparse.Namespace, values: Mapping[str, Any]) -> Any:
    from datalint.scan import images

    if args.files_from_dataset and not args.dataset:
        raise UsageError("--files-from-dataset needs --dataset SPEC")
    if args.image_root and not args.files_from_dataset:
        raise UsageError("--image-root is for --files-from-dataset (with --images DIR, DIR is the root)")
    if args.dataset and (args.images or args.files):
        raise UsageError("scan either --dataset SPEC or --images DIR / --files LIST, not both")
    if args.paths and (args.dataset or args.images or args.files):
        raise UsageError(
            f"image files ({args.paths[0]}, ...) are scanned on their own: "
            "not with --dataset, --images or --files"
        )
    extensions = [part for value in values["ext"] or () for part in value.split(",")]
    return images.images_description(
        folder=args.images,
        file_list=args.files,
        dataset=args.dataset if args.files_from_dataset else None,
        files=args.paths,
        extensions=extensions or None,
        max_pixels=values["max-pixels"] or images.DEFAULT_MAX_PIXELS,
        all_frames=values["all-frames"],
        scores=values["scores"],
        labels=tuple(values["label"]),
        image_root=args.image_root,
    )


def add_scan_arguments(parser: argparse.ArgumentParser) -> None:
    engine = parser.add_argument_group("engine")
    engine.add_argument(
        "--workers",
        type=count,
        metavar="N",
        help="worker processes (default: the CPUs this process may use); 0 runs samples "
        "in this process for debugging and isolates nothing",
    )
    engine.add_argument(
        "--timeout",
        type=positive_float,
        metavar="SECONDS",
        help="per-sample limit, enforced even in C code holding the GIL (default 60)",
    )
    engine.add_argument(
        "--setup-timeout",
        type=non_negative_float,
        metavar="SECONDS",
        help="limit for building the dataset (import, factory, len(), keys), run isolated first "
        "(default 600; 0: build it in the scanner directly, unwatched)",
    )
    engine.add_argument("--rescan", action="store_true", help="measure every sample again, even if indexed")
    engine.add_argument(
        "--incremental",
        action=argparse.BooleanOptionalAction,
        help="--no-incremental refuses an index whose dataset changed instead of measuring only what "
        "changed (--incremental, the default)",
    )
    engine.add_argument(
        "--verify-content",
        action=argparse.BooleanOptionalAction,
        help="also hash the files whose size, mtime, inode and ctime are unchanged (bytes changed with no "
        "write through this file system: disk rot, a network file system's cached stat); "
        "--no-verify-content: stat only (the default)",
    )
    engine.add_argument("--chunk-size", type=positive_int, metavar="N", help=argparse.SUPPRESS)
    engine.add_argument(
        "--backend",
        choices=("local", "dask"),
        default="local",
        help="local: worker processes forked here (default); dask: shards on a dask cluster, see --scheduler "
        "(`datalint docs distributed`; needs the [dask] extra)",
    )
    engine.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="with --backend dask: an existing cluster's scheduler (tcp://host:8786); --workers N then waits "
        "for N workers. Without it the scan starts and stops a local cluster of --workers processes",
    )

    engine.add_argument(
        "--shard-index",
        choices=("auto", "on", "off"),
        default="auto",
        help="with --webdataset or --parquet: each shard's rows written into a file of its own by the "
        "worker that measured it, merged into the index at the end; auto: from 1,000,000 samples "
        "(`datalint docs distributed`)",
    )

    probes = parser.add_argument_group("what to check")
    probes.add_argument(
        "--label",
        action="append",
        metavar="FIELD",
        help="a label field to record (dict key, tuple position or dotted path); repeatable",
    )
    probes.add_argument("--num-classes", type=positive_int, metavar="N", help="labels must lie in [0, N)")
    probes.add_argument("--ignore-index", type=int, metavar="I", help="a label value that is always allowed")
    probes.add_argument(
        "--require",
        action="append",
        metavar="FIELD",
        help="a field every sample must have (not None); repeatable",
    )
    probes.add_argument(
        "--max-bytes",
        type=size,
        metavar="SIZE",
        help="samples above this size are 'oversized' (e.g. 64MB, 1GiB)",
    )
    probes.add_argument("--kinds", metavar="KINDS", help=KIND_HELP)
    add_quality_arguments(probes)

    add_configuration_arguments(parser)

    output = parser.add_argument_group("output")
    output.add_argument("--db", metavar="PATH", help="the SQLite index (default .datalint/<dataset>.db)")
    output.add_argument(
        "--quarantine",
        metavar="PATH",
        help="the quarantine list (default beside the index: <index>.quarantine.json)",
    )
    output.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="summary on stdout: a table (text) or machine-readable (json)",
    )
    output.add_argument(
        "--progress",
        choices=("auto", "rich", "plain", "none"),
        default="auto",
        help="progress on stderr: a bar on a terminal, a line every 30 s otherwise",
    )


THRESHOLD_HELP = (
    "a limit instead of its default, KIND=NUMBER (repeatable): dark, light, blurry, "
    "low_information, grayscale (absolute score limits), odd_size, odd_aspect, outlier_mads (robust "
    "deviations), near_duplicate (hash distance), tiny (pixels), extreme_aspect (ratio); wins over "
    "[tool.datalint.scan.thresholds]; see `datalint docs config`"
)
AGAINST_HELP = (
    "another split's scan index (e.g. train.db): images of this scan that are the same or nearly the "
    "same as one there are `leak` findings, quarantined from this split"
)


def add_configuration_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the project's scan settings come from (`datalint docs config`)."""
    group = parser.add_argument_group("configuration")
    group.add_argument(
        "--config",
        metavar="FILE",
        help="read the scan settings from this pyproject.toml ([tool.datalint.scan]) or datalint.toml "
        "([scan]) (default: the nearest one above the current directory); flags win over it",
    )
    group.add_argument("--isolated", action="store_true", help="ignore every configuration file")


def add_quality_arguments(group: Any) -> None:
    group.add_argument("--threshold", action="append", metavar="KIND=NUMBER", help=THRESHOLD_HELP)
    group.add_argument("--against", metavar="DB", help=AGAINST_HELP)


def against_index(path: str | None) -> str | None:
    """The other split's index as an absolute path (stored with the run), checked to exist."""
    if path is None:
        return None
    if not Path(path).is_file():
        raise UsageError(f"--against {path}: no scan index there; scan the other split first (--db {path})")
    return str(Path(path).resolve())


def run(args: argparse.Namespace) -> int:
    from datalint.scan.settings import settings_document, settings_text

    settings = scan_settings(args, needs_source=not args.show_settings)
    if args.show_settings:
        if args.format == "json":
            sys.stdout.write(json.dumps(settings_document(settings), indent=1) + "\n")
        else:
            sys.stdout.write(settings_text(settings))
        return 0
    say_where_settings_came_from(settings)
    if args.backend == "dask":
        from datalint.extras import require

        require("dask", "`datalint scan --backend dask`")
    description = choose_source(args, settings.values)
    if description.kind == "images" and not _announce_image_files(description, settings.values):
        return 0
    return _scan_then_print(args, description, scan_options(args, settings))


def scan_settings(args: argparse.Namespace, *, needs_source: bool = True) -> Any:
    """The flags over the project file over what the index of this source stored over the defaults
    (`datalint.scan.settings.layered`); also `datalint watch`'s. `--rescan` measures everything
    again, so the index's options are not kept. Without `needs_source` (`--show-settings`) a command
    line naming no source resolves without an index."""
    from datalint.scan import api
    from datalint.scan.settings import resolve, stored_layer

    settings = resolve(args)
    if args.rescan or (not needs_source and not _names_a_source(args)):
        return settings
    description = choose_source(args, settings.values)  # its kind and spec name the index
    index = args.db or api.default_index_path(description.spec, description.kind)
    stored = stored_layer(index, (description.kind, description.spec))
    return settings if stored is None else resolve(args, stored=stored)


def _names_a_source(args: argparse.Namespace) -> bool:
    given = (args.dataset, args.images, args.files, args.paths, args.webdataset, args.parquet)
    return any(given) or args.files_from_dataset


def say_where_settings_came_from(settings: Any) -> None:
    """A value from a project file or kept from the index is never a surprise: one line on stderr each."""
    from datalint.scan.settings import from_file_note, from_index_note

    for note in (from_file_note(settings), from_index_note(settings)):
        if note is not None:
            print(f"datalint: {printable(note)}", file=sys.stderr)


def scan_options(args: argparse.Namespace, settings: Any) -> Any:
    """The ScanOptions of the resolved `settings` and the engine's own flags (rescan, progress,
    backend, ...); also `datalint watch`'s."""
    from datalint.scan import api

    return api.options_from_settings(
        settings.values,
        settings.thresholds,
        against=against_index(args.against),
        rescan=args.rescan,
        chunk_size=args.chunk_size,
        progress="none" if args.format == "json" and args.progress == "auto" else args.progress,
        backend=args.backend,
        scheduler=args.scheduler,
        shard_index=args.shard_index,
    )


def _scan_then_print(args: argparse.Namespace, description: Any, options: Any) -> int:
    from datalint.scan import api

    if options.worker_count() == 0:
        print(
            "datalint: --workers 0: samples run in this process and nothing is isolated: a crash or hang "
            "stops the scan and --timeout is not enforced (for debugging, e.g. with pdb)",
            file=sys.stderr,
        )
    summary = _scan_with_warnings(api, description, options, args)
    if args.format == "json":
        json.dump(summary.to_dict(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_summary(summary))
    return summary.exit_code


def _announce_image_files(description: Any, values: Mapping[str, Any]) -> bool:
    """Say how many image files will be scanned (and what was skipped); False when there are none."""
    from datalint.scan import preflight
    from datalint.scan.images import listing_note
    from datalint.scan.sources import build_source

    setup_timeout = values["setup-timeout"]
    if setup_timeout > 0 and preflight.runs_user_code(description):  # its code runs watched first
        preflight.inspect_source(description, setup_timeout)
    source = build_source(description)  # built once: the scan reuses it
    print(f"datalint: {printable(listing_note(source))}", file=sys.stderr)
    return len(source) > 0


def _scan_with_warnings(api: Any, description: Any, options: Any, args: argparse.Namespace) -> Any:
    from datalint.scan.sources import ScanWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ScanWarning)
        summary = api.scan_source(description, options, db=args.db, quarantine=args.quarantine)
    for warning in caught:
        if issubclass(warning.category, ScanWarning):
            print(f"datalint: warning: {warning.message}", file=sys.stderr)
        else:  # the dataset's own warnings, shown as Python would have shown them
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    return summary


def format_summary(summary: Any) -> str:
    """The end-of-scan table: outcomes, findings per kind, the worst samples, where things are."""
    length = "?" if summary.length is None else f"{summary.length:,}"
    resumed = f", {summary.resumed:,} from a previous run" if summary.resumed else ""
    lines = [
        f"datalint scan {summary.dataset}: {length} samples, {summary.scanned:,} measured{resumed} "
        f"in {summary.elapsed:.1f} s with {summary.workers} worker(s)",
        "  "
        + "  ".join(f"{name} {count:,}" for name, count in (summary.outcomes or summary.statuses).items()),
    ]
    if summary.findings:
        lines += ["", f"  {'finding':<20} {'samples':>8}  quarantined"]
        for kind, count in sorted(summary.findings.items(), key=lambda item: (-item[1], item[0])):
            quarantined = "yes" if kind in summary.policy else "no"
            lines.append(f"  {kind:<20} {count:>8,}  {quarantined}")
        unknown = [kind for kind in summary.findings if kind not in kinds.KINDS]
        if unknown:
            lines.append(f"  (reported by the source: {', '.join(unknown)})")
    if summary.worst:
        lines += ["", "  worst samples:"]
        for sample in summary.worst:
            key = shown_name(sample.key) if sample.key else ""
            lines.append(f"  #{sample.index:<7} {','.join(sample.kinds):<20} {key}".rstrip())
            lines.append(f"           {_one_line(sample.detail)}")
    for note in summary.notes:
        lines += ["", f"  note: {printable(note)}"]
    index, quarantine = shown_name(summary.index_path), shown_name(summary.quarantine_path)
    lines += [
        "",
        f"  index:      {index}{_browse_hint(index)}",
        f"  quarantine: {quarantine}   ({summary.quarantined:,} sample(s))",
        "",
    ]
    return "\n".join(lines)


def _browse_hint(index: str) -> str:
    # datalint does not install datasette: pointing at a command the user lacks is noise
    return f"   (browse: datasette {index})" if shutil.which("datasette") else ""


def _one_line(text: str, limit: int = 140) -> str:
    text = printable(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 3] + "..."
