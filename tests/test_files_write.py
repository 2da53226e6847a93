"""`write_atomically`: the one way datalint replaces a file (lists, reports, caches, the token file)."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from datalint.files import write_atomically


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_bytes_text_and_parts_are_written_whole(tmp_path: Path) -> None:
    target = tmp_path / "list.json"
    write_atomically(target, b"bytes")
    assert target.read_bytes() == b"bytes"
    write_atomically(target, "tëxt\n")
    assert target.read_text(encoding="utf-8") == "tëxt\n"
    write_atomically(target, (b"a", "b", memoryview(b"c"), bytearray(b"d")), sync_folder=True)
    assert target.read_bytes() == b"abcd"
    write_atomically(target, iter([]), durable=False)
    assert target.read_bytes() == b""
    assert leftovers(tmp_path) == []


def test_a_new_file_gets_the_umask_mode_and_a_replaced_one_keeps_its_own(tmp_path: Path) -> None:
    umask = os.umask(0o027)
    try:
        write_atomically(tmp_path / "new", "x")
        assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o640
        (tmp_path / "shared").write_text("old")
        (tmp_path / "shared").chmod(0o644)
        write_atomically(tmp_path / "shared", "new")
        assert stat.S_IMODE((tmp_path / "shared").stat().st_mode) == 0o644
    finally:
        os.umask(umask)


def test_a_mode_given_is_the_mode_the_file_gets(tmp_path: Path) -> None:
    target = tmp_path / "tokens.toml"
    target.write_text("old")
    target.chmod(0o644)
    write_atomically(target, "secret", mode=0o600)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and target.read_text() == "secret"


def test_an_exception_while_writing_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "list.json"
    target.write_text("old")

    def parts() -> Iterator[bytes]:
        yield b"half of a new"
        raise KeyboardInterrupt  # a Ctrl-C mid-write

    with pytest.raises(KeyboardInterrupt):
        write_atomically(target, parts())
    assert target.read_text() == "old"
    assert leftovers(tmp_path) == []


def test_a_full_disk_names_the_file_and_keeps_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "list.json"
    target.write_text("old")

    def full(descriptor: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left") as raised:
        write_atomically(target, "new")
    assert raised.value.filename == str(target) and raised.value.errno == errno.ENOSPC
    assert target.read_text() == "old"
    assert leftovers(tmp_path) == []


def test_a_folder_in_the_way_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    with pytest.raises(IsADirectoryError):
        write_atomically(tmp_path / "out", "x")
    assert leftovers(tmp_path) == [] and (tmp_path / "out").is_dir()


def test_a_missing_folder_is_an_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomically(tmp_path / "no" / "such" / "list.json", "x")
