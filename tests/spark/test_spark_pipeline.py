"""Pipelines of transformations, dataflow.testing, and ``utility validate``."""

from __future__ import annotations

import json
import textwrap
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dataflow.errors import PipelineError, TransformationMismatch, VacuousTest
from dataflow.pipeline import Pipeline, discover
from dataflow.testing import check, example, examples, validate

ROOT = Path(__file__).resolve().parent.parent.parent


def positive(df: DataFrame) -> DataFrame:
    return df.where(F.col("n") > 0)


def doubled(df: DataFrame) -> DataFrame:
    return df.withColumn("n", F.col("n") * 2)


def labelled(df: DataFrame, labels: DataFrame) -> DataFrame:
    return df.join(labels, "n", "left")


def test_a_pipeline_applies_its_transformations_in_order(spark):
    numbers = spark.createDataFrame([(-1,), (1,), (2,)], "n INT")
    result = Pipeline("p", [positive, doubled]).run(numbers)
    assert sorted(r.n for r in result.collect()) == [2, 4]
    # the other order gives another answer: the order is the declared one
    assert sorted(r.n for r in Pipeline("p", [doubled, positive]).run(numbers).collect()) == [2, 4]
    assert [s.name for s in Pipeline("p", [doubled, positive]).steps] == ["doubled", "positive"]


def test_later_transformations_take_other_inputs_by_name(spark):
    numbers = spark.createDataFrame([(1,), (2,)], "n INT")
    labels = spark.createDataFrame([(4, "four")], "n INT, label STRING")
    result = Pipeline("p", [doubled, labelled]).run(numbers, labels=labels)
    assert sorted((r.n, r.label) for r in result.collect()) == [(2, None), (4, "four")]
    with pytest.raises(PipelineError, match=r"labelled needs the input 'labels' \(named inputs"):
        Pipeline("p", [doubled, labelled]).run(numbers)


def write_pipeline(folder: Path, spec: object, modules: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pipeline.json").write_text(spec if isinstance(spec, str) else json.dumps(spec))
    for name, code in modules.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(code))
    return folder


STEPS = """\
from pyspark.sql import functions as F
from dataflow.testing import example
from helpers import FACTOR  # a sibling module of the pipeline folder

@example(input=[{"n": 1}, {"n": -1}], expected=[{"n": 1}], description="negatives go")
@example(input=[{"n": 0}], expected=[], schema="n INT")
def positive(df):
    return df.where(F.col("n") > 0)

@example(input=[{"n": 2}], expected=[{"n": 4}])
@example(input=[{"n": 3}], expected=[{"n": 7}], description="deliberately wrong")
def doubled(df):
    return df.withColumn("n", F.col("n") * FACTOR)

@example(input=[{"n": 5}], expected=[{"n": 5}])
def unchanged(df):
    return df

def untested(df):
    return df
"""


def test_a_pipeline_loads_from_json_and_runs(spark, tmp_path):
    folder = write_pipeline(
        tmp_path / "p",
        {"name": "numbers", "transformations": ["steps.positive", "steps.doubled"]},
        {"steps": STEPS, "helpers": "FACTOR = 2\n"},
    )
    pipeline = Pipeline.load(folder)
    assert (pipeline.name, [s.name for s in pipeline.steps]) == ("numbers", ["positive", "doubled"])
    result = pipeline.run(spark.createDataFrame([(-3,), (5,)], "n INT"))
    assert [r.n for r in result.collect()] == [10]


@pytest.mark.parametrize(
    ("spec", "modules", "message"),
    [
        ("{oops", {}, r"not valid JSON"),
        ({"transformations": []}, {}, r'"transformations" must be a non-empty list'),
        ({"transformations": ["positive"]}, {}, r"'positive' is not \"module.function\""),
        ({"transformations": ["gone.f"]}, {}, r"module gone not found: no .*gone.py"),
        ({"transformations": ["m.nope"]}, {"m": "x = 1\n"}, r"m.py has no function 'nope'"),
        ({"transformations": ["m.f"]}, {"m": "import nowhere\n"}, r"cannot import m.py: Module"),
    ],
)
def test_a_broken_declaration_is_one_clear_line(tmp_path, spec, modules, message):
    folder = write_pipeline(tmp_path / "bad", spec, modules)
    with pytest.raises(PipelineError, match=message) as caught:
        Pipeline.load(folder)
    assert str(caught.value).startswith(f"pipeline {folder / 'pipeline.json'}: ")
    assert "\n" not in str(caught.value)


