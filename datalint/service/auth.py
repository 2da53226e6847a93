"""Bearer tokens with scopes, stored hashed (`tokens.toml`), compared in constant time.

A token is 32 random bytes (`secrets.token_urlsafe`), shown once by `datalint serve token add NAME` and
never stored: the file keeps its SHA-256. A slow password hash (bcrypt, scrypt) protects guessable
secrets; a 256-bit random token cannot be guessed, so one SHA-256 per request is enough, and it keeps
authentication off the ingest path's latency. Every stored hash is compared with
`hmac.compare_digest`, all of them, so the time taken says nothing about which one matched.

Scopes: `read` (lists, reports, status), `write` (guard failures), `admin` (datasets, scans; admin
also grants read and write).

The running service re-reads the file when it changes (one `os.stat` at most every `CHECK_EVERY_S`)
and on SIGHUP, so a removed or expired token is refused without a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
import time
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from datalint.errors import UsageError
from datalint.files import write_atomically
from datalint.service.config import ConfigError, valid_name

SCOPES = ("read", "write", "admin")
PREFIX = "dl_"
CHECK_EVERY_S = 0.5  # a changed token file is seen by the first request this long after the last look
_KEYS = ("name", "hash", "scopes", "created", "expires")

logger = logging.getLogger("datalint.service.auth")


@dataclass(frozen=True)
class TokenRecord:
    name: str
    digest: str  # "sha256:<hex>"
    scopes: frozenset[str]
    created: str | None = None
    expires: datetime | None = None  # refused from this moment on

    def expired(self, now: datetime | None = None) -> bool:
        return self.expires is not None and (now or datetime.now(UTC)) >= self.expires


def digest_of(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode("utf-8")).hexdigest()


def parse_scopes(text: str) -> frozenset[str]:
    scopes = frozenset(part.strip() for part in text.split(",") if part.strip())
    unknown = sorted(scopes - set(SCOPES))
    if unknown or not scopes:
        raise UsageError(f"--scopes: expected a comma-separated subset of {','.join(SCOPES)}, got {text!r}")
    return scopes


def load_tokens(path: Path) -> tuple[TokenRecord, ...]:
    """The token file; a missing one is an empty set (the service then refuses non-loopback hosts)."""
    if not path.exists():
        return ()
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the token file: {exc}") from None
    entries = document.get("tokens", [])
    if not isinstance(entries, list) or set(document) - {"tokens"}:
        raise ConfigError(f"{path}: expected only [[tokens]] tables")
    return tuple(_record(entry, f"{path}: tokens[{n}]") for n, entry in enumerate(entries))


def _record(entry: object, where: str) -> TokenRecord:
    if not isinstance(entry, dict) or set(entry) - set(_KEYS):
        raise ConfigError(f"{where}: expected the keys {', '.join(_KEYS)}")
    name, digest, scopes = entry.get("name"), entry.get("hash"), entry.get("scopes")
    if not valid_name(name):
        raise ConfigError(f"{where}.name: expected a token name, got {name!r}")
    if not isinstance(digest, str) or not digest.startswith("sha256:") or len(digest) != 71:
        raise ConfigError(f"{where}.hash: expected 'sha256:' and 64 hex digits")
    if not isinstance(scopes, list) or not scopes or not set(scopes) <= set(SCOPES):
        raise ConfigError(f"{where}.scopes: expected a list of {', '.join(SCOPES)}")
    created = entry.get("created")
    assert isinstance(name, str)
    return TokenRecord(
        name,
        digest,
        frozenset(scopes),
        created if isinstance(created, str) else None,
        _expiry(entry.get("expires"), where),
    )


def _expiry(value: object, where: str) -> datetime | None:
    if value is None:
        return None
    moment = value if isinstance(value, datetime) else None  # an unquoted TOML date-time
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            moment = None
    if moment is None or moment.tzinfo is None:
        raise ConfigError(
            f"{where}.expires: expected an ISO-8601 time with its offset, such as "
            f"'2027-01-31T12:00:00+00:00', got {value!r}"
        )
    return moment.astimezone(UTC)


def add_token(
    path: Path, name: str, scopes: frozenset[str], created: str, expires: datetime | None = None
) -> str:
    """Add a new token's hash to `path` (created if absent, mode 0600) and return the token. The file
    is replaced whole, so a running service never reads half an entry."""
    if not valid_name(name):
        raise UsageError(f"token name {name!r}: expected letters, digits, '-' or '_'")
    existing = load_tokens(path)
    if any(record.name == name for record in existing):
        raise UsageError(
            f"{path}: a token named {name!r} exists already (`datalint serve token remove {name}` first)"
        )
    token = PREFIX + secrets.token_urlsafe(32)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    entry = _entry(TokenRecord(name, digest_of(token), scopes, created, expires))
    _write_private(path, text + "\n" + entry)
    return token


def remove_token(path: Path, name: str) -> TokenRecord:
    """Rewrite `path` without the token `name` (comments in the file are not kept); the removed record."""
    records = load_tokens(path)
    removed = next((record for record in records if record.name == name), None)
    if removed is None:
        names = ", ".join(record.name for record in records) or "none"
        raise UsageError(f"{path}: no token named {name!r} (the tokens there: {names})")
    kept = [_entry(record) for record in records if record is not removed]
    _write_private(path, "\n".join(kept))
    return removed


def _entry(record: TokenRecord) -> str:
    lines = [
        "[[tokens]]",
        f"name = {json.dumps(record.name)}",
        f"hash = {json.dumps(record.digest)}",
        f"scopes = [{', '.join(json.dumps(scope) for scope in sorted(record.scopes))}]",
    ]
    if record.created is not None:
        lines.append(f"created = {json.dumps(record.created)}")
    if record.expires is not None:
        lines.append(f"expires = {json.dumps(record.expires.isoformat(timespec='seconds'))}")
    return "\n".join(lines) + "\n"


def _write_private(path: Path, text: str) -> None:
    """Replace `path` with `text` in one rename, as a file only its owner can read (0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, text, mode=0o600)


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size, stat.st_ino


