"""The HTTP routes of `datalint serve` (FastAPI): thin handlers over registry, jobs, ingest and auth.

FastAPI because the API's contract is its request models: pydantic validates every body and
parameter into a clear 422 before a handler runs, and the same models publish the OpenAPI schema
(`/openapi.json`) that clients and the schemathesis fuzzing tests are generated from. It runs on
uvicorn (Starlette underneath, so plain ASGI middleware works for the request-size limit).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    StreamingResponse,
)
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from datalint import __version__
from datalint.errors import UsageError
from datalint.index.failures import FailureRecord
from datalint.service import ingest, overview
from datalint.service.auth import Authenticator
from datalint.service.config import (
    NAME_PATTERN,
    ConfigError,
    DatasetConfig,
    ServiceConfig,
    dataset_settings,
)
from datalint.service.ingest import IngestWriter
from datalint.service.jobs import MODES, Job, JobManager
from datalint.service.lists import index_state
from datalint.service.origins import Origins, RequestGate, send_json
from datalint.service.registry import Registry
from datalint.service.watchers import Watchers
from datalint.text import is_utf8

logger = logging.getLogger("datalint.service")
COOKIE = "datalint_token"
CSRF_COOKIE = "datalint_csrf"  # the login form's double-submit token
_BEARER = HTTPBearer(auto_error=False, description="a token from `datalint serve token add NAME`")
_CSP_META = re.compile(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">')

DatasetName = Annotated[str, Path(pattern=NAME_PATTERN.pattern, description="a registered dataset")]
JobId = Annotated[str, Path(pattern=r"^[0-9a-f]{16}$", description="a scan job's id")]


# ---- models (the published contract) ------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="after")
    def _encodable(self) -> _Strict:
        for name, value in self.__dict__.items():
            if isinstance(value, str) and not is_utf8(value):
                raise ValueError(f"{name}: not valid Unicode text (a lone surrogate)")
        return self


class FailureIn(_Strict):
    index: int = Field(ge=0, le=2**62, description="the sample's index in the dataset")
    key: str | None = Field(None, max_length=4096, description="the sample's key (a path), if known")
    error_type: str = Field(min_length=1, max_length=256, description="the exception's class name")
    message: str = Field(max_length=16_384)
    traceback: str | None = Field(None, max_length=65_536)
    host: str | None = Field(None, max_length=256)
    pid: int | None = Field(None, ge=0, le=2**31)
    worker: int | None = Field(None, ge=0, le=2**31)
    time: str | None = Field(None, max_length=64, description="when it failed (ISO 8601)")
    run: str | None = Field(None, max_length=128, description="the training run's id")
    id: str | None = Field(None, max_length=128, description="the client's id of this failure")
    duration: float | None = Field(None, ge=0, le=1e9)


class FailureBatch(_Strict):
    failures: list[FailureIn] = Field(max_length=10_000)


class RefusedFailure(BaseModel):
    position: int = Field(description="the item's place in the posted batch")
    index: int | None = Field(description="its index, where it was a number")
    key: str | None = Field(description="its key, where it was text")
    reason: str


class FailuresAccepted(BaseModel):
    accepted: int
    committed: bool
    refused: list[RefusedFailure] = Field(
        default_factory=list, description="the items not committed, each with its reason (never resend them)"
    )


class FailuresRefused(BaseModel):
    detail: str
    refused: list[RefusedFailure]


class ClearRequest(_Strict):
    indexes: list[Annotated[int, Field(ge=0, le=2**62)]] = Field(
        min_length=1, max_length=100_000, description="the samples' indexes"
    )
    reason: str = Field(min_length=1, max_length=1024, description="why (kept in the index's history)")


class FailuresCleared(BaseModel):
    cleared: list[int] = Field(description="the samples whose acknowledged failure ended")


class ScanRequest(_Strict):
    mode: Literal["resume", "full", "incremental"] = Field(
        "resume", description="resume: measure what the index lacks; full: rescan all; incremental: changes"
    )


class ProgressOut(BaseModel):
    done: int
    total: int | None
    rate: float | None
    eta: float | None
    findings: int


class JobOut(BaseModel):
    id: str
    dataset: str
    mode: str
    state: str
    created: str
    reason: str
    started: str | None
    finished: str | None
    pid: int | None
    returncode: int | None
    error: str | None
    resumed: bool
    summary: dict[str, Any] | None
    progress: ProgressOut


class JobList(BaseModel):
    scans: list[JobOut]


class DatasetIn(_Strict):
    name: str = Field(pattern=NAME_PATTERN.pattern)
    images: str | None = Field(None, min_length=1, max_length=4096)
    dataset: str | None = Field(None, min_length=1, max_length=4096)
    interval: float | None = Field(None, gt=0, le=10**9)
    # [tool.datalint.scan]'s keys (`_` for `-`), checked as the file's are (a 422 naming the key)
    workers: int | None = Field(None, ge=0, le=4096)
    timeout: float | None = Field(None, gt=0, le=86_400)
    setup_timeout: float | None = Field(None, ge=0, le=86_400)
    kinds: str | list[str] | None = Field(None, max_length=1024)
    max_bytes: int | str | None = Field(None, description="bytes, or a size such as '64MB'")
    max_pixels: int | None = Field(None, ge=1)
    num_classes: int | None = Field(None, ge=1)
    ignore_index: int | None = None
    require: list[str] | None = Field(None, max_length=256)
    label: list[str] | None = Field(None, max_length=256)
    ext: list[str] | None = Field(None, max_length=256)
    all_frames: bool | None = None
    scores: bool | None = None
    verify_content: bool | None = None
    incremental: bool | None = None
    thresholds: dict[str, float] | None = Field(None, description='limits by name, e.g. {"dark": 0.1}')

    @model_validator(mode="after")
    def _one_source(self) -> DatasetIn:
        if (self.images is None) == (self.dataset is None):
            raise ValueError("give exactly one of images (a folder) or dataset (a spec)")
        return self


class WatcherOut(BaseModel):
    running: bool
    pid: int | None
    restarts: int
    last_exit: str | None
    paused: bool = Field(False, description="stopped while a scan job of the dataset runs")


class DatasetOut(BaseModel):
    name: str
    source: str
    samples: int
    quarantined: int
    guard_failures: int
    last_scan: dict[str, Any] | None
    interval: float | None
    watch: bool
    watcher: WatcherOut | None = None  # present once the service has started a watcher for it
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="each scan setting of its scans: {name: {value, from}}, as `scan --show-settings`",
    )
    settings_error: str | None = Field(
        None, description="why the settings cannot be read now (its config file)"
    )


class DatasetList(BaseModel):
    datasets: list[DatasetOut]


class Health(BaseModel):
    status: str
    version: str


class QuarantineSample(BaseModel):
    index: int
    key: str | None
    kinds: list[str]
    detail: str | None


class QuarantineList(BaseModel):
    format: str
    dataset: str | None
    length: int | None
    fingerprint: str | None
    created: str
    policy: list[str] | None
    samples: list[QuarantineSample]


class ErrorOut(BaseModel):
    detail: Any


_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "no valid token"},
    403: {"model": ErrorOut, "description": "the token lacks the scope"},
    404: {"model": ErrorOut, "description": "no such dataset or scan"},
}


# ---- the service's state --------------------------------------------------------------------------


@dataclass
class Service:
    config: ServiceConfig
    auth: Authenticator
    registry: Registry
    jobs: JobManager
    watchers: Watchers
    writers: dict[str, IngestWriter] = field(default_factory=dict)
    ingested: dict[str, int] = field(default_factory=dict)
    stopping: bool = False

    def writer(self, name: str) -> IngestWriter:
        if name not in self.writers:
            self.writers[name] = IngestWriter(
                name,
                self.registry.index_path(name),
                self._committed,
                before_commit=lambda: index_state(self.registry.index_path(name)),
            )
        return self.writers[name]

    def _committed(self, name: str, indexes: list[int], before: Any) -> None:
        self.ingested[name] = self.ingested.get(name, 0) + len(indexes)
        self.registry.lists.appended(name, indexes, before)

    def dataset_out(self, name: str) -> DatasetOut:
        dataset = self.registry.get(name)
        assert dataset is not None
        stats = self.registry.stats(name)
        source = f"images {dataset.images}" if dataset.images else f"dataset {dataset.dataset}"
        return DatasetOut(
            name=name,
            source=source,
            samples=stats.samples,
            quarantined=stats.quarantined,
            guard_failures=stats.guard_failures,
            last_scan=stats.last_scan,
            interval=dataset.interval,
            watch=dataset.watch,
            watcher=self._watcher(name),
            **self._settings(dataset),
        )

    def _settings(self, dataset: DatasetConfig) -> dict[str, Any]:
        # Checked at start; only a dataset's `config` file, edited since, can fail here (and its next
        # scan with it): say so beside the dataset rather than fail the whole listing.
        try:
            return {"settings": dataset_settings(dataset, self.registry.index_path(dataset.name))["settings"]}
        except UsageError as exc:  # the scan's ConfigError, as the scan job would meet it
            return {"settings_error": str(exc)}

    def _watcher(self, name: str) -> WatcherOut | None:
        for state in self.watchers.states():
            if state.dataset == name:
                return WatcherOut(
                    running=state.running,
                    pid=state.pid,
                    restarts=state.restarts,
                    last_exit=state.last_exit,
                    paused=state.paused,
                )
        return None


def _job_out(job: Job) -> JobOut:
    return JobOut.model_validate(job.to_dict())


# ---- request size limit (plain ASGI, before any parsing) -----------------------------------------


class BodyLimit:
    """Refuse request bodies over `limit` bytes with 413, by the header or while reading them."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await _too_large(send, self.limit)
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                await _too_large(send, self.limit)
                return
            more = message.get("more_body", False)
        body = b"".join(chunks)
        delivered = False

        async def replay() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _too_large(send: Any, limit: int) -> None:
    await send_json(send, 413, {"detail": f"request body over the limit of {limit} bytes"})


