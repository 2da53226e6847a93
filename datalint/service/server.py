"""Running the service: the bind check, the data directory's lock, logging, and uvicorn with a
graceful SIGTERM and limits on its connections.

uvicorn handles SIGTERM and SIGINT itself: it stops accepting connections, lets in-flight requests
finish (up to `DRAIN_S`), then runs the app's shutdown, which checkpoints running scans so the next
start resumes them. SIGHUP re-reads the token file.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

from datalint.errors import UsageError
from datalint.files import LockHeld, take_lock
from datalint.service import accesslog
from datalint.service.auth import Authenticator
from datalint.service.config import DEFAULT_HEADER_TIMEOUT_S, ServiceConfig, is_loopback

DRAIN_S = 30
LOCK_NAME = "service.lock"

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


def hold_data_dir(data_dir: Path) -> int:
    """Lock `<data-dir>/service.lock` for this process's life (the descriptor returned): one service
    per data directory, with the scan lock's `files.take_lock`: the kernel drops it when the process
    dies however it dies, so it is never stale, and children forked by the service do not inherit it."""
    path = data_dir / LOCK_NAME
    try:
        return take_lock(path, mode=0o644)
    except LockHeld as held:
        raise UsageError(
            f"another datalint serve is using the data directory {data_dir} ({held.holder}): stop it first, "
            "or give this one another [service] data-dir"
        ) from None
    except OSError as exc:
        raise UsageError(f"cannot create the service lock {path}: {exc.strerror}") from None


class _HeaderDeadline(asyncio.Protocol):
    """Mixed into uvicorn's HTTP protocol: closes a connection whose request headers have not all
    arrived `header_timeout` seconds after it opened, or after the first byte of its next request.
    uvicorn closes an idle connection between requests (keep-alive) but waits forever on one that
    sends a request a byte at a time, so a few hundred such sockets (slowloris) held the service's
    connections open."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT_S
    # the protocol's own (uvicorn's H11Protocol, HttpToolsProtocol)
    cycle: Any
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        before = self.cycle  # each request's headers, once complete, make a new cycle
        between = before is None or before.response_complete
        super().data_received(data)
        if self.cycle is not before:
            self._disarm_header_timer()
        elif between and self._header_timer is None:
            self._arm_header_timer()  # the first bytes of a request: its headers are due

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        if not self.transport.is_closing():
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            logger.debug("closed a connection: no complete request headers within %s s", self.header_timeout)
            self.transport.close()


def http_protocol(config: ServiceConfig) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class that `[service] http` names, with the header timeout."""
    from uvicorn.config import HTTP_PROTOCOLS
    from uvicorn.importer import import_from_string

    base = import_from_string(HTTP_PROTOCOLS[config.http])  # "auto": httptools where installed
    attributes = {"header_timeout": config.header_timeout}
    return type(f"HeaderDeadline{base.__name__}", (_HeaderDeadline, base), attributes)


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
    auth = Authenticator.from_file(config.tokens)
    check_bind(config, auth)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    lock = hold_data_dir(config.data_dir)
    try:
        run_uvicorn(config, auth)
    finally:
        os.close(lock)  # after the shutdown's checkpoints: the next service may start now


def run_uvicorn(config: ServiceConfig, auth: Authenticator) -> None:
    import uvicorn

    from datalint.service.app import create_app

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
        http=http_protocol(config),
        loop=config.loop,
        # uvicorn annotates it int; it only hands it to loop.call_later, which takes float seconds
        timeout_keep_alive=cast(int, config.keep_alive),
        # uvicorn answers 503 once this many are open, counting the asking one: `max-connections` more
        limit_concurrency=config.max_connections + 1,
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
