"""Bearer tokens with scopes, stored hashed (`tokens.toml`), compared in constant time.

A token is 32 random bytes (`secrets.token_urlsafe`), shown once by `datalint serve token add NAME` and
never stored: the file keeps its SHA-256. A slow password hash (bcrypt, scrypt) protects guessable
secrets; a 256-bit random token cannot be guessed, so one SHA-256 per request is enough, and it keeps
authentication off the ingest path's latency. Every stored hash is compared with
`hmac.compare_digest`, all of them, so the time taken says nothing about which one matched.

Scopes: `read` (lists, reports, status), `write` (guard failures), `admin` (datasets, scans; admin
also grants read and write).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import tomllib
from dataclasses import dataclass
from pathlib import Path

from datalint.errors import UsageError
from datalint.service.config import ConfigError, valid_name

SCOPES = ("read", "write", "admin")
PREFIX = "dl_"


@dataclass(frozen=True)
class TokenRecord:
    name: str
    digest: str  # "sha256:<hex>"
    scopes: frozenset[str]
    created: str | None = None


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
    records = []
    for n, entry in enumerate(entries):
        where = f"{path}: tokens[{n}]"
        if not isinstance(entry, dict) or set(entry) - {"name", "hash", "scopes", "created"}:
            raise ConfigError(f"{where}: expected the keys name, hash, scopes, created")
        name, digest, scopes = entry.get("name"), entry.get("hash"), entry.get("scopes")
        if not valid_name(name):
            raise ConfigError(f"{where}.name: expected a token name, got {name!r}")
        if not isinstance(digest, str) or not digest.startswith("sha256:") or len(digest) != 71:
            raise ConfigError(f"{where}.hash: expected 'sha256:' and 64 hex digits")
        if not isinstance(scopes, list) or not scopes or not set(scopes) <= set(SCOPES):
            raise ConfigError(f"{where}.scopes: expected a list of {', '.join(SCOPES)}")
        created = entry.get("created")
        assert isinstance(name, str)
        records.append(
            TokenRecord(name, digest, frozenset(scopes), created if isinstance(created, str) else None)
        )
    return tuple(records)


def add_token(path: Path, name: str, scopes: frozenset[str], created: str) -> str:
    """Append a new token's hash to `path` (created if absent, mode 0600) and return the token."""
    if not valid_name(name):
        raise UsageError(f"token name {name!r}: expected letters, digits, '-' or '_'")
    existing = load_tokens(path)
    if any(record.name == name for record in existing):
        raise UsageError(f"{path}: a token named {name!r} exists already (remove it from the file first)")
    token = PREFIX + secrets.token_urlsafe(32)
    entry = (
        f'\n[[tokens]]\nname = "{name}"\nhash = "{digest_of(token)}"\n'
        f"scopes = [{', '.join(f'{s!r}'.replace(chr(39), chr(34)) for s in sorted(scopes))}]\n"
        f'created = "{created}"\n'
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(descriptor, "a", encoding="utf-8") as handle:
        handle.write(entry)
    return token


class Authenticator:
    """Decides whether a request's bearer token grants a scope. No tokens configured: everything is open
    (only allowed on a loopback address)."""

    def __init__(self, records: tuple[TokenRecord, ...]) -> None:
        self.records = records

    @property
    def enabled(self) -> bool:
        return bool(self.records)

    def identify(self, token: str | None) -> TokenRecord | None:
        """The record whose hash matches `token`, comparing against every record."""
        if token is None:
            return None
        presented = digest_of(token)
        found = None
        for record in self.records:
            if hmac.compare_digest(presented, record.digest):
                found = record
        return found

    def allows(self, token: str | None, scope: str) -> bool | None:
        """True: granted; False: a valid token without the scope; None: no valid token."""
        if not self.enabled:
            return True
        record = self.identify(token)
        if record is None:
            return None
        return scope in record.scopes or "admin" in record.scopes