class Authenticator:
    """Decides whether a request's bearer token grants a scope. No tokens configured: everything is open
    (only allowed on a loopback address). Given the token file's `path`, it follows the file: a token
    removed from it, or past its `expires`, is refused from the next look on."""

    def __init__(self, records: tuple[TokenRecord, ...], path: Path | None = None) -> None:
        self.records = records
        self.path = path
        # once any token was configured the service stays closed: a file emptied (or deleted) while it
        # runs refuses every request rather than opening the API
        self._closed = bool(records)
        self._signature = _signature(path) if path else None
        self._looked = time.monotonic()
        self._reload_asked = False
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: Path | None) -> Authenticator:
        """The tokens of `path` (None: no token file, an open service), followed as it changes."""
        if path is None:
            return cls(())
        signature = _signature(path)  # before reading: a change while reading is seen next time
        authenticator = cls(load_tokens(path), path)
        authenticator._signature = signature
        return authenticator

    @property
    def enabled(self) -> bool:
        self.refresh()
        return self._closed

    def reload_soon(self) -> None:
        """Read the file at the next request whatever its stat says (SIGHUP)."""
        self._reload_asked = True
        self.refresh()

    def refresh(self) -> None:
        """Re-read the token file if its stat changed (looked at most every CHECK_EVERY_S) or a reload
        was asked. A file that cannot be read keeps the last good tokens, with one error logged."""
        if self.path is None:
            return
        now = time.monotonic()
        if not self._reload_asked and now - self._looked < CHECK_EVERY_S:
            return
        if not self._lock.acquire(blocking=False):
            return  # another thread is looking now (or a signal came in while this one was)
        try:
            self._looked = now
            asked, self._reload_asked = self._reload_asked, False
            signature = _signature(self.path)
            if signature == self._signature and not asked:
                return
            self._signature = signature
            self._reload(self.path)
        finally:
            self._lock.release()

    def _reload(self, path: Path) -> None:
        try:
            records = load_tokens(path)
        except ConfigError as exc:
            logger.error("%s; the tokens read before stay in force until the file is fixed", exc)
            return
        if not records and self._closed:
            logger.warning("%s has no tokens: every request that needs one is refused", path)
        self.records = records
        self._closed = self._closed or bool(records)
        logger.info("read %d tokens from %s", len(records), path)

    def _matching(self, token: str | None) -> TokenRecord | None:
        if token is None:
            return None
        presented = digest_of(token)
        found = None
        for record in self.records:
            if hmac.compare_digest(presented, record.digest):
                found = record
        return found

    def identify(self, token: str | None) -> TokenRecord | None:
        """The record whose hash matches `token` (comparing against every record), unless it expired."""
        self.refresh()
        record = self._matching(token)
        return None if record is None or record.expired() else record

    def refusal(self, token: str | None) -> str:
        """Why `token` is not accepted, for a 401's message."""
        record = self._matching(token)
        if record is not None and record.expired():
            return (
                f"the token {record.name!r} expired at {record.expires:%Y-%m-%d %H:%M:%S} UTC; "
                "ask for a new one"
            )
        return "a valid token is required (Authorization: Bearer TOKEN)"

    def allows(self, token: str | None, scope: str) -> bool | None:
        """True: granted; False: a valid token without the scope; None: no valid (or an expired) token."""
        if not self.enabled:
            return True
        record = self.identify(token)
        if record is None:
            return None
        return scope in record.scopes or "admin" in record.scopes
