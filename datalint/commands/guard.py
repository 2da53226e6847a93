"""`datalint guard replay SPOOL URL`: send the failures a guard spooled while the service was down."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from datalint.errors import UsageError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("guard", help="the training guard's spooled failures")
    actions = parser.add_subparsers(dest="guard_action", metavar="ACTION", required=True)
    replay = actions.add_parser(
        "replay",
        help="send spooled guard failures to a datalint service (idempotent: no duplicates)",
        description=(
            "Send the failures GuardedDataset(record=URL) spooled while the service was unreachable. "
            "Each file is removed once the service answered for every failure in it; what it did not answer "
            "for stays. Failures it refused go to a rejects file beside the spool file "
            "(NAME.rejects.jsonl, with its reasons) and are never sent again."
        ),
    )
    replay.add_argument(
        "spool", metavar="SPOOL", help="a spool file (.jsonl) or a folder of them (.datalint/spool)"
    )
    replay.add_argument(
        "url", metavar="URL", help="the dataset's URL, e.g. http://127.0.0.1:8765/v1/datasets/train"
    )
    replay.add_argument("--token", metavar="TOKEN", help="a write token (default: $DATALINT_TOKEN)")
    replay.set_defaults(run=run_replay)


def run_replay(args: argparse.Namespace) -> int:
    from datalint.training import remote

    spool = Path(args.spool)
    if not spool.exists():
        raise UsageError(f"{spool}: no such spool file or folder")
    if not remote.is_url(args.url):
        raise UsageError(
            f"{args.url}: expected an http:// or https:// URL of a dataset on a datalint service"
        )
    try:
        replayed = remote.replay_spool(spool, args.url, token=args.token)
    except OSError as exc:
        print(
            f"datalint: error: {remote.failures_url(args.url)}: {exc}; the spool keeps what was not sent",
            file=sys.stderr,
        )
        return 1
    refused = ""
    if replayed.refused:
        kept = ", ".join(map(str, replayed.rejects))
        refused = f"; {replayed.refused} refused by the service, kept in {kept} (not sent again)"
    print(
        f"datalint: {replayed.sent} failures sent to {remote.failures_url(args.url)}{refused}",
        file=sys.stderr,
    )
    return 0