# ---- the conditional GET of a list (plain ASGI, before routing) -----------------------------------

_LIST_PATH = re.compile(r"^/v1/datasets/([^/]+)/quarantine$")


class NotModified:
    """Answer `GET /v1/datasets/{name}/quarantine` with `If-None-Match` naming the published list's ETag
    by a 304 here: a token check and two dict lookups, where routing and FastAPI's dependency solving
    cost ~150 us of CPU per request. Everything else (no or a wrong token, another ETag, no list yet)
    goes on to the route, which gives the same answers it always did."""

    def __init__(self, app: Any, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            match = _LIST_PATH.match(scope["path"])
            if match is not None and await self._not_modified(match[1], scope, send):
                return
        await self.app(scope, receive, send)

    async def _not_modified(self, name: str, scope: dict[str, Any], send: Any) -> bool:
        headers = dict(scope.get("headers") or ())
        tags = headers.get(b"if-none-match")
        served = self.service.registry.lists.current(name) if tags is not None else None
        if served is None or not _matches(served.etag, tags.decode("latin-1")):  # type: ignore[union-attr]
            return False
        if self.service.auth.enabled and self.service.auth.allows(_token(headers), "read") is not True:
            return False  # the route says why (401 or 403)
        await send(
            {
                "type": "http.response.start",
                "status": 304,
                "headers": [
                    (b"etag", served.etag.encode()),
                    (b"cache-control", b"no-cache"),
                    (b"vary", b"Accept-Encoding"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})
        return True


class PartsResponse(Response):
    """A JSON body sent as the parts it is kept in (a published list: its build, then each append),
    one ASGI message each, so a list is never joined into one copy to be sent."""

    media_type = "application/json"

    def __init__(self, parts: tuple[bytes, ...], headers: dict[str, str]) -> None:
        super().__init__(b"", headers=headers)
        self.parts = parts
        self.headers["content-length"] = str(sum(map(len, parts)))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        last = len(self.parts) - 1
        for number, part in enumerate(self.parts):
            await send({"type": "http.response.body", "body": part, "more_body": number < last})
        if not self.parts:
            await send({"type": "http.response.body", "body": b""})


def _token(headers: dict[bytes, bytes]) -> str | None:
    """The bearer token, else the read cookie (as the route's `read` scope takes them)."""
    authorization = headers.get(b"authorization", b"").decode("latin-1")
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    from starlette.requests import cookie_parser  # the parser the route's Request uses

    return cookie_parser(headers.get(b"cookie", b"").decode("latin-1")).get(COOKIE)


# ---- the app ----------------------------------------------------------------------------------------


def create_app(config: ServiceConfig, auth: Authenticator, *, start_jobs: bool = True) -> FastAPI:
    registry = Registry(config)
    watchers = Watchers(registry)
    jobs = JobManager(registry, pause=watchers.pause, resume=watchers.resume)
    service = Service(config=config, auth=auth, registry=registry, jobs=jobs, watchers=watchers)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if start_jobs:
            service.jobs.start()
            service.watchers.start()
        registry.lists.start()  # publishes the saved lists, then keeps every list current
        logger.info("serving %d datasets from %s", len(registry.names()), config.data_dir)
        if config.allow_code_specs:
            logger.warning(
                "--allow-code-specs: admin tokens may register dataset specs, which run code on this host"
                if auth.enabled
                else "--allow-code-specs has no effect without tokens: nobody is admin enough to send code"
            )
        yield
        service.stopping = True
        logger.info("draining: checkpointing running scans")
        await asyncio.to_thread(service.jobs.shutdown)
        await asyncio.to_thread(service.watchers.shutdown)
        await asyncio.to_thread(registry.lists.stop)
        for writer in service.writers.values():
            await asyncio.to_thread(writer.close)
        logger.info("stopped")

    app = FastAPI(
        title="datalint service",
        version=__version__,
        description="Datasets, scans as jobs, quarantine lists and guard failures over HTTP.",
        lifespan=lifespan,
        docs_url=None,  # the interactive pages load scripts from a CDN; the schema is at /openapi.json
        redoc_url=None,
        openapi_url=None,  # served below, behind the read scope
    )
    app.state.service = service
    app.add_middleware(BodyLimit, limit=config.max_request_bytes)
    app.add_middleware(NotModified, service=service)
    app.add_middleware(RequestGate, origins=Origins(config))  # the outermost: before anything is read

    def token_of(
        request: Request, credentials: HTTPAuthorizationCredentials | None, cookie_ok: bool
    ) -> str | None:
        if credentials is not None:
            return credentials.credentials
        return request.cookies.get(COOKIE) if cookie_ok else None

    def scope(name: str, cookie_ok: bool = False) -> Any:
        async def check(
            request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)]
        ) -> None:
            token = token_of(request, credentials, cookie_ok)
            verdict = auth.allows(token, name)
            if verdict is None:  # no token, an unknown one, or one that expired: say which
                raise HTTPException(401, auth.refusal(token), headers={"WWW-Authenticate": "Bearer"})
            if verdict is False:
                raise HTTPException(403, f"this token lacks the {name!r} scope")

        return Depends(check)

    read, write, admin = scope("read", cookie_ok=True), scope("write"), scope("admin")

    def known(name: str) -> str:
        if registry.get(name) is None:
            raise HTTPException(
                404, f"no dataset named {name!r} (registered: {', '.join(registry.names()) or 'none'})"
            )
        return name

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        # FastAPI's own answer echoes the input, and input JSON may hold what no response can carry
        # (a lone surrogate, NaN): the field and the reason say enough.
        return SafeJSONResponse({"detail": _plain_errors(exc.errors())}, status_code=422)

    @app.exception_handler(ConfigError)
    async def config_error(request: Request, exc: ConfigError) -> JSONResponse:
        # the shape of FastAPI's own 422, so one schema describes every validation answer
        detail = [{"loc": ["body"], "msg": str(exc), "type": "value_error"}]
        return JSONResponse({"detail": detail}, status_code=422)

    @app.get("/healthz", response_model=Health, tags=["service"])
    def healthz() -> Health:
        return Health(status="draining" if service.stopping else "ok", version=__version__)

    @app.get(
        "/", response_class=HTMLResponse, tags=["pages"], responses={303: {"description": "sign in first"}}
    )
    def overview_page(
        request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)]
    ) -> Response:
        if auth.enabled and not auth.allows(token_of(request, credentials, cookie_ok=True), "read"):
            return RedirectResponse("/login", status_code=303)
        datasets = [service.dataset_out(name).model_dump() for name in registry.names()]
        running = [
            _job_out(job).model_dump() for job in service.jobs.jobs() if job.state in ("queued", "running")
        ]
        html = overview.render_overview(datasets, running, __version__)
        return HTMLResponse(html, headers={"Content-Security-Policy": overview.CSP})

    def login_form(message: str = "", status_code: int = 200) -> HTMLResponse:
        csrf = secrets.token_urlsafe(32)
        page = HTMLResponse(
            overview.render_login(message, csrf),
            status_code=status_code,
            headers={"Content-Security-Policy": overview.CSP, "Cache-Control": "no-store"},
        )
        page.set_cookie(CSRF_COOKIE, csrf, httponly=True, samesite="strict", path="/login")
        return page

    @app.get("/login", response_class=HTMLResponse, tags=["pages"])
    def login_page() -> HTMLResponse:
        return login_form()

    @app.post(
        "/login", response_class=HTMLResponse, tags=["pages"], responses={303: {"description": "signed in"}}
    )
    async def login(request: Request) -> Response:
        from urllib.parse import parse_qs

        form = parse_qs((await request.body()).decode("utf-8", errors="replace"))
        token = (form.get("token") or [""])[0]
        sent, kept = (form.get("csrf") or [""])[0], request.cookies.get(CSRF_COOKIE, "")
        if not sent or not hmac.compare_digest(sent.encode(), kept.encode()):
            return login_form("The sign-in form expired or came from another page: sign in again.", 403)
        if not auth.allows(token, "read"):
            return login_form("That token is not valid here.", 401)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE, token, httponly=True, samesite="strict", secure=request.url.scheme == "https"
        )
        return response

    @app.get("/openapi.json", tags=["service"], dependencies=[read], responses=_ERRORS)
    def openapi_schema() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get(
        "/metrics", response_class=PlainTextResponse, tags=["service"], dependencies=[read], responses=_ERRORS
    )
    def metrics() -> PlainTextResponse:
        return PlainTextResponse(_metrics_text(service), media_type="text/plain; version=0.0.4")

    @app.get(
        "/v1/datasets", response_model=DatasetList, tags=["datasets"], dependencies=[read], responses=_ERRORS
    )
    def list_datasets() -> DatasetList:
        return DatasetList(datasets=[service.dataset_out(name) for name in registry.names()])

    @app.post(
        "/v1/datasets",
        response_model=DatasetOut,
        status_code=201,
        tags=["datasets"],
        dependencies=[admin],
        responses={**_ERRORS, 409: {"model": ErrorOut}},
    )
    def register_dataset(body: DatasetIn) -> DatasetOut:
        if body.dataset is not None and not (config.allow_code_specs and auth.enabled):
            # `admin` let the request this far; with no tokens anyone on this machine is admin.
            raise HTTPException(
                403,
                "a dataset spec is code (it imports a module on this host), and this service takes code "
                "from its config file only: add the dataset to the config file as a [[datasets]] table, "
                "or register data instead (images = a folder). A service started with "
                "--allow-code-specs and tokens takes specs from admin tokens.",
            )
        if registry.get(body.name) is not None:
            raise HTTPException(409, f"dataset {body.name!r} is registered already")
        registry.register({k.replace("_", "-"): v for k, v in body.model_dump().items() if v is not None})
        return service.dataset_out(body.name)

    @app.get(
        "/v1/datasets/{name}",
        response_model=DatasetOut,
        tags=["datasets"],
        dependencies=[read],
        responses=_ERRORS,
    )
    def get_dataset(name: DatasetName) -> DatasetOut:
        return service.dataset_out(known(name))

    @app.get(
        "/v1/datasets/{name}/quarantine",
        tags=["lists"],
        dependencies=[read],
        responses={
            **_ERRORS,
            200: {"model": QuarantineList, "description": "the list (datalint-quarantine/1)"},
            304: {"description": "the list is the one the client has (If-None-Match)"},
        },
    )
    async def quarantine_list(name: DatasetName, request: Request) -> Response:
        # The published list, from a dict: no I/O, no thread hop. Only a dataset that has never had a
        # list waits here for its first build (in a thread, so other requests go on).
        served = registry.lists.current(known(name))
        if served is None:
            served = await asyncio.to_thread(registry.lists.served_list, name)
        if served is None:
            raise HTTPException(
                404, f"dataset {name!r} has no list yet: start a scan (POST /v1/datasets/{name}/scans)"
            )
        headers = {"ETag": served.etag, "Cache-Control": "no-cache", "Vary": "Accept-Encoding"}
        if _matches(served.etag, request.headers.get("if-none-match", "")):
            return Response(status_code=304, headers=headers)
        if served.gzip_parts and "gzip" in request.headers.get("accept-encoding", ""):
            headers["Content-Encoding"] = "gzip"
            return PartsResponse(served.gzip_parts, headers)
        return PartsResponse(served.parts, headers)

    @app.get(
        "/v1/datasets/{name}/report",
        response_class=HTMLResponse,
        tags=["datasets"],
        dependencies=[read],
        responses=_ERRORS,
    )
    def report(name: DatasetName) -> HTMLResponse:
        from datalint.report import ReportOptions, build_report

        index = registry.index_path(known(name))
        if not index.is_file():
            raise HTTPException(404, f"dataset {name!r} has not been scanned yet")
        html, _ = build_report(index, ReportOptions(title=f"datalint report: {name}"))
        match = _CSP_META.search(html)
        csp = match.group(1).replace("&#x27;", "'") if match else "default-src 'none'"
        return HTMLResponse(html, headers={"Content-Security-Policy": csp})

    @app.post(
        "/v1/datasets/{name}/failures",
        response_model=FailuresAccepted,
        tags=["failures"],
        dependencies=[write],
        responses={**_ERRORS, 413: {"model": ErrorOut}, 422: {"model": FailuresRefused}},
        openapi_extra={"requestBody": _json_body(FailureBatch)},
    )
    async def post_failures(name: DatasetName, request: Request) -> Response:
        # Each item is judged on its own: the valid ones are committed, the others refused by name,
        # so one bad item never costs the batch (nor gets the batch replayed forever).
        known(name)
        items = _failure_items(await _json_document(request))
        if len(items) > config.max_batch:
            raise HTTPException(413, f"{len(items)} failures in one batch; the limit is {config.max_batch}")
        valid, refused = _checked_failures(items)
        if valid:
            index_path = registry.index_path(name)
            reasons = await asyncio.to_thread(ingest.refusals_by_index, index_path, valid)
            refused += [_refused(p, f.index, f.key, reasons[p]) for p, f in valid if p in reasons]
            valid = [(p, f) for p, f in valid if p not in reasons]
        refused.sort(key=lambda item: item.position)
        if items and not valid:
            document = FailuresRefused(detail="no failure in the batch was valid", refused=refused)
            return SafeJSONResponse(document.model_dump(), status_code=422)
        accepted = 0
        if valid:
            try:
                rows = [failure for _, failure in valid]
                accepted = await asyncio.wrap_future(service.writer(name).submit(rows))
            except Exception as exc:  # the index could not take them: the client keeps them in its spool
                raise HTTPException(503, f"could not commit the failures: {exc}") from None
        answer = FailuresAccepted(accepted=accepted, committed=True, refused=refused)
        return SafeJSONResponse(answer.model_dump())

    @app.post(
        "/v1/datasets/{name}/failures/clear",
        response_model=FailuresCleared,
        tags=["failures"],
        dependencies=[admin],
        responses=_ERRORS,
    )
    async def clear_failures(
        name: DatasetName,
        body: ClearRequest,
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)],
    ) -> FailuresCleared:
        known(name)
        record = auth.identify(token_of(request, credentials, cookie_ok=False)) if auth.enabled else None
        by = f"admin token {record.name!r}" if record is not None else "an open service (no tokens)"
        future = service.writer(name).clear(body.indexes, by=by, reason=body.reason)
        try:
            cleared = await asyncio.wrap_future(future)
        except Exception as exc:  # the index could not take it: nothing changed
            raise HTTPException(503, f"could not clear the failures: {exc}") from None
        if cleared:
            registry.lists.invalidate(name)
            await asyncio.to_thread(registry.lists.rebuild, name)
            logger.info("dataset %s: %s cleared %d acknowledged failures", name, by, len(cleared))
        return FailuresCleared(cleared=cleared)

    @app.post(
        "/v1/datasets/{name}/scans",
        response_model=JobOut,
        status_code=202,
        tags=["scans"],
        dependencies=[admin],
        responses=_ERRORS,
    )
    def start_scan(name: DatasetName, body: ScanRequest | None = None) -> JobOut:
        # A watched dataset's watcher is paused while the scan runs (one writer per index).
        mode = body.mode if body is not None else "resume"
        assert mode in MODES
        return _job_out(service.jobs.submit(known(name), mode))

    @app.get(
        "/v1/datasets/{name}/scans",
        response_model=JobList,
        tags=["scans"],
        dependencies=[read],
        responses=_ERRORS,
    )
    def dataset_scans(name: DatasetName) -> JobList:
        return JobList(scans=[_job_out(job) for job in service.jobs.jobs(known(name))])

    @app.get("/v1/scans", response_model=JobList, tags=["scans"], dependencies=[read], responses=_ERRORS)
    def all_scans(
        state: Annotated[
            Literal["queued", "running", "succeeded", "failed", "cancelled", "interrupted"] | None, Query()
        ] = None,
    ) -> JobList:
        return JobList(scans=[_job_out(j) for j in service.jobs.jobs() if state is None or j.state == state])

    def job_named(job_id: str) -> Job:
        job = service.jobs.get(job_id)
        if job is None:
            raise HTTPException(404, f"no scan with id {job_id!r}")
        return job

    @app.get(
        "/v1/scans/{job_id}", response_model=JobOut, tags=["scans"], dependencies=[read], responses=_ERRORS
    )
    def get_scan(job_id: JobId) -> JobOut:
        return _job_out(job_named(job_id))

    @app.post(
        "/v1/scans/{job_id}/cancel",
        response_model=JobOut,
        tags=["scans"],
        dependencies=[admin],
        responses=_ERRORS,
    )
    def cancel_scan(job_id: JobId) -> JobOut:
        job_named(job_id)
        job = service.jobs.cancel(job_id)
        assert job is not None
        return _job_out(job)

    @app.get(
        "/v1/scans/{job_id}/events",
        tags=["scans"],
        dependencies=[read],
        responses={**_ERRORS, 200: {"content": {"text/event-stream": {}}, "description": "progress events"}},
    )
    async def scan_events(job_id: JobId, request: Request) -> StreamingResponse:
        job_named(job_id)

        async def events() -> AsyncIterator[str]:
            last = None
            while True:
                job = service.jobs.get(job_id)
                if job is None:
                    return
                data = _job_out(job).model_dump_json()
                if data != last:
                    last = data
                    yield f"event: progress\ndata: {data}\n\n"
                if job.state not in ("queued", "running") or service.stopping:
                    yield f"event: end\ndata: {json.dumps({'state': job.state})}\n\n"
                    return
                if await request.is_disconnected():
                    return
                await asyncio.sleep(0.5)

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )

    return app


