"""WebDataset tar shards as a scan source: `datalint scan --webdataset 'shards/train-{000000..000999}.tar'`.

A shard is a plain tar file; a sample is the run of consecutive members that share a key (the
member name up to the first dot of its last path part, webdataset's `__key__`), and each member's
extension after that dot names the field (`jpg`, `cls`, `json`, `seg.png`). The source lists every
shard once, in the process that forks the workers, reading only the 512-byte headers; a worker then
reads a member's bytes straight from its offset, so a sample costs one `pread` per member.

Keys are `<shard path relative to the shards' common folder>/<__key__>`, which
`datalint.webdataset.skip_quarantined` rebuilds from a sample's `__url__` and `__key__`.

Damage is found, never raised: a member whose bytes run past the end of the file is cut (a
`corrupt` finding on its sample), and a shard that stops before its end-of-archive blocks is
truncated (an `unreadable` finding on a sample keyed by the shard itself, saying where the members
it lost began). Members that repeat a name within one sample (two `0001.jpg` in a row) are folded
into it, each measured, and said: in the sample's info (`folded`) and once in the summary. Image
members get the image probes of `--images`; `json`, `cls` and `txt` members
must parse; every member must be non-empty.
"""

from __future__ import annotations

import glob
import json
import mmap
import os
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from datalint.errors import UsageError
from datalint.scan.images import (
    DEFAULT_MAX_PIXELS,
    ImageOptions,
    StderrCapture,
    probe_image_bytes,
    warm_up_decoders,
)

IMAGE_EXTENSIONS = frozenset(
    {"jpg", "jpeg", "jpe", "jfif", "png", "gif", "bmp", "webp", "tif", "tiff", "ppm", "pgm", "pbm", "pnm"}
)
BLOCK = 512

_BRACE = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"^(\d+)\.\.(\d+)$")


def expand_braces(pattern: str) -> list[str]:
    """`a-{000..002}.tar` -> a-000.tar, a-001.tar, a-002.tar; `{x,y}` lists; ranges keep zero padding."""
    match = _BRACE.search(pattern)
    if match is None:
        return [pattern]
    body = match.group(1)
    numeric = _RANGE.match(body)
    if numeric:
        first, last = numeric.groups()
        width = len(first) if first.startswith("0") or len(first) == len(last) else 0
        step = 1 if int(last) >= int(first) else -1
        choices = [str(n).zfill(width) for n in range(int(first), int(last) + step, step)]
    else:
        choices = body.split(",")
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [expanded for choice in choices for expanded in expand_braces(head + choice + tail)]


def shard_paths(pattern: str, flag: str = "--webdataset") -> tuple[str, ...]:
    """The local files a shard pattern names (braces, then globs), sorted, each once."""
    found: set[str] = set()
    missing: list[str] = []
    for expanded in expand_braces(pattern):
        if glob.has_magic(expanded):
            found.update(path for path in glob.glob(expanded) if os.path.isfile(path))
        elif os.path.isfile(expanded):
            found.add(expanded)
        else:
            missing.append(expanded)
    if not found:
        raise UsageError(f"{flag} {pattern!r}: no shard file matches")
    if missing:
        more = f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""
        raise UsageError(f"{flag} {pattern!r}: no such shard: {', '.join(missing[:3])}{more}")
    return tuple(sorted(found))


@dataclass(frozen=True)
class Member:
    extension: str  # after the key's first dot, lower case: "jpg", "seg.png"
    offset: int  # of the data in the shard file
    size: int  # as the header declares it
    available: int  # bytes of it actually in the file (less when the shard is cut inside it)


@dataclass(frozen=True)
class Entry:
    """One sample of the scan: a group of members, or (members empty) a damaged shard itself."""

    shard: int
    key: str
    members: tuple[Member, ...] = ()
    damage: str | None = None  # for a shard-level entry: what is wrong with the shard


@dataclass(frozen=True)
class ShardListing:
    path: str
    groups: tuple[tuple[str, tuple[Member, ...]], ...]
    damage: str | None = None


def split_name(name: str) -> tuple[str, str]:
    """webdataset's rule: `dir/abc.seg.png` -> key `dir/abc`, extension `seg.png`."""
    folder, _, base = name.rpartition("/")
    stem, dot, extension = base.partition(".")
    key = f"{folder}/{stem}" if folder else stem
    return key, extension.lower() if dot else ""


