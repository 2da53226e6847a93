"""Image bytes in Parquet files as a scan source: `datalint scan --parquet 'part-*.parquet' --column image`.

img2dataset and Hugging Face `datasets` keep images as bytes in a column: a binary column, or a
struct with a `bytes` field (the `datasets` Image feature). The source reads each file's footer once
in the process that forks the workers; a worker reads one row group of the image column at a time
and keeps it while its chunk of rows lies in it, so a file is read about once.

Keys are `<file relative to the files' common folder>#<row>` (the row within the file), or the
value of `--key-column`. A file whose footer cannot be read, or that lacks the image column or holds
another type there (when other files of the set have it), is one `unreadable` finding, keyed by the
file; a row group that cannot be read (a corrupt page, a failed page checksum) makes every row
of it a `corrupt` finding naming the row group; the scan goes on. Every value gets the image probes
of `--images`; a null or empty value is `empty`.
"""

from __future__ import annotations

import bisect
import os
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
from datalint.scan.webdataset import shard_paths


@dataclass(frozen=True)
class ParquetPart:
    path: str
    name: str
    group_rows: tuple[int, ...] = ()  # rows per row group
    damage: str | None = None  # the footer could not be read, or no image column: the file is one entry
    footer_read: bool = True

    @property
    def rows(self) -> int:
        return sum(self.group_rows) if self.damage is None else 1


def _open(path: str) -> Any:
    """The file for reading, to use in a `with`: its descriptor is closed on leaving it, not when
    pyarrow's reader is collected (its read-ahead can hold it past the sample that opened it, which
    the scan would report as that sample's `fd_leak`)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path, page_checksum_verification=True)


def read_part(path: str, name: str, column: str) -> ParquetPart:
    try:
        with _open(path) as opened:
            metadata, schema = opened.metadata, opened.schema_arrow
    except Exception as exc:  # per-file boundary: pyarrow raises ArrowInvalid, OSError, ...
        damage = f"is not a readable Parquet file ({type(exc).__name__}: {exc})"
        return ParquetPart(path, name, damage=damage, footer_read=False)
    unusable = _unusable_column(schema, column)
    if unusable is not None:
        return ParquetPart(path, name, damage=unusable)
    return ParquetPart(
        path, name, tuple(metadata.row_group(g).num_rows for g in range(metadata.num_row_groups))
    )


def _unusable_column(schema: Any, column: str) -> str | None:
    """Why this file's `column` holds no image bytes (None when it may): missing, or another type.

    One file of a set written by another job (a renamed column, paths instead of bytes) is that
    file's finding; it used to stop the whole scan."""
    import pyarrow as pa

    if column not in schema.names:
        return f"has no column {column!r} (its columns: {', '.join(schema.names)})"
    kind = schema.field(column).type
    if pa.types.is_struct(kind) and kind.get_field_index("bytes") >= 0:
        kind = kind.field("bytes").type
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        return None
    if pa.types.is_null(kind):
        return None  # every value null: each row is `empty`
    return f"holds {kind} in column {column!r}, not image bytes (binary, or a struct with a `bytes` field)"


