"""Pipelines: transformations, plain functions of DataFrames, applied in order.

A transformation takes one or more DataFrames and returns one; it knows nothing of
chunks or datasets, so it can be tested on a few rows (:mod:`dataflow.testing`).
A pipeline lists transformations in code::

    clean = Pipeline("clean", [drop_invalid, normalise_country])

or in a folder holding ``pipeline.json`` and the modules it names::

    {"name": "clean", "transformations": ["clean.drop_invalid", "clean.normalise_country"]}

(``clean.drop_invalid`` is function ``drop_invalid`` of ``clean.py`` in that folder)
and runs it on one DataFrame, or on several passed by parameter name::

    Pipeline.load("pipelines/clean").run(df)
    enrich.run(orders=orders, customers=customers)

The first transformation receives the inputs; each next one receives the previous
result as its first parameter, and any other parameter from the named inputs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..errors import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PIPELINE_FILE = "pipeline.json"
Transformation = Callable[..., "DataFrame"]


@dataclass(frozen=True)
class Step:
    """One transformation of a pipeline."""

    name: str
    function: Transformation

    @property
    def parameters(self) -> list[str]:
        return [
            p.name
            for p in inspect.signature(self.function).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]


@dataclass(frozen=True, init=False)
class Pipeline:
    """Transformations in order; ``source`` says where it was declared."""

    name: str
    steps: tuple[Step, ...]
    source: str = "<code>"

    def __init__(self, name: str, functions: Iterable[Transformation | Step], source: str = ""):
        steps = tuple(f if isinstance(f, Step) else Step(f.__name__, f) for f in functions)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "source", source or "<code>")
        if not steps:
            raise PipelineError(self.source, "it lists no transformations")

    @classmethod
    def load(cls, path: str | Path) -> Pipeline:
        """Read ``pipeline.json`` (or the folder holding it) and import its transformations."""
        file = Path(path)
        if file.is_dir():
            file = file / PIPELINE_FILE
        if not file.is_file():
            raise PipelineError(str(path), f"no {PIPELINE_FILE} there")
        name, entries = _read_spec(file)
        folder = file.parent.resolve()
        steps = [
            Step(entry.rpartition(".")[2], _function(folder, entry, file)) for entry in entries
        ]
        return cls(name or folder.name, steps, str(file))

    def run(self, *inputs: DataFrame, **named: DataFrame) -> DataFrame:
        """Apply every transformation in order; returns the last one's DataFrame."""
        first, *rest = self.steps
        result = _call(first, list(inputs), named, self.source)
        for step in rest:
            result = _call(step, [result], named, self.source)
        return result


def discover(path: str | Path) -> list[Pipeline]:
    """The pipeline at ``path`` (a ``pipeline.json`` or its folder), or every pipeline
    found in the folders below it."""
    root = Path(path)
    if not root.exists():
        raise PipelineError(str(path), "no such file or folder")
    if root.is_file() or (root / PIPELINE_FILE).is_file():
        return [Pipeline.load(root)]
    files = sorted(
        p
        for p in root.rglob(PIPELINE_FILE)
        if not any(part.startswith(".") for part in p.relative_to(root).parts)
    )
    if not files:
        raise PipelineError(str(path), f"no {PIPELINE_FILE} in it or in the folders below it")
    return [Pipeline.load(file) for file in files]


def _call(step: Step, positional: list[Any], named: dict[str, Any], source: str) -> Any:
    params = step.parameters
    if len(positional) > len(params):
        raise PipelineError(
            source, f"{step.name} takes {len(params)} DataFrames, {len(positional)} were given"
        )
    kwargs = {}
    for param in params[len(positional) :]:
        if param not in named:
            given = ", ".join(sorted(named)) or "none"
            raise PipelineError(
                source, f"{step.name} needs the input '{param}' (named inputs given: {given})"
            )
        kwargs[param] = named[param]
    return step.function(*positional, **kwargs)


def _read_json(file: Path) -> dict[str, Any]:
    try:
        spec = json.loads(file.read_text())
    except json.JSONDecodeError as exc:
        raise PipelineError(str(file), f"not valid JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise PipelineError(str(file), "it must be a JSON object")
    return spec


def _read_spec(file: Path) -> tuple[str, Sequence[str]]:
    """The pipeline's name (may be empty) and its "module.function" entries."""
    spec = _read_json(file)
    entries = spec.get("transformations")
    if not isinstance(entries, list) or not entries:
        raise PipelineError(
            str(file), '"transformations" must be a non-empty list of "module.function"'
        )
    for entry in entries:
        if not isinstance(entry, str) or "." not in entry.strip(".") or " " in entry:
            raise PipelineError(str(file), f'{entry!r} is not "module.function"')
    return str(spec.get("name") or ""), entries


def _function(folder: Path, entry: str, file: Path) -> Transformation:
    module_name, _, function_name = entry.rpartition(".")
    module = _module(folder, module_name, file)
    function = getattr(module, function_name, None)
    if not callable(function):
        raise PipelineError(str(file), f"{module.__file__} has no function '{function_name}'")
    return function


def _module(folder: Path, dotted: str, file: Path) -> ModuleType:
    """Import ``folder/a/b.py`` for ``a.b`` under a name unique to the folder, so two
    pipelines may each have a ``clean.py``; the folder is on sys.path meanwhile, so the
    module may import its siblings."""
    path = folder.joinpath(*dotted.split(".")).with_suffix(".py")
    if not path.is_file():
        raise PipelineError(str(file), f"module {dotted} not found: no {path}")
    unique = hashlib.sha256(str(path).encode()).hexdigest()[:10]
    name = f"dataflow_pipeline_{unique}_{dotted.replace('.', '_')}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise PipelineError(str(file), f"cannot import {path.name}: {reason}") from None
    finally:
        sys.path.remove(str(folder))
    _pickle_by_value(module)
    return module


def _pickle_by_value(module: ModuleType) -> None:
    """Python UDFs defined in a pipeline module reach the executors by value: the
    executors cannot import a module loaded from a file under a private name."""
    try:
        from pyspark import cloudpickle
    except ImportError:
        return
    register = getattr(cloudpickle, "register_pickle_by_value", None)
    if register is not None:
        register(module)
