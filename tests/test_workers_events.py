"""The event pipe between a spread drain's workers and RunJob (run/drain/events.py): every
event goes through as it is; a line that is not an event, one of the wrong types, one
that never ends, or output a job writes where RunJob reads, is one line at most and never
a traceback; dataids of any shape (a newline, quotes, 5,000 characters, written as
numbers) are told as any other; nothing to claim is said as a single drain says it; a
reader of RunJob's output that leaves, or a helper a job left, never holds the drain."""

from __future__ import annotations

import json

import pytest

from support import (
    BIN,
    script,
    setting,
    statuses,
    wait_for,
)
from support.hosts import alive
from support.spreading import (
    JUDGE,
    SPREAD,
    _lines,
    _no_overlap,
    chunks,
)

on_postgres = pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)


FORGED = [  # shaped like events, of the wrong types
    '{"kind": "ended", "dataid": "1", "claim": ["1", 1, 1, "log", "t"], "outcome": [0, "x"],'
    ' "status": "READY", "counts": [1, 1], "live": 0, "cap": null}',
    '{"kind": "launch", "dataid": "1", "claim": ["1", "one", [], "log", "t"], "outcome": null,'
    ' "status": "", "counts": [0, 0], "live": 0, "cap": null}',
    '{"kind": "ended", "dataid": ["1"], "claim": ["1", 1, 1, "log", "t"], "outcome": [1, 0.1],'
    ' "status": "FAILED", "counts": ["a"], "live": 0, "cap": null}',
]


def _insert_ready(tmp_path, dataid: str) -> None:
    """A READY chunk of src (bound parameters: any text)."""
    from support import ADDRESSES

    address = ADDRESSES.get(tmp_path, tmp_path / "dataflow.db")
    sql = "insert into datastatus values ('src','fakejob',?,'OUT','READY','2026-01-01')"
    if isinstance(address, str):
        import psycopg

        with psycopg.connect(address) as conn:
            conn.execute(sql.replace("?", "%s"), (dataid,))
    else:
        import sqlite3

        with sqlite3.connect(address) as conn:
            conn.execute(sql, (dataid,))


def _events():
    from hypothesis import strategies as st

    from dataflow.run.claim.claims import Claim
    from dataflow.run.drain.events import Event
    from dataflow.run.process.runner import Outcome

    text = st.text(
        st.characters(codec="utf-8") | st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF)
    )
    count = st.integers(-(2**63), 2**63 - 1)
    claims = st.builds(
        lambda d, a, r, p, t: Claim(d, a, r, None, p, t, ()), text, count, count, text, text
    )
    seconds = st.floats(allow_nan=False, allow_infinity=False)
    outcomes = st.builds(
        Outcome,
        count,
        seconds,
        st.none() | seconds,
        st.none() | count,
        st.none() | st.sampled_from(["passed", "failed"]),
        st.lists(text).map(tuple),
        st.none() | text,
        st.none() | text,
        st.none() | text,
    )
    kinds = st.sampled_from(
        ["launch", "ending", "ended", "fenced", "store", "cap_full", "unusable"]
    )
    return st.builds(
        Event,
        kinds,
        text,
        st.none() | claims,
        st.none() | outcomes,
        text,
        st.tuples(count, count),
        count,
        st.none() | count,
    )


def _json():
    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
    return st.recursive(scalars, lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner))


@on_postgres
def test_garbage_on_the_event_pipe_is_one_line(cli, tmp_path):
    """A job that writes into its worker's event pipe (/proc/$PPID/fd/N, the same user):
    RunJob ends in one line on stderr, never a traceback, and its chunks are recorded."""
    chunks(cli, 4)
    script(
        tmp_path,
        "work.sh",
        JUDGE + "n=$(tr '\\0' '\\n' < /proc/$PPID/cmdline | sed -n '/^--events$/{n;p;}')\n"
        'printf "not json\\n{\\"kind\\": 7}\\n\\xff\\xfe\\n" > /proc/$PPID/fd/$n',
    )
    done = cli.runjob(*SPREAD)
    assert done.code == 1 and done.err.count("\n") == 1, done
    assert "sent a line that is not an event" in done.err and "'not json'" in done.err
    assert "work: 4 READY, 0 FAILED in" in done.out  # the drain went on
    assert sorted(_no_overlap(tmp_path)) == ["1", "2", "3", "4"]


