"""The library keeps its shape: no import circles, short modules, and each package imports
only what its ``__init__`` docstring allows (its ``May import:`` line).

The checks read the code itself with ``ast``: every import counts, including those inside
functions and under ``TYPE_CHECKING`` (a circle deferred to run time is still a circle).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dataflow

ROOT = Path(dataflow.__file__).parent
# A module is one idea: about 400 lines is the guide (docs/development.md), and a module
# over it is split where its ideas part, not at a line count. Past the hard limit, the
# test fails: an idea that long is more than one.
GUIDE_LINES = 400
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = ("dataflow", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The dataflow modules that module ``name`` imports, anywhere in its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # "from pkg import name" imports the submodule pkg.name when there is one
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _rule(package: str, modules: dict[str, Path]) -> list[str]:
    """The ``May import:`` line of a package's docstring, as dotted prefixes."""
    doc = ast.get_docstring(ast.parse(modules[package].read_text())) or ""
    match = re.search(r"^May import:(.*)$", doc, re.MULTILINE)
    assert match, f"{package}/__init__.py's docstring has no 'May import:' line"
    return [
        f"dataflow.{word.strip()}" for word in match.group(1).rstrip(".").split(",") if word.strip()
    ]


def _governing_package(name: str, modules: dict[str, Path]) -> str:
    """The nearest package (the module itself, if a package) whose docstring has a rule."""
    package = name if modules[name].name == "__init__.py" else name.rpartition(".")[0]
    while package != "dataflow":
        doc = ast.get_docstring(ast.parse(modules[package].read_text())) or ""
        if "May import:" in doc:
            return package
        package = package.rpartition(".")[0]
    return package


def _layer_violations(graph: dict[str, set[str]]) -> list[str]:
    modules = _modules()
    wrong = []
    for name, targets in sorted(graph.items()):
        package = _governing_package(name, modules)
        allowed = _rule(package, modules)
        for target in sorted(targets - {"dataflow"}):  # the root: only a version, no imports
            # a package may import its own modules; top-level modules only the listed ones
            inside = package != "dataflow" and f"{target}.".startswith(f"{package}.")
            if not inside and not any(target == a or target.startswith(a + ".") for a in allowed):
                wrong.append(
                    f"{name} imports {target} ({package} may import: {', '.join(allowed)})"
                )
    return wrong


def test_no_import_circles():
    assert _cycles(_graph()) == []


