"""A ``.py`` job whose Spark application runs on a cluster: spark-submit run as any job
(its own process group, its output to the log), plus what only a cluster needs.

- The application's id is read from spark-submit's output and goes into the run's
  history (the note of its reason field), with the state it ended in.
- In cluster deploy mode (YARN, Kubernetes) the driver runs on the cluster:
  the chunk's variables reach it as driver-environment confs (passwords and encrypted
  passwords excepted: a command line is not the place for them); a signal or a
  timeout of RunJob kills the application there (``yarn application -kill ID``, or
  ``spark-submit --kill NAMESPACE:POD --master k8s://...``), not only spark-submit
  here; a driver that failed while spark-submit exited 0 (Kubernetes) ends FAILED with
  its own exit code; and when the user told spark-submit not to wait for the end
  (``waitAppCompletion=false``), its state is polled until the application ends.
- In client mode the driver is spark-submit's child, here: ending the process group
  ends the application, as the cluster manager sees its driver go.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from functools import partial

from ..process.output import Sink
from ..process.runner import Outcome, Run
from . import sparkcluster
from .sparkcluster import KUBERNETES, Submission, Watch

KILL_TIMEOUT_S = 120.0  # the most a kill or status command on the cluster may take
POLL_S = 5.0  # between status requests when spark-submit does not wait for the end
MAX_UNANSWERED = 12  # status requests in a row without an answer before giving up
# variables that never go into a command line (the driver on a cluster does without)
_WITHHELD_SUFFIXES = ("_password", "_encryptedpass")


class Lines(Sink):
    """Hands each complete line of one output stream to a Watch (no descriptor)."""

    def __init__(self, watch: Watch):
        super().__init__("watch", None)
        self.watch, self._rest = watch, b""

    def write(self, data: bytes) -> None:
        if not data:
            return
        *lines, rest = (self._rest + data).split(b"\n")
        self._rest = rest[-65536:]  # a line longer than that names no application
        for line in lines:
            self.watch.line(line.decode("utf-8", "replace"))


def driver_variables(env: dict[str, str], names: Iterable[str], secrets: Iterable[str]) -> dict:
    """The chunk's variables that may go into a command line."""
    hidden = set(secrets)
    return {
        name: env[name]
        for name in names
        if name in env
        and env[name] not in hidden
        and not name.lower().endswith(_WITHHELD_SUFFIXES)
        and "\0" not in env[name]
    }