@on_postgres
def test_a_run_on_line_in_the_event_pipe_is_one_line_and_bounded(cli, tmp_path):
    """A job that pours 8 MB without a newline into its worker's event pipe: RunJob ends
    in one line and the drain goes on (RunJob holds at most workers.LINE_MAX bytes of such
    a line; it held the whole line, however long, copied again at every read)."""
    chunks(cli, 2)
    script(
        tmp_path,
        "work.sh",
        JUDGE + "n=$(tr '\\0' '\\n' < /proc/$PPID/cmdline | sed -n '/^--events$/{n;p;}')\n"
        '[ "$dataid" = 1 ] && head -c 8000000 /dev/zero | tr "\\0" x > /proc/$PPID/fd/$n\n'
        "true",
    )
    done = cli.runjob(*SPREAD)
    assert done.code == 1 and done.err.count("\n") == 1, done
    assert "sent a line that is not an event" in done.err and "'xxxx" in done.err
    # (the worker's next event, glued to the run-on line, is lost to the report)
    assert statuses(tmp_path, "work") == {"1": "READY", "2": "READY"}
    assert sorted(_no_overlap(tmp_path)) == ["1", "2"]


@pytest.mark.parametrize(
    "forged",
    [
        FORGED[0],
        FORGED[1],
        FORGED[2],
    ],
)
@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
def test_an_event_of_the_wrong_types_is_one_line(cli, tmp_path, forged):
    """A job that writes a line shaped like an event, but of the wrong types, into its
    worker's event pipe: one error line, never a traceback; the drain goes on."""
    chunks(cli, 2)
    (tmp_path / "forged").write_text(forged + "\n")
    script(
        tmp_path,
        "work.sh",
        JUDGE + "n=$(tr '\\0' '\\n' < /proc/$PPID/cmdline | sed -n '/^--events$/{n;p;}')\n"
        "cat forged > /proc/$PPID/fd/$n",
    )
    done = cli.runjob(*SPREAD)
    assert done.code == 1 and done.err.count("\n") == 1, done
    assert "sent a line that is not an event" in done.err
    assert sorted(_no_overlap(tmp_path)) == ["1", "2"]


@on_postgres
def test_hostile_output_never_reaches_runjob(cli, tmp_path):
    """Jobs that write megabytes of binary to stdout and stderr, close them, or dup them
    onto other descriptors: RunJob's own output is its report, every chunk READY once."""
    chunks(cli, 8)
    script(
        tmp_path,
        "work.sh",
        JUDGE + "case $((dataid % 4)) in\n"
        "0) head -c 5000000 /dev/urandom; head -c 5000000 /dev/urandom >&2 ;;\n"
        "1) exec >&- 2>&-; sleep 0.2 ;;\n"
        "2) exec 3>&1 4>&2 1>&- 2>&-; head -c 300000 /dev/urandom >&3; printf '\\0\\n' >&4 ;;\n"
        '3) printf \'%s\\n\' \'{"kind": "error", "message": "x", "code": 9}\' ;;\n'
        "esac",
    )
    done = cli.runjob(*SPREAD, timeout=300)
    assert done.code == 0 and done.err == "", done.err[-2000:]
    assert len(done.out) < 2000 and "kind" not in done.out, done.out[-2000:]
    assert "work: 8 READY, 0 FAILED in" in done.out
    assert sorted(_no_overlap(tmp_path), key=int) == [str(n) for n in range(1, 9)]


def test_events_go_through_the_pipe_as_they_are():
    """Every event a worker may write is read back as it was (its claim less the lock,
    which stays in the worker)."""
    from hypothesis import given, settings

    from dataflow.run.drain.events import decode, encode

    @settings(max_examples=300, deadline=None)
    @given(_events())
    def check(event):
        read = decode(encode(event))
        claim = event.claim and event.claim._replace(lock=None)
        assert read == event._replace(claim=claim)

    check()


@pytest.mark.long
def test_any_other_line_is_refused_or_an_event_of_the_right_types():
    """A line another process wrote into the pipe, shaped like an event or not: refused
    (ValueError, LookupError) or an event RunJob can count, never another error."""

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from dataflow.run.drain.events import Tally, decode

    keys = ["kind", "dataid", "claim", "outcome", "status", "counts", "live", "cap"]
    shaped = st.fixed_dictionaries({key: _json() for key in keys})

    @settings(max_examples=200, deadline=None)
    @given(_json() | shaped)
    def check(fields):
        try:
            event = decode(json.dumps(fields))
        except (ValueError, LookupError):
            return
        Tally().count(event)
        assert isinstance(event.dataid, str) and isinstance(event.status, str)

    check()


@pytest.mark.both_stores
def test_dataids_a_pipe_line_cannot_hold_whole(cli, tmp_path):
    """Dataids with a newline, a quote, a backslash, non-ASCII, 5000 characters (an event
    longer than a pipe writes at once): each run once, READY, told in RunJob's report."""
    chunks(cli, 1)
    cli.ok("dml", "delete from datastatus")
    odd = ["a\nb", 'q"uo\\te', "caf\u00e9-\u65e5\u672c", "x" * 5000, "{}", "1e3"]
    for dataid in odd:
        _insert_ready(tmp_path, dataid)
    # a file a run (two jobs appending to one file may interleave: printf writes "a\n" first)
    script(tmp_path, "work.sh", 'printf "%s" "$dataid" > "$(mktemp ran.XXXXXX)"')
    done = cli.runjob(*SPREAD)
    assert done.code == 0 and done.err == "", done
    assert f"work: {len(odd)} READY, 0 FAILED" in done.out
    ran = [path.read_text() for path in tmp_path.glob("ran.*")]
    assert sorted(ran) == sorted(odd)
    assert set(statuses(tmp_path, "work").values()) == {"READY"}


