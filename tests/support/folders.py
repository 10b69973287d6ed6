"""A folder drain's pipeline (test_folder_drain, test_racing_drains): a chain a -> b -> c
whose jobs are the scripts of a folder, each appending ``<job> <dataid>`` to a ledger."""

from __future__ import annotations

from support import script

# a chain a -> b -> c; each job appends "<job> <dataid>" to a ledger
STEP = 'echo "$jobid $dataid" >> ledger; [ "$jobid $dataid" != "$FAIL" ]'


def _chain(cli, tmp_path, chunks: int):
    cli.ok("createtables")
    for name in ("src", "a_out", "b_out", "c_out"):
        cli.ok("register-dataset", name)
    cli.ok("register-job", "a", "--in", "src", "--out", "a_out")
    cli.ok("register-job", "b", "--in", "a_out", "--out", "b_out")
    cli.ok("register-job", "c", "--in", "b_out", "--out", "c_out")
    cli.ok("ready", "src", *[str(i) for i in range(1, chunks + 1)])
    etl = tmp_path / "etl"
    etl.mkdir()
    for job in ("c", "a", "b"):  # not in pipeline order: the store knows the order
        script(etl, f"{job}.sh", STEP)
    (etl / "README").write_text("not a job\n")
    script(etl, "helper.sh", "exit 0")  # an executable that names no job
    return etl
