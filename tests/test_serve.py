"""``utility serve``: a real server process, real HTTP (httpx). Items POSTed land as
``utility drop`` lands them; every refusal is one line of JSON and lands nothing; the
token is needed, never taken from a URL, never logged; the read-only views answer what
the CLI's ``--json`` prints; SIGTERM lets a request under way finish."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from support import Cli, script
from support.serving import Server, client, json_items, landed, token_file

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

MARKER = "SECRET-BODY-7f3a"  # in bodies: must never reach the server's log


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A store with landing datasets (json, csv) and some that take no items, one job
    run to READY, and a server on it (reads need the token)."""
    folder = tmp_path_factory.mktemp("serve")
    cli = Cli(folder)
    data = folder / "data"
    cli.ok("createtables")
    for name, fmt in (("landing", "json"), ("orders", "csv"), ("clean", "parquet")):
        cli.ok("register-dataset", name, "--database", fmt, "--schemaname", str(data),
               "--tablename", name)  # fmt: skip
    cli.ok("register-dataset", "events", "--database", "json", "--schemaname", str(data),
           "--tablename", "events")  # fmt: skip
    cli.ok("register-dataset", "remote", "--database", "json", "--schemaname", "s3a://bucket",
           "--tablename", "r")  # fmt: skip
    cli.ok("register-dataset", "src")
    cli.ok("register-job", "work", "--in", "src", "--out", "events")  # events: a job's OUT
    script(folder, "work.sh", 'echo "work at $dataid"')
    cli.ok("ready", "src", "1")
    assert cli.run_job("./work.sh").exit_code == 0
    token_path, token = token_file(folder)
    server = Server(cli, token_path, "--max-body", "4K", "--landing-root", str(folder)).start()
    yield cli, server, token, data
    assert server.stop() == 0
    logs = server.logs()
    assert MARKER not in logs and token not in logs  # bodies and the token: never logged


def post(http: httpx.Client, dataset: str, body, kind="application/json", **headers):
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return http.post(f"/stream/{dataset}", content=content,
                     headers={"Content-Type": kind, **headers})  # fmt: skip


def one_line_error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.text.count("\n") == 1 and response.text.endswith("\n")
    return response.json()["error"]


@pytest.mark.long
def test_one_item_lands_whole_and_is_acknowledged(site):
    _, server, token, data = site
    with client(server, token) as http:
        response = post(http, "landing", {"order": 1, "note": MARKER})
    assert response.status_code == 202
    answer = response.json()
    assert answer["dataset"] == "landing" and answer["items"] == 1
    assert answer["duplicate"] is False
    item = data / "landing" / answer["file"]
    assert (
        item.read_text() == json.dumps({"order": 1, "note": MARKER}, separators=(",", ":")) + "\n"
    )
    assert oct(item.stat().st_mode & 0o777) == "0o644"
    assert not [p for p in item.parent.iterdir() if p.name.startswith(".")]  # no half file


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("application/json", '[{"n": 1}, {"n": 2}, {"n": 3}]'),
        ("application/x-ndjson", '{"n": 1}\n\n{"n": 2}\n{"n": 3}\n'),
        ("application/json; charset=utf-8", '[{"n": 1}, {"n": 2}, {"n": 3}]'),
        ("text/csv", "n\n1\n2\n3\n"),
    ],
)
def test_many_items_by_content_type(site, kind, body):
    _, server, token, data = site
    with client(server, token) as http:
        response = post(http, "landing", body, kind)
    assert response.status_code == 202, response.text
    assert response.json()["items"] == 3
    lines = (data / "landing" / response.json()["file"]).read_text().splitlines()
    numbers = [json.loads(line)["n"] for line in lines]
    assert [str(n) for n in numbers] == ["1", "2", "3"]  # CSV values stay text


