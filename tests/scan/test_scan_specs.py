"""Dataset specs: every way a spec can be wrong is a clear message and exit code 2, never a traceback."""

from __future__ import annotations

import pytest
from scan_support import run_cli, spec

from datalint.scan.sources import DatasetSource, SourceDescription
from datalint.scan.specs import SpecError, parse_spec, resolve_spec


def build(text: str) -> DatasetSource:
    return DatasetSource(SourceDescription.make("dataset", text))


def test_the_three_forms_parse() -> None:
    assert parse_spec("mymod.sub:ds").module == "mymod.sub"
    call = parse_spec("mymod:make_ds(3, split='train')")
    assert call.attribute == ("make_ds",) and call.call == ((3,), (("split", "train"),))
    by_file = parse_spec("path/to/file.py:ds")
    assert str(by_file.path) == "path/to/file.py" and by_file.attribute == ("ds",)


def test_a_factory_with_literal_arguments_is_called() -> None:
    source = build(spec("broken.py:make(4, split='val')"))
    assert len(source) == 3


def test_a_module_spec_imports_from_the_working_directory(tmp_path, monkeypatch) -> None:
    (tmp_path / "my_tiny_ds.py").write_text("ds = [[1.0], [2.0]]\n")
    monkeypatch.chdir(tmp_path)
    assert resolve_spec("my_tiny_ds:ds") == [[1.0], [2.0]]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no_colon_here", "must have the form"),
        ("datalint_no_such_module_xyz:ds", "no module named 'datalint_no_such_module_xyz'; run from"),
        (spec("nowhere.py:ds"), "no such file"),
        (spec("broken.py:datset"), "did you mean dataset?"),
        (spec("broken.py:no_length"), "not a map-style dataset: it has no __len__"),
        (spec("broken.py:not_a_dataset"), "not a map-style dataset"),
        (spec("broken.py:Fine"), "names the class Fine, not a dataset"),
        (spec("broken.py:len_raises"), "len() raised TypeError: length unknown until the manifest"),
        (spec("import_fails.py:ds"), "FileNotFoundError: data/train.csv: no such file"),
        (spec("missing_dependency.py:ds"), "No module named 'datalint_fixture_no_such_package'"),
        (spec("broken.py:make(size=len('x'))"), "factory arguments must be literals"),
        (
            spec("broken.py:make(1, split='test')"),
            "the factory call failed: ValueError: unknown split 'test'",
        ),
    ],
)
def test_spec_errors_say_what_is_wrong(text: str, expected: str) -> None:
    with pytest.raises(SpecError) as caught:
        build(text)
    assert expected in str(caught.value)


def test_the_cli_exits_2_with_the_message_and_no_traceback(tmp_path) -> None:
    code, out, err = run_cli(
        "scan", "--dataset", spec("broken.py:len_raises"), "--db", str(tmp_path / "x.db")
    )
    assert code == 2
    assert "len() raised TypeError" in err and "broken.py" in err
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize(
    ("attribute", "suggestion"),
    [
        ("train_dz", "; did you mean train_ds?"),
        ("make_flower", "; did you mean make_flowers?"),
        # close to `np`, `Path` and the imported `Dataset` base class: none of them is a dataset
        ("nq", "; datasets or factories there: Flowers, MEAN, make_flowers, train_ds"),
        ("Pth", "; datasets or factories there: Flowers, MEAN, make_flowers, train_ds"),
        ("Datset", "; datasets or factories there: Flowers, MEAN, make_flowers, train_ds"),
    ],
)
def test_a_missing_attribute_suggests_only_what_could_be_a_dataset(attribute, suggestion) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_spec(spec(f"suggestions.py:{attribute}"))
    assert str(caught.value).endswith(f"has no attribute {attribute!r}{suggestion}")


def test_an_owner_with_nothing_dataset_like_says_so() -> None:
    with pytest.raises(SpecError, match="nothing there looks like a dataset"):
        resolve_spec(spec("suggestions.py:NAME.upperr"))


class _Keyed:
    """A source of `n` keys, one of them a name that is not UTF-8 (a surrogate-escaped byte)."""

    def __init__(self, n: int, odd: str = "caf\udce9.png") -> None:
        self.keys = [f"d{i % 7}/{i:07d}.png" for i in range(n)]
        self.keys[n // 2] = odd

    def __len__(self) -> int:
        return len(self.keys)

    def key(self, index: int) -> str:
        return self.keys[index]


def test_the_fingerprint_is_the_same_read_a_block_at_a_time_as_key_by_key() -> None:
    """The scan hashes keys a block at a time; the preflight (which names a key that hangs) and
    the staleness check read them one by one: every way must give one fingerprint, or a fresh
    quarantine list would be refused as stale."""
    from datalint.scan.sources import fingerprint

    source = _Keyed(20_000)  # more than two blocks
    seen: list[int] = []
    by_key = fingerprint(source, on_key=seen.append)
    assert seen[-1] == len(source) - 1
    assert fingerprint(source) == by_key
    assert fingerprint(_Keyed(20_000, odd="cafe.png")) != by_key  # one key differs: another fingerprint
    shorter = _Keyed(20_000)
    shorter.keys.pop()
    assert fingerprint(shorter) != by_key


MY_DATA = """
class Pairs:
    def __len__(self):
        return 3

    def __getitem__(self, i):
        return [float(i)]


def make_ds():
    return Pairs()


def make_split(split, size=3):
    return Pairs()
"""


@pytest.mark.parametrize(
    ("target", "hint"),
    [
        ("make_ds", "names the function make_ds, not a dataset; add () to call it: my_data:make_ds()"),
        ("Pairs", "names the class Pairs, not a dataset; add () to call it: my_data:Pairs()"),
        ("make_split", "add () to call it with its arguments: my_data:make_split(split=...)"),
    ],
)
def test_a_factory_named_without_its_call_is_told_to_add_it(tmp_path, monkeypatch, target, hint) -> None:
    (tmp_path / "my_data.py").write_text(MY_DATA)
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("scan", "--dataset", f"my_data:{target}", "--db", str(tmp_path / "x.db"))
    assert code == 2 and hint in err, err
    called = "my_data:make_split('val')" if target == "make_split" else f"my_data:{target}()"
    code, _, err = run_cli("scan", "--dataset", called, "--db", str(tmp_path / f"{target}.db"))
    assert code == 0, err


def test_a_misspelt_module_suggests_the_closest_one(tmp_path, monkeypatch) -> None:
    (tmp_path / "my_data.py").write_text(MY_DATA)
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("scan", "--dataset", "mydata:make_ds()", "--db", str(tmp_path / "x.db"))
    assert code == 2 and "no module named 'mydata'; did you mean 'my_data'?" in err, err
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train_data.py").write_text(MY_DATA)
    code, _, err = run_cli("scan", "--dataset", "pkg.traindata:make_ds()", "--db", str(tmp_path / "y.db"))
    assert code == 2 and "no module named 'pkg.traindata'; did you mean 'pkg.train_data'?" in err, err
