"""Every test that docs/guarantees.md cites exists: a guarantee is a sentence with a test
that fails without the code behind it, and a renamed or deleted test must not leave a
sentence that nothing checks.

A citation is ``*(test_module: a test's name in words, another's; test_other: ...)*``:
tests of a module are separated by commas or semicolons, words in brackets name a case of
a parametrised test (``[postgres]``), and a name in words is the test function's name
with its underscores as spaces and apostrophes dropped (``job's`` for ``jobs``); a name
may stop before the function's name does.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CITATION = re.compile(r"\*\((test_\w+.*?)\)\*", re.S)
MODULE = re.compile(r"(test_\w+)(?:,? on \w+)?(?::\s*(.*))?$", re.S)
CASES = re.compile(r"\[[^\]]*\]")


def _tests() -> dict[str, list[str]]:
    """The test functions and classes of every test module, by module name."""
    found = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        tree = ast.parse(path.read_text())
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        found[path.stem] = [n.name.lower() for n in ast.walk(tree) if isinstance(n, kinds)]
    return found


def citations(text: str) -> list[tuple[str, str | None]]:
    """(module, a test's name in words, or None for the module as a whole) of each
    citation in ``text``."""
    cited = []
    for citation in CITATION.findall(text):
        citation = CASES.sub("", " ".join(citation.split()))
        for part in re.split(r";\s*(?=test_\w+\b)", citation):
            module, names = MODULE.match(part.strip()).groups()
            names = [n.strip() for n in re.split(r"[;,]", names or "") if n.strip()]
            cited += [(module, name) for name in names] or [(module, None)]
    return cited


def function_name(words: str) -> str:
    return "test_" + re.sub(r"\W+", "_", words.lower().replace("'", "")).strip("_")


def test_every_test_guarantees_md_cites_exists():
    tests = _tests()
    cited = citations((ROOT / "docs" / "guarantees.md").read_text())
    assert len(cited) > 100  # (the parsing found them)
    missing = [
        f"{module}: {words}"
        for module, words in cited
        if module not in tests
        or (words and not any(n.startswith(function_name(words)) for n in tests[module]))
    ]
    assert not missing, "docs/guarantees.md cites tests that do not exist:\n" + "\n".join(missing)


def test_a_citation_is_read_as_the_guarantees_write_them():
    text = (
        "*(test_lease: a kill of RunJob's group, a host [postgres]; test_trust: a row\n"
        "   of the job)* and *(test_hosts)*"
    )
    assert citations(text) == [
        ("test_lease", "a kill of RunJob's group"),
        ("test_lease", "a host"),
        ("test_trust", "a row of the job"),
        ("test_hosts", None),
    ]
    assert function_name("a kill of RunJob's group") == "test_a_kill_of_runjobs_group"
