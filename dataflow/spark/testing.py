"""Test a transformation on a few rows: lists of dicts in, the expected list of dicts out.

Declare examples next to the transformation; ``utility validate FOLDER`` runs them all::

    from dataflow.testing import example

    @example(
        input=[{"sku": "a1", "qty": "2"}, {"sku": "", "qty": "1"}],
        expected=[{"sku": "a1", "qty": 2}],
        schema="sku STRING, qty STRING",
    )
    def drop_invalid(df): ...

or check one in a pytest test::

    from dataflow.testing import check

    def test_drop_invalid():
        check(drop_invalid, input=[...], expected=[...])

Rows are compared as a multiset (order does not matter, duplicates do); numbers compare
by value (``2 == 2.0``; floats and decimals to 9 decimal places); other values, dates
included, must be equal. A mismatch raises :class:`TransformationMismatch` whose message
lists the missing and the unexpected rows. An example whose input already equals its
expected output would pass without the transformation doing anything: it raises
:class:`VacuousTest`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ..errors import TransformationMismatch, VacuousTest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .pipeline import Pipeline

Rows = Sequence[Mapping[str, Any]]
EXAMPLES_ATTRIBUTE = "__dataflow_examples__"
_SHOWN = 10  # rows shown per side of a diff


@dataclass(frozen=True)
class Example:
    """Inputs (one list of rows, or lists by parameter name) and the expected rows."""

    inputs: Mapping[str, Rows] | Rows
    expected: Rows
    schema: Mapping[str, str] | str | None = None
    description: str = ""
    _named: bool = field(default=False, repr=False)


def example(
    input: Rows | None = None,
    expected: Rows = (),
    *,
    inputs: Mapping[str, Rows] | None = None,
    schema: Mapping[str, str] | str | None = None,
    description: str = "",
) -> Callable[[Callable[..., DataFrame]], Callable[..., DataFrame]]:
    """Attach an example to a transformation (the function itself is unchanged)."""
    case = _example(input, expected, inputs, schema, description)

    def attach(function: Callable[..., DataFrame]) -> Callable[..., DataFrame]:
        cases = list(getattr(function, EXAMPLES_ATTRIBUTE, ()))
        # decorators apply bottom-up: keep the order in which they are written
        setattr(function, EXAMPLES_ATTRIBUTE, [case, *cases])
        return function

    return attach


def examples(function: Callable[..., Any]) -> list[Example]:
    """The examples declared on a transformation, in the order written."""
    return list(getattr(function, EXAMPLES_ATTRIBUTE, ()))


def check(
    transformation: Callable[..., DataFrame],
    input: Rows | None = None,
    expected: Rows = (),
    *,
    inputs: Mapping[str, Rows] | None = None,
    schema: Mapping[str, str] | str | None = None,
    spark: SparkSession | None = None,
) -> None:
    """Run ``transformation`` on the input rows; raise unless it yields ``expected``."""
    run_example(transformation, _example(input, expected, inputs, schema, ""), spark)


def run_example(
    transformation: Callable[..., DataFrame], case: Example, spark: SparkSession | None = None
) -> None:
    """Check one :class:`Example`; raises VacuousTest or TransformationMismatch."""
    name = getattr(transformation, "__name__", "transformation")
    expected_columns = _columns(case.expected)
    expected = Counter(_normal_row(row, expected_columns) for row in case.expected)
    named = case.inputs if case._named else {"": case.inputs}
    for label, rows in named.items():
        same_columns = set(_columns(rows)) == set(expected_columns)
        if same_columns and Counter(_normal_row(r, expected_columns) for r in rows) == expected:
            which = f"input '{label}'" if label else "the input"
            raise VacuousTest(
                f"{name}: {which} already equals the expected output, so this example "
                "would pass even if the transformation did nothing"
            )
    spark = spark or session()
    frames = {
        label: _frame(spark, rows, _schema(case.schema, label)) for label, rows in named.items()
    }
    result = transformation(**frames) if case._named else transformation(frames[""])
    problem = diff(result.columns, result.collect(), expected_columns, case.expected)
    if problem:
        raise TransformationMismatch(f"{name}: {problem}")


def diff(
    columns: Sequence[str], rows: Sequence[Any], expected_columns: Sequence[str], expected: Rows
) -> str | None:
    """None when ``rows`` (Spark Rows or dicts) equal ``expected`` as multisets, else a
    readable account of the difference."""
    if expected and set(columns) != set(expected_columns):  # no rows: no columns to expect
        missing = sorted(set(expected_columns) - set(columns))
        extra = sorted(set(columns) - set(expected_columns))
        parts = [f"missing {missing}" if missing else "", f"unexpected {extra}" if extra else ""]
        return f"output columns differ: {', '.join(p for p in parts if p)}"
    actual = Counter(_normal_row(_as_dict(row), columns) for row in rows)
    wanted = Counter(_normal_row(row, columns) for row in expected)
    if actual == wanted:
        return None
    order = list(expected_columns)
    lines = [f"output differs from expected ({len(rows)} rows, {len(expected)} expected)"]
    for title, sign, counts in (
        ("missing (expected, not in output)", "-", wanted - actual),
        ("unexpected (in output, not expected)", "+", actual - wanted),
    ):
        listed = list(counts.elements())
        if not listed:
            continue
        lines.append(f"  {title}: {len(listed)} row{'s' if len(listed) != 1 else ''}")
        for row in listed[:_SHOWN]:
            lines.append(f"    {sign} {_show(row, order)}")
        if len(listed) > _SHOWN:
            lines.append(f"    ... and {len(listed) - _SHOWN} more")
    return "\n".join(lines)


def session() -> SparkSession:
    """The active SparkSession, or a small local one for tests (one core, no UI)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("dataflow tests")
        .config("spark.driver.bindAddress", "127.0.0.1")  # tests need no network
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# -- helpers ------------------------------------------------------------------------------


