"""The live board's actions (``utility serve --write-token-file LABEL=FILE``): in a real
headless Chromium through Debian's chromedriver, an operator pastes a write token, clicks
a chunk's cell and an action, reads what will change, confirms, and the store changes,
with the token's label and the client's address in its audit; the read token's click is
refused with the server's line shown. Without a browser: a request from another site, a
form's body or a GET never acts; a bad write token file stops the server in one line.
The CLI records its own actions, and ``utility history JOB DATAID`` shows them."""

from __future__ import annotations

import getpass
import json
import secrets
import tempfile

import httpx
import pytest

from support import script, start_runjob, statuses, wait_for
from support.browser import Browser, needed
from support.serving import Server, token_file

pytestmark = [pytest.mark.both_stores, pytest.mark.filterwarnings("ignore::ResourceWarning")]

REFRESH = "600"  # seconds: the page's cells are not replaced while the test clicks them


def _pipeline(cli) -> None:
    """Jobs a (src -> out) and b (out -> out2): a 1 FAILED (b 1 READY, built from a's
    earlier output), a 2 READY, a 3 RUNNING with its run gone."""
    cli.ok("createtables")
    for name in ("src", "out", "out2"):
        cli.ok("register-dataset", name)
    cli.ok("register-job", "a", "--in", "src", "--out", "out")
    cli.ok("register-job", "b", "--in", "out", "--out", "out2")
    cli.ok("ready", "src", "1", "2")
    cli.ok(
        "dml",
        "insert into datastatus values ('out','a','1','OUT','FAILED',now()),"
        " ('out','a','2','OUT','READY',now()), ('out2','b','1','OUT','READY',now())",
    )
    cli.ok("forcejob", "a", "3")  # RUNNING, and no process of it lives


def _write_token(folder, label="oncall") -> tuple[str, str]:
    """A write token's file, as ``LABEL=FILE``, and the token."""
    token = secrets.token_urlsafe(32)
    path = folder / f"{label}.token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return f"{label}={path}", token


def _actions(cli, *args: str) -> list[dict]:
    return json.loads(cli.ok("actions", *args, "--json").out)


def _act(browser: Browser, job: str, column: int, name: str, cascade: bool = False) -> list[str]:
    """Click the chunk's cell and the action's button; the changes the page then asks to
    confirm (or the line it shows if the server refused)."""
    browser.click(f'tr[data-job="{job}"] td:nth-child({column + 1})')
    if cascade:
        browser.click("#act-cascade")
    browser.click(f'button[data-act="{name}"]')
    shown = "return !document.getElementById('act-confirm').hidden"
    refused = "return document.getElementById('act-result').textContent.startsWith('refused')"
    wait_for(lambda: browser.run(shown) or browser.run(refused), 60, f"{name}'s confirmation")
    if browser.run(refused):
        return [browser.text("#act-result")]
    return browser.run(
        "return Array.from(document.querySelectorAll('#act-changes li'))"
        ".map(function (li) { return li.textContent; })"
    )


def _confirm(browser: Browser, name: str) -> str:
    browser.click("#act-yes")
    done = f"return document.getElementById('act-result').textContent.indexOf('{name} done') === 0"
    wait_for(lambda: browser.run(done), 60, f"{name} done")
    return browser.text("#act-result")


