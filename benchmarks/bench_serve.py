"""``utility serve``: items POSTed over HTTP, against ``utility drop``.

- Latency (inside the streaming benchmark, with its stream running): an item POSTed →
  its chunk READY, from the moment the POST is sent, beside the ``utility drop`` row.
- Throughput (this section): how many items a second one server lands durably (each
  request one item, fsync on, 16 clients at once, each request with its Idempotency-Key),
  against the same number of ``utility drop`` calls, 16 at once.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from measure import BIN, Config, Dist, Row, Section, base_env, check_output, ms, times

CLIENTS = 16
STARTED = re.compile(rb"^serving (http://\S+?): ", re.M)


def available() -> str:
    """Empty if the server can run here, else why not."""
    try:
        import httpx  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        return f"{exc.name} is not installed (pip install opendataflow[serve] httpx)"
    return ""


class Server:
    """``utility serve`` on a free port, for the length of a ``with``."""

    def __init__(self, work: Path, env: dict[str, str]):
        self.token = secrets.token_urlsafe(32)
        token = work / "token"
        token.write_text(self.token + "\n")
        token.chmod(0o600)
        self.log = work / "serve.log"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [str(BIN / "utility"), "serve", "--port", "0", "--token-file", str(token),
                 "--landing-root", str(work)],
                cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while not (found := STARTED.search(self.log.read_bytes())):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"utility serve did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.02)
        self.url = found.group(1).decode()

    def client(self):
        import httpx

        headers = {"Authorization": f"Bearer {self.token}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *_) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=60)


def post(http, dataset: str, body: str, key: str) -> None:
    answer = http.post(f"/stream/{dataset}", content=body,
                       headers={"Content-Type": "text/csv", "Idempotency-Key": key})  # fmt: skip
    if answer.status_code != 202:
        raise RuntimeError(f"POST answered {answer.status_code}: {answer.text}")


def posted_to_ready(
    work: Path,
    env: dict[str, str],
    items: range,
    body: Callable[[int], str],
    ready: Callable[[int], None],
    pause: Callable[[], None],
) -> list[float]:
    """For each item: POST it to ``landing`` (a server started here), wait until
    ``ready(n)`` returns (its chunk READY), pause. Latencies from the POST's sending."""
    latencies = []
    with Server(work, env) as server, server.client() as http:
        for n in items:
            sent = time.perf_counter()
            post(http, "landing", body(n), f"bench-{n}")
            ready(n)
            latencies.append(time.perf_counter() - sent)
            pause()
    return latencies


def _concurrently(count: int, one: Callable[[int], None]) -> float:
    """``one(n)`` for n in range(count), from CLIENTS threads; the seconds it took."""
    failures: list[str] = []
    lock = threading.Lock()
    queue = iter(range(count))

    def work() -> None:
        while True:
            with lock:
                n = next(queue, None)
            if n is None:
                return
            try:
                one(n)
            except Exception as exc:
                failures.append(str(exc))
                return

    threads = [threading.Thread(target=work) for _ in range(CLIENTS)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(failures[0])
    return time.perf_counter() - started


def bench(config: Config, work: Path) -> Section:
    section = Section("serve", "utility serve: items over HTTP")
    why = available()
    if why:
        section.skip("items a second one server lands", why)
        return section
    count = 100 if config.quick else 400
    store = work / "dataflow.db"
    env = base_env(store)
    utility = str(BIN / "utility")
    check_output([utility, "createtables"], work, env)
    for name in ("posted", "dropped"):
        check_output([utility, "register-dataset", name, "--database", "csv",
                      "--schemaname", str(work / "data"), "--tablename", name], work, env)  # fmt: skip
    body = "item,sku,qty\n{n},sku{n},1\n"
    latencies: list[float] = []
    with Server(work, env) as server:
        local = threading.local()

        def one_post(n: int) -> None:
            if not hasattr(local, "http"):
                local.http = server.client()
            sent = time.perf_counter()
            post(local.http, "posted", body.format(n=n), f"throughput-{n}")
            latencies.append(time.perf_counter() - sent)

        served = _concurrently(count, one_post)
    outbox = work / "outbox"
    outbox.mkdir()
    for n in range(count):
        (outbox / f"item-{n:05d}.csv").write_text(body.format(n=n))

    def one_drop(n: int) -> None:
        check_output([utility, "drop", "dropped", str(outbox / f"item-{n:05d}.csv")], work, env)

    dropped = _concurrently(count, one_drop)
    landed = [len(list((work / "data" / name).glob("*.csv"))) for name in ("posted", "dropped")]
    if landed != [count, count]:
        raise RuntimeError(f"landed {landed}, expected {count} each")
    dist = Dist.of(latencies)
    per_s_served, per_s_dropped = count / served, count / dropped
    print(
        f"  {count} POSTs: {per_s_served:.0f} items/s; {count} drops: {per_s_dropped:.0f} items/s"
    )
    print(f"  POST → 202: p50 {ms(dist.median)}, p95 {ms(dist.p95)}")
    section.add(
        Row(section.title, f"items a second one server lands ({CLIENTS} clients, fsync on)",
            note=f"{per_s_served:.0f} items/s; `utility drop` ×{count}, {CLIENTS} at once: "
            f"{per_s_dropped:.0f} items/s; ratio {times(per_s_served / per_s_dropped)}"),
        Row(section.title, "POST of one item → 202 (on disk), under that load",
            ms(dist.median), ms(dist.p95), note=f"{count} requests, {CLIENTS} clients"),
    )  # fmt: skip
    section.text(
        f"One `utility serve` (SQLite store, one uvicorn worker) takes {count} POSTs of one "
        f"CSV item each, from {CLIENTS} clients at once (httpx, keep-alive), each with its "
        "Idempotency-Key; each 202 comes once the item is written whole, fsynced, linked and "
        f"the folder fsynced. Against it: {count} `utility drop` calls, {CLIENTS} at once, "
        "each a new process that writes the same way."
    )
    return section
