"""``utility serve`` against clients that misbehave and rows that point elsewhere, with a
real server process and real sockets on 127.0.0.1: a valid POST is answered while 1,000
half-sent requests are held open (the server under ``ulimit -n 1024``), a token sent in
the path never reaches the log, and items land only under a ``--landing-root``."""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from support import Cli
from support.serving import Server, json_items, landed, token_file

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

HELD = 1000  # half-sent requests held open against the server
PRODUCERS = 24  # valid POSTs sent at once beside them, each from its own connection
FILES = 1024  # the server's limit of open files
ANSWER_WITHIN = 2.0  # seconds: the bound on waiting for the valid POST's answer
HALF_SENT = b"POST /stream/landing HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty"


def _site(tmp_path: Path) -> tuple[Cli, Path, str, Path]:
    """A store with the landing dataset ``landing`` (json) under ``data``."""
    cli = Cli(tmp_path)
    cli.ok("createtables")
    data = tmp_path / "data"
    data.mkdir()
    cli.ok("register-dataset", "landing", "--database", "json", "--schemaname", str(data),
           "--tablename", "landing")  # fmt: skip
    path, token = token_file(tmp_path)
    return cli, path, token, data


def _post(server: Server, token: str, path: str, item: dict, timeout: float = 30):
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=timeout) as http:
        return http.post(path, json=item)


def _answer(server: Server, token: str, n: int) -> int | str:
    """The status of one valid POST, or what kept it from being answered in time."""
    try:
        return _post(server, token, "/stream/landing", {"n": n}, timeout=ANSWER_WITHIN).status_code
    except httpx.HTTPError as exc:
        return type(exc).__name__


@pytest.mark.slow
def test_posts_are_answered_while_1000_half_sent_requests_are_held_open(tmp_path):
    cli, path, token, data = _site(tmp_path)
    server = Server(cli, path, "--landing-root", str(data), files=FILES).start()
    held: list[socket.socket] = []
    try:
        for _ in range(HELD):  # each sends part of its headers, then holds still
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            sock.sendall(HALF_SENT)
            held.append(sock)
        with ThreadPoolExecutor(PRODUCERS) as pool:
            answers = list(pool.map(lambda n: _answer(server, token, n), range(PRODUCERS)))
        assert answers == [202] * PRODUCERS, answers
        assert sorted(item["n"] for item in json_items(data / "landing")) == list(range(PRODUCERS))
    finally:
        for sock in held:
            sock.close()
        assert server.stop() == 0
    logs = server.logs()
    assert "Traceback" not in logs and 'File "' not in logs, logs[-3000:]
    assert all(line.strip() == line and line for line in logs.splitlines()), logs[-3000:]


def test_a_token_sent_in_the_path_is_never_logged(tmp_path):
    cli, path, token, data = _site(tmp_path)
    server = Server(cli, path, "--landing-root", str(data)).start()
    escaped = f"%{ord(token[0]):02X}{token[1:]}"  # the same path, one character escaped
    try:
        with httpx.Client(base_url=server.url, timeout=30,
                          headers={"Authorization": f"Bearer {token}"}) as http:  # fmt: skip
            assert http.post(f"/stream/{token}", json={"n": 1}).status_code == 404
            assert http.post(f"/stream/{escaped}", json={"n": 1}).status_code == 404
            assert http.get(f"/api/log/{token}/1").status_code == 404
            assert http.get(f"/api/log/work/{token}").status_code == 404
            assert http.get(f"/{token}").status_code == 404
        with httpx.Client(base_url=server.url, timeout=30) as anonymous:
            assert anonymous.post(f"/stream/{token}", json={"n": 1}).status_code == 401
    finally:
        assert server.stop() == 0
    logs = server.logs()
    assert token not in logs and token[1:] not in logs, logs
    assert logs.count(" 404 ") == 5 and logs.count(" 401 ") == 1, logs


def _landing(cli: Cli, name: str, base: str) -> None:
    cli.ok("register-dataset", name, "--database", "json", "--schemaname", base,
           "--tablename", name)  # fmt: skip


@pytest.mark.long
def test_items_land_only_under_a_landing_root(tmp_path):
    cli, path, token, data = _site(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (data / "link").mkdir(parents=True)
    (data / "link" / "out").symlink_to(elsewhere)
    _landing(cli, "outside", str(elsewhere))  # a row naming a folder outside the root
    _landing(cli, "climbs", f"{data}/../elsewhere")  # inside, by its text
    _landing(cli, "linked", f"{data}/link/out")  # inside, until the symlink is followed
    _landing(cli, "near", f"{data}-2")  # a name that starts like the root's
    server = Server(cli, path, "--landing-root", str(data)).start()
    try:
        assert _post(server, token, "/stream/landing", {"n": 1}).status_code == 202
        for name in ("outside", "climbs", "linked", "near"):
            answer = _post(server, token, f"/stream/{name}", {"n": 2})
            assert answer.status_code == 403, (name, answer.text)
            assert "--landing-root" in answer.json()["error"]
    finally:
        assert server.stop() == 0
    assert json_items(data / "landing") == [{"n": 1}]
    assert list(elsewhere.rglob("*")) == [] and not Path(f"{data}-2").exists()
    refusals = [line for line in server.output().splitlines() if " 403 " in line]
    assert len(refusals) == 4 and all("--landing-root" in line for line in refusals), refusals
    for name in ("outside", "climbs", "linked", "near"):
        assert sum(f"'{name}'" in line for line in refusals) == 1, (name, refusals)


def test_without_a_landing_root_no_item_lands(tmp_path):
    cli, path, token, data = _site(tmp_path)
    server = Server(cli, path).start()
    try:
        answer = _post(server, token, "/stream/landing", {"n": 1})
        assert answer.status_code == 403 and "--landing-root" in answer.json()["error"]
        reads = httpx.get(f"{server.url}/api/status", timeout=30,
                          headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        assert reads.status_code == 200  # the board and the API need no root
    finally:
        assert server.stop() == 0
    assert landed(data / "landing") == []
    assert "no --landing-root" in server.err.read_text()
