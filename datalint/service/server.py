"""Running the service: the bind check, logging, and uvicorn with a graceful SIGTERM.

uvicorn handles SIGTERM and SIGINT itself: it stops accepting connections, lets in-flight requests
finish (up to `DRAIN_S`), then runs the app's shutdown, which checkpoints running scans so the next
start resumes them. SIGHUP re-reads the token file.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from datalint.errors import UsageError
from datalint.service import accesslog
from datalint.service.auth import Authenticator
from datalint.service.config import ServiceConfig, is_loopback

DRAIN_S = 30

logger = logging.getLogger("datalint.service.server")


def check_bind(config: ServiceConfig, auth: Authenticator) -> None:
    """Refuse to listen beyond this machine with no tokens: the API would be open to the network."""
    if not is_loopback(config.host) and not auth.enabled:
        where = f" in {config.source}" if config.source else ""
        raise UsageError(
            f"refusing to listen on {config.host} without tokens: anyone who can reach it could start scans "
            f"and rewrite lists. Create one with `datalint serve token add NAME --scopes read,write,admin "
            f'--tokens tokens.toml` and set [service] tokens = "tokens.toml"{where}, or bind 127.0.0.1'
        )


_STACK_MODULES = {"httptools": "httptools", "uvloop": "uvloop"}


def check_stack(config: ServiceConfig) -> None:
    """An HTTP parser or event loop asked for by name must be installed (uvicorn's "auto" falls back)."""
    import importlib.util

    for key, choice in (("http", config.http), ("loop", config.loop)):
        module = _STACK_MODULES.get(choice)
        if module is not None and importlib.util.find_spec(module) is None:
            raise UsageError(
                f"[service] {key} = {choice!r}, but {module} is not installed: "
                f"`pip install 'torch-datalint[service]'` brings it, or set {key} = \"auto\""
            )


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    service_logger = logging.getLogger("datalint.service")
    service_logger.handlers[:] = [handler]
    service_logger.setLevel(level.upper())
    service_logger.propagate = False


@contextlib.contextmanager
def reload_tokens_on_sighup(auth: Authenticator) -> Iterator[None]:
    """SIGHUP re-reads the token file (uvicorn takes only SIGTERM and SIGINT); signals reach only the
    main thread, so elsewhere (a test's thread) the file's changes are still seen, by its stat."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def reload(signum: int, frame: Any) -> None:
        logger.info("SIGHUP: re-reading the token file")
        auth.reload_soon()

    previous = signal.signal(signal.SIGHUP, reload)
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, previous)


def serve(config: ServiceConfig) -> None:
    import uvicorn

    from datalint.service.app import create_app

    auth = Authenticator.from_file(config.tokens)
    check_bind(config, auth)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    configure_logging(config.log_level)
    check_stack(config)
    app: Any = create_app(config, auth)
    access_lines: collections.deque[accesslog.Entry] = collections.deque()
    if config.log_level in ("debug", "info"):  # access lines are info, as uvicorn's were
        app = accesslog.AccessLog(app, access_lines)
    settings = uvicorn.Config(
        app,
        host=config.host,
        port=config.port,
        http=config.http,
        loop=config.loop,
        log_level=config.log_level,
        access_log=False,  # ours (datalint.service.accesslog): one line per request, off the loop
        timeout_graceful_shutdown=DRAIN_S,
        server_header=False,
        proxy_headers=False,
    )
    stop_logging = log_off_the_loop(["uvicorn", "datalint.service"])
    stop_access_log = accesslog.start_writer(access_lines)

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn re-raises a captured SIGTERM when this exits: the queued lines go out first
            with super().capture_signals(), reload_tokens_on_sighup(auth):
                try:
                    yield
                finally:
                    stop_access_log()
                    stop_logging()

    try:
        server = Server(settings)
        server.run()
    except KeyboardInterrupt:  # as uvicorn.run: Ctrl-C ends the service quietly
        pass
    finally:
        stop_access_log()  # writes what is queued
        stop_logging()
    if not server.started:
        raise SystemExit(3)  # it could not start (the port is taken, say); uvicorn said why


class _Deferred(logging.Handler):
    """Hands each record to the log writer thread, which passes it to the handler this one replaced."""

    def __init__(self, target: logging.Handler, records: queue.SimpleQueue[Any]) -> None:
        super().__init__(target.level)
        self.target = target
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.put((self.target, record))


def log_off_the_loop(names: list[str]) -> Callable[[], None]:
    """Write these loggers' lines on a thread of their own: a request's access-log line is formatted
    and written there, so the event loop never waits on stderr (a pipe to a slow journal, a busy
    disk). Returns the function that writes what is queued and stops the thread."""
    records: queue.SimpleQueue[Any] = queue.SimpleQueue()
    original = {name: list(logging.getLogger(name).handlers) for name in names}
    for name, handlers in original.items():
        logging.getLogger(name).handlers[:] = [_Deferred(handler, records) for handler in handlers]

    def write() -> None:
        while (item := records.get()) is not None:
            target, record = item
            if record.levelno >= target.level:
                target.handle(record)

    thread = threading.Thread(target=write, name="datalint-log", daemon=True)
    thread.start()

    def stop() -> None:
        if not thread.is_alive():
            return
        for name, handlers in original.items():  # lines from now on are written where they are made
            logging.getLogger(name).handlers[:] = handlers
        records.put(None)
        thread.join(timeout=5)

    return stop
