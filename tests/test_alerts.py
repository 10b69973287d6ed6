"""Alerts (issue 25 item 1) sent by real RunJobs to real receivers: a local HTTP server
taking Apprise ``json://`` webhooks, a local SMTP server (aiosmtpd) for ``mailto://``, a
server that accepts and never answers, and a closed port."""

from __future__ import annotations

import json
import socket
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support import (
    history,
    rows,
    script,
    start_runjob,
    statuses,
    wait_for,
)
from support.alerts import SECRET, patient  # noqa: F401 (patient: an autouse fixture)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def smtp():
    """An SMTP server on 127.0.0.1 (aiosmtpd); ``smtp.mails``: the messages it took."""
    from aiosmtpd.controller import Controller

    class Handler:
        def __init__(self) -> None:
            self.mails: list[bytes] = []

        async def handle_DATA(self, server, session, envelope):
            self.mails.append(envelope.content)
            return "250 OK"

    handler = Handler()
    controller = Controller(handler, hostname="127.0.0.1", port=_free_port())
    controller.start()
    controller.mails = handler.mails  # type: ignore[attr-defined]
    controller.url = (  # type: ignore[attr-defined]
        f"mailto://127.0.0.1:{controller.port}?from=dataflow@example.com"
        "&to=ops@example.com&mode=insecure"
    )
    yield controller
    controller.stop()


