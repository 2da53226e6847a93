"""`datalint serve --config FILE`, the scanner as a service, and `datalint serve token list` (add, remove)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from datalint.commands.arguments import add_format, duration

# the choices only: datalint.service.config imports nothing heavy
from datalint.service.config import HTTP_IMPLEMENTATIONS, LOOP_IMPLEMENTATIONS

TOKEN_EPILOG = """\
The running service re-reads the token file when it changes (and on SIGHUP): a removed or expired
token is refused within a second, without a restart.

examples:
  datalint serve token add trainer --scopes read,write --expires 30d --tokens tokens.toml
  datalint serve token list --tokens tokens.toml
  datalint serve token remove trainer --tokens tokens.toml
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the scanner as an HTTP service: datasets, scans as jobs, lists and guard failures",
        description=(
            "Serve datasets' scan indexes and quarantine lists over HTTP, run scans as jobs and collect "
            "guard failures from training jobs (`datalint docs service`)."
        ),
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        default="datalint-service.toml",
        help="the service config (default: datalint-service.toml)",
    )
    parser.add_argument("--host", metavar="HOST", help="override [service] host")
    parser.add_argument("--port", type=int, metavar="PORT", help="override [service] port")
    parser.add_argument(
        "--http", choices=HTTP_IMPLEMENTATIONS, help="override [service] http (uvicorn's HTTP parser)"
    )
    parser.add_argument(
        "--loop", choices=LOOP_IMPLEMENTATIONS, help="override [service] loop (uvicorn's event loop)"
    )
    parser.add_argument(
        "--allow-code-specs",
        action="store_true",
        help=(
            "let admin tokens register a dataset = SPEC through the API (a spec imports and runs code on "
            "this host); without it only the config file names specs (also [service] allow-code-specs)"
        ),
    )
    parser.set_defaults(run=run_serve, extras=("service", "scan"))
    actions = parser.add_subparsers(dest="serve_action", metavar="ACTION")
    token = actions.add_parser(
        "token",
        help="manage the service's bearer tokens: list, add, remove",
        description="Manage the bearer tokens of the service's token file ([service] tokens).",
        epilog=TOKEN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    token_actions = token.add_subparsers(dest="token_action", metavar="ACTION", required=True)
    add = token_actions.add_parser("add", help="create a token: printed once, only its hash is stored")
    add.add_argument("name", metavar="NAME", help="what the token is for (letters, digits, '-', '_')")
    add.add_argument("--scopes", default="read", metavar="SCOPES", help="read,write,admin (default: read)")
    add.add_argument(
        "--expires",
        type=duration,
        metavar="DURATION",
        help="refuse the token after this long: 30d, 12h, 90m (default: never)",
    )
    add.set_defaults(run=run_token_add, extras=())
    listing = token_actions.add_parser(
        "list", help="the tokens: name, scopes, created, expires (never a token or its hash)"
    )
    add_format(listing, ("text", "json"), help="text (a table, the default) or json")
    listing.set_defaults(run=run_token_list, extras=())
    remove = token_actions.add_parser(
        "remove", help="delete a token from the file; the running service refuses it within a second"
    )
    remove.add_argument("name", metavar="NAME", help="the token's name (`datalint serve token list`)")
    remove.set_defaults(run=run_token_remove, extras=())
    for action in (add, listing, remove):
        action.add_argument(
            "--tokens", default="tokens.toml", metavar="FILE", help="the token file (default: tokens.toml)"
        )


def run_serve(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from datalint.service.config import load_config
    from datalint.service.server import serve

    config = load_config(args.config)
    if args.host:
        config = replace(config, host=args.host)
    if args.port is not None:
        config = replace(config, port=args.port)
    for key in ("http", "loop"):
        if getattr(args, key):
            config = replace(config, **{key: getattr(args, key)})
    if args.allow_code_specs:
        config = replace(config, allow_code_specs=True)
    serve(config)
    return 0


def run_token_add(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime, timedelta

    from datalint.service.auth import add_token, parse_scopes

    now = datetime.now(UTC).replace(microsecond=0)
    expires = now + timedelta(seconds=args.expires) if args.expires else None
    token = add_token(Path(args.tokens), args.name, parse_scopes(args.scopes), now.isoformat(), expires)
    print(token)
    until = f", expires {expires.isoformat()}" if expires else ""
    print(
        f"datalint: token {args.name!r} ({args.scopes}{until}) added to {args.tokens}; it is shown only "
        "now. Clients send it as `Authorization: Bearer TOKEN` (or DATALINT_TOKEN).",
        file=sys.stderr,
    )
    return 0


def run_token_list(args: argparse.Namespace) -> int:
    import json
    from datetime import UTC, datetime

    from datalint.service.auth import load_tokens
    from datalint.text import printable

    now = datetime.now(UTC)
    records = load_tokens(Path(args.tokens))
    if args.format == "json":
        rows = [
            {
                "name": record.name,
                "scopes": sorted(record.scopes),
                "created": record.created,
                "expires": record.expires.isoformat() if record.expires else None,
                "expired": record.expired(now),
            }
            for record in records
        ]
        print(json.dumps({"tokens": rows}, indent=2))
        return 0
    table = [("NAME", "SCOPES", "CREATED", "EXPIRES")] + [
        (
            record.name,
            ",".join(sorted(record.scopes)),
            printable(record.created or "-"),
            (record.expires.isoformat() if record.expires else "never")
            + (" (expired)" if record.expired(now) else ""),
        )
        for record in records
    ]
    widths = [max(len(line[column]) for line in table) for column in range(4)]
    for line in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
    missing = " (no such file yet: `datalint serve token add NAME` makes it)"
    missing = "" if Path(args.tokens).exists() else missing
    print(f"datalint: {len(records)} tokens in {args.tokens}{missing}", file=sys.stderr)
    return 0


def run_token_remove(args: argparse.Namespace) -> int:
    from datalint.service.auth import remove_token

    remove_token(Path(args.tokens), args.name)
    print(
        f"datalint: token {args.name!r} removed from {args.tokens}; a running service refuses it within "
        "a second",
        file=sys.stderr,
    )
    return 0
