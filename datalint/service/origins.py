"""Who may ask: the `Host` a request names, the page a state-changing request comes from, and the body
type of a JSON endpoint, checked before routing (plain ASGI).

- **DNS rebinding.** A page on `evil.example` can point its name at 127.0.0.1 and have the user's browser
  call the service as its own origin. Such a request still names `evil.example` in `Host`: only the
  bound address, `localhost`, loopback addresses and the names in `[service] allowed-hosts` are served
  (421 otherwise). An IP literal cannot be rebound, so on a wildcard bind any IP literal is served.
- **Cross-site writes.** A browser sends `Origin` (or at least `Referer`) with a cross-site POST: a
  state-changing request from any origin but the service's own or one in `[service] allowed-origins`
  gets 403. Clients that are not browsers send neither and are judged by their token alone.
- **Forms.** A form can POST only `application/x-www-form-urlencoded`, `multipart/form-data` or
  `text/plain` without a CORS preflight (and CORS is off): the JSON endpoints take `application/json`
  only (415), so no form reaches them. `/login` is the one form, and carries a CSRF token.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from datalint.service.config import ServiceConfig, is_loopback

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_WILDCARDS = frozenset({"0.0.0.0", "::", ""})
_FORM_PATHS = frozenset({"/login"})  # the UI's own forms (with a CSRF token of their own)


def host_name(header: str) -> str | None:
    """The name or address of a `Host` header (`[::1]:8765` -> `::1`), lower case; None if malformed."""
    text = header.strip().lower()
    if not text:
        return None
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or (text[end + 1 :] and not _is_port(text[end + 1 :])):
            return None
        return text[1:end]
    name, colon, port = text.rpartition(":")
    if colon and ":" not in name:
        return name if name and (port == "" or port.isdigit()) else None
    return text


def _is_port(text: str) -> bool:
    return text.startswith(":") and text[1:].isdigit()


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


class Origins:
    """The hosts and origins one service answers, from its config."""

    def __init__(self, config: ServiceConfig) -> None:
        self.bound = config.host.strip("[]").lower()
        self.hosts = frozenset(config.allowed_hosts)
        self.origins = frozenset(config.allowed_origins)

    def host_allowed(self, name: str) -> bool:
        if name == self.bound or name in self.hosts or is_loopback(name):
            return True
        return self.bound in _WILDCARDS and _ip(name) is not None

    def origin_allowed(self, origin: str, host_header: str, scheme: str) -> bool:
        """`origin` is the service's own (the scheme and `Host` the request was sent to) or allowed."""
        parts = urlsplit(origin.strip().lower())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False  # "null" (a sandboxed page, a file), or not an origin at all
        named = f"{parts.scheme}://{parts.netloc}"
        return named == f"{scheme}://{host_header.strip().lower()}" or named in self.origins


class RequestGate:
    """Refuse, before routing, what a hostile page could send through the user's browser."""

    def __init__(self, app: Any, origins: Origins) -> None:
        self.app = app
        self.origins = origins

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, detail = refusal
        await send_json(send, status, {"detail": detail})

    def refusal(self, scope: dict[str, Any]) -> tuple[int, str] | None:
        headers = _headers(scope.get("headers") or ())
        host = headers.get("host")
        name = host_name(host) if host is not None else None
        if host is None or name is None:
            return 400, "a request must name this service in a well-formed Host header"
        if not self.origins.host_allowed(name):
            return 421, (
                f"Host {_quoted(host)} is not this service's name: only its bound address, localhost, "
                "loopback addresses and the names in [service] allowed-hosts are served (this refuses "
                "pages that rebind their DNS name to this machine)"
            )
        if scope["method"] not in STATE_CHANGING:
            return None
        assert host is not None
        source = headers.get("origin") or _referer_origin(headers.get("referer"))
        if source is not None and not self.origins.origin_allowed(source, host, scope.get("scheme", "http")):
            return 403, (
                f"a state-changing request from {_quoted(source)} is refused: only this service's own "
                "pages and the origins in [service] allowed-origins may send one"
            )
        if scope["path"] in _FORM_PATHS:
            return None
        return _body_type_refusal(headers)


def _body_type_refusal(headers: dict[str, str]) -> tuple[int, str] | None:
    """JSON endpoints take `application/json`; no type is fine only for an empty body."""
    declared = headers.get("content-type")
    if declared is None:
        length = headers.get("content-length", "0").strip()
        if length in ("", "0") and "transfer-encoding" not in headers:
            return None
        return 415, "send the body as JSON with Content-Type: application/json"
    media = declared.split(";", 1)[0].strip().lower()
    if media == "application/json":
        return None
    return 415, f"Content-Type {_quoted(declared)} is not accepted here: send JSON as application/json"


_WANTED = frozenset(
    {b"host", b"origin", b"referer", b"content-type", b"content-length", b"transfer-encoding"}
)


def _headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """The headers the gate reads, by lower-case name, decoded as HTTP/1.1 allows (Latin-1); the first
    of repeated ones, except that a repeated Host or Origin is malformed and kept as such. (Only
    these: every request passes here, a 304 included.)"""
    headers: dict[str, str] = {}
    for name, value in raw:
        lowered = name.lower()
        if lowered not in _WANTED:
            continue
        key, text = lowered.decode("latin-1"), value.decode("latin-1")
        if key in headers and key in ("host", "origin"):
            headers[key] = "\x00"  # two Hosts: not a name any check accepts
        else:
            headers.setdefault(key, text)
    return headers


def _referer_origin(referer: str | None) -> str | None:
    if referer is None:
        return None
    parts = urlsplit(referer.strip())
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else "null"


def _quoted(text: str) -> str:
    """A client's header in a message: quoted, printable, never long."""
    return ascii(text[:200])


async def send_json(
    send: Any, status: int, document: Any, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps(document, ensure_ascii=True).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
