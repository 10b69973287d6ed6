"""dataflow.spark: the job context, and reading and writing exactly one chunk."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dataflow import crypto
from dataflow.errors import (
    ChunkMissing,
    DatasetError,
    NoSuchJobDataset,
    NotAJobEnvironment,
    PasskeyMissing,
)
from dataflow.spark import Dataset, chunk_folder, context, read, read_all, registered, write


def environment(**extra: str) -> dict[str, str]:
    """What RunJob exports for job 'clean' at chunk 7: IN raw (JDBC), OUT tidy (files)."""
    env = {"dataid": "7", "jobid": "clean", "PATH": "/bin", "raw_dataid_column": "shard"}
    for name, itemtype, values in (
        ("raw", "IN", ("db1:5433", "sales", "public", "orders", "etl", "tok", "pw")),
        ("tidy", "OUT", ("", "csv", "/lake", "tidy", "", "", "")),
    ):
        columns = ("hostname", "database", "schemaname", "tablename", "username")
        columns += ("encryptedpass", "password")
        for column, value in zip(columns, values, strict=True):
            if column == "password" and not value:
                continue
            env[f"{name}_{column}"] = env[f"{name}_{column.upper()}"] = value
        env[f"{name}_datasetid"] = env[f"{name}_DATASETID"] = name
        env[f"{name}_itemtype"] = env[f"{name}_ITEMTYPE"] = itemtype
    return {**env, **extra}


def test_the_context_reads_what_runjob_exports():
    ctx = context(environment())
    assert (ctx.jobid, ctx.dataid) == ("clean", "7")
    raw, tidy = ctx.input(), ctx.output()
    assert ctx.input("raw") is raw and list(ctx.inputs) == ["raw"] and list(ctx.outputs) == ["tidy"]
    assert (raw.kind, raw.jdbc_url, raw.username, raw.password) == (
        "jdbc",
        "jdbc:postgresql://db1:5433/sales",
        "etl",
        "pw",
    )
    assert raw.chunk_column == "shard" and tidy.chunk_column == "dataid"
    assert (tidy.kind, tidy.format, tidy.chunk_path) == ("file", "csv", "/lake/tidy/dataid=7")
    assert "pw" not in repr(raw) and "pw" not in repr(ctx)
    assert not tidy.fenced and not raw.fenced  # not a run of RunJob's
    sink = {"sink_datasetid": "sink", "sink_itemtype": "OUT", "sink_hostname": "db1"}
    run = context(environment(DATAFLOW_RUN="f" * 32, DATAFLOW_ATTEMPT="3", **sink))
    sink, tidy, raw = run.output("sink"), run.output("tidy"), run.input()
    assert (sink.fenced, sink.number, sink.jobid, sink.attempt) == (True, 3, "clean", "f" * 32)
    assert tidy.number == 3 and not tidy.fenced  # a file chunk: its attempt folder
    assert not raw.fenced and "f" * 32 not in repr(sink)  # an input is never written


def test_the_context_explains_what_is_missing():
    with pytest.raises(NotAJobEnvironment, match=r"\$dataid is not set\): run this script with"):
        context({"jobid": "x"})
    ctx = context(environment())
    with pytest.raises(NoSuchJobDataset) as caught:
        ctx.input("orders")
    assert str(caught.value) == "job 'clean' has no IN dataset 'orders' (its IN datasets: raw)"
    two = context(environment(extra_datasetid="extra", extra_itemtype="OUT"))
    with pytest.raises(NoSuchJobDataset, match=r"no exactly one OUT dataset \(.*: extra, tidy\)"):
        two.output()


def test_a_job_wide_chunk_column_item_applies_to_every_jdbc_dataset():
    env = environment(dataid_column="day")
    del env["raw_dataid_column"]
    assert context(env).input().chunk_column == "day"


def test_file_dataset_paths():
    seed = Dataset(
        "d", "2025-11-25", database="file:", schemaname="s3a://bucket/lake/", tablename="t"
    )
    assert (seed.format, seed.chunk_path) == ("parquet", "s3a://bucket/lake/t/dataid=2025-11-25")
    hdfs = Dataset("d", "1.0", database="ORC", schemaname="hdfs://nn:8020/w", tablename="/t/")
    assert hdfs.chunk_path == "hdfs://nn:8020/w/t/dataid=1.0"
    # characters Spark escapes in partition folders are escaped the same way
    assert chunk_folder("2025-11-25T10:00") == "dataid=2025-11-25T10%3A00"
    assert chunk_folder("../a/b c") == "dataid=..%2Fa%2Fb c"
    with pytest.raises(DatasetError, match=r"dataset 'd': schemaname \(the base path"):
        _ = Dataset("d", "1", database="csv").chunk_path
    with pytest.raises(DatasetError, match=r"set database to a file format .* or hostname"):
        _ = Dataset("d", "1", database="mystery").kind


def test_jdbc_dataset_sql():
    pg = Dataset("d", "it's", hostname="db", database="w", schemaname="s", tablename="t")
    assert pg.chunk_sql() == "(SELECT * FROM s.t WHERE dataid = 'it''s') dataflow_chunk"
    query = Dataset("d", "3", hostname="db", tablename="select a, b from t where b > 0;")
    assert query.chunk_sql() == (
        "(SELECT * FROM (select a, b from t where b > 0) dataflow_source "
        "WHERE dataid = '3') dataflow_chunk"
    )
    mysql = Dataset("d", "1", hostname="jdbc:mysql://db:3306/", database="w", tablename="t")
    assert (mysql.jdbc_url, mysql.jdbc_driver) == (
        "jdbc:mysql://db:3306/w",
        "com.mysql.cj.jdbc.Driver",
    )
    with pytest.raises(DatasetError, match=r"cannot be used in SQL"):
        Dataset("d", "a\\b", hostname="db", tablename="t").chunk_sql()
    with pytest.raises(DatasetError, match=r"chunk column 'x; drop' is not a column name"):
        Dataset("d", "1", hostname="db", tablename="t", chunk_column="x; drop").chunk_sql()
    with pytest.raises(DatasetError, match=r"'t t' is not a table name"):
        _ = Dataset("d", "1", hostname="db", tablename="t t").table


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json", "orc"])
def test_each_file_format_round_trips_one_chunk(spark, tmp_path, fmt):
    dataset = Dataset("d", "2025-01-02", database=fmt, schemaname=str(tmp_path), tablename="t")
    write(spark.createDataFrame([("a", "1"), ("b", "2")], "k STRING, v STRING"), dataset)
    assert (tmp_path / "t" / "dataid=2025-01-02").is_dir()
    back = read(spark, dataset, schema="k STRING, v STRING")
    assert sorted(tuple(r) for r in back.collect()) == [("a", "1"), ("b", "2")]


def test_a_rewrite_replaces_its_chunk_and_leaves_the_others(spark, tmp_path):
    def chunk(dataid: str) -> Dataset:
        return Dataset("d", dataid, database="parquet", schemaname=str(tmp_path), tablename="t")

    write(spark.createDataFrame([(1,), (2,)], "n INT"), chunk("1"))
    write(spark.createDataFrame([(3,)], "n INT"), chunk("2"))
    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "t" / "dataid=2").iterdir()}
    write(spark.createDataFrame([(9,)], "n INT"), chunk("1"))
    write(spark.createDataFrame([(9,)], "n INT"), chunk("1"))  # a rerun: still one copy
    assert [r.n for r in read(spark, chunk("1")).collect()] == [9]
    after = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "t" / "dataid=2").iterdir()}
    assert after == before


def test_the_dataid_is_the_folder_and_read_all_keeps_it_as_written(spark, tmp_path):
    def chunk(dataid: str) -> Dataset:
        return Dataset("d", dataid, database="parquet", schemaname=str(tmp_path), tablename="t")

    frame = spark.createDataFrame([("x", "stale")], "k STRING, dataid STRING")
    write(frame, chunk("007"))  # a dataid column would clash with the folder: not stored
    write(frame, chunk("2025-11-25T10:00"))
    assert read(spark, chunk("007")).columns == ["k"]
    rows = read_all(spark, chunk("")).collect()
    assert sorted(r.dataid for r in rows) == ["007", "2025-11-25T10:00"]


def test_reading_a_chunk_that_is_not_there_says_where_it_looked(spark, tmp_path):
    dataset = Dataset("raw", "42", database="parquet", schemaname=str(tmp_path), tablename="t")
    with pytest.raises(ChunkMissing) as caught:
        read(spark, dataset)
    assert str(caught.value) == f"dataset 'raw' has no chunk '42' at {tmp_path}/t/dataid=42"


def test_registered_reads_the_store_like_runjob_does(cli, monkeypatch, tmp_path):
    secret = crypto.encrypt("pw", "key")
    cli.ok("createtables")
    cli.ok("dml", f"insert into dataset values ('src','db:5432','w','s','t','etl','{secret}')")
    cli.ok(
        "dml", "insert into job (jobid, itemtype, itemvalue) values ('x','src_dataid_column','n')"
    )
    db = str(tmp_path / "dataflow.db")
    monkeypatch.delenv("PASSKEY", raising=False)
    monkeypatch.delenv("PASSKEY_FILE", raising=False)
    with pytest.raises(PasskeyMissing):
        registered("src", db=db)
    monkeypatch.setenv("PASSKEY", "key")
    src = registered("src", "3", job="x", db=db)
    assert (src.password, src.chunk_column, src.chunk_sql()) == (
        "pw",
        "n",
        "(SELECT * FROM s.t WHERE n = '3') dataflow_chunk",
    )
    with pytest.raises(DatasetError, match=r"dataset 'nope': it is not in table dataset"):
        registered("nope", db=db)


# -- JDBC, on a real PostgreSQL server -----------------------------------------------------


def jdbc(postgres, table: str, dataid: str, column: str = "shard") -> Dataset:
    return postgres.dataset(table, dataid, column)


def test_a_jdbc_read_gets_one_chunk_filtered_in_the_database(spark, postgres):
    postgres.sql(
        "DROP TABLE IF EXISTS src; CREATE TABLE src (id int, shard int, amount numeric(8,2));"
        "INSERT INTO src SELECT g, g % 3, g / 4.0 FROM generate_series(1, 30) g"
    )
    chunk = read(spark, jdbc(postgres, "src", "2"))
    assert sorted(r.id for r in chunk.collect()) == list(range(2, 31, 3))
    plan = chunk._jdf.queryExecution().executedPlan().toString()
    assert "WHERE shard = '2'" in plan  # the filter is in the SQL sent, not applied after
    everything = read_all(spark, jdbc(postgres, "src", ""))
    counts = {r.dataid: r["count"] for r in everything.groupBy("dataid").count().collect()}
    assert counts == {"0": 10, "1": 10, "2": 10}


def test_a_jdbc_write_replaces_its_chunk_and_leaves_the_others(spark, postgres):
    postgres.sql(
        "DROP TABLE IF EXISTS tgt; CREATE TABLE tgt (id int, note text, shard int NOT NULL);"
        "INSERT INTO tgt VALUES (1, 'old', 1), (2, 'old', 1), (3, 'keep', 2)"
    )
    rows = spark.createDataFrame([(10, "new"), (11, "new")], "id INT, note STRING")
    write(rows, jdbc(postgres, "tgt", "1"))
    write(rows, jdbc(postgres, "tgt", "1"))  # a rerun: the chunk is replaced, not doubled
    table = postgres.sql("SELECT shard, id, note FROM tgt ORDER BY shard, id")
    assert table.splitlines() == ["1|10|new", "1|11|new", "2|3|keep"]


def test_a_jdbc_write_creates_a_missing_table(spark, postgres):
    postgres.sql("DROP TABLE IF EXISTS fresh")
    write(spark.createDataFrame([(1,)], "id INT"), jdbc(postgres, "fresh", "a'b", column="day"))
    assert postgres.sql("SELECT day, id FROM fresh").splitlines() == ["a'b|1"]


def test_a_wrong_password_is_one_line_without_the_password(spark, postgres):
    wrong = replace(jdbc(postgres, "tgt", "1"), password="not-it")
    with pytest.raises(DatasetError) as caught:
        write(spark.createDataFrame([(1,)], "id INT"), wrong)
    message = str(caught.value)
    assert message.startswith("dataset 'tgt': cannot connect: ")
    assert "\n" not in message and "not-it" not in message


def test_without_a_tablename_the_base_path_is_the_table_folder(tmp_path):
    assert Path(Dataset("d", "1", database="csv", schemaname=str(tmp_path)).table_path) == tmp_path