class SparkRun(Run):
    """spark-submit, its application followed on the cluster (see the module's doc)."""

    when_ended = None  # its end is known once it is followed on the cluster: :meth:`wait`

    def __init__(self, argv: list[str], env: dict[str, str], *, submission: Submission,
                 variables: Iterable[str] = (), **options):  # fmt: skip
        at = submission.script_at or len(argv)
        driver_env = driver_variables(env, variables, options.get("secrets", ()))
        extra = sparkcluster.driver_env_args(submission, driver_env)
        env = {**env, **sparkcluster.log_env(submission, env)}
        super().__init__([*argv[:at], *extra, *argv[at:]], env, words=False, **options)
        self.submission = submission
        self.watch = Watch(submission)
        self._killer: threading.Thread | None = None
        self._kill_note: str | None = None

    def _watchers(self) -> list[Sink]:
        return [Lines(self.watch)]

    def _kill_group(self, number: int) -> None:
        self._kill_on_cluster()
        super()._kill_group(number)

    def _kill_on_cluster(self) -> None:
        """Start killing the application on the cluster, once (a thread: this may run in
        a signal handler, and a kill takes seconds)."""
        if not self.submission.tracked or self._killer or self.watch.app_id is None:
            return
        argv = sparkcluster.kill_argv(self.submission, self.watch.app_id, self.env)
        self._killer = threading.Thread(target=self._kill, args=(argv,), daemon=True)
        self._killer.start()

    def _kill(self, argv: list[str]) -> None:
        done = self._command(argv)
        if isinstance(done, str):
            self._kill_note = f"not killed on the cluster: {done}"
        elif done.returncode:
            said = (done.stdout + done.stderr).strip().splitlines()
            why = said[-1] if said else f"exit code {done.returncode}"
            for secret in self.secrets:  # the note goes into the store
                why = why.replace(secret, "***")
            self._kill_note = f"not killed on the cluster: {argv[0]}: {why}"
        else:
            self._kill_note = "killed on the cluster"

    def _command(self, argv: list[str]) -> subprocess.CompletedProcess | str:
        """Run a status or kill command; what went wrong if it could not run."""
        try:
            return subprocess.run(
                argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=KILL_TIMEOUT_S,
                check=False,
            )
        except OSError as exc:
            return f"{argv[0]}: {exc.strerror or exc}"
        except subprocess.TimeoutExpired:
            return f"{argv[0]} did not answer within {KILL_TIMEOUT_S:g} s"

    def wait(self) -> Outcome:
        outcome = super().wait()
        if self.submission.tracked:
            if self._terminated_at is not None:
                self._kill_on_cluster()  # the id may have come after the signal
            elif outcome.returncode == 0 and not self.submission.wait:
                outcome = self._follow(outcome)
            code = self.watch.exit_code
            if self.submission.manager == KUBERNETES and code and outcome.returncode == 0:
                outcome = outcome._replace(returncode=code)  # the driver's, not spark-submit's
            if self._killer is not None:
                self._killer.join(KILL_TIMEOUT_S)
        note = "; ".join(part for part in (self.watch.note(), self._kill_note) if part)
        return outcome._replace(cluster=note or None)

    def _follow(self, outcome: Outcome) -> Outcome:
        """spark-submit returned once the application was accepted: ask for its state until
        it ends, and kill it on a signal or a timeout."""
        if self.watch.app_id is None:
            self.watch.state = "not followed: spark-submit did not name the application"
            return outcome._replace(returncode=1)
        argv = sparkcluster.status_argv(self.submission, self.watch.app_id, self.env)
        unanswered, asked_at = 0, 0.0
        while True:
            now = time.monotonic()
            if self.interrupted or self._timed_out(now):
                self._terminated_at = now
                self._kill_on_cluster()
                timeout = None if self.interrupted else self.timeout
                return self._ended(outcome._replace(interrupted=self.interrupted, timeout=timeout))
            if now - asked_at >= POLL_S:
                asked_at = now
                status = self._status(argv)
                if status is None:
                    unanswered += 1
                    if unanswered >= MAX_UNANSWERED:
                        self.watch.state = "state unknown: no answer to " + " ".join(argv[-3:])
                        return self._ended(outcome._replace(returncode=1))
                else:
                    unanswered = 0
                    self.watch.state = status.state
                    if status.done:
                        code = 0 if status.ok else (status.exit_code or 1)
                        return self._ended(outcome._replace(returncode=code))
            time.sleep(0.2)

    def _timed_out(self, now: float) -> bool:
        return self.timeout is not None and now - self._started > self.timeout

    def _status(self, argv: list[str]) -> sparkcluster.Status | None:
        done = self._command(argv)
        if isinstance(done, str):
            return None
        return sparkcluster.parse_status(self.submission, done.stdout + "\n" + done.stderr)

    def _ended(self, outcome: Outcome) -> Outcome:
        return outcome._replace(duration=round(time.monotonic() - self._started, 3))


def runner_for(submission: Submission | None, variables: Iterable[str]) -> Callable[..., Run]:
    """What runs a job's argv: a SparkRun for a Spark application on a cluster (the
    chunk's ``variables`` may go to a cluster-mode driver), else a plain Run."""
    if submission is None or submission.manager == sparkcluster.LOCAL:
        return partial(Run, words=False)
    names = (*variables, "dataid")

    def start(argv: list[str], env: dict[str, str], **options) -> Run:
        return SparkRun(argv, env, submission=submission, variables=names, **options)

    return start
