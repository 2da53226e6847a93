"""Every rule's examples are its tests: each bad example fires exactly on its `# expect:` lines,
each good example is clean. Run one rule's examples with `pytest tests/lint/test_rule_examples.py -k DL001`.

Each rule file is loaded on its own, so one broken rule fails only its own tests.
"""

from __future__ import annotations

import tomllib
from collections import Counter
from pathlib import Path

import pytest

from datalint.config import Config
from datalint.lint.catalog import Catalog, Example, Rule, load_rule, rules_dir
from datalint.lint.engine import Linter
from datalint.lint.matchers import MATCHERS


def _cases() -> list[pytest.param]:
    cases = []
    for path in sorted(rules_dir().glob("*.toml")):
        code = path.name.partition("-")[0]
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            data = {}
        counts = {kind: len(data.get(kind, [])) or 1 for kind in ("bad", "good")}
        for kind, count in counts.items():
            for index in range(count):
                cases.append(pytest.param(path, kind, index, id=f"{code}-{kind}-{index + 1}"))
    return cases


def _findings(rule: Rule, example: Example) -> Counter[tuple[int, str]]:
    config = Config(
        select=(rule.id,),
        start_method=example.start_method or "spawn",
        rule_options={rule.id: example.config} if example.config else {},
    )
    linter = Linter(config, Catalog((rule,)))
    source = example.code.lstrip("\n")
    return Counter((f.line, f.code) for f in linter.check_source(source, f"example_{rule.id}.py"))


@pytest.mark.parametrize(("path", "kind", "index"), _cases())
def test_rule_example(path: Path, kind: str, index: int) -> None:
    rule = load_rule(path, MATCHERS)
    examples = rule.bad if kind == "bad" else rule.good
    example = examples[index]
    expected = Counter(
        (line, code) for line, code in Example(example.code.lstrip("\n")).expected() if code == rule.id
    )
    if kind == "bad":
        assert expected, f"{path.name}: [[bad]] #{index + 1} has no `# expect: {rule.id}` marker"
    else:
        assert not expected, f"{path.name}: [[good]] #{index + 1} must not carry `# expect:` markers"
    found = _findings(rule, example)
    missing, extra = expected - found, found - expected
    assert not missing and not extra, (
        f"{path.name} [[{kind}]] #{index + 1}:\n"
        f"  expected but not reported (line, code): {sorted(missing)}\n"
        f"  reported but not expected (line, code): {sorted(extra)}\n"
        f"--- code ---\n{example.code.lstrip(chr(10))}"
    )
