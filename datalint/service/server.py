"""Running the service: the bind check, logging, and uvicorn with a graceful SIGTERM.

uvicorn handles SIGTERM and SIGINT itself: it stops accepting connections, lets in-flight requests
finish (up to `DRAIN_S`), then runs the app's shutdown, which checkpoints running scans so the next
start resumes them.
"""

from __future__ import annotations

import logging
import sys

from datalint.errors import UsageError
from datalint.service.auth import Authenticator, load_tokens
from datalint.service.config import ServiceConfig, is_loopback

DRAIN_S = 30


def check_bind(config: ServiceConfig, auth: Authenticator) -> None:
    """Refuse to listen beyond this machine with no tokens: the API would be open to the network."""
    if not is_loopback(config.host) and not auth.enabled:
        where = f" in {config.source}" if config.source else ""
        raise UsageError(
            f"refusing to listen on {config.host} without tokens: anyone who can reach it could start scans "
            f"and rewrite lists. Create one with `datalint serve token add NAME --scopes read,write,admin "
            f'--tokens tokens.toml` and set [service] tokens = "tokens.toml"{where}, or bind 127.0.0.1'
        )


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    service_logger = logging.getLogger("datalint.service")
    service_logger.handlers[:] = [handler]
    service_logger.setLevel(level.upper())
    service_logger.propagate = False


def serve(config: ServiceConfig) -> None:
    import uvicorn

    from datalint.service.app import create_app

    auth = Authenticator(load_tokens(config.tokens) if config.tokens else ())
    check_bind(config, auth)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    configure_logging(config.log_level)
    app = create_app(config, auth)
    uvicorn.run(
        app,
        host=config.host,
        port=config.port,
        log_level=config.log_level,
        access_log=True,  # one line per request
        timeout_graceful_shutdown=DRAIN_S,
        server_header=False,
        proxy_headers=False,
    )
