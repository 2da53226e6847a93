"""The fast shard listing reads what `tarfile` reads, and hands every other archive to `tarfile`."""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path

import pytest

from datalint.scan.webdataset import _list_plain_shard, _list_with_tarfile, list_shard
from tests.shards.shard_support import good_sample, jpeg, write_faulty_shards


def write_tar(path: Path, members: list[tuple[str, bytes]], fmt: int, *, folder: str | None = None) -> Path:
    with tarfile.open(path, "w", format=fmt) as archive:
        if folder is not None:
            info = tarfile.TarInfo(folder)
            info.type = tarfile.DIRTYPE
            archive.addfile(info)
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = time.time()  # a float, as webdataset's TarWriter sets it: a pax header per member
            archive.addfile(info, io.BytesIO(data))
    return path


def members(prefix: str = "", count: int = 3) -> list[tuple[str, bytes]]:
    made = []
    for n in range(count):
        sample = good_sample(f"{prefix}s{n:04d}", n)
        made.extend(
            (f"{prefix}s{n:04d}.{extension}", data)
            for extension, data in sample.items()
            if extension != "__key__"
        )
    return made


def plain_archives(folder: Path) -> list[Path]:
    long = "a-folder-name-long-enough-to-need-more-than-the-hundred-bytes-of-a-ustar-name/" * 2
    return [
        write_tar(folder / "ustar.tar", members(), tarfile.USTAR_FORMAT),
        write_tar(folder / "pax.tar", members(), tarfile.PAX_FORMAT),
        write_tar(folder / "pax-long.tar", members(long) + members("dossier-é/"), tarfile.PAX_FORMAT),
        write_tar(folder / "gnu-short.tar", members(), tarfile.GNU_FORMAT),
        write_tar(
            folder / "ustar-prefix.tar", members("x" * 60 + "/" + "y" * 60 + "/"), tarfile.USTAR_FORMAT
        ),
        write_tar(folder / "with-folder.tar", members("d/"), tarfile.USTAR_FORMAT, folder="d"),
        write_tar(folder / "empty-member.tar", [("e.txt", b""), ("e.cls", b"1")], tarfile.USTAR_FORMAT),
    ]


def other_archives(folder: Path) -> list[Path]:
    """Archives the fast reader must hand to tarfile: damage, GNU long names, links, odd ends."""
    long = "n" * 120 + "/"
    gnu_long = write_tar(folder / "gnu-long.tar", members(long), tarfile.GNU_FORMAT)
    whole = write_tar(folder / "whole.tar", members(count=2), tarfile.USTAR_FORMAT).read_bytes()
    ends_in_folder = folder / "ends-in-folder.tar"
    with tarfile.open(ends_in_folder, "w", format=tarfile.USTAR_FORMAT) as archive:
        for name, data in members(count=1):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("later")
        info.type = tarfile.DIRTYPE
        archive.addfile(info)
    linked = folder / "link.tar"
    with tarfile.open(linked, "w", format=tarfile.USTAR_FORMAT) as archive:
        info = tarfile.TarInfo("s0000.lnk")
        info.type, info.linkname = tarfile.SYMTYPE, "elsewhere"
        archive.addfile(info)
    bad_checksum = bytearray(whole)
    bad_checksum[10] ^= 1
    cut_at_boundary = whole[: len(whole) - 10240]  # no end-of-archive blocks at all
    paths = [gnu_long, ends_in_folder, linked]
    for name, data in (
        ("bad-checksum.tar", bytes(bad_checksum)),
        ("no-end.tar", cut_at_boundary),
        ("junk-after.tar", whole + b"junk" * 300),
        ("empty.tar", b""),
        ("not-a-tar.tar", b"PK\x03\x04 a zip perhaps" * 40),
    ):
        (folder / name).write_bytes(data)
        paths.append(folder / name)
    write_faulty_shards(folder)
    return [*paths, folder / "train-000002.tar"]  # the faulty set's truncated shard


def test_plain_archives_are_listed_fast_and_as_tarfile_lists_them(tmp_path: Path) -> None:
    write_faulty_shards(tmp_path)
    paths = [*plain_archives(tmp_path), tmp_path / "train-000000.tar", tmp_path / "train-000001.tar"]
    for path in paths:
        fast = _list_plain_shard(str(path))
        assert fast is not None, path.name
        assert fast == _list_with_tarfile(str(path)), path.name
    pax = _list_plain_shard(str(tmp_path / "pax-long.tar"))
    assert pax is not None and any(key.startswith("dossier-é/") for key, _ in pax.groups)


def test_everything_else_is_read_by_tarfile_with_the_same_verdict(tmp_path: Path) -> None:
    for path in other_archives(tmp_path):
        assert list_shard(str(path)) == _list_with_tarfile(str(path)), path.name
    assert _list_plain_shard(str(tmp_path / "gnu-long.tar")) is None  # GNU long names: tarfile's job
    assert list_shard(str(tmp_path / "junk-after.tar")).damage is None  # tarfile stops at the end blocks


def test_a_shard_written_by_webdataset_itself_is_listed_fast(tmp_path: Path) -> None:
    wds = pytest.importorskip("webdataset")
    path = tmp_path / "written.tar"
    with wds.TarWriter(str(path)) as sink:
        for n in range(5):
            sink.write({"__key__": f"k{n:03d}", "jpg": jpeg(n), "cls": n, "json": {"n": n}})
    fast = _list_plain_shard(str(path))
    assert fast is not None
    assert fast == _list_with_tarfile(str(path))
    assert [key for key, _ in fast.groups] == [f"k{n:03d}" for n in range(5)]
