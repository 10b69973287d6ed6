"""The live board of ``utility serve`` in a real headless Chromium, driven through
Debian's chromedriver (the W3C WebDriver protocol, spoken with httpx): a real RunJob's
chunk turns from RUNNING to READY on the open page, without a reload."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time

import httpx
import pytest
from test_board import FLAGS, rgb

from dataflow.ops import board
from serving import Server, token_file
from support import Cli, script, start_runjob, statuses, wait_for

CELLS = """
return Array.from(document.querySelectorAll('tbody tr')).map(function (tr) {
  return [tr.dataset.job, Array.from(tr.querySelectorAll('td.cell')).map(function (td) {
    return [td.dataset.status || '', getComputedStyle(td).backgroundColor]; })];
});
"""


def _needed(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    message = f"{name} is needed to test the live board: apt-get install chromium chromium-driver"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(message)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Browser:
    """A headless Chromium session through chromedriver's WebDriver endpoint."""

    def __init__(self, driver: str, binary: str, profile: str):
        port = _free_port()
        self.driver = subprocess.Popen([driver, f"--port={port}"], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)  # fmt: skip
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120)
        wait_for(self._ready, timeout=60, what="chromedriver")
        options = {"binary": binary, "args": [*FLAGS, f"--user-data-dir={profile}"]}
        capabilities = {"browserName": "chrome", "goog:chromeOptions": options}
        answer = self.http.post("/session", json={"capabilities": {"alwaysMatch": capabilities}})
        assert answer.status_code == 200, answer.text
        self.session = f"/session/{answer.json()['value']['sessionId']}"

    def _ready(self) -> bool:
        try:
            return self.http.get("/status").json()["value"]["ready"]
        except httpx.TransportError:
            return False

    def open(self, url: str) -> None:
        answer = self.http.post(f"{self.session}/url", json={"url": url})
        assert answer.status_code == 200, answer.text

    def run(self, code: str):
        answer = self.http.post(f"{self.session}/execute/sync", json={"script": code, "args": []})
        assert answer.status_code == 200, answer.text
        return answer.json()["value"]

    def close(self) -> None:
        try:
            self.http.delete(self.session)
        finally:
            self.http.close()
            self.driver.terminate()
            self.driver.wait(30)


def cell(browser: Browser, job: str, at: int = 0) -> list[str]:
    rows = dict(browser.run(CELLS))
    return rows[job][at] if job in rows and len(rows[job]) > at else ["", ""]


def test_the_live_board_turns_a_chunk_ready_without_a_reload(tmp_path):
    driver, binary = _needed("chromedriver"), _needed("chromium")
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