def test_discover_finds_every_pipeline_below_a_folder(tmp_path):
    for name in ("b", "a/inner"):
        write_pipeline(tmp_path / name, {"transformations": ["m.f"]}, {"m": "def f(df): return df"})
    write_pipeline(tmp_path / ".hidden", {"transformations": ["m.f"]}, {})
    assert [p.name for p in discover(tmp_path)] == ["inner", "b"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(PipelineError, match=r"no pipeline.json in it or in the folders below"):
        discover(tmp_path / "empty")


# -- dataflow.testing ------------------------------------------------------------------------


def test_check_passes_whatever_the_row_order_and_number_spelling(spark):
    check(
        doubled,
        input=[{"n": 1}, {"n": 2}, {"n": 2}],
        expected=[{"n": 4.0}, {"n": 2}, {"n": Decimal("4.00")}],
        spark=spark,
    )


def test_check_shows_the_missing_and_the_unexpected_rows(spark):
    with pytest.raises(TransformationMismatch) as caught:
        check(
            doubled,
            input=[{"n": 1}, {"n": 2}, {"n": 2}],
            expected=[{"n": 2}, {"n": 4}],
            spark=spark,
        )
    assert str(caught.value) == (
        "doubled: output differs from expected (3 rows, 2 expected)\n"
        "  unexpected (in output, not expected): 1 row\n"
        "    + {'n': 4}"
    )
    with pytest.raises(TransformationMismatch) as caught:
        check(positive, input=[{"n": 1}, {"n": -1}], expected=[{"n": 2}], spark=spark)
    assert str(caught.value) == (
        "positive: output differs from expected (1 rows, 1 expected)\n"
        "  missing (expected, not in output): 1 row\n"
        "    - {'n': 2}\n"
        "  unexpected (in output, not expected): 1 row\n"
        "    + {'n': 1}"
    )


def test_check_reports_different_columns(spark):
    with pytest.raises(
        TransformationMismatch, match=r"columns differ: missing \['m'\], unexpected \['n'\]"
    ):
        check(doubled, input=[{"n": 1}], expected=[{"m": 2}], spark=spark)


def test_an_example_whose_input_is_already_the_answer_proves_nothing(spark):
    def identity(df: DataFrame) -> DataFrame:
        return df

    with pytest.raises(
        VacuousTest, match=r"identity: the input already equals the expected output"
    ):
        check(identity, input=[{"n": 1}, {"n": 2}], expected=[{"n": 2}, {"n": 1}], spark=spark)
    with pytest.raises(VacuousTest, match=r"input 'labels' already equals"):
        check(
            labelled,
            inputs={"df": [{"n": 1}], "labels": [{"n": 1, "label": "one"}]},
            expected=[{"n": 1, "label": "one"}],
            spark=spark,
        )


def test_several_inputs_are_given_by_parameter_name(spark):
    check(
        labelled,
        inputs={"df": [{"n": 1}, {"n": 2}], "labels": [{"n": 2, "label": "two"}]},
        expected=[{"n": 1, "label": None}, {"n": 2, "label": "two"}],
        schema={"labels": "n INT, label STRING"},
        spark=spark,
    )


def test_examples_keep_the_order_they_are_written_in():
    @example(input=[{"n": 1}], expected=[{"n": 2}], description="first")
    @example(input=[{"n": 2}], expected=[{"n": 4}], description="second")
    def twice(df: DataFrame) -> DataFrame:
        return doubled(df)

    assert [e.description for e in examples(twice)] == ["first", "second"]


def test_validate_reports_each_transformation(spark, tmp_path):
    folder = write_pipeline(
        tmp_path / "p",
        {
            "transformations": [
                "steps.positive",
                "steps.doubled",
                "steps.unchanged",
                "steps.untested",
            ]
        },
        {"steps": STEPS, "helpers": "FACTOR = 2\n"},
    )
    reports = {r.name: r for r in validate(Pipeline.load(folder), spark)}
    assert {n: r.status for n, r in reports.items()} == {
        "positive": "ok",
        "doubled": "failed",
        "unchanged": "failed",
        "untested": "untested",
    }
    assert reports["positive"].examples == 2
    assert reports["doubled"].failures == (
        "example 2 (deliberately wrong): output differs from expected (1 rows, 1 expected)\n"
        "  missing (expected, not in output): 1 row\n"
        "    - {'n': 7}\n"
        "  unexpected (in output, not expected): 1 row\n"
        "    + {'n': 6}",
    )
    assert "already equals the expected output" in reports["unchanged"].failures[0]


def test_the_examples_pipelines_pass_their_own_tests(spark):
    reports = [r for p in discover(ROOT / "examples") for r in validate(p, spark)]
    assert reports and {r.status for r in reports} == {"ok"}, reports


# -- utility validate ------------------------------------------------------------------------


def test_utility_validate_prints_one_line_per_transformation_and_fails(cli, tmp_path):
    write_pipeline(
        tmp_path / "pipes" / "numbers",
        {
            "name": "numbers",
            "transformations": ["steps.positive", "steps.doubled", "steps.untested"],
        },
        {"steps": STEPS, "helpers": "FACTOR = 2\n"},
    )
    result = cli.utility("validate", "pipes", timeout=300)
    assert result.code == 1, result
    assert result.lines == [
        f"pipeline numbers ({Path('pipes') / 'numbers' / 'pipeline.json'})",
        "  OK        positive  2 examples",
        "  FAILED    doubled   1 of 2 examples failed",
        "      example 2 (deliberately wrong): output differs from expected (1 rows, 1 expected)",
        "        missing (expected, not in output): 1 row",
        "          - {'n': 7}",
        "        unexpected (in output, not expected): 1 row",
        "          + {'n': 6}",
        "  UNTESTED  untested  no examples declared",
        "3 transformations: 1 ok, 1 failed, 1 untested",
    ]


def test_utility_validate_errors_are_one_line(cli, tmp_path):
    missing = cli.utility("validate", "nowhere")
    assert (missing.code, missing.err) == (2, "error: pipeline nowhere: no such file or folder\n")
    write_pipeline(tmp_path / "bad", "[1]", {})
    bad = cli.utility("validate", "bad")
    assert (bad.code, bad.err) == (
        2,
        f"error: pipeline {Path('bad') / 'pipeline.json'}: it must be a JSON object\n",
    )
