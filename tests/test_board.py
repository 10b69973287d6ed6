"""The status board: a real store built through the CLIs, the page rendered in headless Chromium.

What a person sees is checked in the browser, not in the HTML text: the colour of a cell's
pixels in a screenshot, and (through a probe script appended to a copy of the page, whose
findings ``--dump-dom`` prints) cell counts, hover texts, and the job filter hiding rows.
"""

from __future__ import annotations

import html
import itertools
import json
import math
import re
import struct
import subprocess
import tempfile
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from dataflow.ops import board, lineage
from support import Cli, installed, script
from support.browser import FLAGS, WINDOW, rgb

ODD = '<b>x</b>&"'  # a dataid that is also markup
EVIL = '<script>document.title="pwned"</script>'
EXPECTED = {  # (job, dataid) -> status, as the fixture leaves the store
    ("alpha", "1"): "READY",
    ("alpha", "2"): "READY",
    ("alpha", "3"): "RESUBMIT",
    ("alpha", "10"): "READY",
    ("beta", "1"): "FAILED",
    ("beta", "2"): "HOLD",
    ("gamma", "1"): "READY",
    ("gamma", ODD): "RUNNING",
}
DATAIDS = ["1", "2", "3", "10", ODD]  # natural order: 10 after 3
JOBS = ["alpha", "beta", "gamma", "aardvark"]  # lineage order: gamma reads a, aardvark c


# -- the browser ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def chromium() -> str:
    message = (
        "headless Chromium is needed to test the status board and is not installed: "
        "apt-get install chromium chromium-driver (.ci/run does it)"
    )
    return installed("chromium", "chromium-browser", message=message)


def run_chromium(binary: str, url: str, *args: str) -> str:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        done = subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", *args, url],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


PROBE = """<script>
var out = {rows: [], cells: [], title: document.title,
           filter: document.getElementById('filter').value,
           scope: document.getElementById('scope').textContent,
           legend: document.querySelector('.legend').textContent,
           failures: Array.from(document.querySelectorAll('#failures li')).map(function (li) {
             var r = li.getBoundingClientRect();
             return {text: li.textContent, shown: r.height > 0 && r.width > 0};
           }),
           headers: Array.from(document.querySelectorAll('thead th')).slice(1)
                      .map(function (th) { return th.textContent; })};
document.querySelectorAll('tbody tr').forEach(function (tr) {
  out.rows.push({job: tr.dataset.job, hidden: tr.hidden, height: tr.getBoundingClientRect().height});
  tr.querySelectorAll('td.cell').forEach(function (td, i) {
    var r = td.getBoundingClientRect();
    out.cells.push({job: tr.dataset.job, dataid: out.headers[i], status: td.dataset.status || '',
                    title: td.title, colour: getComputedStyle(td).backgroundColor,
                    x: r.x + r.width / 2, y: r.y + r.height / 2, w: r.width});
  });
});
var pre = document.createElement('pre');
pre.id = 'probe';
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>
"""


def probe(binary: str, page: Path, fragment: str = "") -> dict:
    """Open a copy of the page with the probe appended; return what the probe saw."""
    probed = page.with_name("probe-" + page.name)
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = run_chromium(binary, probed.as_uri() + fragment, "--dump-dom")
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    return json.loads(html.unescape(found.group(1)))