def test_a_csv_landing_gets_a_header_and_the_first_items_columns(site):
    _, server, token, data = site
    items = [{"id": 1, "store": "nyc", "ok": True}, {"store": "sfo,west", "id": 2}]
    with client(server, token) as http:
        response = post(http, "orders", items)
        assert response.status_code == 202, response.text
        text = (data / "orders" / response.json()["file"]).read_text()
        assert text == 'id,store,ok\n1,nyc,true\n2,"sfo,west",\n'
        posted = post(http, "orders", "id,store\n3,chi\n", "text/csv")
        assert (data / "orders" / posted.json()["file"]).read_text() == "id,store\n3,chi\n"


def test_an_idempotency_key_lands_a_retried_post_once(site):
    _, server, token, data = site
    body = [{"order": 7, "note": MARKER}, {"order": 8}]
    with client(server, token) as http:
        first = post(http, "landing", body, **{"Idempotency-Key": "order-7-8"})
        again = post(http, "landing", body, **{"Idempotency-Key": "order-7-8"})
        other = post(http, "landing", [{"order": 9}], **{"Idempotency-Key": "order-7-8"})
        bad = post(http, "landing", body, **{"Idempotency-Key": "x" * 256})
    assert first.status_code == again.status_code == 202
    assert first.json()["duplicate"] is False and again.json()["duplicate"] is True
    assert first.json()["file"] == again.json()["file"] and again.json()["items"] == 2
    assert "used before for other items" in one_line_error(other, 422)
    assert "Idempotency-Key" in one_line_error(bad, 400)
    found = [i for i in json_items(data / "landing") if i.get("order") in (7, 8, 9)]
    assert found == [{"order": 7, "note": MARKER}, {"order": 8}]


@pytest.mark.parametrize(
    ("dataset", "kind", "body", "says"),
    [
        ("landing", "application/json", '{"a": 1,', "the body is not JSON: "),
        ("landing", "application/json", '{"a": "' + MARKER + '"', "the body is not JSON: "),
        ("landing", "text/csv", 'a\n"' + MARKER, "cannot be read at line"),
        ("landing", "application/json", '[{"a": 1}, 2]', "item 2 is a JSON number"),
        ("landing", "application/json", "[]", "the body has no items"),
        ("landing", "application/json", '{"a": NaN}', "NaN is not JSON"),
        ("landing", "application/json", b'{"a": "\xff"}', "not UTF-8"),
        ("landing", "application/x-ndjson", '{"a": 1}\n[1]\n', "line 2 is a JSON array"),
        ("landing", "text/csv", "a,b\n1,2\n3\n", "CSV line 3 has 1 fields; the header has 2"),
        ("landing", "text/csv", "a,a\n1,2\n", "repeats a name"),
        ("landing", "text/csv", "", "starts with its header line"),
        ("orders", "application/json", '[{"a": 1}, {"a": 2, "b": 3}]', "a field that item 1"),
        ("orders", "application/json", '{"a": {"b": 1}}', "nested object"),
        ("orders", "application/json", '{"a": "two\\nlines"}', "line break"),
    ],
)
def test_a_malformed_body_is_400_in_one_line_and_lands_nothing(site, dataset, kind, body, says):
    _, server, token, data = site
    before = landed(data / dataset)
    with client(server, token) as http:
        response = post(http, dataset, body, kind)
    assert says in one_line_error(response, 400)
    assert MARKER not in response.text  # a place in the body is named, never its text
    assert landed(data / dataset) == before


def test_other_content_types_and_datasets_that_take_no_items(site):
    _, server, token, data = site
    with client(server, token) as http:
        assert "text/csv" in one_line_error(post(http, "landing", "a=1", "text/plain"), 415)
        assert "unknown dataset 'nope'" in one_line_error(post(http, "nope", {"a": 1}), 404)
        assert "is parquet" in one_line_error(post(http, "clean", {"a": 1}), 409)
        assert "OUT dataset of job work" in one_line_error(post(http, "events", {"a": 1}), 409)
        assert "not on this machine" in one_line_error(post(http, "remote", {"a": 1}), 409)
        assert http.get("/stream/landing").status_code == 405
        assert one_line_error(http.get("/nothing/here"), 404) == "Not Found"
    assert not (data / "clean").exists() and not (data / "events").exists()