def test_modules_are_short():
    long = {
        name: lines
        for name, path in _modules().items()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"modules over {MAX_LINES} lines (the guide is {GUIDE_LINES}): split by idea"


def test_packages_import_only_what_their_docstring_allows():
    assert _layer_violations(_graph()) == []


def test_checks_catch_a_circle_and_a_forbidden_import():
    """The checks above can fail: a store module importing the run package breaks both."""
    graph = _graph()
    graph["dataflow.store.base"] = graph["dataflow.store.base"] | {"dataflow.run.claim.lifecycle"}
    assert any("dataflow.store.base" in cycle for cycle in _cycles(graph))
    assert any(
        v.startswith("dataflow.store.base imports dataflow.run") for v in _layer_violations(graph)
    )


ROOMS = {"process", "lease", "spark", "listeners", "claim", "drain"}  # run/'s subpackages


def _room_of(name: str) -> str | None:
    """The room of the run package a module belongs to (``dataflow.run.claim``), if any."""
    parts = name.split(".")
    return ".".join(parts[:3]) if len(parts) >= 3 and parts[:2] == ["dataflow", "run"] else None


def _room_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Circles between the rooms of the run package: the module graph drawn one node a
    room (a circle of modules inside one room is :func:`_cycles`'s to find)."""
    rooms: dict[str, set[str]] = {}
    for name, targets in graph.items():
        if room := _room_of(name):
            found = {_room_of(t) for t in targets} - {room, None}
            rooms.setdefault(room, set()).update(r for r in found if r)
    for targets in list(rooms.values()):
        for target in targets:
            rooms.setdefault(target, set())
    return _cycles(rooms)


def _room_rule_violations(modules: dict[str, Path]) -> list[str]:
    """Each room of the run package has a rule of its own, which allows no more than the
    run package's (its rooms aside): a room narrows what the run path may import."""
    wrong = []
    allowed = set(_rule("dataflow.run", modules))
    for room in sorted(n for n in modules if _room_of(n) == n):
        if _governing_package(room, modules) != room:
            wrong.append(f"{room}/__init__.py's docstring has no 'May import:' line")
            continue
        for word in _rule(room, modules):
            if word not in allowed and _room_of(word) is None:
                wrong.append(f"{room} may import {word}, which dataflow.run may not")
    return wrong


def test_the_run_package_is_rooms_each_with_its_rule():
    modules = _modules()
    assert {name.split(".")[2] for name in modules if _room_of(name)} == ROOMS  # no loose module
    assert _room_rule_violations(modules) == []
    assert _room_circles(_graph()) == []


def test_the_room_checks_can_fail():
    """A room importing a room above it is a circle between rooms, and breaks its rule; a
    room without a rule, or one wider than the run package's, is named."""
    graph = _graph()
    graph["dataflow.run.process.logs"] |= {"dataflow.run.claim.lifecycle"}
    assert any(
        {"dataflow.run.claim", "dataflow.run.process"} <= set(c) for c in _room_circles(graph)
    )
    assert any(
        v.startswith("dataflow.run.process.logs imports dataflow.run.claim.lifecycle")
        for v in _layer_violations(graph)
    )
    modules = dict(_modules())
    spark = modules["dataflow.run.spark"]
    listeners = modules["dataflow.run.listeners"]
    try:
        modules["dataflow.run.spark"] = modules["dataflow.run.process.logs"]  # no rule
        modules["dataflow.run.listeners"] = modules["dataflow.api"]  # may import ops
        assert _room_rule_violations(modules) == [
            "dataflow.run.listeners may import dataflow.run, which dataflow.run may not",
            "dataflow.run.listeners may import dataflow.ops, which dataflow.run may not",
            "dataflow.run.listeners may import dataflow.landing, which dataflow.run may not",
            "dataflow.run.spark/__init__.py's docstring has no 'May import:' line",
        ]
    finally:
        modules["dataflow.run.spark"], modules["dataflow.run.listeners"] = spark, listeners


def test_graph_sees_lazy_and_relative_imports():
    graph = _graph()
    # registered() imports the store inside the function; jdbc names Dataset for typing only
    assert "dataflow.store" in graph["dataflow.spark.context"]
    assert "dataflow.spark.datasets" in graph["dataflow.spark.jdbc"]
    assert "dataflow.run.claim.lifecycle" in graph["dataflow.api.running"]


@pytest.mark.parametrize("name", ["dataflow.testing", "dataflow.pipeline"])
def test_public_aliases_are_the_spark_modules(name):
    __import__(name)
    assert sys.modules[name] is sys.modules[name.replace("dataflow.", "dataflow.spark.")]


def test_the_import_users_write_in_their_jobs_keeps_working():
    """``from dataflow import spark as df`` (README, docs/spark.md), in a fresh Python: the
    job-side API is there, and importing it does not import pyspark (a job pays for Spark
    only when it starts a session)."""
    code = (
        "import sys\n"
        "from dataflow import spark as df\n"
        "api = ('Dataset', 'context', 'read', 'read_all', 'write', 'registered')\n"
        "print([name for name in api if not callable(getattr(df, name, None))])\n"
        "print('pyspark' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "[]\nFalse\n", "")


DRIVERS = {"sqlite3", "psycopg", "psycopg2", "psycopg_pool", "asyncpg", "pg8000"}


BACKENDS = {"sqlite", "postgres"}  # the subpackages of dataflow.store that are backends
NEUTRAL = {"queries"}  # and those that are not: what every backend runs alike


def _backend_of(name: str) -> str | None:
    """The backend package a module belongs to (``dataflow.store.sqlite``), if any."""
    parts = name.split(".")
    if len(parts) >= 3 and parts[:2] == ["dataflow", "store"] and parts[2] in BACKENDS:
        return ".".join(parts[:3])
    return None


def _seam_violations(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """Imports that cross the backend seam: a database driver imported outside a backend
    package, or a backend imported by anything but ``dataflow.store`` (which picks one)."""
    backends = {b for name in sources if (b := _backend_of(name))}
    wrong = []
    for name, (source, is_package) in sorted(sources.items()):
        package = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            else:
                continue
            for target in targets:
                root = target.split(".")[0]
                if root in DRIVERS and not _backend_of(name):
                    wrong.append(f"{name} imports the driver {root}")
                backend = next((b for b in backends if f"{target}.".startswith(f"{b}.")), None)
                # no backend builds on another's SQL; nothing else picks one but
                # dataflow.store
                own = _backend_of(name)
                if backend and name != "dataflow.store" and own != backend:
                    wrong.append(f"{name} imports the backend {backend}")
    return sorted(set(wrong))


def _sources() -> dict[str, tuple[str, bool]]:
    """Each module's source, and whether it is a package's ``__init__``."""
    return {name: (p.read_text(), p.name == "__init__.py") for name, p in _modules().items()}


def test_only_a_backend_holds_its_driver_and_only_the_store_picks_a_backend():
    packages = {p.parent.name for p in (ROOT / "store").glob("*/__init__.py")}
    assert packages == BACKENDS | NEUTRAL  # a new backend is named here
    assert _seam_violations(_sources()) == []


def test_the_seam_check_can_fail():
    sources = _sources()
    sources["dataflow.ops.sneaky"] = (
        "import sqlite3\nfrom ..store.sqlite import SqliteStore\n",
        False,
    )
    sources["dataflow.run"] = (sources["dataflow.run"][0] + "\nfrom ..store import sqlite\n", True)
    sources["dataflow.store.postgres.borrowed"] = ("from ..sqlite import store\n", False)
    assert _seam_violations(sources) == [
        "dataflow.ops.sneaky imports the backend dataflow.store.sqlite",
        "dataflow.ops.sneaky imports the driver sqlite3",
        "dataflow.run imports the backend dataflow.store.sqlite",
        "dataflow.store.postgres.borrowed imports the backend dataflow.store.sqlite",
    ]


SERVER_LIBRARIES = {"starlette", "uvicorn", "httpx", "anyio", "h11"}  # opendataflow[serve]


def _server_violations(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """The server stays optional: only ``dataflow.serve`` imports its libraries, and only
    ``utility serve`` (``dataflow.cli.serving``) imports ``dataflow.serve``, inside its
    function, so that no other command needs the extra or pays for importing it."""
    wrong = []
    for name, (source, is_package) in sorted(sources.items()):
        package = name if is_package else name.rpartition(".")[0]
        tree = ast.parse(source)
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            else:
                continue
            inside = name == "dataflow.serve" or name.startswith("dataflow.serve.")
            for target in targets:
                if target.split(".")[0] in SERVER_LIBRARIES and not inside:
                    wrong.append(f"{name} imports {target.split('.')[0]}")
                if f"{target}.".startswith("dataflow.serve.") and not inside:
                    if name != "dataflow.cli.serving":
                        wrong.append(f"{name} imports dataflow.serve")
                    elif id(node) in top_level:
                        wrong.append(f"{name} imports dataflow.serve at its top level")
    return sorted(set(wrong))


def test_only_utility_serve_imports_the_server_and_only_when_it_runs():
    assert _server_violations(_sources()) == []
    sources = _sources()
    sources["dataflow.ops.sneaky"] = ("import starlette\nfrom ..serve import app\n", False)
    serving = sources["dataflow.cli.serving"][0]
    sources["dataflow.cli.serving"] = ("from ..serve import views\n" + serving, False)
    assert _server_violations(sources) == [
        "dataflow.cli.serving imports dataflow.serve at its top level",
        "dataflow.ops.sneaky imports dataflow.serve",
        "dataflow.ops.sneaky imports starlette",
    ]


def test_the_run_path_asks_the_store_what_liveness_needs_never_its_kind():
    from dataflow.run.claim import liveness
    from dataflow.store.postgres.store import PostgresStore
    from dataflow.store.sqlite import SqliteStore

    asking = [
        f"{path.name}:{node.lineno}"
        for path in sorted((ROOT / "run").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "shared"
    ]
    assert asking == []
    assert {SqliteStore.liveness, PostgresStore.liveness} <= set(liveness._KINDS)


def _driver_violations(graph: dict[str, set[str]]) -> list[str]:
    """The Spark driver program (``dataflow.driver``) is started by path, never imported:
    no module outside it imports it."""
    return sorted(
        f"{name} imports {target}"
        for name, targets in graph.items()
        if not f"{name}.".startswith("dataflow.driver.")
        for target in targets
        if f"{target}.".startswith("dataflow.driver.")
    )


def test_the_spark_driver_program_is_a_package_of_its_own_started_by_path():
    from dataflow.run.drain import launch

    modules = _modules()
    assert _rule("dataflow.driver", modules) == [
        "dataflow.run",
        "dataflow.spark",
        "dataflow.store",
        "dataflow.errors",
    ]
    assert Path(launch.LAUNCHER) == modules["dataflow.driver.sparkmain"]
    assert not [name for name in modules if name.startswith("dataflow.cli.spark")]
    graph = _graph()
    assert _driver_violations(graph) == []
    graph["dataflow.cli.runjob"] = graph["dataflow.cli.runjob"] | {"dataflow.driver.sparkdrain"}
    assert _driver_violations(graph) == ["dataflow.cli.runjob imports dataflow.driver.sparkdrain"]
    graph["dataflow.driver.sparkdrain"] |= {"dataflow.cli.report"}  # it prints via events
    assert "dataflow.driver.sparkdrain imports dataflow.cli.report" in " ".join(
        _layer_violations(graph)
    )
