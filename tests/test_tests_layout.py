"""The tests keep their shape: a test module is named by its subject and imports no other
test module (a helper two modules share lives in tests/support/, where a reader finds
it), and a subject's file stays short enough to read (split by sub-subject past it)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
MAX_LINES = 800


def modules(root: Path = TESTS) -> dict[str, Path]:
    return {path.stem: path for path in sorted(root.rglob("test_*.py"))}


def imported_tests(source: str, tests: set[str]) -> list[str]:
    """The test modules that ``source`` imports, anywhere in its code."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0] in tests]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in tests:
            found.append(node.module)
    return found


def test_no_test_module_imports_another():
    tests = set(modules())
    found = [
        f"{path.relative_to(TESTS)} imports {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for module in imported_tests(path.read_text(), tests)
    ]
    assert not found, "move what is shared to tests/support/:\n" + "\n".join(found)


def test_the_import_check_sees_every_form():
    source = (
        "import test_a\nfrom test_b import x\n"
        "def f():\n    from test_c import y\n    import support.hosts\n"
        "from support import z\n"
    )
    assert imported_tests(source, {"test_a", "test_b", "test_c"}) == ["test_a", "test_b", "test_c"]


def test_test_modules_are_short():
    long = {
        name: lines
        for name, path in modules().items()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"split these by sub-subject (at most {MAX_LINES} lines): {long}"