def test_a_body_over_the_limit_is_413_even_without_a_length(site):
    _, server, token, data = site
    before = landed(data / "landing")
    big = json.dumps([{"n": n, "pad": "x" * 100} for n in range(40)])  # over 4K
    with client(server, token) as http:
        assert "over 4,096 bytes" in one_line_error(post(http, "landing", big), 413)

        def pieces():  # chunked: no Content-Length to refuse it early
            for at in range(0, len(big), 500):
                yield big[at : at + 500].encode()

        chunked = http.post("/stream/landing", content=pieces(),
                            headers={"Content-Type": "application/json"})  # fmt: skip
        assert "over 4,096 bytes" in one_line_error(chunked, 413)
    assert landed(data / "landing") == before


def test_no_token_a_wrong_one_or_one_in_the_url_is_refused(site):
    _, server, token, data = site
    before = landed(data / "landing")
    wrong = token[:-1] + ("A" if token[-1] != "A" else "B")
    with client(server, None) as anonymous:
        assert "valid token" in one_line_error(post(anonymous, "landing", {"a": 1}), 401)
        refused = post(anonymous, "landing", {"a": 1}, Authorization=f"Bearer {wrong}")
        assert one_line_error(refused, 401) and refused.headers["www-authenticate"]
        refused = post(anonymous, "landing", {"a": 1}, Authorization=f"Basic {token}")
        assert one_line_error(refused, 401)
        for query in (f"?token={token}", f"?access_token={token}", f"?x={token}", "?api_key=1"):
            with_header = anonymous.post(
                f"/stream/landing{query}", content='{"a": 1}',
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )  # fmt: skip
            assert "token in the URL" in one_line_error(with_header, 401)
            assert one_line_error(anonymous.get(f"/api/status{query}"), 401)
        for path in ("/", "/api/status", "/api/runs", "/api/history", "/api/board",
                     "/api/log/work/1"):  # fmt: skip
            assert one_line_error(anonymous.get(path), 401), path
    assert landed(data / "landing") == before


