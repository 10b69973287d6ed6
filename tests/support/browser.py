"""A headless Chromium session for the tests of the live board, through Debian's
chromedriver (the W3C WebDriver protocol, spoken with httpx): open a page, run a script,
find an element, click it and type into it as a person does."""

from __future__ import annotations

import socket
import subprocess

import httpx

from support import installed, wait_for

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C name of an element's reference


def needed(name: str) -> str:
    """The path of program ``name``; the test is skipped without it (failed on CI)."""
    why = f"{name} is needed to test the live board: apt-get install chromium chromium-driver"
    return installed(name, message=why)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Browser:
    """A headless Chromium session through chromedriver's WebDriver endpoint."""

    def __init__(self, driver: str, binary: str, profile: str):
        port = free_port()
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

    def run(self, code: str, *args):
        answer = self.http.post(
            f"{self.session}/execute/sync", json={"script": code, "args": list(args)}
        )
        assert answer.status_code == 200, answer.text
        return answer.json()["value"]

    def find(self, css: str) -> str:
        """The reference of the element ``css`` selects."""
        found = self.http.post(
            f"{self.session}/element", json={"using": "css selector", "value": css}
        )
        assert found.status_code == 200, found.text
        return found.json()["value"][ELEMENT]

    def click(self, css: str) -> None:
        """A click on the element, as the pointer makes one: on the one ``css`` selects
        at the click (a board that refreshes replaces its rows between a find and a
        click, and the found element is then stale: it is found again)."""
        for _ in range(5):
            answer = self.http.post(f"{self.session}/element/{self.find(css)}/click", json={})
            if answer.status_code != 404 or "stale element" not in answer.text:
                break
        assert answer.status_code == 200, answer.text

    def type(self, css: str, text: str) -> None:
        """Keystrokes into the element, after clearing it."""
        element = self.find(css)
        cleared = self.http.post(f"{self.session}/element/{element}/clear", json={})
        assert cleared.status_code == 200, cleared.text
        answer = self.http.post(f"{self.session}/element/{element}/value", json={"text": text})
        assert answer.status_code == 200, answer.text

    def text(self, css: str) -> str:
        return self.run("return document.querySelector(arguments[0]).textContent", css)

    def close(self) -> None:
        try:
            self.http.delete(self.session)
        finally:
            self.http.close()
            self.driver.terminate()
            self.driver.wait(30)


WINDOW = (1000, 600)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--force-device-scale-factor=1",
    f"--window-size={WINDOW[0]},{WINDOW[1]}",
]


def rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