@pytest.mark.both_stores
def test_dataids_written_as_numbers_are_told_as_any_other(cli, tmp_path):
    """Chunks whose dataid a client wrote as a number (``values (..., 5, ...)``; SQLite's
    seed columns have no type): a spread drain runs and reports them as RunJob's own."""
    chunks(cli, 1)
    cli.ok("dml", "delete from datastatus")
    values = ", ".join(f"('src','fakejob',{n},'OUT','READY',now())" for n in (5, 7, 12, 30))
    cli.ok("dml", f"insert into datastatus values {values}")
    script(tmp_path, "work.sh", JUDGE)
    done = cli.runjob(*SPREAD)
    assert done.code == 0 and done.err == "", done
    assert "work: 4 READY, 0 FAILED" in done.out
    assert sorted(_no_overlap(tmp_path), key=int) == ["5", "7", "12", "30"]


@pytest.mark.both_stores
@pytest.mark.parametrize("state", ["none", "consumed", "delayed"])
def test_nothing_to_claim_is_said_as_a_single_drain_says_it(cli, tmp_path, state):
    """Chunks counted as waiting that no worker can claim (an IN row of the job held on
    each; FAILED with a retry delay not yet passed) or none at all: the spread drain says
    what the drain in RunJob says, with its exit code."""
    import re

    chunks(cli, 4)
    script(tmp_path, "work.sh", "exit 3")
    if state == "consumed":
        for n in range(1, 5):
            cli.ok(
                "dml", f"insert into datastatus values ('src','work','{n}','IN','RUNNING',now())"
            )
    elif state == "delayed":
        setting(cli, "retries", "2")
        setting(cli, "retry_delay", "3600")
        assert cli.runjob(*SPREAD).code == 1  # every chunk FAILED, a retry left
    elif state == "none":
        cli.ok("dml", "delete from datastatus")
    said = {}
    for processes in ("1", "2"):
        done = cli.runjob("--all", "--parallel", "4", "--workers", processes, "./work.sh")
        assert "Traceback" not in done.err
        text = re.sub(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d [AP]M \S* ?\d{4}", "DATE", done.out)
        said[processes] = (done.code, re.sub(r"in [\d.]+ s \([\d.]+/s\)", "in S", text), done.err)
    assert said["2"] == said["1"], said


@pytest.mark.long  # a spread drain read slowly
@on_postgres
def test_a_caller_reading_a_spread_drains_output_never_waits_for_a_helper(cli, tmp_path):
    """Jobs that each leave a helper in a session of its own (descriptors kept): RunJob of
    a spread drain ends while they live (its output and the event pipes are nobody
    else's), and a second drain never runs their chunks beside them."""
    chunks(cli, 4)
    script(
        tmp_path,
        "work.sh",
        JUDGE + "setsid bash -c 'until [ -e go ]; do sleep 0.1; done' &\necho \"$!\" >> helpers",
    )
    done = cli.runjob(*SPREAD, timeout=120)  # a pipe held open by a helper: a timeout
    assert done.code == 0 and done.err == "", done
    helpers = [int(pid) for pid in _lines(tmp_path / "helpers")]
    assert len(helpers) == 4 and all(alive(pid) for pid in helpers)
    cli.ok("dml", "update datastatus set status = 'RESUBMIT' where jobid = 'work'")
    again = cli.runjob(*SPREAD)
    assert "Traceback" not in again.err, again
    (tmp_path / "go").touch()
    wait_for(lambda: not any(alive(pid) for pid in helpers), what="the helpers to end")
    _no_overlap(tmp_path)


@on_postgres
def test_a_reader_that_leaves_costs_a_spread_drain_nothing(cli, tmp_path):
    """``RunJob ... | head -1``: RunJob's output is a pipe nobody reads any more; the
    drain goes on, every chunk READY once, exit 0, nothing on stderr."""

    chunks(cli, 12)
    script(tmp_path, "work.sh", JUDGE + "sleep 0.2")
    done = cli.sh(f"{BIN}/RunJob {' '.join(SPREAD)} | head -1; echo rc ${{PIPESTATUS[0]}}")
    assert done.out.endswith("rc 0\n") and done.err == "", done
    assert set(statuses(tmp_path, "work").values()) == {"READY"}
    assert sorted(_no_overlap(tmp_path), key=int) == [str(n) for n in range(1, 13)]
