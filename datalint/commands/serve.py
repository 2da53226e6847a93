"""`datalint serve --config FILE`, the scanner as a service, and `datalint serve token add NAME`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

# the choices only: datalint.service.config imports nothing heavy
from datalint.service.config import HTTP_IMPLEMENTATIONS, LOOP_IMPLEMENTATIONS


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
    parser.set_defaults(run=run_serve, extras=("service", "scan"))
    actions = parser.add_subparsers(dest="serve_action", metavar="ACTION")
    token = actions.add_parser("token", help="manage the service's bearer tokens")
    token_actions = token.add_subparsers(dest="token_action", metavar="ACTION", required=True)
    add = token_actions.add_parser("add", help="create a token: printed once, only its hash is stored")
    add.add_argument("name", metavar="NAME", help="what the token is for (letters, digits, '-', '_')")
    add.add_argument("--scopes", default="read", metavar="SCOPES", help="read,write,admin (default: read)")
    add.add_argument(
        "--tokens", default="tokens.toml", metavar="FILE", help="the token file (default: tokens.toml)"
    )
    add.set_defaults(run=run_token_add, extras=())


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
    serve(config)
    return 0


def run_token_add(args: argparse.Namespace) -> int:
    from datalint.scan.store import utc_now
    from datalint.service.auth import add_token, parse_scopes

    token = add_token(Path(args.tokens), args.name, parse_scopes(args.scopes), utc_now())
    print(token)
    print(
        f"datalint: token {args.name!r} ({args.scopes}) added to {args.tokens}; it is shown only now. "
        "Clients send it as `Authorization: Bearer TOKEN` (or DATALINT_TOKEN).",
        file=sys.stderr,
    )
    return 0