@pytest.fixture
def hanging():
    """A server that takes a request and never finishes its answer: it sends one byte of
    it every 0.2 s (each resets a client's read timeout)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    stop = threading.Event()

    def trickle(connection: socket.socket) -> None:
        with connection:
            connection.recv(65536)
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"." * 600:
                if stop.wait(0.2):
                    return
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    return

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=trickle, args=(connection,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


def _pipeline(chain, tmp_path, chunks: int = 3, failing: str = "") -> None:
    """Job ``work`` over ``chunks`` READY chunks; its script fails (exit 3) on the dataids
    listed in file ``failing`` (one a line)."""
    if chunks > 3:
        values = " union ".join(f"select '{n}' AS value" for n in range(4, chunks + 1))
        chain.ok(
            "dml",
            "insert into datastatus select 'src','fakejob',value,'OUT','READY',now() "
            f"from ({values}) AS chunks",
        )
    (tmp_path / "failing").write_text(failing)
    failed = 'grep -qx "$dataid" failing && { echo "no rows for $dataid in src" >&2; exit 3; }'
    script(tmp_path, "work.sh", failed + '\necho "did $dataid"')


def _titles(received: list[dict]) -> list[str]:
    return [body["title"] for body in received]


def _no_secret(*results) -> None:
    for result in results:
        assert SECRET not in result.out + result.err, result


@pytest.mark.both_stores
def test_a_failure_alerts_once_with_no_retry_left_and_its_recovery_too(chain, tmp_path, hook):
    _pipeline(chain, tmp_path, failing="1\n")
    chain.ok("set", "work", f"alerts={hook.url}", "retries=1")
    first = chain.runjob("./work.sh")
    assert first.code == 3 and hook.got == [], first  # a retry is left: no news yet
    second = chain.runjob("./work.sh")
    assert second.code == 3, second
    assert _titles(hook.got) == ["dataflow: work 1 FAILED"]
    (alert,) = hook.got
    # the failure's own words, and where to read its log from any host
    assert alert["message"].startswith("exit code 3: no rows for 1 in src; log: "), alert
    assert "utility log work 1 (any host)" in alert["message"], alert
    assert "1.2.log (this host)" in alert["message"], alert
    assert alert["path"] == "/hook" and alert["auth"].startswith("Basic ")  # the URL's own

    (tmp_path / "failing").write_text("")
    chain.ok("resubmit", "work", "1")
    third = chain.runjob("./work.sh")
    assert third.code == 0, third
    assert _titles(hook.got) == ["dataflow: work 1 FAILED", "dataflow: work 1 recovered"]
    ok = chain.runjob("./work.sh")  # a first success is no news
    assert ok.code == 0 and len(hook.got) == 2, ok
    _no_secret(first, second, third, ok, chain.ok("jobs"), chain.ok("history", "work"))


def test_a_drain_sends_one_summary_capped(chain, tmp_path, hook):
    _pipeline(chain, tmp_path, chunks=24, failing="\n".join(map(str, range(1, 24))))
    chain.ok("set", "work", f"alerts={hook.url}")
    drained = chain.runjob("--all", "--parallel", "4", "./work.sh")
    assert drained.code == 1, drained
    assert _titles(hook.got) == ["dataflow: work: 23 FAILED"]
    lines = hook.got[0]["message"].splitlines()
    assert [line.split(":")[0] for line in lines[:20]] == [str(n) for n in range(1, 21)]
    assert lines[20] == "... and 3 more (utility status work)", lines
    assert "24" not in {line.split(":")[0] for line in lines}  # READY: not news
    _no_secret(drained)


def test_the_store_wide_default_mails_a_validation_failure_and_an_abandoned_chunk(
    chain, tmp_path, smtp
):
    _pipeline(chain, tmp_path)
    chain.ok("set", "*", f"alerts={smtp.url}")
    assert "mailto://127.0.0.1:" in chain.ok("jobs").out  # the pseudo-job is listed ...
    assert "*" not in [r["jobid"] for r in json.loads(chain.ok("--json", "status").out)]
    assert "*" not in json.loads(chain.ok("export", "-").out)["jobs"]  # ... not a job
    script(tmp_path, "check.sh", "exit 1")
    checked = chain.run_job("./work.sh", validate="./check.sh")
    assert checked.exit_code == 1, checked
    wait_for(lambda: len(smtp.mails) == 1, 10, "the mail")
    assert b"Subject: dataflow: work 1 validation failed" in smtp.mails[0]

    chain.ok("forcejob", "work", "2")  # RUNNING, and no process of it lives
    chain.run_job("./work.sh")
    wait_for(lambda: len(smtp.mails) == 2, 10, "the second mail")
    assert b"Subject: dataflow: work 2 abandoned" in smtp.mails[1]


def test_a_run_found_dead_by_utility_recover_is_alerted(chain, tmp_path, hook):
    _pipeline(chain, tmp_path)
    chain.ok("set", "work", f"alerts={hook.url}")
    chain.ok("forcejob", "work", "2")  # RUNNING, and no process of it lives
    recovered = chain.ok("recover")
    assert "1 abandoned chunk recovered" in recovered.out, recovered
    assert _titles(hook.got) == ["dataflow: work 2 abandoned"]
    _no_secret(recovered)


def test_a_fenced_finish_is_alerted(chain, tmp_path, hook):
    _pipeline(chain, tmp_path)
    script(tmp_path, "slow.sh", "while [ ! -e go ]; do sleep 0.05; done")
    chain.ok("register-dataset", "other")
    chain.ok("register-job", "slow", "--in", "src", "--out", "other", "--set", f"alerts={hook.url}")
    running = start_runjob(chain, "./slow.sh")
    wait_for(lambda: statuses(tmp_path, "slow").get("1") == "RUNNING", 30, "the run")
    chain.ok("endjob", "--force", "slow", "1", "READY")
    (tmp_path / "go").write_text("")
    out, err = running.communicate(timeout=60)
    assert running.returncode == 1, (out, err)
    assert _titles(hook.got) == ["dataflow: slow 1 fenced"]


@pytest.mark.both_stores  # the note in the history is new SQL
@pytest.mark.long  # waits out the alert timeout
def test_a_notifier_that_hangs_or_refuses_never_holds_a_drain(chain, tmp_path, hanging):
    _pipeline(chain, tmp_path, failing="1\n2\n")
    closed = _free_port()
    urls = f"json://u:{SECRET}@127.0.0.1:{closed}/x json://127.0.0.1:{hanging}/"
    chain.ok("set", "work", f"alerts={urls}")
    drained = chain.runjob(
        "--all", "./work.sh", env={"DATAFLOW_ALERT_TIMEOUT": "3"}, timeout=55
    )  # finished long before a hanging server would answer (never)
    assert drained.code == 1, drained
    assert statuses(tmp_path, "work") == {"1": "FAILED", "2": "FAILED", "3": "READY"}
    warnings = [line for line in drained.err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1, drained.err
    assert warnings[0].startswith(
        f"warning: alert not sent to json://***@127.0.0.1:{closed}/***: "
    ) and warnings[0].endswith(
        f"; json://127.0.0.1:{hanging}/: no answer within 3 s (DATAFLOW_ALERT_TIMEOUT) "
        "(recorded in the history)"
    )
    reasons = {dataid: reason for dataid, _, _, _, _, reason in history(tmp_path, "work")}
    assert reasons["1"].startswith("exit code 3: no rows for 1 in src; alert not sent to "), reasons
    assert "alert not sent" in reasons["2"] and reasons["3"] is None, reasons
    _no_secret(drained, chain.ok("history", "work"))


def test_notify_test_says_where_it_sent_and_whether_it_worked(chain, tmp_path, hook):
    _pipeline(chain, tmp_path)
    none = chain.utility("notify-test", "work")
    assert none.code == 2 and none.err.startswith("error: no alerts configured for job work")
    closed = _free_port()
    chain.ok("set", "*", f"alerts={hook.url}")
    sent = chain.ok("notify-test")
    port = hook.server_address[1]
    assert sent.out == f"sent to json://***@127.0.0.1:{port}/***\n", sent
    assert _titles(hook.got) == ["dataflow: test alert"]
    chain.ok("set", "work", f"alerts={hook.url},json://x:{SECRET}@127.0.0.1:{closed}/")
    mixed = chain.utility("notify-test", "work")
    assert mixed.code == 1, mixed
    assert mixed.out.splitlines()[0] == f"sent to json://***@127.0.0.1:{port}/***"
    assert mixed.out.splitlines()[1].startswith(f"not sent to json://***@127.0.0.1:{closed}/: ")
    refused = chain.utility("set", "work", "alerts=not-a-url")
    assert refused.code == 2 and "is not a URL" in refused.err, refused
    unknown = chain.utility("set", "*", "retries=1")
    assert unknown.code == 2 and "not a store-wide setting" in unknown.err, unknown
    _no_secret(none, sent, mixed, refused, chain.ok("jobs"), chain.ok("getjob", "work"))
    assert rows(tmp_path, "select count(*) from job where jobid='*'") == [(1,)]
    chain.ok("unset", "*", "alerts")
    assert rows(tmp_path, "select count(*) from job where jobid='*'") == [(0,)]


def test_without_apprise_a_run_goes_on_and_says_what_to_install(chain, tmp_path, hook):
    _pipeline(chain, tmp_path, failing="1\n")
    hidden = tmp_path / "hidden" / "apprise"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('not installed here')\n")
    chain.ok("set", "work", f"alerts={hook.url}")
    env = {"PYTHONPATH": str(tmp_path / "hidden")}
    failed = chain.runjob("./work.sh", env=env)
    assert failed.code == 3 and statuses(tmp_path, "work") == {"1": "FAILED"}, failed
    assert "warning: alerts need: pip install opendataflow[alerts]" in failed.err.splitlines()
    assert hook.got == []
    test = chain.utility("notify-test", "work", env=env)
    assert test.code == 2 and test.err == "error: alerts need: pip install opendataflow[alerts]\n"


_SECRET = st.text(st.sampled_from("ABCXYZ0189-_%@:/?#&=+"), min_size=1).filter(
    lambda text: any(c.isalnum() for c in text)
)


@given(user=_SECRET, password=_SECRET, path=_SECRET, scheme=st.sampled_from(["json", "slack"]))
def test_a_masked_url_shows_nothing_of_its_user_password_path_or_token(
    user, password, path, scheme
):
    from dataflow.run.listeners.alerts import masked

    for url in (
        f"{scheme}://{user}:{password}@hooks.example.com/{path}",
        f"{scheme}://{user}@hooks.example.com:8080/{path}",
        f"{scheme}://{password}/{path}",  # a token where a host would be
        f"{scheme}://hooks.example.com/?token={password}",
    ):
        shown = masked(url)
        assert not any(c.isupper() or c.isdigit() for c in shown.replace("8080", "")), (url, shown)
