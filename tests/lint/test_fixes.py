"""Fixes: each rule's fix, applied to its bad examples, gives code that parses and that the rule
no longer reports; unsafe fixes only when asked; unused-noqa fixes; `--add-noqa` round trip."""

from __future__ import annotations

import ast
import textwrap

import pytest

from datalint.config import Config
from datalint.lint.catalog import Catalog, Rule, load_catalog
from datalint.lint.engine import Linter
from datalint.lint.fixes import FIXERS, apply_fixes, fix_source
from datalint.lint.noqa import add_noqa

CATALOG = load_catalog()


def _linter(rule: Rule, example_start_method: str | None = None) -> Linter:
    config = Config(select=(rule.id,), start_method=example_start_method or "spawn")
    return Linter(config, Catalog((rule,)))


@pytest.mark.parametrize("code", sorted(FIXERS))
def test_each_fix_turns_its_bad_examples_into_code_the_rule_accepts(code: str) -> None:
    rule = CATALOG.get(code)
    assert rule is not None
    fixed_examples = 0
    for number, example in enumerate(rule.bad, start=1):
        linter = _linter(rule, example.start_method)
        source = example.code.lstrip("\n")
        findings = linter.check_source(source, "example.py")
        assert findings, f"{code} bad #{number} reports nothing"
        safe_only = fix_source(linter, source, "example.py")
        assert all(f.fix is not None and f.fix.applicability == "safe" for f in safe_only.fixed)
        if all(f.fix is None or f.fix.applicability == "unsafe" for f in findings):
            assert safe_only.text == source, f"{code} bad #{number}: an unsafe fix applied without the flag"
        outcome = fix_source(linter, source, "example.py", unsafe=True)
        ast.parse(outcome.text)  # still Python
        fixable = [f for f in findings if f.fix is not None]
        if fixable:
            fixed_examples += 1
            assert len(outcome.fixed) >= len(fixable)
            still = [f for f in outcome.remaining if f.fix is not None]
            assert not still, f"{code} bad #{number}: after fixing\n{outcome.text}\nstill {still}"
            assert len(outcome.remaining) < len(findings), outcome.text
    assert fixed_examples, f"no bad example of {code} gets a fix"


def test_fixed_code_behaves_like_the_rules_good_examples() -> None:
    linter = Linter(Config())
    source = textwrap.dedent(
        """\
        from torch.utils.data import DataLoader
        from torch.utils.data._utils.collate import default_collate

        a = DataLoader(dataset, batch_size=32, prefetch_factor=4, persistent_workers=True)
        b = DataLoader(
            dataset,
            shuffle=True,
            sampler=DistributedSampler(dataset),
        )
        c = DataLoader(dataset, 16, True, RandomSampler(dataset))
        """
    )
    outcome = fix_source(linter, source, "train.py")
    assert outcome.text == textwrap.dedent(
        """\
        from torch.utils.data import DataLoader
        from torch.utils.data import default_collate

        a = DataLoader(dataset, batch_size=32)
        b = DataLoader(
            dataset,
            sampler=DistributedSampler(dataset),
        )
        c = DataLoader(dataset, 16, None, RandomSampler(dataset))
        """
    )
    assert sorted(f.code for f in outcome.fixed) == ["DL001", "DL002", "DL003", "DL003", "DL506"]
    assert outcome.remaining == ()


def test_unsafe_fixes_only_with_the_flag() -> None:
    rule = CATALOG.get("DL505")
    assert rule is not None
    source = rule.bad[0].code.lstrip("\n")
    linter = _linter(rule)
    (finding,) = linter.check_source(source, "data.py")
    assert finding.fix is not None and finding.fix.applicability == "unsafe"
    assert fix_source(linter, source, "data.py").text == source
    fixed = fix_source(linter, source, "data.py", unsafe=True).text
    assert 'torch.load(self.paths[i], map_location="cpu", weights_only=True)' in fixed


def test_overlapping_fixes_wait_for_the_next_pass() -> None:
    linter = Linter(Config())
    source = (
        "from torch.utils.data import DataLoader\n"
        "x = DataLoader(d, persistent_workers=True, prefetch_factor=2)\n"
    )
    findings = linter.check_source(source, "x.py")
    fixes = [f.fix for f in findings if f.fix is not None]
    _, applied = apply_fixes(source, fixes)
    assert len(applied) == 1  # both edits touch the comma between the two arguments
    assert fix_source(linter, source, "x.py").text.endswith("x = DataLoader(d)\n")


def test_unused_noqa_is_reported_and_fixed() -> None:
    linter = Linter(Config())
    source = textwrap.dedent(
        """\
        from torch.utils.data import DataLoader
        a = DataLoader(ds, num_workers=2)  # noqa: DL001
        b = DataLoader(ds, num_workers=2)  # noqa: E501, DL001
        c = DataLoader(ds, prefetch_factor=2)  # noqa: DL001, DL002
        d = DataLoader(ds, num_workers=2)  # type: ignore  # noqa: DL001
        e = DataLoader(ds, num_workers=2)  # noqa
        f = DataLoader(ds, num_workers=2)  # noqa: DL999
        """
    )
    findings = linter.check_source(source, "x.py")
    assert [(f.line, f.code) for f in findings] == [
        (2, "DL900"),
        (3, "DL900"),
        (4, "DL900"),
        (5, "DL900"),
        (7, "DL900"),
    ]
    assert "DL999 is not a rule code" in findings[-1].message
    outcome = fix_source(linter, source, "x.py")
    assert outcome.remaining == ()
    assert outcome.text.splitlines()[1:] == [
        "a = DataLoader(ds, num_workers=2)",
        "b = DataLoader(ds, num_workers=2)  # noqa: E501",
        "c = DataLoader(ds, prefetch_factor=2)  # noqa: DL001",
        "d = DataLoader(ds, num_workers=2)  # type: ignore",
        "e = DataLoader(ds, num_workers=2)  # noqa",
        "f = DataLoader(ds, num_workers=2)",
    ]


def test_unused_noqa_is_not_reported_for_rules_that_did_not_run() -> None:
    source = "from torch.utils.data import DataLoader\na = DataLoader(ds)  # noqa: DL101\n"
    assert Linter(Config(select=("DL0", "DL9"))).check_source(source, "x.py") == []
    assert [f.code for f in Linter(Config()).check_source(source, "x.py")] == ["DL900"]


def test_add_noqa_round_trip() -> None:
    linter = Linter(Config())
    source = textwrap.dedent(
        '''\
        from torch.utils.data import DataLoader
        a = DataLoader(ds, prefetch_factor=2, persistent_workers=True)
        b = DataLoader(ds, prefetch_factor=2)  # noqa: E501
        c = DataLoader(ds, prefetch_factor=2)  # keep this comment
        d = DataLoader(ds, prefetch_factor=2, collate_fn=g("""
        text"""))
        '''
    )
    findings = linter.check_source(source, "x.py")
    codes: dict[int, set[str]] = {}
    for f in findings:
        codes.setdefault(f.line, set()).add(f.code)
    new_text, added = add_noqa(source, codes)
    assert added == 5
    ast.parse(new_text)
    assert linter.check_source(new_text, "x.py") == []
    lines = new_text.splitlines()
    assert lines[1].endswith("  # noqa: DL001, DL002")
    assert lines[2].endswith("# noqa: E501, DL001")
    assert lines[3].endswith("# keep this comment  # noqa: DL001")
    assert lines[5] == 'text"""))  # noqa: DL001'  # not inside the string: on the statement's last line
    assert add_noqa(new_text, codes) == (new_text, 0)
