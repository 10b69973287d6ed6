"""A run's JDBC output is fenced by its attempt's number in the target database
(docs/guarantees.md, "Output written with dataflow.spark", statement 5), on a real
PostgreSQL server through Spark's JDBC driver."""

from __future__ import annotations

from dataclasses import replace

import pytest

import dataflow.spark as df
from dataflow.errors import DatasetError
from dataflow.spark.batch import BatchDataset
from dataflow.spark.datasets import Dataset

OLD, NEW, OTHER = "a" * 32, "b" * 32, "c" * 32  # three runs' tokens


def output(postgres, table: str, dataid: str, token: str, number: int) -> Dataset:
    """Chunk ``dataid`` of OUT dataset ``table``, as attempt ``number`` of job ``load``
    (run ``token``) sees it."""
    return postgres.dataset(
        table, dataid, itemtype="OUT", attempt=token, number=number, jobid="load"
    )


def rows(spark, note: str, *dataids: str):
    return spark.createDataFrame(
        [(n, note, d) for d in dataids for n in (1, 2)], "id INT, note STRING, dataid STRING"
    )


def table(postgres, name: str) -> list[str]:
    return postgres.sql(f"SELECT shard, id, note FROM {name} ORDER BY shard, id").splitlines()


def stages(postgres) -> str:
    return postgres.sql(
        "SELECT count(*) FROM information_schema.tables WHERE table_name LIKE 'dataflow_stage%'"
    ).strip()


def test_a_late_jdbc_writer_never_replaces_a_newer_attempts_rows(spark, postgres):
    postgres.sql(
        "DROP TABLE IF EXISTS fenced, dataflow_fence;"
        "CREATE TABLE fenced (id int, note text, shard int NOT NULL);"
        "INSERT INTO fenced VALUES (9, 'other chunk', 2)"
    )
    chunk = rows(spark, "new", "1").drop("dataid")
    df.write(chunk, output(postgres, "fenced", "1", NEW, 2))
    assert table(postgres, "fenced") == ["1|1|new", "1|2|new", "2|9|other chunk"]

    late = rows(spark, "late", "1").drop("dataid")
    with pytest.raises(DatasetError, match=r"a newer attempt wrote chunk '1' \(attempt 2\): "):
        df.write(late, output(postgres, "fenced", "1", OLD, 1))
    with pytest.raises(DatasetError, match=r"chunk '1' \(attempt 2\)"):  # same number, not it
        df.write(late, output(postgres, "fenced", "1", OTHER, 2))
    assert table(postgres, "fenced") == ["1|1|new", "1|2|new", "2|9|other chunk"]
    assert stages(postgres) == "0"  # each write's staging table is dropped

    df.write(rows(spark, "again", "1").drop("dataid"), output(postgres, "fenced", "1", NEW, 2))
    assert table(postgres, "fenced")[:2] == ["1|1|again", "1|2|again"]  # its own rerun
    df.write(rows(spark, "next", "1").drop("dataid"), output(postgres, "fenced", "1", OTHER, 3))
    assert table(postgres, "fenced") == ["1|1|next", "1|2|next", "2|9|other chunk"]
    fence = postgres.sql("SELECT tablename, dataid, jobid, attempt FROM dataflow_fence")
    assert fence.splitlines() == ["public.fenced|1|load|3"]
    # the boundary: numbers that start again lower (a store writer deleted the chunk's
    # last history rows) are refused until the chunk's fence row is deleted
    with pytest.raises(DatasetError, match=r"chunk '1' \(attempt 3\)"):
        df.write(late, output(postgres, "fenced", "1", OLD, 1))
    postgres.sql("DELETE FROM dataflow_fence WHERE dataid = '1'")
    df.write(late, output(postgres, "fenced", "1", OLD, 1))
    assert table(postgres, "fenced")[:2] == ["1|1|late", "1|2|late"]


def test_a_fenced_jdbc_write_creates_a_missing_table(spark, postgres):
    postgres.sql("DROP TABLE IF EXISTS made, dataflow_fence")
    df.write(rows(spark, "first", "7").drop("dataid"), output(postgres, "made", "7", NEW, 1))
    assert table(postgres, "made") == ["7|1|first", "7|2|first"]


def test_a_batch_publishes_every_chunk_but_one_a_newer_attempt_wrote(spark, postgres):
    postgres.sql(
        "DROP TABLE IF EXISTS bfenced, dataflow_fence;"
        "CREATE TABLE bfenced (id int, note text, shard int NOT NULL);"
        "INSERT INTO bfenced VALUES (1, 'old', 1), (1, 'old', 3)"
    )
    df.write(rows(spark, "newer", "2").drop("dataid"), output(postgres, "bfenced", "2", NEW, 4))
    batch = BatchDataset(
        "bfenced", tuple(output(postgres, "bfenced", d, OLD, 3) for d in ("1", "2", "3"))
    )
    with pytest.raises(DatasetError, match=r"a newer attempt wrote chunk '2' \(attempt 4\)"):
        df.write(rows(spark, "batch", "1", "2"), batch)  # no rows for chunk 3: emptied
    assert table(postgres, "bfenced") == ["1|1|batch", "1|2|batch", "2|1|newer", "2|2|newer"]
    assert stages(postgres) == "0"


def test_a_jdbc_write_outside_a_run_is_not_fenced(spark, postgres):
    postgres.sql(
        "DROP TABLE IF EXISTS plain, dataflow_fence;"
        "CREATE TABLE plain (id int, note text, shard int NOT NULL)"
    )
    unfenced = replace(output(postgres, "plain", "1", "", 0), attempt="", number=0)
    df.write(rows(spark, "by hand", "1").drop("dataid"), unfenced)
    assert table(postgres, "plain") == ["1|1|by hand", "1|2|by hand"]
    found = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'dataflow_fence'"
    assert postgres.sql(found).strip() == "0"
