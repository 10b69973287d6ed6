"""A real ``utility serve`` process for the tests: started on a free port (or the one it
had, after a crash), its output kept in files, stopped by SIGTERM or killed."""

from __future__ import annotations

import json
import os
import re
import resource
import secrets
import signal
import subprocess
import time
from pathlib import Path

import httpx

from support import BIN, Cli

STARTED = re.compile(r"^serving (http://\S+?): ", re.M)


def token_file(folder: Path) -> tuple[Path, str]:
    token = secrets.token_urlsafe(32)
    path = folder / "token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path, token


class Server:
    """``utility serve --port P --token-file F ARGS...`` in the background; ``files``: its
    limit of open files (``ulimit -n``), if not this process's."""

    def __init__(self, cli: Cli, token: Path, *args: str, name: str = "serve",
                 files: int | None = None):  # fmt: skip
        self.cli, self.token, self.args, self.files = cli, token, args, files
        self.out = cli.cwd / f"{name}.out"
        self.err = cli.cwd / f"{name}.err"
        self.url = ""
        self.process: subprocess.Popen | None = None

    def start(self, port: int = 0, timeout: float = 60) -> Server:
        before = len(STARTED.findall(self.output()))
        argv = [str(BIN / "utility.sh"), "serve", "--port", str(port)]
        argv += ["--token-file", str(self.token), *self.args]
        with open(self.out, "ab") as out, open(self.err, "ab") as err:
            self.process = subprocess.Popen(argv, cwd=self.cli.cwd, env=self.cli.env,
                                            stdout=out, stderr=err,
                                            preexec_fn=self._limit)  # fmt: skip
        deadline = time.monotonic() + timeout
        while len(found := STARTED.findall(self.output())) <= before:
            code = self.process.poll()
            assert code is None, f"utility serve exited {code}: {self.logs()}"
            assert time.monotonic() < deadline, f"utility serve did not start: {self.logs()}"
            time.sleep(0.05)
        self.url = found[-1]
        return self

    def _limit(self) -> None:
        if self.files is not None:
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.files, hard))

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def output(self) -> str:
        return self.out.read_text(errors="replace") if self.out.exists() else ""

    def logs(self) -> str:
        """Everything the server printed, stdout and stderr."""
        err = self.err.read_text(errors="replace") if self.err.exists() else ""
        return self.output() + err

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM; the exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(30)


def landed(folder: Path) -> list[Path]:
    """The items a landing folder holds, as Spark's file source sees them."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if not p.name.startswith((".", "_")))


def json_items(folder: Path) -> list[dict]:
    return [json.loads(line) for p in landed(folder) for line in p.read_text().splitlines()]


def client(server: Server, token: str | None, **kw) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=server.url, headers=headers, timeout=30, **kw)
