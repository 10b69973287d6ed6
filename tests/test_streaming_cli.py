"""``utility drop DATASET FILE...`` (items into a stream's landing folder, each appearing
whole) and the mistakes ``utility stream`` refuses before it starts anything. No Spark."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow.errors import DropError
from dataflow.spark import drop
from dataflow.store import DATASET_COLUMNS, create_store


def landing_store(cli) -> Path:
    cli.ok("createtables")
    cli.ok(
        "register-dataset", "landing", "--database", "csv", "--schemaname",
        str(cli.cwd / "data"), "--tablename", "in/landing",
    )  # fmt: skip
    return cli.cwd / "data" / "in" / "landing"


def files(cli, **contents: str) -> list[str]:
    made = []
    for name, text in contents.items():
        path = cli.cwd / "outbox" / name.replace("_csv", ".csv")
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        made.append(str(path))
    return made


def everything(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir()} if folder.exists() else {}


def one_error(result) -> str:
    assert result.code == 2, result
    assert result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.err
    return lines[0]


def test_drop_lands_whole_items_under_their_names(cli):
    landing = landing_store(cli)
    items = files(cli, a_csv="sku,qty\na,1\n", b_csv="sku,qty\nb,2\n")
    done = cli.ok("drop", "landing", *items)
    assert done.out == f"2 items dropped into landing ({landing})\n"
    assert everything(landing) == {"a.csv": "sku,qty\na,1\n", "b.csv": "sku,qty\nb,2\n"}
    assert oct(os.stat(landing / "a.csv").st_mode & 0o777) == "0o644"


def test_drop_refuses_mistakes_with_one_line_and_drops_nothing(cli):
    landing = landing_store(cli)
    cli.ok("drop", "landing", *files(cli, old_csv="first\n"))
    good = files(cli, new_csv="x\n")[0]
    cli.ok("register-dataset", "orders_db", "--hostname", "db:5432", "--database", "shop")
    cli.ok("register-dataset", "remote", "--database", "json", "--schemaname", "s3a://b/lake")
    hidden = files(cli, **{".part_csv": "x\n", "_tmp_csv": "x\n"})
    cases = {
        ("landing", good, *files(cli, old_csv="second\n")): "is there already: give it a new",
        ("landing", good, str(cli.cwd / "nowhere.csv")): "nowhere.csv is not a file",
        ("landing", good, str(cli.cwd)): "is not a file",
        ("landing", hidden[0]): "Spark ignores names starting with . or _",
        ("landing", hidden[1]): "Spark ignores names starting with . or _",
        ("landing", good, good): "new.csv is named twice",
        ("nosuch", good): "dataset 'nosuch': it is not in table dataset",
        ("orders_db", good): "it is not a file dataset",
        ("remote", good): "its folder s3a://b/lake is not on this machine's file system",
    }
    for argv, expected in cases.items():
        assert expected in one_error(cli.utility("drop", *argv)), argv
    assert everything(landing) == {"old.csv": "first\n"}  # nothing dropped, nothing replaced
    assert "the following arguments are required" in one_error(cli.utility("drop", "landing"))


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.text("abcXYZ019-.é", min_size=1, max_size=12).filter(
            lambda n: not n.startswith((".", "_")) and n not in (".", "..")
        ),
        st.binary(max_size=2000),
        min_size=1,
        max_size=5,
    )
)
def test_every_dropped_item_lands_byte_for_byte_and_nothing_else(items):
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        store, _ = create_store(root / "dataflow.db")
        with store, store.transaction():
            row = dict.fromkeys(DATASET_COLUMNS, "")
            row.update(datasetid="landing", database="json", schemaname=str(root / "lake"))
            store.put_dataset({**row, "tablename": "landing", "encryptedpass": None})
        outbox = root / "outbox"
        outbox.mkdir()
        for name, data in items.items():
            (outbox / name).write_bytes(data)
        folder, landed = drop("landing", [str(outbox / n) for n in items], str(store.path))
        assert folder == root / "lake" / "landing"
        assert sorted(p.name for p in landed) == sorted(items)
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == items  # no hidden leftover
        try:
            drop("landing", [str(outbox / next(iter(items)))], str(store.path))
        except DropError as exc:
            assert "is there already" in str(exc)
        else:
            raise AssertionError("an item dropped twice was not refused")


def test_stream_refuses_what_cannot_be_a_stream_before_starting_spark(cli):
    landing_store(cli)
    cli.ok("register-dataset", "clean", "--database", "parquet", "--schemaname", "/tmp/x")
    for name in ("extra", "other"):
        cli.ok("register-dataset", name, "--database", "parquet", "--schemaname", "/tmp/y")
    cli.ok("register-job", "daily", "--in", "today", "--out", "other")
    cli.ok("register-job", "twice", "--in", "landing", "--out", "clean", "extra")
    for name in ("daily.py", "twice.py", "stranger.py"):
        (cli.cwd / name).write_text("import dataflow.spark\n")
    (cli.cwd / "shell.sh").write_text("#!/bin/sh\n")
    cases = {
        "./shell.sh": "a stream is a PySpark script (.py)",
        "./missing.py": "no such file",
        "./stranger.py": "stranger",
        "./daily.py": "cannot stream job 'daily': its IN dataset is 'today'",
        "./twice.py": "cannot stream job 'twice': it has 2 OUT datasets; a stream has one",
    }
    for script, expected in cases.items():
        assert expected in one_error(cli.utility("stream", script)), script


def test_drop_lands_only_under_its_landing_roots(cli, tmp_path):
    """The dataset's row names the folder: a row that names one outside the folder drop
    runs in (or its --landing-root), through .. or a symlink too, gets nothing there."""
    landing_store(cli)
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    (tmp_path / "link").symlink_to(outside, target_is_directory=True)
    item = files(cli, a_csv="x\n")
    for schemaname, tablename in (
        (str(outside), "t"),
        (str(tmp_path), "../x/t"),
        (str(tmp_path), "link/t"),
    ):
        cli.ok("dml", f"update dataset set schemaname = '{schemaname}', tablename = '{tablename}'")
        said = one_error(cli.utility("drop", "landing", *item))
        assert "is outside the landing roots" in said, (schemaname, tablename)
    assert not outside.exists() and not (tmp_path.parent / "x").exists()
    outside.mkdir()
    done = cli.ok("drop", "landing", *item, "--landing-root", str(outside))
    assert (outside / "t" / "a.csv").read_text() == "x\n", done