class SafeJSONResponse(JSONResponse):
    """JSON that any client can read: ASCII only (a lone surrogate from the request is escaped)."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


def _plain_errors(errors: Any) -> list[dict[str, Any]]:
    """Validation errors without the input (nor anything else that may not be JSON): type, loc, msg."""
    plain = []
    for error in errors:
        location = [
            part if isinstance(part, int) else ascii(str(part))[1:-1] for part in error.get("loc", ())
        ]
        plain.append(
            {"type": str(error.get("type")), "loc": location, "msg": ascii(str(error.get("msg")))[1:-1]}
        )
    return plain


def _json_body(model: type[BaseModel]) -> dict[str, Any]:
    """An OpenAPI request body of `model`, for a route that reads its body itself."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("$defs", None)
    return {"required": True, "content": {"application/json": {"schema": schema}}}


async def _json_document(request: Request) -> Any:
    """The request's JSON; a body that is not JSON (bad UTF-8, nesting too deep) is a 422, as FastAPI
    answers a body it parses."""
    body = await request.body()
    try:
        return json.loads(body)
    except RecursionError:
        reason = "the JSON is nested too deeply"
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        reason = f"JSON decode error: {ascii(str(exc))[1:-1][:200]}"
    raise HTTPException(422, [{"type": "json_invalid", "loc": ["body"], "msg": reason}])