@pytest.mark.long
def test_the_board_acts_for_the_write_token_after_a_confirmation(cli, tmp_path):
    driver, binary = needed("chromedriver"), needed("chromium")
    _pipeline(cli)
    read_path, read_token = token_file(tmp_path)
    spec, write_token = _write_token(tmp_path)
    server = Server(cli, read_path, "--open-read", "--refresh", REFRESH,
                    "--write-token-file", spec).start()  # fmt: skip
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        browser = Browser(driver, binary, profile)
        try:
            browser.open(server.url + "/")
            browser.type("#act-token", read_token)  # the read token: refused, shown
            line = _act(browser, "a", 1, "resubmit")
            assert line == ["refused: the read token cannot act: a write token is needed"]
            assert statuses(tmp_path, "a")["1"] == "FAILED"

            browser.type("#act-token", write_token)
            preview = _act(browser, "a", 1, "resubmit", cascade=True)
            assert preview == [
                "a 1: FAILED -> RESUBMIT",
                "b 1: READY -> RESUBMIT (downstream of a)",
            ]
            assert statuses(tmp_path, "a")["1"] == "FAILED"  # shown, not done
            assert _confirm(browser, "resubmit") == "resubmit done as oncall: 2 chunks changed"
            assert statuses(tmp_path, "a")["1"] == "RESUBMIT"
            assert statuses(tmp_path, "b")["1"] == "RESUBMIT"

            assert _act(browser, "a", 2, "hold") == ["a 2: READY -> HOLD"]
            _confirm(browser, "hold")
            assert statuses(tmp_path, "a")["2"] == "HOLD"
            assert _act(browser, "a", 2, "release") == ["a 2: HOLD -> READY"]
            _confirm(browser, "release")
            assert statuses(tmp_path, "a")["2"] == "READY"

            assert _act(browser, "a", 3, "recover") == ["a 3: RUNNING -> FAILED (its run died)"]
            _confirm(browser, "recover")
            assert statuses(tmp_path, "a")["3"] == "FAILED"
            assert browser.run("return sessionStorage.length") == 1  # the token: this tab's
            assert browser.run("return document.cookie") == ""
        finally:
            browser.close()
            assert server.stop() == 0
    done = [(r["action"], r["jobid"], r["dataid"], r["who"], r["client"]) for r in _actions(cli)]
    assert done == [
        ("recover", "a", "3", "oncall", "127.0.0.1"),
        ("release", "a", "2", "oncall", "127.0.0.1"),
        ("hold", "a", "2", "oncall", "127.0.0.1"),
        ("resubmit --cascade", "b", "1", "oncall", "127.0.0.1"),
        ("resubmit --cascade", "a", "1", "oncall", "127.0.0.1"),
    ]
    assert write_token not in server.logs() and read_token not in server.logs()
    assert "oncall: resubmit changed 2" in server.logs()


def _post(url: str, token: str, name: str, body, **headers) -> httpx.Response:
    content = body if isinstance(body, (str, bytes)) else json.dumps(body)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", **headers}
    return httpx.post(f"{url}/api/actions/{name}", content=content, headers=headers, timeout=60)


