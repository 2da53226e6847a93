"""Which files an image scan takes, and under which keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from datalint.scan.images import list_image_files, normalize_extensions, read_file_list


def _touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")


def test_keys_are_sorted_posix_paths_relative_to_the_folder(tmp_path: Path) -> None:
    _touch(tmp_path, "b/2.png", "a/deep/1.JPG", "top.jpeg", "a/notes.txt", "b/.DS_Store", "labels.csv")
    listing = list_image_files(tmp_path)
    assert listing.files == ("a/deep/1.JPG", "b/2.png", "top.jpeg")
    assert (listing.skipped, listing.skipped_examples) == (3, ("a/notes.txt", "b/.DS_Store", "labels.csv"))


def test_symlinked_folders_are_not_followed_but_broken_file_links_are_listed(tmp_path: Path) -> None:
    _touch(tmp_path, "real/1.png")
    (tmp_path / "loop").symlink_to(tmp_path, target_is_directory=True)  # would recurse forever
    (tmp_path / "gone.jpg").symlink_to(tmp_path / "deleted.jpg")
    assert list_image_files(tmp_path).files == ("gone.jpg", "real/1.png")


def test_extensions_are_case_and_dot_insensitive(tmp_path: Path) -> None:
    _touch(tmp_path, "1.png", "2.JPG", "3.webp")
    assert normalize_extensions(["JPG", ".png", " "]) == (".jpg", ".png")
    assert list_image_files(tmp_path, ["jpg"]).files == ("2.JPG",)


def test_a_file_list_skips_blank_lines_and_comments(tmp_path: Path) -> None:
    listing = tmp_path / "files.txt"
    listing.write_text("# exported 2026-11-30\nimages/1.jpg\n\n  images/2.png  \n")
    assert read_file_list(listing) == ("images/1.jpg", "images/2.png")


@pytest.mark.parametrize(
    "relative",
    ["a.JPG", "d/a.png", "d.x/a", "d.x/.hidden", ".png", "..", "d/...png", "a..jpg", "d/.a.webp", "a.",
     "d/b/c.tar.gz", "noext", "d/..png", "é/ünï.PNG", "x/.y.z/w"],
)  # fmt: skip
def test_the_extension_is_the_one_os_path_splitext_gives(relative: str) -> None:
    """The listing's own extension test (hot: every incremental scan lists the whole folder)
    keeps splitext's rules: a name of dots before its last dot has no extension."""
    import os

    from datalint.scan.images import _has_extension, file_extension

    expected = os.path.splitext(relative)[1].lower()
    assert file_extension(relative) == expected
    # as `normalize_extensions` makes them: never the empty extension
    sets = [{".jpg", ".png", ".webp"}, {".gz", ".tar.gz", ".x/a"}, {expected} - {""}]
    for wanted in map(frozenset, sets):
        assert _has_extension(relative, wanted) == (expected in wanted)
