"""The live board of ``utility serve`` in a real headless Chromium, driven through
Debian's chromedriver (the W3C WebDriver protocol, spoken with httpx): a real RunJob's
chunk turns from RUNNING to READY on the open page, without a reload."""

from __future__ import annotations

import tempfile
import time

from dataflow.ops import board
from support import Cli, script, start_runjob, statuses, wait_for
from support.browser import Browser, needed, rgb
from support.serving import Server, token_file

CELLS = """
return Array.from(document.querySelectorAll('tbody tr')).map(function (tr) {
  return [tr.dataset.job, Array.from(tr.querySelectorAll('td.cell')).map(function (td) {
    return [td.dataset.status || '', getComputedStyle(td).backgroundColor]; })];
});
"""


def cell(browser: Browser, job: str, at: int = 0) -> list[str]:
    rows = dict(browser.run(CELLS))
    return rows[job][at] if job in rows and len(rows[job]) > at else ["", ""]


def test_the_live_board_turns_a_chunk_ready_without_a_reload(tmp_path):
    driver, binary = needed("chromedriver"), needed("chromium")
    cli = Cli(tmp_path)
    cli.ok("createtables")
    cli.ok("register-dataset", "src")
    cli.ok("register-dataset", "out")
    cli.ok("register-job", "alpha", "--in", "src", "--out", "out")
    cli.ok("ready", "src", "1")
    go = tmp_path / "go"
    script(tmp_path, "alpha.sh", f"for _ in $(seq 1200); do [ -e {go} ] && break; sleep 0.1; done")
    run = start_runjob(cli, "./alpha.sh")
    path, _ = token_file(tmp_path)
    server = Server(cli, path, "--open-read", "--refresh", "1").start()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        browser = Browser(driver, binary, profile)
        try:
            wait_for(lambda: statuses(tmp_path, "alpha").get("1") == "RUNNING", 60, "RUNNING")
            browser.open(server.url + "/")
            assert browser.run("return document.title") == "OpenDataFlow status board"
            assert cell(browser, "alpha") == [
                "RUNNING",
                "rgb({}, {}, {})".format(*rgb(board.COLOURS["RUNNING"])),
            ]
            browser.run("window.sameDocument = 'yes'; return 0")  # gone if the page reloads
            go.touch()
            assert run.wait(60) == 0, run.stderr.read()
            deadline = time.monotonic() + 60
            while cell(browser, "alpha")[0] != "READY":
                assert time.monotonic() < deadline, browser.run("return document.body.innerText")
                time.sleep(0.2)
            ready = "rgb({}, {}, {})".format(*rgb(board.COLOURS["READY"]))
            assert cell(browser, "alpha")[1] == ready  # what a person sees: green
            assert browser.run("return window.sameDocument") == "yes"  # not reloaded
            navigations = "return performance.getEntriesByType('navigation').length"
            assert browser.run(navigations) == 1
            live = browser.run("return document.getElementById('live').textContent")
            assert live.startswith("live: updated ")
        finally:
            browser.close()
            assert server.stop() == 0