def _failure_items(document: Any) -> list[Any]:
    if not isinstance(document, dict) or not isinstance(document.get("failures"), list):
        raise HTTPException(422, 'expected {"failures": [...]}')
    if set(document) - {"failures"}:
        raise HTTPException(422, f"unknown keys beside failures: {ascii(sorted(map(str, document)))[:200]}")
    return document["failures"]


def _checked_failures(items: list[Any]) -> tuple[list[tuple[int, FailureRecord]], list[RefusedFailure]]:
    """(position, failure) for each valid item; a refusal naming each other one."""
    valid: list[tuple[int, FailureRecord]] = []
    refused: list[RefusedFailure] = []
    for position, item in enumerate(items):
        try:
            failure = FailureIn.model_validate(item)
        except ValidationError as exc:
            reason = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'item'}: {error['msg']}"
                for error in _plain_errors(exc.errors())
            )
            raw = item if isinstance(item, dict) else {}
            refused.append(_refused(position, raw.get("index"), raw.get("key"), reason))
            continue
        fields = failure.model_dump()
        at = fields.pop("time")
        valid.append((position, FailureRecord(**fields, at=at, source="service")))
    return valid, refused


def _refused(position: int, index: Any, key: Any, reason: str) -> RefusedFailure:
    """A refusal that names the item as far as it can be named safely."""
    number = index if isinstance(index, int) and not isinstance(index, bool) and abs(index) < 2**63 else None
    text = key if isinstance(key, str) and len(key) <= 4096 and is_utf8(key) else None
    return RefusedFailure(position=position, index=number, key=text, reason=reason)