def png_pixels(data: bytes):
    """Decode an 8-bit, non-interlaced RGB(A) PNG; returns ``pixel(x, y) -> (r, g, b)``."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    stride, raw = width * bpp, zlib.decompress(idat)
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = previous[i]
            c = previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        previous = line

    def pixel(x: float, y: float) -> tuple[int, int, int]:
        row, at = rows[int(y)], int(x) * bpp
        return row[at], row[at + 1], row[at + 2]

    return pixel


# -- a real store -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Cli, Path]:
    folder = tmp_path_factory.mktemp("board")
    return build(Cli(folder)), folder / "board.html"


def build(cli: Cli) -> Cli:
    """Jobs alpha (src -> a), beta (src -> b, fails), gamma (a -> c), one chunk per status,
    and aardvark (c -> d), registered and waiting: no chunk yet, last in pipeline order;
    the board written to board.html."""
    folder = cli.cwd
    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid) values ('src'), ('a'), ('b'), ('c'), ('d')")
    cli.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('alpha','IN','src'), ('alpha','OUT','a'),"
        " ('beta','IN','src'), ('beta','OUT','b'), ('gamma','IN','a'), ('gamma','OUT','c'),"
        " ('aardvark','IN','c'), ('aardvark','OUT','d')",
    )
    cli.ok(
        "dml",
        "insert into datastatus select 'src','fakejob',value,'OUT','READY',now() from "
        "(select '1' value union select '2' union select '3' union select '10') AS chunks",
    )
    script(folder, "alpha.sh", "echo alpha $dataid")
    script(folder, "beta.sh", "echo boom; exit 3")
    script(folder, "gamma.sh", "echo gamma $dataid")
    for _ in range(4):
        assert cli.run_job("./alpha.sh").exit_code == 0
    assert cli.run_job("./beta.sh").exit_code == 3  # chunk 1 FAILED
    assert cli.run_job("./gamma.sh").exit_code == 0  # chunk 1 READY
    cli.ok("dml", f"update run set reason = '{EVIL}' where jobid = 'gamma'")  # user data
    cli.ok("forcejob", "beta", "2")
    cli.ok("endjob", "beta", "2", "HOLD")
    cli.ok("forcejob", "gamma", ODD)  # RUNNING
    cli.ok("endjob", "alpha", "3", "RESUBMIT")
    result = cli.ok("board", "--html", "board.html")
    assert result.out == "board written to board.html (4 jobs, 5 dataids)\n"
    return cli


@pytest.mark.long
def test_grid_cells_and_hover_texts_in_the_browser(chromium, made):
    _, page = made
    seen = probe(chromium, page)
    assert seen["headers"] == DATAIDS  # natural order, shown as text, not as markup
    # pipeline order (producers first), and a registered job with no chunk has its row
    assert [row["job"] for row in seen["rows"]] == JOBS
    assert len(seen["cells"]) == 4 * 5
    statuses = {(c["job"], c["dataid"]): c["status"] for c in seen["cells"] if c["status"]}
    assert statuses == EXPECTED
    assert seen["title"] == "OpenDataFlow status board"  # the reason's <script> did not run
    for name in board.COLOURS:
        assert name in seen["legend"]
    titles = {(c["job"], c["dataid"]): c["title"] for c in seen["cells"]}
    failed = titles["beta", "1"].splitlines()
    assert failed[0] == "beta at 1: FAILED"
    assert re.fullmatch(r"attempt 1, \d+\.\d s, exit code 3", failed[1])
    assert titles["gamma", "1"].splitlines()[2] == f"reason: {EVIL}"
    assert titles["alpha", "2"].startswith("alpha at 2: READY\nattempt 1, ")
    assert titles["gamma", ODD].startswith(f"gamma at {ODD}: RUNNING")
    assert titles["beta", "3"] == "beta at 3: no chunk"
    assert titles["aardvark", "1"] == "aardvark at 1: no chunk"
    # a failure's reason is on the page in words, not only on hover
    ((failure,),) = [[f for f in seen["failures"] if f["shown"]]]
    said, todo = failure["text"].split(" \u2014 ")  # then what to do, where the log is
    assert re.fullmatch(r"beta at 1: attempt 1, \d+\.\d s, exit code 3", said)
    assert todo.startswith("no retry left: fix the cause, then 'utility resubmit beta 1'; log ")
    for cell in seen["cells"]:
        expected = board.COLOURS.get(cell["status"], board.EMPTY)
        assert cell["colour"] == "rgb({}, {}, {})".format(*rgb(expected)), cell


@pytest.mark.long  # the browser's board
def test_screenshot_pixels_have_the_status_colours(chromium, made, tmp_path):
    _, page = made
    cells = probe(chromium, page)["cells"]  # where each cell is, at the same window size
    shot = tmp_path / "board.png"
    run_chromium(chromium, page.as_uri(), f"--screenshot={shot}")
    pixel = png_pixels(shot.read_bytes())
    checked = set()
    for cell in cells:
        assert cell["w"] >= 8, cell  # big enough to see
        assert 0 < cell["x"] < WINDOW[0] and 0 < cell["y"] < WINDOW[1], cell
        wanted = rgb(board.COLOURS.get(cell["status"], board.EMPTY))
        got = pixel(cell["x"], cell["y"])
        assert all(abs(g - w) <= 3 for g, w in zip(got, wanted, strict=True)), (cell, got)
        checked.add(cell["status"])
    assert checked == {"", *board.COLOURS}  # every status and the empty cell were seen


def test_job_filter_hides_other_rows(chromium, made):
    _, page = made
    seen = probe(chromium, page, "#filter=beta")
    assert seen["filter"] == "beta"
    rows = {row["job"]: row for row in seen["rows"]}
    assert not rows["beta"]["hidden"] and rows["beta"]["height"] > 0
    for job in ("alpha", "gamma", "aardvark"):
        assert rows[job]["hidden"] and rows[job]["height"] == 0
    everything = probe(chromium, page)
    assert not any(row["hidden"] for row in everything["rows"])


def test_last_n_shows_the_newest_dataids_and_says_so(chromium, made):
    cli, _ = made
    result = cli.ok("board", "--html", "last.html", "--last", "2")
    assert result.out == "board written to last.html (4 jobs, 2 dataids)\n"
    seen = probe(chromium, cli.cwd / "last.html")
    assert seen["headers"] == ["10", ODD]
    assert len(seen["cells"]) == 4 * 2
    assert "showing only the newest 2 dataids (utility board --last N)" in seen["scope"]


def test_job_option_and_a_self_contained_page(made):
    cli, _ = made
    result = cli.ok("board", "--html", "beta.html", "--job", "beta")
    assert result.out == "board written to beta.html (1 job, 2 dataids)\n"
    page = (cli.cwd / "beta.html").read_text()
    assert 'data-job="beta"' in page and 'data-job="alpha"' not in page
    assert not re.search(r"https?:|src=|href=|@import|url\(", page)  # nothing to fetch


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--job", "nope"], "error: unknown job 'nope'"),
        (["--last", "0"], "error: --last must be at least 1, not 0"),
    ],
)
def test_bad_options_write_nothing(made, args, message):
    cli, _ = made
    result = cli.utility("board", "--html", "bad.html", *args)
    assert result.code != 0 and result.out == ""
    assert result.err.startswith(message)
    assert not (cli.cwd / "bad.html").exists()


def test_unwritable_file_and_missing_store(cli, made):
    made_cli, _ = made
    result = made_cli.utility("board", "--html", "no/such/folder/board.html")
    assert result.code != 0
    assert (
        result.err == "error: cannot write no/such/folder/board.html: No such file or directory\n"
    )
    result = cli.utility("board", "--html", "board.html")  # a fresh tmp_path: no store
    assert result.code != 0 and result.err.startswith("error: no dataflow store at ")
    assert not (cli.cwd / "board.html").exists()


class Cells(HTMLParser):
    """The grid of a board page as the browser builds it: headers, rows, cells."""

    def __init__(self, page: str):
        super().__init__()
        self.headers: list[str] = []
        self.cells: dict[tuple[str, str], dict[str, str]] = {}
        self.jobs: list[str] = []
        self._in_header = False
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        if tag == "th" and found.get("scope") == "col":
            self._in_header = True
        elif tag == "tr" and "data-job" in found:
            self.jobs.append(found["data-job"])
        elif tag == "td" and "cell" in found.get("class", ""):
            job = self.jobs[-1]
            dataid = self.headers[1 + sum(1 for j, _ in self.cells if j == job)]
            self.cells[job, dataid] = found

    def handle_endtag(self, tag):
        self._in_header = False

    def handle_data(self, data):
        if self._in_header:
            self.headers.append(data)


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
@pytest.mark.long
def test_the_board_of_a_postgresql_store(cli):
    """What the page shows comes from the store: the same grid on PostgreSQL."""
    build(cli)
    grid = Cells((cli.cwd / "board.html").read_text())
    assert grid.headers == ["job", *DATAIDS]
    assert grid.jobs == ["alpha", "beta", "gamma", "aardvark"]  # pipeline order
    assert len(grid.cells) == 4 * 5
    statuses = {
        key: cell["data-status"] for key, cell in grid.cells.items() if "data-status" in cell
    }
    assert statuses == EXPECTED
    failed = grid.cells["beta", "1"]["title"].splitlines()
    assert failed[0] == "beta at 1: FAILED"
    assert re.fullmatch(r"attempt 1, \d+\.\d s, exit code 3", failed[1])
    assert grid.cells["gamma", "1"]["title"].splitlines()[2] == f"reason: {EVIL}"
    assert grid.cells["beta", "3"]["title"] == "beta at 3: no chunk"
    last = cli.ok("board", "--html", "last.html", "--last", "2")
    assert last.out == "board written to last.html (4 jobs, 2 dataids)\n"
    assert Cells((cli.cwd / "last.html").read_text()).headers == ["job", "10", ODD]
    beta = cli.ok("board", "--html", "beta.html", "--job", "beta")
    assert beta.out == "board written to beta.html (1 job, 2 dataids)\n"
    assert Cells((cli.cwd / "beta.html").read_text()).jobs == ["beta"]
    for args, message in (
        (["--job", "nope"], "error: unknown job 'nope'"),
        (["--last", "0"], "error: --last must be at least 1, not 0"),
    ):
        result = cli.utility("board", "--html", "bad.html", *args)
        assert result.code != 0 and result.out == "" and result.err.startswith(message)
    assert not (cli.cwd / "bad.html").exists()


def test_render_escapes_and_orders_without_a_browser():
    rows = [
        {"jobid": "j", "dataid": d, "status": "READY", "reason": None} for d in ("10", "9", "x")
    ] + [{"jobid": "<j>", "dataid": "2", "status": "FAILED", "reason": "a & <b>"}]
    grid = board.build(rows, last=3)
    assert grid.dataids == ["9", "10", "x"] and grid.total_dataids == 4 and grid.truncated
    page = board.render(board.build(rows))
    assert "<j>" not in page and "&lt;j&gt;" in page and "a &amp; &lt;b&gt;" in page
    assert board.hover_text(
        {
            "jobid": "j",
            "dataid": "1",
            "status": "FAILED",
            "signal": "SIGKILL",
            "exitcode": -9,
            "attempt": 2,
            "duration": 3725.0,
            "reason": "killed by SIGKILL",
        }
    ) == ("j at 1: FAILED\nattempt 2, 1 h 2 min, signal SIGKILL\nreason: killed by SIGKILL")


def lab(hex_colour: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of an sRGB colour."""

    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c / 255) for c in rgb(hex_colour))
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def test_every_status_colour_is_far_from_every_other():
    """At 14 px, FAILED and RESUBMIT (and every other pair, the empty cell too) must not
    be mistaken: a colour difference (CIE76) of at least 40, i.e. plainly different."""
    colours = {**board.COLOURS, "no chunk": board.EMPTY}
    for one, other in itertools.combinations(colours, 2):
        distance = math.dist(lab(colours[one]), lab(colours[other]))
        assert distance >= 40, (one, other, round(distance))