def list_shard(path: str) -> ShardListing:
    """The sample groups of one shard from its headers, and what damage the headers show.

    A whole shard of plain members is read by `_list_plain_shard` (~10x faster than `tarfile`,
    which costs ~45 us a member: 37 h of one scanner's CPU at 1e9 samples of 3 members); anything
    else (damage, GNU long names, sparse files, links, global headers) goes through `tarfile`, so
    what a damaged shard reports does not depend on which reader ran.
    """
    plain = _list_plain_shard(path)
    return plain if plain is not None else _list_with_tarfile(path)


_ZERO_BLOCK = bytes(BLOCK)
_POSIX_MAGIC, _GNU_MAGIC = b"ustar\x0000", b"ustar  \x00"
_FILE_TYPES = (b"0", b"\x00")
_PAX_RECORD = re.compile(rb"(\d+) ([^=]+)=")


def _list_plain_shard(path: str) -> ShardListing | None:
    """The listing of a whole shard whose members are plain files (ustar headers, optionally each
    behind a pax header, as Python's tarfile and webdataset write them) followed by the
    end-of-archive blocks; None at anything else, for `tarfile` to read and judge."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < 3 * BLOCK:
            return None
        # Mapped, the headers are slices: no system call per member.
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return _list_mapped(path, mapped, size)


def _list_mapped(path: str, mapped: mmap.mmap, size: int) -> ShardListing | None:
    groups: list[tuple[str, list[Member]]] = []
    position = end = 0  # the next header; the end of the last file's data (where tarfile looks)
    pax: dict[bytes, bytes] = {}
    while True:
        block = mapped[position : position + BLOCK]
        if len(block) < BLOCK:
            return None
        if block == _ZERO_BLOCK:
            if position == 0 or pax:
                return None
            break
        if block[257:265] not in (_POSIX_MAGIC, _GNU_MAGIC):
            return None
        try:
            checksum = int(block[148:156].split(b"\0", 1)[0].strip() or b"0", 8)
            length = int(block[124:136].split(b"\0", 1)[0].strip() or b"0", 8)
        except ValueError:  # base-256 numbers, garbage: tarfile decides
            return None
        if checksum != 256 + sum(block[:148]) + sum(block[156:]):
            return None
        kind = block[156:157]
        data = position + BLOCK
        if kind == b"x":  # a pax header: its records apply to the next member
            if data + length > size or pax:
                return None
            records = _pax_records(mapped[data : data + length])
            if records is None:
                return None
            pax = records
            position = data + -(-length // BLOCK) * BLOCK
            continue
        name = _header_name(block, pax)
        if name is None:
            return None
        if b"size" in pax:
            length = int(pax[b"size"])
        pax = {}
        if kind == b"5" or (kind == b"\x00" and name.endswith("/")):
            position = data  # a folder: no data
            continue
        if kind not in _FILE_TYPES:
            return None
        end = data + -(-length // BLOCK) * BLOCK
        if end > size:
            return None  # cut: tarfile names the damage
        key, extension = split_name(name)
        member = Member(extension, data, length, length)
        if groups and groups[-1][0] == key:
            groups[-1][1].append(member)
        else:
            groups.append((key, [member]))
        position = end
    # as `_end_damage` looks: two zero blocks right after the last file
    if not groups or mapped[end : end + 2 * BLOCK] != bytes(2 * BLOCK):
        return None
    return ShardListing(path, tuple((key, tuple(members)) for key, members in groups), None)


def _pax_records(data: bytes) -> dict[bytes, bytes] | None:
    """`path` and `size` of a pax header; None for what only tarfile handles (sparse, charsets)."""
    records: dict[bytes, bytes] = {}
    position = 0
    while position < len(data) and data[position] != 0:
        match = _PAX_RECORD.match(data, position)
        if match is None or int(match.group(1)) <= 0:
            return None
        length, keyword = int(match.group(1)), match.group(2)
        value = data[match.end() : position + length - 1]
        if keyword.startswith(b"GNU.sparse") or keyword == b"hdrcharset":
            return None
        records[keyword] = value
        position += length
    if b"size" in records and not records[b"size"].isdigit():
        return None
    return records


def _header_name(block: bytes, pax: dict[bytes, bytes]) -> str | None:
    """The member's name as tarfile decodes it (file system encoding, surrogates for bad bytes)."""
    if b"path" in pax:
        try:
            return pax[b"path"].decode("utf-8").rstrip("/")
        except UnicodeDecodeError:
            return None
    name = block[:100].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
    prefix = block[345:500].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
    return f"{prefix}/{name}" if prefix else name


