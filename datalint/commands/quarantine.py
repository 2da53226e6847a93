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

from datalint.commands.arguments import add_format, add_output_file, positive_int, size
from datalint.commands.scan import KIND_HELP, add_quality_arguments, against_index
from datalint.errors import UsageError
from datalint.text import printable, shown_name


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "quarantine",
        help="derive a quarantine list from a scan index with another policy, without rescanning",
        description=(
            "Re-derive the quarantine list from a scan index: choose which finding kinds quarantine a "
            "sample, or change a threshold, without measuring anything again. The index is only read."
        ),
    )
    parser.add_argument("db", metavar="DB", help="the scan index (.datalint/<dataset>.db)")
    parser.add_argument("--kinds", metavar="KINDS", help=KIND_HELP)
    add_output_file(parser, metavar="PATH", help="write the list here, atomically (default: stdout)")
    add_format(
        parser,
        ("json", "text", "binary"),
        default="json",
        help="json: the quarantine.json contract; text: one 'index<TAB>key<TAB>kinds<TAB>detail' "
        "line per sample; binary: a memory-mapped sorted uint64 list for large datasets (needs -o)",
    )
    parser.add_argument(
        "--num-classes", type=positive_int, metavar="N", help="override the scan's --num-classes"
    )
    parser.add_argument("--ignore-index", type=int, metavar="I", help="override the scan's --ignore-index")
    parser.add_argument("--max-bytes", type=size, metavar="SIZE", help="override the scan's --max-bytes")
    parser.add_argument("--require", action="append", metavar="FIELD", help="override the scan's --require")
    add_quality_arguments(parser)
    parser.set_defaults(run=run, extras=("scan",))


def run(args: argparse.Namespace) -> int:
    from datalint.scan import policy
    from datalint.scan.api import (
        check_output_path,
        derive_quarantine,
        write_json_atomically,
        write_text_atomically,
    )

    if args.output_file is not None:
        check_output_path(Path(args.output_file), "-o/--output-file")
    document = derive_quarantine(
        args.db,
        kinds=args.kinds,
        num_classes=args.num_classes,
        ignore_index=args.ignore_index,
        max_bytes=args.max_bytes,
        require=tuple(args.require) if args.require else None,
        thresholds=policy.parse_thresholds(args.threshold) or None,
        against=against_index(args.against),
    )
    text = format_text(document) if args.format == "text" else None
    if args.format == "binary":
        if args.output_file is None:
            raise UsageError("--format binary writes a file: give it with -o/--output-file PATH")
        from datalint.training.binary_list import write_from_document

        write_from_document(args.output_file, document)
    elif args.output_file is None:
        sys.stdout.write(text if text is not None else json.dumps(document, indent=1) + "\n")
    elif text is not None:
        write_text_atomically(Path(args.output_file), text)
    else:
        write_json_atomically(Path(args.output_file), document)
    if args.output_file is not None:
        count = len(document["samples"])
        print(f"datalint: {count} sample(s) quarantined -> {args.output_file}", file=sys.stderr)
    return 0


def format_text(document: dict[str, Any]) -> str:
    lines = []
    for sample in document["samples"]:
        detail = printable(" ".join(str(sample["detail"]).split()))
        # A tab or a newline in a key would break the line: shown_name quotes and escapes it.
        key = shown_name(sample["key"]) if sample["key"] else ""
        lines.append(f"{sample['index']}\t{key}\t{','.join(sample['kinds'])}\t{detail}")
    return "".join(line + "\n" for line in lines)