def test_board_json_is_the_grid_in_pipeline_order(made):
    cli, _ = made
    told = json.loads(cli.ok("--json", "board").out)
    assert told["jobs"] == JOBS and told["dataids"] == DATAIDS
    cells = {(c["jobid"], c["dataid"]): c["status"] for c in told["cells"]}
    assert cells == EXPECTED
    ((failed,),) = [[c for c in told["cells"] if c["status"] == "FAILED"]]
    assert (failed["jobid"], failed["dataid"], failed["exitcode"]) == ("beta", "1", 3)
    both = json.loads(cli.ok("board", "--json", "--html", "both.html").out)
    assert both == told and (cli.cwd / "both.html").is_file()
    refused = cli.utility("board")
    assert refused.code == 2 and refused.err.startswith("error: board needs --html FILE")


def test_pipeline_order_puts_producers_first_and_survives_a_cycle():
    def rows(*edges: tuple[str, str, str]) -> list[dict]:
        return [
            {"jobid": job, "itemtype": kind, "datasetid": dataset} for job, kind, dataset in edges
        ]

    chain = rows(
        ("z", "IN", "today"), ("z", "OUT", "x"), ("a", "IN", "y"), ("a", "OUT", "w"),
        ("m", "IN", "x"), ("m", "OUT", "y"), ("b", "IN", "src"), ("b", "OUT", "v"),
    )  # fmt: skip
    assert lineage.pipeline_order(chain) == ["b", "z", "m", "a"]
    loop = rows(("p", "IN", "q_out"), ("p", "OUT", "p_out"), ("q", "IN", "p_out"))
    loop += rows(("q", "OUT", "q_out"), ("r", "IN", "p_out"), ("r", "OUT", "r_out"))
    assert lineage.pipeline_order(loop) == ["p", "q", "r"]