def _etags(header: str) -> set[str]:
    return {part.strip().removeprefix("W/") for part in header.split(",") if part.strip()}


def _matches(etag: str, header: str) -> bool:
    """If-None-Match (RFC 9110 13.1.2): `*` or any of the tags, compared weakly."""
    tags = _etags(header)
    return "*" in tags or etag in tags


def _metrics_text(service: Service) -> str:
    jobs = service.jobs.jobs()
    lines = [
        "# HELP datalint_scans_running Scan jobs running now.",
        "# TYPE datalint_scans_running gauge",
        f"datalint_scans_running {sum(j.state == 'running' for j in jobs)}",
        "# HELP datalint_scans_queued Scan jobs waiting for their dataset's running scan.",
        "# TYPE datalint_scans_queued gauge",
        f"datalint_scans_queued {sum(j.state == 'queued' for j in jobs)}",
        "# HELP datalint_scan_samples_per_second Samples measured per second by all running scans.",
        "# TYPE datalint_scan_samples_per_second gauge",
        f"datalint_scan_samples_per_second {service.jobs.samples_per_second:.1f}",
        "# HELP datalint_watchers_running Watchers (watch = true) running now.",
        "# TYPE datalint_watchers_running gauge",
        f"datalint_watchers_running {service.watchers.count_running()}",
        "# HELP datalint_failures_ingested_total Guard failures committed since the service started.",
        "# TYPE datalint_failures_ingested_total counter",
    ]
    names = service.registry.names()
    lines += [
        f'datalint_failures_ingested_total{{dataset="{n}"}} {service.ingested.get(n, 0)}' for n in names
    ]
    lines += [
        "# HELP datalint_quarantined_samples Samples on each dataset's list.",
        "# TYPE datalint_quarantined_samples gauge",
    ]
    lines += [
        f'datalint_quarantined_samples{{dataset="{n}"}} {service.registry.stats(n).quarantined}'
        for n in names
    ]
    return "\n".join(lines) + "\n"


def app_from_config(path: str) -> FastAPI:
    """For `uvicorn --factory`: the app of a config file (tokens read from the file it names)."""
    from datalint.service.config import load_config

    config = load_config(path)
    return create_app(config, Authenticator.from_file(config.tokens))