def _refused(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.text.count("\n") == 1 and response.text.endswith("\n")
    return response.json()["error"]


def test_no_request_from_another_site_no_form_no_get_and_no_read_token_acts(cli, tmp_path):
    _pipeline(cli)
    read_path, read_token = token_file(tmp_path)
    spec, token = _write_token(tmp_path)
    script(tmp_path, "a.sh", f"while [ ! -e {tmp_path / 'go'} ]; do sleep 0.1; done")
    cli.ok("ready", "src", "4")
    run = start_runjob(cli, "./a.sh")
    server = Server(cli, read_path, "--write-token-file", spec).start()
    chunk = {"job": "a", "dataid": "1"}
    try:
        foreign = _post(server.url, token, "resubmit", chunk, Origin="https://evil.example")
        assert "another site" in _refused(foreign, 403)
        cross = _post(server.url, token, "hold", chunk, **{"Sec-Fetch-Site": "cross-site"})
        assert "another site" in _refused(cross, 403)
        form = _post(server.url, token, "resubmit", "job=a&dataid=1",
                     **{"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
        assert "application/json" in _refused(form, 415)
        plain = _post(server.url, token, "resubmit", json.dumps(chunk), **{"Content-Type": ""})
        _refused(plain, 415)
        got = httpx.get(f"{server.url}/api/actions/resubmit", params=chunk,
                        headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        _refused(got, 405)
        read = _post(server.url, read_token, "resubmit", chunk)
        assert _refused(read, 403) == "the read token cannot act: a write token is needed"
        assert "write token is needed" in _refused(_post(server.url, "x" * 40, "hold", chunk), 401)
        in_url = _post(f"{server.url}", token, f"hold?token={token}", chunk)
        _refused(in_url, 401)
        assert statuses(tmp_path, "a")["1"] == "FAILED" and _actions(cli) == []  # nothing

        unknown = _post(server.url, token, "resubmit", {"job": "nope", "dataid": "1"})
        assert "unknown job 'nope'" in _refused(unknown, 404)
        no_chunk = _post(server.url, token, "resubmit", {"job": "a", "dataid": "9"})
        assert "has no chunk with dataid '9'" in _refused(no_chunk, 404)
        wait_for(lambda: statuses(tmp_path, "a").get("4") == "RUNNING", 60, "a 4 RUNNING")
        live = _refused(_post(server.url, token, "resubmit", {"job": "a", "dataid": "4"}), 409)
        assert live.startswith("a 4 is being run now (") and "wait for it to end" in live
        same = _post(server.url, token, "resubmit", chunk, Origin=server.url)  # its own page
        assert same.status_code == 200 and same.json()["summary"] == "1 chunk changed"
    finally:
        (tmp_path / "go").touch()
        run.wait(60)
        assert server.stop() == 0
    assert [(r["action"], r["dataid"], r["who"]) for r in _actions(cli)] == [
        ("resubmit", "1", "oncall")
    ]


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
@pytest.mark.utility_process
def test_a_write_token_file_that_cannot_be_used_is_one_line(cli, tmp_path):
    cli.ok("createtables")
    read_path, _ = token_file(tmp_path)
    short = tmp_path / "short.token"
    short.write_text("abc\n")
    twin = tmp_path / "twin.token"
    twin.write_text(read_path.read_text())
    spec, _ = _write_token(tmp_path)
    for value, said in [
        (f"oncall={tmp_path / 'missing'}", "is not a file"),
        (f"oncall={short}", "at least 16 printable ASCII characters"),
        (spec.split("=", 1)[1], "give LABEL=FILE"),
        (f"oncall={twin}", "holds a token given already"),
    ]:
        result = cli.utility("serve", "--port", "0", "--token-file", str(read_path),
                             "--write-token-file", value)  # fmt: skip
        assert result.code != 0, result
        assert result.err.count("\n") == 1 and said in result.err, result.err
        assert result.err.startswith("error: ") and "Traceback" not in result.err


def test_the_cli_records_its_actions_and_history_shows_a_chunks(cli):
    _pipeline(cli)
    cli.ok("resubmit", "a", "1")
    cli.ok("hold", "a", "2")
    cli.ok("release", "a", "2")
    cli.ok("recover")
    cli.ok("endjob", "a", "1", "READY")
    cli.ok("resubmit", "a", "2", "--dry-run")  # changes nothing: no action
    rows = _actions(cli)
    assert [(r["action"], r["jobid"], r["dataid"], r["detail"]) for r in rows] == [
        ("end", "a", "1", "set to READY"),
        ("recover", "a", "3", "RUNNING -> FAILED (its run died; abandoned)"),
        ("release", "a", "2", "HOLD -> READY"),
        ("hold", "a", "2", "READY -> HOLD"),
        ("resubmit", "a", "1", "FAILED -> RESUBMIT"),
    ]
    assert {(r["who"], r["client"]) for r in rows} == {(getpass.getuser(), None)}
    shown = cli.ok("history", "a", "1").out
    assert "actions on a 1 (utility actions):" in shown
    assert "set to READY" in shown and "FAILED -> RESUBMIT" in shown and "HOLD" not in shown
    assert [r["action"] for r in _actions(cli, "a", "2")] == ["release", "hold"]
    assert cli.ok("actions", "b").out.strip() == "no actions recorded"
    assert "unknown job 'zz'" in cli.utility("actions", "zz").err


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
def test_the_buttons_are_on_the_live_board_of_a_server_with_write_tokens_only(cli, tmp_path):
    _pipeline(cli)
    cli.ok("board", "--html", "board.html")
    assert 'id="acts"' not in (tmp_path / "board.html").read_text()  # the static page
    read_path, _ = token_file(tmp_path)
    spec, _ = _write_token(tmp_path)
    for extra, panel in (([], False), (["--write-token-file", spec], True)):
        server = Server(cli, read_path, "--open-read", *extra).start()
        try:
            page = httpx.get(server.url + "/").text
            assert ('id="acts"' in page) is panel and ("api/actions/" in page) is panel
        finally:
            assert server.stop() == 0
