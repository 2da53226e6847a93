"""`datalint quarantine DB`: derive a quarantine list from an existing index, without rescanning.

The thresholds default to those of the scan that made the index; `--kinds` picks which finding
kinds put a sample on the list. The index is only read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from datalint.commands.arguments import add_format, add_output_file, count, positive_int, size
from datalint.commands.scan import (
    KIND_HELP,
    add_configuration_arguments,
    add_quality_arguments,
    against_index,
)
from datalint.errors import UsageError
from datalint.text import printable, shown_name


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "quarantine",
        help="derive a quarantine list from a scan index with another policy, without rescanning",
        description=(
            "Re-derive the quarantine list from a scan index: choose which finding kinds quarantine a "
            "sample, or change a threshold, without measuring anything again. The index is only read. "
            "Exit status as datalint scan's: 1 when the list holds samples, 0 when it is empty, 2 on a "
            "usage error."
        ),
    )
    parser.add_argument("db", metavar="DB", help="the scan index (.datalint/<dataset>.db)")
    parser.add_argument("--kinds", metavar="KINDS", help=KIND_HELP)
    add_output_file(parser, metavar="PATH", help="write the list here, atomically (default: stdout)")
    add_format(
        parser,
        ("auto", "json", "text", "binary"),
        default="auto",
        help="auto (the default): json, and with -o past 1,000,000 samples also the binary form "
        "beside it (PATH with .bin), as the scan does; -o PATH.bin writes the binary form alone. "
        "json: the quarantine.json contract only; text: one 'index<TAB>key<TAB>kinds<TAB>detail' "
        "line per sample; binary: a memory-mapped sorted uint64 list for large datasets (needs -o)",
    )
    parser.add_argument(
        "--num-classes", type=positive_int, metavar="N", help="override the scan's --num-classes"
    )
    parser.add_argument("--ignore-index", type=int, metavar="I", help="override the scan's --ignore-index")
    parser.add_argument("--max-bytes", type=size, metavar="SIZE", help="override the scan's --max-bytes")
    parser.add_argument("--require", action="append", metavar="FIELD", help="override the scan's --require")
    add_quality_arguments(parser)
    parser.add_argument(
        "--workers",
        type=count,
        metavar="N",
        help="processes that judge an index judged from its population summary (past a million rows), "
        "part by part (default: the CPUs this process may use; 0 or 1: one part after the other)",
    )
    add_configuration_arguments(parser)
    parser.add_argument(
        "--show-settings",
        action="store_true",
        help="print each setting that decides verdicts, its value and where it comes from (a flag, "
        "[tool.datalint.scan], the scan that made the index, or the default), and exit",
    )
    parser.set_defaults(run=run, extras=("scan",))


def run(args: argparse.Namespace) -> int:
    from datalint.host.cpus import effective_cpu_count
    from datalint.scan.api import check_output_path, derive_quarantine
    from datalint.scan.settings import DEFAULT, resolve, stored_layer, verdict_keys

    # Flags over [tool.datalint.scan] over what the scan used; measuring keys (timeout, ...) do not apply.
    settings = resolve(args, verdict_keys(), stored=stored_layer(args.db, keys=verdict_keys()))
    if args.show_settings:
        return _show_settings(args.db, settings)
    if args.output_file is not None:
        check_output_path(Path(args.output_file), "-o/--output-file")
    values = settings.values
    document = derive_quarantine(
        args.db,
        kinds=None if settings.origins["kinds"] == DEFAULT else values["kinds"],
        num_classes=values["num-classes"],
        ignore_index=values["ignore-index"],
        max_bytes=values["max-bytes"],
        require=tuple(values["require"]),  # `require = []` in the file clears what the scan required
        thresholds=settings.thresholds or None,
        against=against_index(args.against),
        workers=effective_cpu_count() if args.workers is None else args.workers,
    )
    target = None if args.output_file is None else Path(args.output_file)
    written = _write(document, _chosen_format(args.format, target), target)
    count = len(document["samples"])
    if args.output_file is not None:
        print(f"datalint: {count} sample(s) quarantined -> {', '.join(map(str, written))}", file=sys.stderr)
    return 1 if count else 0  # as `datalint scan`: 1 when the list holds samples


def _show_settings(db: str, settings: Any) -> int:
    from datalint.index import store
    from datalint.scan.settings import settings_text

    if settings.stored is None:  # no scan to show the options of: say why, as deriving the list would
        store.open_index(Path(db), create=False).close()
    sys.stdout.write(settings_text(settings))
    return 0


def _chosen_format(requested: str, target: Path | None) -> str:
    """`auto`: a `.bin` target gets the binary form alone; others get JSON (plus the binary if large)."""
    from datalint.index.binary_list import SUFFIX

    if requested != "auto":
        return requested
    return "binary" if target is not None and target.suffix == SUFFIX else "auto"


def _write(document: dict[str, Any], chosen: str, target: Path | None) -> list[Path]:
    """Write the list in the chosen form; the files written (none for stdout)."""
    from datalint.index.binary_list import write_beside_if_large, write_from_document
    from datalint.scan.api import write_json_atomically, write_text_atomically

    if chosen == "binary":
        if target is None:
            raise UsageError("--format binary writes a file: give it with -o/--output-file PATH")
        return [write_from_document(target, document)]
    if target is None:
        sys.stdout.write(format_text(document) if chosen == "text" else json.dumps(document, indent=1) + "\n")
        return []
    if chosen == "text":
        write_text_atomically(target, format_text(document))
        return [target]
    write_json_atomically(target, document)
    beside = write_beside_if_large(target, document) if chosen == "auto" else None
    return [target] if beside is None else [target, beside]


def format_text(document: dict[str, Any]) -> str:
    lines = []
    for sample in document["samples"]:
        detail = printable(" ".join(str(sample["detail"]).split()))
        # A tab or a newline in a key would break the line: shown_name quotes and escapes it.
        key = shown_name(sample["key"]) if sample["key"] else ""
        lines.append(f"{sample['index']}\t{key}\t{','.join(sample['kinds'])}\t{detail}")
    return "".join(line + "\n" for line in lines)