def _raw(port: int, request: str) -> str:
    """A request sent as written (no client tidies its path); the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        raw.sendall(request.encode())
        answer = b""
        while part := raw.recv(65536):
            answer += part
    return answer.decode(errors="replace")


def test_paths_that_climb_out_are_refused(site):
    cli, server, token, data = site
    before = landed(data / "landing")
    outside = cli.cwd / "outside.log"
    outside.write_text("not a log of ours\n")
    cli.ok("dml", f"update run set logpath = '{outside}' where jobid = 'work'")
    for path in ("/stream/..%2F..%2Fetc", "/stream/%2e%2e", "/stream/.hidden",
                 "/stream/..%5Cx", "/api/log/..%2F..%2Fetc/passwd", "/api/log/../../etc/passwd",
                 "/api/log/work/..%2F..%2F..%2Fetc%2Fpasswd"):  # fmt: skip
        for method in ("GET", "POST"):
            head = _raw(server.port, f"{method} {path} HTTP/1.1\r\nHost: x\r\n"
                        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                        "Content-Length: 2\r\nConnection: close\r\n\r\n{}")  # fmt: skip
            status = int(head.split()[1])
            assert 400 <= status < 500 and "root:" not in head, (path, head)
    with client(server, token) as http:
        for dataset in ("..%2F..%2Ftmp", "%2e%2e", ".hidden", "a%5Cb"):
            response = http.post(f"/stream/{dataset}", content="{}",
                                 headers={"Content-Type": "application/json"})  # fmt: skip
            assert response.status_code in (400, 404), (dataset, response.text)
        # a history row naming a file outside the store's log folder: not served
        answer = http.get("/api/log/work/1")
        assert answer.status_code in (200, 404) and "not a log of ours" not in answer.text
    assert landed(data / "landing") == before
    assert not list(cli.cwd.glob("tmp*")) and not (data / ".hidden").exists()


def _cli_json(cli: Cli, *args: str):
    return json.loads(cli.ok(*args, "--json").out)


def test_read_only_views_answer_what_the_cli_prints(site):
    cli, server, token, _ = site
    cli.ok("dml", "update run set logpath = null where jobid = 'work'")  # its own log again
    with client(server, token) as http:
        assert http.get("/api/status").json() == _cli_json(cli, "status")
        assert http.get("/api/status?job=work").json() == _cli_json(cli, "status", "work")
        assert http.get("/api/runs?limit=5").json() == _cli_json(cli, "runs", "--limit", "5")
        history = http.get("/api/history?job=work").json()
        assert history == _cli_json(cli, "history", "work")
        assert history and history[0]["status"] == "READY"
        assert http.get("/api/board").json() == _cli_json(cli, "board")
        log = http.get("/api/log/work/1?attempt=1")
        assert log.status_code == 200 and log.headers["content-type"].startswith("text/plain")
        assert log.text == cli.ok("log", "work", "1").out and "work at 1" in log.text
        assert "unknown job 'nope'" in one_line_error(http.get("/api/history?job=nope"), 404)
        assert "no run history" in one_line_error(http.get("/api/log/work/2"), 404)
        assert "limit=" in one_line_error(http.get("/api/runs?limit=-1"), 400)
        page = http.get("/")
        assert page.headers["content-type"].startswith("text/html")
        assert "connect-src 'self'" in page.text and 'data-live="5"' in page.text
        assert 'data-job="work"' in page.text


def test_open_read_opens_the_views_only(tmp_path):
    cli = Cli(tmp_path)
    cli.ok("createtables")
    cli.ok("register-dataset", "landing", "--database", "json", "--schemaname",
           str(tmp_path / "data"), "--tablename", "landing")  # fmt: skip
    path, token = token_file(tmp_path)
    cli.ok("register-dataset", "other", "--database", "json", "--schemaname",
           str(tmp_path / "data"), "--tablename", "other")  # fmt: skip
    # one POST every 20 s: the second one comes sooner, however slow this machine is
    server = Server(cli, path, "--open-read", "--rate", "0.05", "--dataset", "landing",
                    "--landing-root", str(tmp_path)).start()  # fmt: skip
    try:
        with client(server, None) as anonymous:
            assert anonymous.get("/api/status").status_code == 200
            assert anonymous.get("/").status_code == 200
            assert one_line_error(post(anonymous, "landing", {"a": 1}), 401)
            assert one_line_error(anonymous.get(f"/api/runs?token={token}"), 401)
        with client(server, token) as http:
            elsewhere = post(http, "other", {"n": 0})  # not among --dataset
            assert "takes no items on this server" in one_line_error(elsewhere, 404)
            answers = [post(http, "landing", {"n": n}) for n in range(8)]
        codes = [a.status_code for a in answers]
        assert codes[0] == 202 and codes[1] == 429, codes
        limited = next(a for a in answers if a.status_code == 429)
        assert int(limited.headers["retry-after"]) >= 1 and "too many" in limited.json()["error"]
        numbers = sorted(item["n"] for item in json_items(tmp_path / "data" / "landing"))
        assert numbers == [n for n, a in enumerate(answers) if a.status_code == 202]
        assert not (tmp_path / "data" / "other").exists()
    finally:
        assert server.stop() == 0


@pytest.mark.slow
def test_sigterm_lets_the_request_under_way_finish_then_exits_0(tmp_path):
    cli = Cli(tmp_path)
    cli.ok("createtables")
    cli.ok("register-dataset", "landing", "--database", "json", "--schemaname",
           str(tmp_path / "data"), "--tablename", "landing")  # fmt: skip
    path, token = token_file(tmp_path)
    server = Server(cli, path, "--landing-root", str(tmp_path)).start()
    sent = threading.Event()
    answer: list = []

    def slowly():  # the body arrives in pieces, SIGTERM in the middle
        yield b'[{"n": 1},'
        sent.set()
        time.sleep(3)
        yield b'{"n": 2}]'

    def send() -> None:
        with client(server, token) as http:
            answer.append(http.post("/stream/landing", content=slowly(),
                                    headers={"Content-Type": "application/json"}))  # fmt: skip

    sender = threading.Thread(target=send)
    sender.start()
    assert sent.wait(30)
    time.sleep(1)  # the server has the request
    server.process.send_signal(15)
    sender.join(60)
    assert server.process.wait(60) == 0
    assert answer and answer[0].status_code == 202, answer
    assert sorted(i["n"] for i in json_items(tmp_path / "data" / "landing")) == [1, 2]
    assert server.output().endswith("stopped\n")
    with pytest.raises(httpx.ConnectError):  # and then it is gone
        httpx.get(server.url + "/api/status", timeout=5)


@pytest.mark.long
def test_start_up_mistakes_are_one_line(tmp_path):
    cli = Cli(tmp_path)
    cli.ok("createtables")
    short = tmp_path / "short"
    short.write_text("abc\n")
    path, _ = token_file(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        for args, says in (
            ([], "utility serve needs --token-file FILE"),
            (["--token-file", str(tmp_path / "none")], "is not a file"),
            (["--token-file", str(short)], "at least 16 printable"),
            (["--token-file", str(path), "--port", port], f"cannot listen on 127.0.0.1 port {port}"),
            (["--token-file", str(path), "--max-body", "lots"], "is not a size"),
            (["--token-file", str(path), "--rate", "-1"], "is not a rate"),
            (["--token-file", str(path), "--refresh", "0"], "is not a number of seconds"),
        ):  # fmt: skip
            result = cli.utility("serve", *args, timeout=60)
            assert result.code != 0 and result.out == "", (args, result)
            assert result.err.startswith("error: ") and says in result.err, (args, result.err)
            assert result.err.count("\n") == 1
    missing = Cli(tmp_path / "none")
    (tmp_path / "none").mkdir()
    result = missing.utility("serve", "--token-file", str(path))
    assert result.code != 0 and result.err.startswith("error: no dataflow store at ")


def test_without_the_extra_it_says_what_to_install(tmp_path):
    code = (
        "import sys\n"
        "sys.modules['starlette'] = None  # as if opendataflow[serve] were not installed\n"
        "from dataflow.cli.utility import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    path, _ = token_file(tmp_path)
    env = {**os.environ, "DATAFLOW_DB": str(tmp_path / "dataflow.db")}
    done = subprocess.run([sys.executable, "-c", code, "serve", "--token-file", str(path)],
                          capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "error: utility serve needs: pip install opendataflow[serve]\n"


def test_the_other_commands_never_import_the_server():
    code = (
        "import sys\n"
        "from dataflow.cli import utility, runjob\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('starlette', 'uvicorn', 'httpx') or m.startswith('dataflow.serve')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_server_on_a_postgresql_store(cli):
    """The store is only read (the registration, the views): the same on PostgreSQL."""
    folder = cli.cwd / "data"
    cli.ok("createtables")
    cli.ok("register-dataset", "landing", "--database", "json", "--schemaname", str(folder),
           "--tablename", "landing")  # fmt: skip
    path, token = token_file(cli.cwd)
    server = Server(cli, path, "--landing-root", str(cli.cwd)).start()
    try:
        with client(server, token) as http:
            answer = post(http, "landing", [{"n": 1}, {"n": 2}], **{"Idempotency-Key": "pg-1"})
            assert answer.status_code == 202 and answer.json()["items"] == 2
            assert post(http, "landing", [{"n": 1}, {"n": 2}],
                        **{"Idempotency-Key": "pg-1"}).json()["duplicate"] is True  # fmt: skip
            assert "unknown dataset" in one_line_error(post(http, "nope", {"n": 3}), 404)
            assert http.get("/api/status").json() == _cli_json(cli, "status")
            assert http.get("/api/board").json() == _cli_json(cli, "board")
    finally:
        assert server.stop() == 0
    assert json_items(folder / "landing") == [{"n": 1}, {"n": 2}]