class ParquetSource:
    """Parquet files as a source (see the module docstring). Options: `column`, `key_column`,
    `max_pixels`, `all_frames`."""

    def __init__(self, description: Any) -> None:
        from datalint.extras import require

        require("parquet", "scanning Parquet files")
        self.description = description
        self.column: str = description.option("column", "image")
        self.key_column: str | None = description.option("key_column")
        paths = shard_paths(description.spec, flag="--parquet")
        common = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths])
        self.parts = tuple(
            read_part(p, os.path.relpath(os.path.abspath(p), common).replace(os.sep, "/"), self.column)
            for p in paths
        )
        self._unkeyed: list[str] = []  # files without the key column
        self._check_column()
        self._starts: list[int] = []
        total = 0
        for part in self.parts:
            self._starts.append(total)
            total += part.rows
        self._length = total
        self._keys = self._read_keys() if self.key_column else None
        self.options = ImageOptions(
            max_pixels=int(description.option("max_pixels", DEFAULT_MAX_PIXELS)),
            all_frames=bool(description.option("all_frames", False)),
        )
        self._capture: StderrCapture | None = None
        self._capture_pid = 0
        self._group: tuple[int, int, Any] | None = None  # (part, row group, its values or the error)
        if total:
            warm_up_decoders()

    def _check_column(self) -> None:
        """A column no file can give is a usage error (a misspelt `--column`); one file is its finding."""
        usable = [part for part in self.parts if part.damage is None]
        readable = [part for part in self.parts if part.footer_read]
        if readable and not usable:
            raise UsageError(f"{readable[0].name} {readable[0].damage}; give the image column with --column")
        if self.key_column is None:
            return
        for part in usable:
            with _open(part.path) as opened:
                names = opened.schema_arrow.names
            if self.key_column not in names:
                self._unkeyed.append(part.name)
        if self._unkeyed and len(self._unkeyed) == len(usable):  # a misspelt --key-column
            raise UsageError(
                f"{usable[-1].name} has no column {self.key_column!r}; its columns: {', '.join(names)}"
            )

    def listing_notes(self) -> tuple[str, ...]:
        """Files of the set without the key column: their rows are keyed by file and row."""
        if not self._unkeyed:
            return ()
        return (
            f"{len(self._unkeyed):,} file(s) have no column {self.key_column!r} (the first: "
            f"{self._unkeyed[0]}): their rows are keyed FILE#ROW, so a list of keys does not match "
            "them as it matches the others",
        )

    def _read_keys(self) -> list[str]:
        keys: list[str] = []
        for part in self.parts:
            if part.damage is not None:
                keys.append(part.name)
                continue
            try:
                with _open(part.path) as opened:
                    values = opened.read(columns=[self.key_column]).column(0).to_pylist()
            except Exception:  # a damaged key column: fall back to row numbers for this file
                values = [None] * part.rows
            keys.extend(f"{part.name}#{row}" if v is None else str(v) for row, v in enumerate(values))
        return keys

    def __len__(self) -> int:
        return self._length

    def shard_starts(self) -> tuple[int, ...]:
        """The first row of each file (a damaged file is one entry); files without rows are left out."""
        return tuple(sorted(set(start for start in self._starts if start < self._length)))

    def _locate(self, index: int) -> tuple[int, int]:
        number = bisect.bisect_right(self._starts, index) - 1
        return number, index - self._starts[number]

    def key(self, index: int) -> str:
        if self._keys is not None:
            return self._keys[index]
        number, row = self._locate(index)
        part = self.parts[number]
        return part.name if part.damage is not None else f"{part.name}#{row}"

    def measure(self, index: int) -> dict[str, Any]:
        number, row = self._locate(index)
        part = self.parts[number]
        if part.damage is not None:
            detail = f"file {part.name} {part.damage}: its rows are not scanned"
            return {"info": {"file": part.name}, "findings": [{"kind": "unreadable", "detail": detail}]}
        group, within = _group_of(part.group_rows, row)
        values = self._row_group(number, group)
        info: dict[str, Any] = {"file": part.name, "row": row, "row_group": group}
        if isinstance(values, Exception):
            detail = f"row group {group} of {part.name} cannot be read ({type(values).__name__}: {values})"
            return {"info": info, "findings": [{"kind": "corrupt", "detail": detail}]}
        data = _image_bytes(values[within])
        if not data:
            return {
                "info": info,
                "findings": [{"kind": "empty", "detail": f"column {self.column!r} is null or empty"}],
            }
        if self._capture is None or self._capture_pid != os.getpid():
            self._capture, self._capture_pid = StderrCapture(), os.getpid()
        measured = probe_image_bytes(data, "", self.options, self._capture).measurement()
        return {"info": {**info, **measured["info"]}, "findings": measured["findings"]}

    def _row_group(self, number: int, group: int) -> Any:
        if self._group is None or self._group[:2] != (number, group):
            try:
                with _open(self.parts[number].path) as opened:
                    table = opened.read_row_group(group, columns=[self.column])
                values: Any = table.column(0).to_pylist()
            except Exception as exc:  # per-row-group boundary: a corrupt page loses this group only
                values = exc
            self._group = (number, group, values)
        return self._group[2]


def _group_of(group_rows: tuple[int, ...], row: int) -> tuple[int, int]:
    for group, rows in enumerate(group_rows):
        if row < rows:
            return group, row
        row -= rows
    raise IndexError(row)


def _image_bytes(value: Any) -> bytes | None:
    """bytes from a binary column, or from a `{"bytes": ..., "path": ...}` struct (datasets' Image)."""
    if isinstance(value, dict):
        value = value.get("bytes")
    return bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else None


def parquet_description(
    pattern: str,
    *,
    column: str,
    key_column: str | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    all_frames: bool = False,
) -> Any:
    from datalint.extras import require
    from datalint.scan.sources import SourceDescription

    require("parquet", "scanning Parquet files")
    shard_paths(pattern, flag="--parquet")
    return SourceDescription.make(
        "parquet", pattern, column=column, key_column=key_column, max_pixels=max_pixels, all_frames=all_frames
    )