def _list_with_tarfile(path: str) -> ShardListing:
    size = os.path.getsize(path)
    groups: list[tuple[str, list[Member]]] = []
    damage: str | None = None
    end = 0
    try:
        with tarfile.open(path, mode="r:") as archive:
            for info in archive:
                if not info.isfile():
                    continue
                key, extension = split_name(info.name)
                available = max(0, min(info.size, size - info.offset_data))
                member = Member(extension, info.offset_data, info.size, available)
                if groups and groups[-1][0] == key:
                    groups[-1][1].append(member)
                else:
                    groups.append((key, [member]))
                end = info.offset_data + -(-info.size // BLOCK) * BLOCK
    except (tarfile.TarError, OSError) as exc:
        damage = (
            f"is not a readable tar file ({exc})"
            if not groups
            else f"is unreadable after byte {end} ({exc}): the members after it are lost"
        )
    if damage is None:
        damage = _end_damage(path, end, size)
    return ShardListing(path, tuple((key, tuple(members)) for key, members in groups), damage)


def _end_damage(path: str, end: int, size: int) -> str | None:
    """A whole tar ends with two zero blocks after its last member; anything else lost members."""
    if end > size:
        return f"is truncated: {size} bytes, its last member needs {end}: the members after it are lost"
    with open(path, "rb") as handle:
        handle.seek(end)
        tail = handle.read(2 * BLOCK)
    if len(tail) == 2 * BLOCK and not tail.strip(b"\0"):
        return None
    return (
        f"is truncated at byte {size}, with no end-of-archive after byte {end}: the members after it are lost"
    )


class WebDatasetSource:
    """Tar shards as a source for the scan engine (see the module docstring).

    Description: spec = the shard pattern; options `max_pixels`, `all_frames`.
    """

    def __init__(self, description: Any) -> None:
        self.description = description
        self.paths = shard_paths(description.spec)
        common = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in self.paths])
        self.names = tuple(
            os.path.relpath(os.path.abspath(p), common).replace(os.sep, "/") for p in self.paths
        )
        self.options = ImageOptions(
            max_pixels=int(description.option("max_pixels", DEFAULT_MAX_PIXELS)),
            all_frames=bool(description.option("all_frames", False)),
        )
        self._folded: list[tuple[str, int]] = []  # (a sample's key, members whose name it held already)
        self.entries = tuple(self._entries())
        self._capture: StderrCapture | None = None
        self._capture_pid = 0
        self._open: tuple[int, int, int] | None = None  # (process, shard, descriptor)
        if self.entries:
            warm_up_decoders()

    def _entries(self) -> Iterator[Entry]:
        for number, path in enumerate(self.paths):
            listing = list_shard(path)
            for key, members in listing.groups:
                entry = Entry(number, f"{self.names[number]}/{key}", members)
                if _repeated(members):
                    self._folded.append((entry.key, sum(_repeated(members).values())))
                yield entry
            if listing.damage is not None:
                yield Entry(number, self.names[number], damage=listing.damage)

    def __len__(self) -> int:
        return len(self.entries)

    def shard_starts(self) -> tuple[int, ...]:
        """The first entry of each shard that has any (entries are listed shard by shard)."""
        starts: list[int] = []
        previous = -1
        for index, entry in enumerate(self.entries):
            if entry.shard != previous:
                starts.append(index)
                previous = entry.shard
        return tuple(starts)

    def key(self, index: int) -> str:
        return self.entries[index].key

    def listing_notes(self) -> tuple[str, ...]:
        """What the listing folded: members repeating a name in one sample (two `0001.jpg` in a row)."""
        if not self._folded:
            return ()
        key, extra = self._folded[0]
        members = sum(extra for _, extra in self._folded)
        return (
            f"{members:,} tar member(s) repeat a name their sample already has and were folded into "
            f"{len(self._folded):,} sample(s) (the first: {key}, {extra} more): each member is measured, "
            "but webdataset's loader stops at such a sample ('duplicate file name in tar file') or, with "
            "a handler that goes on, keeps one; each sample's info says how many (`folded`)",
        )

    def measure(self, index: int) -> dict[str, Any]:
        entry = self.entries[index]
        if entry.damage is not None:
            detail = f"shard {self.names[entry.shard]} {entry.damage}"
            return {
                "info": {"shard": self.names[entry.shard]},
                "findings": [{"kind": "unreadable", "detail": detail}],
            }
        if self._capture is None or self._capture_pid != os.getpid():
            self._capture, self._capture_pid = StderrCapture(), os.getpid()
        findings: list[dict[str, str]] = []
        info: dict[str, Any] = {"shard": self.names[entry.shard], "members": {}}
        descriptor = self._descriptor(entry.shard)
        for member in entry.members:
            data = os.pread(descriptor, member.available, member.offset) if member.available else b""
            info["members"][member.extension] = member.size
            findings.extend(self._member_findings(member, data, info))
        repeated = _repeated(entry.members)
        if repeated:  # {"jpg": 1}: one member more than the one `.jpg` a sample holds
            info["folded"] = repeated
        return {"info": info, "findings": findings}

    def _descriptor(self, shard: int) -> int:
        """One open shard per process: a worker's chunk of samples mostly lies in one shard."""
        if self._open is not None and self._open[:2] == (os.getpid(), shard):
            return self._open[2]
        if self._open is not None and self._open[0] == os.getpid():
            os.close(self._open[2])
        descriptor = os.open(self.paths[shard], os.O_RDONLY)
        self._open = (os.getpid(), shard, descriptor)
        return descriptor

    def _member_findings(self, member: Member, data: bytes, info: dict[str, Any]) -> list[dict[str, str]]:
        name = f"member .{member.extension}"
        if len(data) < member.size:
            return [
                {"kind": "corrupt", "detail": f"{name} cut: {len(data)} of {member.size} bytes in the shard"}
            ]
        last = member.extension.rpartition(".")[2]
        if last in IMAGE_EXTENSIONS:
            assert self._capture is not None
            probe = probe_image_bytes(data, "." + last, self.options, self._capture)
            measured = probe.measurement()
            if "file_bytes" not in info:  # the first image member's facts, where an image file's are
                info.update(measured["info"])  # (the policy's duplicates, quality kinds and shapes read them)
            return [{"kind": f["kind"], "detail": f"{name}: {f['detail']}"} for f in measured["findings"]]
        if not data:
            return [{"kind": "empty", "detail": f"{name} is empty (0 bytes)"}]
        problem = decode_problem(last, data)
        return [] if problem is None else [{"kind": "corrupt", "detail": f"{name}: {problem}"}]


def _repeated(members: tuple[Member, ...]) -> dict[str, int]:
    """Per extension, the members of one sample past the first of that name."""
    seen: dict[str, int] = {}
    for member in members:
        seen[member.extension] = seen.get(member.extension, 0) + 1
    return {extension: count - 1 for extension, count in seen.items() if count > 1}


def decode_problem(extension: str, data: bytes) -> str | None:
    """Why a non-image member does not decode as its extension says, or None (unknown ones pass)."""
    if extension not in {"json", "cls", "txt"}:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text (byte {exc.start})"
    if extension == "json":
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            return f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
    elif extension == "cls":
        try:
            int(text.strip())
        except ValueError:
            return f"a .cls member must hold an integer class, got {text.strip()[:40]!r}"
    return None


def webdataset_description(
    pattern: str, *, max_pixels: int = DEFAULT_MAX_PIXELS, all_frames: bool = False
) -> Any:
    """The SourceDescription of a shard scan; a pattern that names no file is a usage error."""
    from datalint.scan.sources import SourceDescription

    shard_paths(pattern)  # fail here, with exit 2, rather than in the first worker
    return SourceDescription.make("webdataset", pattern, max_pixels=max_pixels, all_frames=all_frames)
