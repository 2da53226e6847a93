"""`datalint watch`: keep a scan's index and quarantine list current while the data changes.

Runs until Ctrl-C or SIGTERM (exit 0). One line per update on stdout (`--format json`: one JSON
object per line); warnings (a paused watch) on stderr. Usage errors exit 2.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from datalint.commands import scan
from datalint.commands.arguments import duration


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "watch",
        help="keep the index and quarantine list of a folder or dataset current as it changes",
        description=(
            "Watch an image folder (filesystem events, and a periodic walk as a safety net) or poll a "
            "dataset, and scan only what changed: new and modified files are measured once they have "
            "settled, removed ones leave the list, and the list is rewritten atomically after each update."
        ),
    )
    scan.add_source_arguments(parser)
    scan.add_scan_arguments(parser)
    group = parser.add_argument_group("watching")
    group.add_argument(
        "--settle",
        type=duration,
        default=2.0,
        metavar="DURATION",
        help="a file is judged once its size and mtime have not changed for this long (default 2s)",
    )
    group.add_argument(
        "--rescan-every",
        type=duration,
        default=3600.0,
        metavar="DURATION",
        help="walk the whole folder this often even without events: they are lost on NFS and when inotify "
        "watches run out (default 1h)",
    )
    group.add_argument(
        "--poll",
        type=duration,
        default=300.0,
        metavar="DURATION",
        help="with --dataset or --files: look for new and removed samples this often (default 5m)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    _require_extras()
    from datalint.scan import api, watch

    chosen = scan.scan_settings(args)  # flags > project file > the index's last scan > default
    scan.say_where_settings_came_from(chosen)
    description = scan.choose_source(args, chosen.values)
    options = scan.scan_options(args, chosen)
    db = Path(args.db) if args.db else api.default_index_path(description.spec, description.kind)
    quarantine = Path(args.quarantine) if args.quarantine else api.default_quarantine_path(db)
    api.check_output_path(quarantine, "--quarantine")  # before the first scan, as `datalint scan` does
    settings = watch.WatchOptions(
        settle=args.settle, rescan_every=args.rescan_every, poll=args.poll, json_lines=args.format == "json"
    )
    folder = description.kind == "images" and description.option("dataset") is None
    folder = folder and description.option("file_list") is None
    how = "watching the folder" if folder else f"polling every {args.poll:g}s"
    _say(f"{how} {description.spec}: index {db}, list {quarantine}; Ctrl-C stops")
    follow = watch.watch_folder if folder else watch.watch_dataset
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        follow(description, options, settings, db=db, quarantine=quarantine, log=_log, warn=_warn, stop=stop)
    except KeyboardInterrupt:
        stop.set()
        _say(f"stopped; the index {db} and the list {quarantine} are complete up to the last update")
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


def _require_extras() -> None:
    """The scan's extra, and watchfiles from it (which `datalint scan` alone does not need)."""
    import importlib.util

    from datalint.extras import MissingExtraError, install_line, require

    require("scan", "`datalint watch`")
    if importlib.util.find_spec("watchfiles") is None:
        raise MissingExtraError(
            "`datalint watch` needs watchfiles from the [scan] extra; install it with: "
            + install_line("scan"),
            extra="scan",
            missing=("watchfiles",),
        )


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _log(line: str) -> None:
    print(line, flush=True)


def _warn(message: str) -> None:
    print(f"datalint: warning: {message}", file=sys.stderr, flush=True)


def _say(message: str) -> None:
    print(f"datalint: {message}", file=sys.stderr, flush=True)
