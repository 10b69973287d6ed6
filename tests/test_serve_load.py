"""``utility serve`` under load, killed in the middle: 2,000 items from 16 concurrent
clients, random requests sent again with their Idempotency-Key, the server killed with
SIGKILL half-way and started again on its port. Every item acknowledged (202) is in the
landing folder, each exactly once, and in the end all 2,000 are."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import httpx
import pytest

from support import Cli
from support.serving import Server, client, json_items, landed, token_file

ITEMS = 2000
CLIENTS = 16
RETRIED = 0.25  # share of requests sent again after their 202
DEADLINE = 240  # seconds: a stuck client fails the test instead of hanging it


def requests_of(seed: int) -> list[tuple[str, list[dict]]]:
    """The items in requests of 1 to 5 items, each with its own key."""
    rng, found, at = random.Random(seed), [], 0
    while at < ITEMS:
        size = rng.randint(1, 5)
        items = [{"id": n, "note": f"order-{n}-body"} for n in range(at, min(at + size, ITEMS))]
        found.append((f"load-{seed}-{len(found)}", items))
        at += size
    return found


class Producer(threading.Thread):
    """One client: posts its requests, each until it is acknowledged (a connection lost
    to a killed server, a 503 while it restarts: the same request again, same key)."""

    def __init__(self, server: Server, token: str, requests: list, seed: int):
        super().__init__(daemon=True)
        self.server, self.token, self.requests = server, token, requests
        self.rng = random.Random(seed)
        self.acknowledged: list[int] = []
        self.keys: list[tuple[str, list[dict]]] = []  # the requests acknowledged, in order
        self.duplicates = 0
        self.failure = ""

    def send(self, http: httpx.Client, key: str, items: list[dict]) -> dict:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            try:
                answer = http.post("/stream/landing", json=items, headers={"Idempotency-Key": key})
            except httpx.TransportError:  # the server is down: try again, same key
                time.sleep(0.05)
                continue
            if answer.status_code == 202:
                return answer.json()
            if answer.status_code != 503:
                raise AssertionError(f"{key}: {answer.status_code} {answer.text}")
            time.sleep(0.05)
        raise AssertionError(f"{key}: not acknowledged in {DEADLINE} s")

    def run(self) -> None:
        try:
            with client(self.server, self.token) as http:
                for key, items in self.requests:
                    assert self.send(http, key, items)["items"] == len(items)
                    self.acknowledged += [item["id"] for item in items]
                    self.keys.append((key, items))
                    if self.rng.random() < RETRIED:  # as a client that never saw the 202
                        again = self.send(http, key, items)
                        assert again["duplicate"] is True, (key, again)
                        self.duplicates += 1
        except Exception as exc:  # reported by the test, not lost in a thread
            self.failure = f"{type(exc).__name__}: {exc}"


@pytest.mark.slow
def test_2000_items_from_16_clients_through_a_kill_land_exactly_once(tmp_path):
    cli = Cli(tmp_path)
    cli.ok("createtables")
    folder = tmp_path / "data" / "landing"
    cli.ok("register-dataset", "landing", "--database", "json", "--schemaname",
           str(tmp_path / "data"), "--tablename", "landing")  # fmt: skip
    path, token = token_file(tmp_path)
    server = Server(cli, path, "--landing-root", str(tmp_path)).start()
    requests = requests_of(26)
    producers = [
        Producer(server, token, requests[n::CLIENTS], seed=n) for n in range(CLIENTS)
    ]  # fmt: skip
    for producer in producers:
        producer.start()
    deadline = time.monotonic() + DEADLINE
    while sum(len(p.acknowledged) for p in producers) < ITEMS // 3:
        assert time.monotonic() < deadline and all(p.is_alive() for p in producers)
        time.sleep(0.02)
    server.kill()  # SIGKILL in the middle of the load: requests under way are cut
    before_restart = {n for p in producers for n in p.acknowledged}
    known = [request for p in producers for request in list(p.keys)]
    on_disk = Counter(item["id"] for item in json_items(folder))
    assert before_restart <= set(on_disk)  # every 202 landed before the kill
    assert max(on_disk.values()) == 1
    server.start(port=server.port)
    for producer in producers:
        producer.join(DEADLINE)
    failures = [p.failure for p in producers if p.failure or p.is_alive()]
    assert failures == [], failures
    with client(server, token) as http:  # keys acknowledged before the kill: still known
        for key, items in random.Random(3).sample(known, min(50, len(known))):
            again = http.post("/stream/landing", json=items, headers={"Idempotency-Key": key})
            assert again.status_code == 202 and again.json()["duplicate"] is True, again.text
    assert server.stop() == 0
    landed_ids = Counter(item["id"] for item in json_items(folder))
    assert sorted(landed_ids) == list(range(ITEMS))  # every item...
    assert set(landed_ids.values()) == {1}  # ...exactly once
    assert sorted(n for p in producers for n in p.acknowledged) == list(range(ITEMS))
    assert sum(p.duplicates for p in producers) > 0  # the retries did happen
    assert len(landed(folder)) == len(requests)  # one file per request
    assert token not in server.logs() and "-body" not in server.logs()