def _example(
    input: Rows | None,
    expected: Rows,
    inputs: Mapping[str, Rows] | None,
    schema: Mapping[str, str] | str | None,
    description: str,
) -> Example:
    if (input is None) == (inputs is None):
        raise TypeError("give either input=[rows] or inputs={'name': [rows], ...}")
    if inputs is not None:
        return Example(dict(inputs), list(expected), schema, description, _named=True)
    return Example(list(input or ()), list(expected), schema, description)


def _schema(schema: Mapping[str, str] | str | None, label: str) -> str | None:
    if isinstance(schema, Mapping):
        return schema.get(label)
    return schema


def _frame(spark: SparkSession, rows: Rows, schema: str | None) -> DataFrame:
    if schema is not None:
        names = [f.name for f in spark.createDataFrame([], schema).schema.fields]
        return spark.createDataFrame([tuple(r.get(n) for n in names) for r in rows], schema)
    if not rows:
        raise TypeError("an empty input needs a schema, e.g. schema='id INT, name STRING'")
    names = _columns(rows)
    return spark.createDataFrame([tuple(r.get(n) for n in names) for r in rows], names)


def _columns(rows: Rows) -> list[str]:
    """Column names in first-seen order across the rows."""
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def _as_dict(row: Any) -> Mapping[str, Any]:
    return row.asDict(recursive=True) if hasattr(row, "asDict") else row


def _normal(value: Any) -> Any:
    """A hashable value that compares as a person would read it."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (float, Decimal)):
        number = round(float(value), 9)
        return int(number) if number.is_integer() else number
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _normal(v)) for k, v in _as_dict(value).items()))
    if hasattr(value, "asDict"):
        return _normal(value.asDict(recursive=True))
    if isinstance(value, (list, tuple)):
        return tuple(_normal(v) for v in value)
    return value


def _normal_row(row: Mapping[str, Any], columns: Sequence[str]) -> tuple[tuple[str, Any], ...]:
    """The row as sorted (column, value) pairs; a column the row leaves out is None."""
    row = _as_dict(row)
    return tuple(sorted((c, _normal(row.get(c))) for c in columns))


def _show(row: tuple[tuple[str, Any], ...], order: list[str]) -> str:
    values = dict(row)
    keys = [k for k in order if k in values] + sorted(k for k in values if k not in order)
    return "{" + ", ".join(f"{k!r}: {values[k]!r}" for k in keys) + "}"


# -- a whole pipeline ---------------------------------------------------------------------


@dataclass(frozen=True)
class StepReport:
    """How one transformation's examples went: ``failures`` has one message per failure."""

    pipeline: str
    name: str
    examples: int
    failures: tuple[str, ...] = ()

    @property
    def status(self) -> str:
        if not self.examples:
            return "untested"
        return "failed" if self.failures else "ok"


def validate(pipeline: Pipeline, spark: SparkSession | None = None) -> list[StepReport]:
    """Run every declared example of every transformation of ``pipeline``."""
    reports = []
    for step in pipeline.steps:
        cases = examples(step.function)
        failures = []
        for number, case in enumerate(cases, 1):
            label = f"example {number}" + (f" ({case.description})" if case.description else "")
            try:
                run_example(step.function, case, spark or session())
            except (TransformationMismatch, VacuousTest) as exc:
                failures.append(f"{label}: {str(exc).split(': ', 1)[-1]}")
            except Exception as exc:  # the transformation itself broke: report, go on
                first = (str(exc).strip().splitlines() or [""])[0]
                failures.append(f"{label}: raised {type(exc).__name__}: {first}")
        reports.append(StepReport(pipeline.name, step.name, len(cases), tuple(failures)))
    return reports
