"""The CLIs are thin: each function of ``dataflow/cli/`` parses, calls the library
(:mod:`dataflow.api`) and prints, so none is long (issue 46). A function's lines are
counted with ``ast``, its body included, its decorators not."""

from __future__ import annotations

import ast
from pathlib import Path

import dataflow.cli

CLI = Path(dataflow.cli.__file__).parent
MAX_LINES = 40
ALLOWED: dict[str, str] = {}  # "module.function": why it may be longer (none today)


def long_functions(source: str, module: str) -> dict[str, int]:
    """Each function (methods and nested ones too) over MAX_LINES lines, by name."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = node.end_lineno - node.lineno + 1  # from its def: decorators excluded
            if lines > MAX_LINES:
                found[f"{module}.{node.name}"] = lines
    return found


def test_no_cli_function_is_over_40_lines():
    found = {}
    for path in sorted(CLI.glob("*.py")):
        found |= long_functions(path.read_text(), path.stem)
    assert {name: n for name, n in found.items() if name not in ALLOWED} == {}


def test_the_count_sees_a_long_function_and_not_its_decorators():
    body = "\n".join(f"    x{n} = {n}" for n in range(39))
    decorated = "@command('x')\n@other\ndef short():\n" + body + "\n"
    assert long_functions(decorated, "m") == {}  # 40 lines with its def; 42 with decorators
    longer = "def long():\n" + body + "\n    return x0\n"
    assert long_functions(longer, "m") == {"m.long": 41}
    nested = "class C:\n    def method(self):\n" + "\n".join(
        f"        y{n} = {n}" for n in range(41)
    )
    assert long_functions(nested, "m") == {"m.method": 42}
